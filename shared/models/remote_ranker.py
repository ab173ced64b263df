"""Cross-encoders on a remote model server, behind the same `CrossEncoder` interface as the
local ones, so the reranker service serves them unchanged:

- `rerank`: POST {base}/rerank, the shape TEI, infinity, Cohere (and vLLM, llama.cpp's server,
  Jina) share: {"query", "documents" | "texts"} -> results with "index" and "relevance_score"
  (or TEI's bare list of {"index", "score"}).
- `nim`: POST {base}/ranking, NVIDIA NIM's reranking API: {"model", "query": {"text"},
  "passages": [{"text"}], "truncate"} -> {"rankings": [{"index", "logit"}]}.

Scores come back in the passages' order. NIM returns logits; they pass through a sigmoid, as
the local cross-encoders' and the /rerank servers' default scores do, so a score threshold
means the same whichever backend serves (the order is unchanged by it). Passages are sent in
requests of at most `batch_size` (each scored on its own, so splitting does not change them).
The request and response mapping are plain functions, tested against NVIDIA's published
examples (no NIM runs here) and against a real /rerank server.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from shared.errors import Unavailable
from shared.models.cross_encoder import CrossEncoder, Pair
from shared.models.remote import RemoteServer

DocumentsField = Literal["documents", "texts"]
# The input length Info reports when the settings do not say (the server truncates, not us).
DEFAULT_MAX_LENGTH = 512
PROBE_QUERY, PROBE_PASSAGE = "ragrail start probe", "a passage to score"


def rerank_request(
    query: str, texts: list[str], model: str, field: DocumentsField = "documents"
) -> dict[str, Any]:
    """The body of POST /rerank. `field`: "documents" (infinity, Cohere, vLLM, llama.cpp,
    Jina) or "texts" (TEI); `model` only when known (TEI serves one model and has none)."""
    body: dict[str, Any] = {"query": query, field: texts}
    if model:
        body["model"] = model
    return body


def rerank_scores(body: Any, count: int) -> np.ndarray:
    """float32 scores in input order from a /rerank reply: {"results": [{"index",
    "relevance_score"}]} (infinity, Cohere) or [{"index", "score"}] (TEI). Raises ValueError
    unless every passage got exactly one score."""
    results = body.get("results") if isinstance(body, dict) else body
    if not isinstance(results, list):
        raise ValueError("no results list in the reply")
    return _scatter(results, count, lambda item: item.get("relevance_score", item.get("score")))


def nim_request(query: str, texts: list[str], model: str, truncate: str = "") -> dict[str, Any]:
    """The body of NIM's POST /v1/ranking."""
    body: dict[str, Any] = {
        "model": model,
        "query": {"text": query},
        "passages": [{"text": text} for text in texts],
    }
    if truncate:
        body["truncate"] = truncate
    return body


def nim_scores(body: Any, count: int) -> np.ndarray:
    """float32 sigmoid(logit) in input order from NIM's {"rankings": [{"index", "logit"}]}
    (listed best first). Raises ValueError unless every passage got exactly one logit."""
    rankings = body.get("rankings") if isinstance(body, dict) else None
    if not isinstance(rankings, list):
        raise ValueError("no rankings list in the reply")
    logits = _scatter(rankings, count, lambda item: item.get("logit"))
    return sigmoid(logits)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x)).astype(np.float32)  # no overflow for large -x


def _scatter(items: list[Any], count: int, score_of: Any) -> np.ndarray:
    if len(items) != count:
        raise ValueError(f"{len(items)} scores in the reply to {count} passages")
    scores = np.full(count, np.nan, dtype=np.float32)
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        score = score_of(item) if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or not np.isnan(scores[index]):
            raise ValueError(f"a missing or repeated index {index!r}")
        if not isinstance(score, int | float):
            raise ValueError(f"passage {index} has no numeric score")
        scores[index] = score
    return scores


