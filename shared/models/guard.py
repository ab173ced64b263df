"""The guard model: one ONNX graph (INT8 by default) that gives, for each text, the logits
of every guardrail head and the packaged MiniLM's sentence embedding.

`python -m trainers.guardrails --all` writes the directory (trainers/guardrails/guard.py):

    model_int8.onnx   inputs input_ids, attention_mask, token_type_ids;
                      outputs "embedding" (n, 384, normalised) and "logits" (n, labels)
    tokenizer.json    the packaged MiniLM's tokenizer
    guard.json        {"format": "ragrail-guard/1", "max_length": 128, "labels": [...],
                       "heads": {"injection": {"logit": 0, "threshold": 1.2},
                                 "unsafe": {"logit": 1, "threshold": 0.4,
                                            "categories": {"first": 2, "names": [...]}},
                                 "document": {"logit": 16, "threshold": 2.1,
                                              "window_chars": 500}}}

A text is flagged by a head when that head's logit reaches its threshold; an unsafe text's
category is the highest of the category logits. A document is scored as its windows
(`windows`, consecutive sentences of about `window_chars`): flagged when any window is.
Everything is loaded once; a file that does not load stops the caller with the file named.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.errors import FailedPrecondition
from shared.models import runtime
from shared.models.text_cache import TextResultCache
from shared.text import windows

log = logging.getLogger(__name__)

GUARD_FILE = "guard.json"
GUARD_FORMAT = "ragrail-guard/1"
TOKENIZER_FILE = "tokenizer.json"
ONNX_FILE = "model_int8.onnx"
TRAIN_HINT = "train it with `python -m trainers.guardrails --all` (models/guardrails/guard-minilm/)"
GUARD_ROLE = "guardrails"
__all__ = [
    "GUARD_FILE",
    "GUARD_FORMAT",
    "GuardModel",
    "GuardScores",
    "ScoreCache",
    "encode",
    "find_guard_model",
    "newest_guard_model",
    "windows",
]


def load_tokenizer(path: Path) -> Any:
    """The fast tokenizer of tokenizer.json, without truncation or padding set (encode does)."""
    from tokenizers import Tokenizer

    file = path / TOKENIZER_FILE
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:
        raise FailedPrecondition(f"cannot read {file}: {type(exc).__name__}: {exc}") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


# Truncation is a setting of the tokenizer object, set and cleared around each encode; the
# service encodes on several worker threads at once (concurrent checks), and without this
# lock one thread's no_truncation() landed inside another's encode_batch (which runs without
# the GIL): texts came back longer than max_length, scored as the model never saw them.
_TRUNCATION = threading.Lock()


def encode(tokenizer: Any, texts: list[str], max_length: int) -> list[list[int]]:
    """Token ids of each text, [CLS] … [SEP], at most max_length: the trainer and the service
    call this same function."""
    with _TRUNCATION:
        tokenizer.enable_truncation(max_length)
        try:
            return [e.ids for e in tokenizer.encode_batch(texts)]
        finally:
            tokenizer.no_truncation()


def pad(ids: list[list[int]]) -> dict[str, np.ndarray]:
    """Model inputs for a batch: right-padded ids, mask and zero token types."""
    width = max(len(i) for i in ids)
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": mask,
        "token_type_ids": np.zeros_like(input_ids),
    }


@dataclass
class GuardScores:
    embeddings: np.ndarray  # (n, 384) float32, normalised: the packaged MiniLM's
    logits: np.ndarray  # (n, labels) float32


@dataclass(frozen=True)
class Head:
    name: str
    logit: int
    threshold: float
    config: dict[str, Any]


class GuardModel:
    """Loads a guard directory; `score(texts)` runs the graph in length-sorted batches."""

    # Its encoder is fine-tuned: the general sentence embedding is the graph's second output
    # (and guard.json's `embedding` directory), not the classifier's own vectors.
    frozen_base = False

    def __init__(
        self,
        path: Path,
        threads: int = 0,
        onnx_file: str = "",
        batch_size: int = 32,
        config_name: str = GUARD_FILE,
    ) -> None:
        config_file = path / config_name
        if not config_file.is_file():
            raise FailedPrecondition(f"{path} has no {config_name}; {TRAIN_HINT}")
        config = runtime.read_object(config_file)
        try:
            if config.get("format") != GUARD_FORMAT:
                raise ValueError(f"format {config.get('format')!r}, expected {GUARD_FORMAT!r}")
            self.labels = [str(x) for x in config["labels"]]
            self.max_length = int(config["max_length"])
            self.heads = {
                name: Head(name, int(h["logit"]), float(h["threshold"]), dict(h))
                for name, h in config["heads"].items()
            }
            for head in self.heads.values():
                if not 0 <= head.logit < len(self.labels):
                    raise ValueError(f"head {head.name}: logit {head.logit} out of range")
            self.onnx_file = onnx_file or str(config.get("onnx_file") or ONNX_FILE)
        except (ValueError, KeyError, TypeError) as exc:
            raise FailedPrecondition(f"cannot read {config_file}: {exc}") from exc
        self.path, self.config, self.batch_size = path, config, batch_size
        self.tokenizer = load_tokenizer(path)
        file = path / self.onnx_file
        if not file.is_file():
            raise FailedPrecondition(f"{file} does not exist; {TRAIN_HINT}")
        try:
            self.session = runtime.session(
                file, threads or len(os.sched_getaffinity(0)), spinning=False
            )
            outputs = [o.name for o in self.session.get_outputs()]
            if outputs != ["embedding", "logits"]:
                raise ValueError(f"outputs {outputs}, expected ['embedding', 'logits']")
            # The heads alone (content safety on answers, the document head): the graph
            # without the sentence-embedding branch, about a fifth less to run, the logits
            # bit for bit the same. The whole graph where onnx is not installed.
            graph = runtime.pruned(file, ["logits"])
            self.logits_session = (
                self.session
                if graph is None
                else runtime.session(graph, threads or len(os.sched_getaffinity(0)))
            )
            probe = self.score(["ok"])
        except FailedPrecondition:
            raise
        except Exception as exc:
            raise FailedPrecondition(
                f"cannot load the guard model {file}: {type(exc).__name__}: {str(exc)[:300]}; "
                f"{TRAIN_HINT}"
            ) from exc
        if probe.logits.shape[1] != len(self.labels):
            raise FailedPrecondition(
                f"{config_file}: {len(self.labels)} labels for a graph with "
                f"{probe.logits.shape[1]} logits; the files come from different trainings"
            )
        self.dimension = int(probe.embeddings.shape[1])
        log.info("guard model loaded", extra={"model": str(file), "heads": sorted(self.heads)})

    def head(self, name: str) -> Head:
        if name not in self.heads:
            raise FailedPrecondition(
                f"{self.path / GUARD_FILE} has no '{name}' head (it has {sorted(self.heads)}); "
                f"{TRAIN_HINT}"
            )
        return self.heads[name]

    def _batches(self, texts: list[str]) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """(rows, model inputs) of each forward pass: length-sorted batches of batch_size.
        `score` and `logits` batch alike: with dynamic INT8 quantization a text's scores
        depend on the batch it runs in."""
        ids = encode(self.tokenizer, texts, self.max_length)
        order = np.argsort([-len(i) for i in ids], kind="stable")
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            yield rows, pad([ids[i] for i in rows])

    def score(self, texts: list[str]) -> GuardScores:
        n = len(texts)
        embeddings = np.zeros((n, 384), dtype=np.float32)
        logits = np.zeros((n, len(self.labels)), dtype=np.float32)
        for rows, feeds in self._batches(texts) if n else ():
            emb, log_ = self.session.run(None, feeds)
            if embeddings.shape[1] != emb.shape[1]:
                embeddings = np.zeros((n, emb.shape[1]), dtype=np.float32)
            embeddings[rows] = emb
            logits[rows] = log_
        return GuardScores(embeddings, logits)

    def logits(self, texts: list[str]) -> np.ndarray:
        """`score(texts).logits`, without computing the sentence embeddings."""
        logits = np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        for rows, feeds in self._batches(texts) if texts else ():
            logits[rows] = self.logits_session.run(["logits"], feeds)[0]
        return logits

    def category(self, logits: np.ndarray) -> str:
        """The unsafe head's category for one text's logits."""
        spec = self.head("unsafe").config.get("categories") or {}
        names = list(spec.get("names") or [])
        if not names:
            return "unsafe"
        first = int(spec["first"])
        return names[int(np.argmax(logits[first : first + len(names)]))]

    def document_scores(self, documents: list[str], window_chars: int = 0) -> np.ndarray:
        """Each document's highest document-head logit over its windows."""
        head = self.head("document")
        size = window_chars or int(head.config.get("window_chars") or 500)
        pieces = [windows(d, size) for d in documents]
        flat = [p for ps in pieces for p in ps]
        scores = self.logits(flat)[:, head.logit]
        out, start = np.empty(len(documents), dtype=np.float32), 0
        for i, ps in enumerate(pieces):
            out[i] = scores[start : start + len(ps)].max()
            start += len(ps)
        return out


