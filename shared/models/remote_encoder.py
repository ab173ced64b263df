"""A sentence encoder on a remote model server: any OpenAI-compatible /v1/embeddings (NIM,
vLLM, TEI, infinity, Ollama, llama.cpp's server), behind the same `Encoder` interface as the
local models, so the embedder service serves it unchanged.

What the server does not say, and how it is filled in:
- The model's name comes from REMOTE_MODEL or the server's /models (its first entry); it is
  the identity the service reports, so a collection embedded locally with the same model
  (e.g. infinity serving all-MiniLM-L6-v2 as "sentence-transformers/all-MiniLM-L6-v2") keeps
  its identity when served remotely: the vectors are the same (tests/embedder measures it).
- The dimension comes from the server: one probe embedding at start, then every reply is
  checked against it (a server that changed model under us is refused, not stored).
- Tokens (Tokenize for ingest chunking, and token counts): a local copy of the model's
  tokenizer when REMOTE_TOKENIZER names one; otherwise a conservative approximation (see
  `approximate_offsets`), reported as such in Info.
- Queries and passages: NIM's retrieval models need `input_type`; other servers reject or
  ignore it, so it is sent only when asked (`input_type=True`).

The request and the response mapping are plain functions (`embeddings_request`,
`embeddings_from`), tested against NVIDIA's published examples as well as a real server.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from shared.errors import FailedPrecondition, Unavailable
from shared.models.encoder import (
    Encoder,
    InputType,
    TokenOffsets,
    length_batches,
    offsets_of,
    sentence_config,
)
from shared.models.remote import RemoteServer

log = logging.getLogger(__name__)

# The input length reported when neither the settings nor a tokenizer say (BERT-sized models).
DEFAULT_MAX_LENGTH = 512
PROBE_TEXT = "ragrail dimension probe"
# One CJK character (subword tokenizers make at least a token of each), a run of at most 4
# other word characters, or one other non-space character: more pieces than a WordPiece/BPE
# tokenizer makes of English text (about 1.6 per word against 1.2-1.4), so chunks cut by it
# fit the model's window.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_APPROXIMATE_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]{{1,4}}|[^\w\s]")


def embeddings_request(
    texts: list[str],
    model: str,
    input_type: InputType | None = None,
    truncate: str = "",
) -> dict[str, Any]:
    """The body of POST /embeddings: OpenAI's {"model", "input"}, plus NIM's `input_type` and
    `truncate` when given."""
    body: dict[str, Any] = {"model": model, "input": texts}
    if input_type:
        body["input_type"] = input_type
    if truncate:
        body["truncate"] = truncate
    return body


def embeddings_from(body: Any, count: int) -> np.ndarray:
    """float32 (count, dimension) from an OpenAI-format reply ({"data": [{"index",
    "embedding"}]}), in input order whatever order the server listed them in. Raises
    ValueError on a reply that does not hold exactly `count` vectors of one width."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise ValueError(f"{got} embeddings in the reply to {count} texts")
    rows: list[Any] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
            raise ValueError(f"embedding {position} has a missing or repeated index {index!r}")
        if not isinstance(vector, list) or not vector:
            raise ValueError(
                f"embedding {index} is not a list of floats (base64 replies are not read)"
            )
        rows[index] = vector
    if len({len(row) for row in rows}) != 1:
        raise ValueError("the embeddings in the reply differ in width")
    return np.asarray(rows, dtype=np.float32)


def approximate_offsets(texts: list[str]) -> list[TokenOffsets]:
    """Token offsets without the model's tokenizer: single CJK characters, runs of at most 4
    other word characters, single punctuation marks (more than a subword tokenizer makes)."""
    out = []
    for text in texts:
        spans = [(m.start(), m.end()) for m in _APPROXIMATE_TOKEN.finditer(text)]
        out.append(TokenOffsets([s for s, _ in spans], [e for _, e in spans]))
    return out