class RemoteRanker(CrossEncoder):
    """Scores from a model server; subclasses say which request shape it speaks."""

    path: ClassVar[str]  # under the base URL

    def __init__(self, server: RemoteServer, *, batch_size: int = 64, max_length: int = 0) -> None:
        """Connects: names the model (from the settings or the server) and scores one pair."""
        self.server = server
        self.batch_size = batch_size
        self.max_length = max_length or DEFAULT_MAX_LENGTH
        self.device = "remote"
        self.client = server.sync_client()
        try:
            self.model_name = self.identify()
            # One pair at start: a wrong URL, backend or key stops the start with the error
            # that names it, instead of failing every search later.
            self.score(PROBE_QUERY, [PROBE_PASSAGE])
        except BaseException:
            self.close()
            raise

    def identify(self) -> str:
        """The model's name for requests and Info."""
        return self.server.first_model(self.client)

    def request(self, query: str, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def scores_from(self, body: Any, count: int) -> np.ndarray:
        raise NotImplementedError

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        parts = [
            self._score_batch(query, passages[start : start + self.batch_size])
            for start in range(0, len(passages), self.batch_size)
        ]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)

    def predict(self, pairs: list[Pair]) -> np.ndarray:
        """Pairs grouped by query: one request (or batch of them) per distinct query."""
        scores = np.empty(len(pairs), dtype=np.float32)
        by_query: dict[str, list[int]] = {}
        for i, (query, _) in enumerate(pairs):
            by_query.setdefault(query, []).append(i)
        for query, rows in by_query.items():
            scores[rows] = self.score(query, [pairs[i][1] for i in rows])
        return scores

    def _score_batch(self, query: str, texts: list[str]) -> np.ndarray:
        body = self.request(query, texts)
        what = f"scores of {len(texts)} passages"

        def send() -> Any:
            response = self.client.post(self.server.url(self.path), json=body)
            response.raise_for_status()
            return response.json()

        reply = self.server.call(send, what)
        try:
            return self.scores_from(reply, len(texts))
        except ValueError as exc:
            raise Unavailable(
                f"the reranker's model server at {self.server.base_url} answered {what} with "
                f"something else: {exc}; check RAGRAIL_RERANKER_BACKEND ({self.name}) matches "
                "the API it serves"
            ) from exc

    def close(self) -> None:
        self.client.close()

    def details(self) -> dict[str, str]:
        return {"remote_url": self.server.base_url}


class RerankRanker(RemoteRanker):
    """POST {base}/rerank: TEI, infinity, Cohere, vLLM, llama.cpp's server."""

    name: ClassVar[str] = "rerank"
    path: ClassVar[str] = "rerank"

    def __init__(
        self, server: RemoteServer, *, field: DocumentsField = "documents", **options: int
    ) -> None:
        self.field = field
        super().__init__(server, **options)

    def identify(self) -> str:
        # TEI serves one model and lists none; without REMOTE_MODEL none is sent, and Info
        # names the server instead.
        return self.server.model or f"rerank@{self.server.base_url}"

    def request(self, query: str, texts: list[str]) -> dict[str, Any]:
        return rerank_request(query, texts, self.server.model, self.field)

    def details(self) -> dict[str, str]:
        return {**super().details(), "documents_field": self.field}

    def scores_from(self, body: Any, count: int) -> np.ndarray:
        return rerank_scores(body, count)


class NimRanker(RemoteRanker):
    """POST {base}/ranking: NVIDIA NIM's reranking API (base http://host:8000/v1)."""

    name: ClassVar[str] = "nim"
    path: ClassVar[str] = "ranking"

    def __init__(self, server: RemoteServer, *, truncate: str = "", **options: int) -> None:
        self.truncate = truncate
        super().__init__(server, **options)

    def request(self, query: str, texts: list[str]) -> dict[str, Any]:
        return nim_request(query, texts, self.model_name, self.truncate)

    def scores_from(self, body: Any, count: int) -> np.ndarray:
        return nim_scores(body, count)
