"""The texts both quantization recipes measure on when given none: samples/corpus cut into
passages, short queries beside them, one-word texts; the embedder embeds them, the reranker
pairs the queries with the passages."""

from __future__ import annotations

from pathlib import Path

from trainers.data import read_texts

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"

# Queries next to the passages: they are embedded too, and quantization error shows
# differently on a handful of tokens. They count towards --min-cosine.
SHORT_TEXTS = (
    "how do bees tell each other where food is",
    "What causes volcanoes to erupt?",
    "sourdough starter feeding schedule",
    "TCP three-way handshake",
    "Mars rover landing sites",
    "Vitamin D deficiency increases the risk of multiple sclerosis.",
    "photosynthesis light reactions",
    "Who built the first bicycle with pedals?",
    "The Rhine flows from the Alps to the North Sea.",
    "ALDH1 expression is associated with poorer prognosis in breast cancer.",
)
# One-word texts, each embedded alone: three tokens with [CLS] and [SEP], where per-tensor
# activation scales hurt most (cosine to FP32 about 0.97 to 0.99 with the default variant,
# above 0.98 with matmul-per-channel-fp32-ffn-out). Reported apart, not held to --min-cosine:
# passages and real queries are what retrieval quality rests on.
ONE_WORD_TEXTS = ("ok", "yes", "no", "why", "error", "covid", "x")


def sample_passages(words: int = 200) -> list[str]:
    """samples/corpus cut into passages of about `words` words (markup kept: it is text)."""
    passages: list[str] = []
    for file in sorted(SAMPLES.iterdir()):
        tokens = file.read_text(encoding="utf-8").split()
        passages += [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]
    return passages


def default_texts() -> tuple[list[str], str]:
    scifact = SHARED_DATA / "scifact" / "corpus.jsonl"
    if scifact.is_file():
        return read_texts(scifact), str(scifact)
    return sample_passages(), f"{SAMPLES} (passages of 200 words)"


def take(texts: list[str], n: int) -> list[str]:
    """The first n texts, cycling when there are fewer (throughput needs n, not variety)."""
    return [texts[i % len(texts)] for i in range(n)]