class RemoteEncoder(Encoder):
    """Embeddings from a model server's /embeddings, batches of at most `batch_size` texts per
    request, retried where the server could not be reached (embedding is idempotent)."""

    name: ClassVar[str] = "openai"

    def __init__(
        self,
        server: RemoteServer,
        *,
        batch_size: int = 64,
        input_type: bool = False,
        truncate: str = "",
        tokenizer: str = "",
        max_length: int = 0,
        normalize: bool = True,
        concurrency: int = 2,
    ) -> None:
        """`concurrency`: requests in flight at once for a request of several batches.
        Connects: reads the model name from /models when the settings give none, and the
        dimension from one probe embedding, so a server that is down stops the start with the
        error naming it."""
        self.server = server
        self.batch_size = batch_size
        self.send_input_type = input_type
        self.truncate = truncate
        self.normalized = normalize
        self.device = "remote"  # Info's details name the server (`details`)
        self.client = server.sync_client()
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="embedder-remote")
        self.tokenizer: Any = None
        model_length = 0
        if tokenizer:
            self.tokenizer, model_length = load_tokenizer(Path(tokenizer))
        self.max_length = max_length or model_length or DEFAULT_MAX_LENGTH
        if self.tokenizer is None:
            log.warning(
                "no tokenizer for the remote model: Tokenize approximates tokens (ingest cuts "
                "smaller chunks); set RAGRAIL_EMBEDDER_REMOTE_TOKENIZER to a local copy of the "
                "model's tokenizer for exact ones",
                extra={"max_length": self.max_length},
            )
        self.dimension = 0
        try:
            self.model_name = server.first_model(self.client)
            self.dimension = int(self.embed_for([PROBE_TEXT], "query").shape[1])
        except BaseException:
            self.close()  # the start stops here: leave no connection or thread behind
            raise

    # Encoder

    @property
    def call_size(self) -> int:
        # One round of requests in flight at once: smaller calls would leave the pool idle.
        return self.batch_size * self.concurrency

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_for(texts, "passage")

    def embed_for(self, texts: list[str], input_type: InputType) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        kind = input_type if self.send_input_type else None
        # Texts of one request pad to similar lengths on the server, as sentence-transformers
        # sorts them locally; what fits one request goes as it came.
        batches = (
            [np.arange(len(texts))]
            if len(texts) <= self.batch_size
            else length_batches([len(t) for t in texts], self.batch_size, split=False)
        )
        if len(batches) == 1:
            parts = [self._embed_batch(texts, kind)]
        else:
            # Several requests in flight keep the server's queue full while this side reads
            # the previous reply (the server batches them as it likes).
            parts = list(
                self._pool.map(
                    lambda rows: self._embed_batch([texts[i] for i in rows], kind), batches
                )
            )
        vectors = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for rows, part in zip(batches, parts, strict=True):
            vectors[rows] = part
        if self.normalized:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.clip(norms, 1e-12, None)
        return vectors.astype(np.float32, copy=False)

    def _embed_batch(self, texts: list[str], input_type: InputType | None) -> np.ndarray:
        body = embeddings_request(texts, self.model_name, input_type, self.truncate)
        what = f"embeddings of {len(texts)} texts"

        def send() -> Any:
            response = self.client.post(self.server.url("embeddings"), json=body)
            response.raise_for_status()
            return response.json()

        reply = self.server.call(send, what)
        try:
            vectors = embeddings_from(reply, len(texts))
        except ValueError as exc:
            raise Unavailable(
                f"the embedder's model server at {self.server.base_url} answered {what} with "
                f"something else: {exc}; check that it serves OpenAI's /embeddings"
            ) from exc
        if self.dimension and vectors.shape[1] != self.dimension:
            raise Unavailable(
                f"the embedder's model server at {self.server.base_url} now returns "
                f"{vectors.shape[1]}-dimensional vectors, not the {self.dimension} it gave at "
                f"start: its model changed; restart the embedder (a collection keeps the "
                "embedder it was built with)"
            )
        return vectors

    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        if self.tokenizer is None:
            return approximate_offsets(texts)
        return offsets_of(self.tokenizer, texts)

    def count_tokens(self, texts: list[str]) -> int:
        if self.tokenizer is None:
            # The approximation plus the two special tokens a BERT-style model adds.
            return sum(min(len(o.starts) + 2, self.max_length) for o in self.tokenize(texts))
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        return sum(len(ids) for ids in encoded["input_ids"])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def details(self) -> dict[str, str]:
        """What Info adds about the server: where it is, and how tokens are counted."""
        return {
            "remote_url": self.server.base_url,
            "tokenizer": "exact" if self.tokenizer is not None else "approximate",
            "input_type": "sent" if self.send_input_type else "not sent",
        }


def load_tokenizer(path: Path) -> tuple[Any, int]:
    """The Hugging Face tokenizer in `path`, lifted to any length (Tokenize reads whole
    documents), and the model's input length as sentence-transformers or the tokenizer
    configuration give it (0 when neither does); never downloaded."""
    if not path.is_dir():
        raise FailedPrecondition(
            f"RAGRAIL_EMBEDDER_REMOTE_TOKENIZER={path} is not a directory; point it at a local "
            "copy of the remote model's tokenizer files, or leave it empty to approximate"
        )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    length = int(sentence_config(path).get("max_seq_length") or tokenizer.model_max_length)
    tokenizer.model_max_length = 10**9
    return tokenizer, (length if 0 < length < 10**6 else 0)