class ScoreCache:
    """`GuardModel.score` behind a cache of recent texts: the rails that read the same user
    message (injection, content safety, topics through the embedding) run the graph once."""

    def __init__(self, model: GuardModel, size: int = 256) -> None:
        self.model = model
        # (embedding, logits) of each text
        self._scores: TextResultCache[tuple[np.ndarray, np.ndarray]] = TextResultCache(size)

    def _score(self, texts: list[str]) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        scores = self.model.score(texts)
        return zip(scores.embeddings, scores.logits, strict=True)

    def __call__(self, texts: list[str]) -> GuardScores:
        if not texts:
            return self.model.score([])
        found = self._scores.results(texts, self._score)
        return GuardScores(np.stack([e for e, _ in found]), np.stack([lg for _, lg in found]))

    def embed(self, texts: list[str]) -> np.ndarray:
        """The packaged MiniLM's sentence embeddings (topics), from the same cached run."""
        return self(texts).embeddings


def newest_guard_model(models_dir: str = "") -> Path | None:
    """The newest complete guard model under `models_dir` (default models/guardrails/, from
    the working directory): a `<name>/<version>/` holding guard.json and manifest.json (the
    trainer writes the manifest last), newest by the manifest's created_at. With no
    `models_dir` given and none trained, the published guard model (registry.published_root)."""
    from shared.models import registry

    def newest_in(base: Path) -> Path | None:
        found = [
            p.parent
            for p in base.glob(f"*/*/{GUARD_FILE}")
            if (p.parent / "manifest.json").is_file()
        ]

        def created(path: Path) -> tuple[str, str]:
            return (str(registry.read_manifest(path).get("created_at", "")), str(path))

        return max(found, key=created, default=None)

    base = Path.cwd() / Path(models_dir or registry.models_root() / GUARD_ROLE).expanduser()
    found = newest_in(base)
    published = registry.published_root()
    if found is None and not models_dir and published is not None:
        found = newest_in(published / GUARD_ROLE)
    return found


def find_guard_model(setting: str, models_dir: str = "") -> Path | None:
    """The directory a setting names, else the newest trained guard model, else None."""
    if setting:
        path = Path(setting).expanduser()
        if not (path / GUARD_FILE).is_file():
            raise FailedPrecondition(f"{path} holds no {GUARD_FILE}; {TRAIN_HINT}")
        return path
    return newest_guard_model(models_dir)
