"""What retrieval brings a question when its own document is not in the collection: the
chunks of *other* documents that BM25 ranks highest for it.

The gateway's abstention reads the reader's "no answer" score on such chunks. A reader that
only ever saw windows of the question's own article learns "this paragraph of the right
article is not the one", not "this look-alike passage of another article does not answer",
and then finds confident spans for questions about documents the user never ingested. These
chunks, labelled [CLS] in training, teach the second; the same selection on held-out
questions measures it.

Chunks are cut as the gateway cuts them (shared/chunking.py, the embedder's 254-token
windows with a 32-token overlap), so the reader trains on the passages it will read.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.chunking import Chunker, TokenSpans
from trainers.reader.examples import Example
from trainers.reader.features import Featurizer

# The gateway's chunks for the packaged MiniLM embedder (256 tokens less [CLS] and [SEP]).
CHUNK_TOKENS = 254
CHUNK_OVERLAP = 32


@dataclass(frozen=True)
class Question:
    text: str
    document: str  # the id of the document that answers it


Offsets = Callable[[str], list[tuple[int, int]]]


def chunk_documents(documents: dict[str, str], offsets: Offsets) -> tuple[list[str], list[str]]:
    """(chunk texts, the document id of each), the gateway's chunking with the tokenizer
    whose character `offsets` are given."""
    chunker = Chunker(CHUNK_TOKENS, CHUNK_OVERLAP)
    texts, owners = [], []
    for doc_id, text in documents.items():
        spans = offsets(text)
        tokens = TokenSpans([s for s, _ in spans], [e for _, e in spans])
        for chunk in chunker.split(text, tokens):
            texts.append(chunk.text)
            owners.append(doc_id)
    return texts, owners


def closest_other_chunks(
    questions: Sequence[Question],
    documents: dict[str, str],
    offsets: Offsets,
    n: int,
    *,
    pool: int = 5,
    seed: int = 0,
) -> list[list[str]]:
    """Per question, `n` chunks of other documents drawn from the `pool` that BM25 ranks
    highest for it (the hardest negatives, with some variety between questions)."""
    import bm25s

    if n <= 0 or not questions:
        return [[] for _ in questions]
    texts, owners = chunk_documents(documents, offsets)
    if not texts:
        return [[] for _ in questions]
    model = bm25s.BM25()
    model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    # Deep enough that `pool` chunks of other documents remain after the own document's.
    own_most = max(Counter(owners).values())
    k = min(len(texts), pool + own_most)
    ranked, _ = model.retrieve(
        bm25s.tokenize([q.text for q in questions], stopwords="en", show_progress=False),
        k=k,
        show_progress=False,
        n_threads=1,
    )
    rng = random.Random(seed)
    out = []
    for question, row in zip(questions, ranked, strict=True):
        others = [texts[i] for i in row if owners[i] != question.document][:pool]
        out.append(rng.sample(others, min(n, len(others))))
    return out


def documents_of(examples: list[Example]) -> dict[str, str]:
    """Each article's text: a COVID-QA context is its whole article; an XQuAD one a paragraph,
    joined with the article's others in order."""
    paragraphs: dict[str, dict[str, None]] = {}
    for ex in examples:
        paragraphs.setdefault(ex.document, {})[ex.context] = None
    return {doc: "\n\n".join(texts) for doc, texts in paragraphs.items()}


def other_document_chunks(
    examples: list[Example], featurizer: Featurizer, n: int, seed: int
) -> list[list[str]]:
    """Per example, n of the chunks of other articles that BM25 ranks highest for its
    question (closest_other_chunks), cut with the featurizer's tokenizer."""
    questions = [Question(ex.question, ex.document) for ex in examples]
    return closest_other_chunks(
        questions,
        documents_of(examples),
        lambda text: featurizer.context_tokens(text)[1],
        n,
        seed=seed,
    )
