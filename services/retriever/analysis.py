"""Lexical analysis for BM25: the same terms for every backend and every Milvus deployment.

Milvus Lite accepts an analyzer's stemmer filter but silently skips it, while a Milvus
server applies it, so the same collection would rank differently in the two. The retriever
therefore analyses text itself — words (`\\w+`), lowercased, English stop words removed,
Snowball-stemmed — and hands Milvus the analysed terms to index with its plain standard
tokenizer. Queries go through the same analyser. A FAISS/bm25s backend can reuse it as is.
"""

from __future__ import annotations

import re
from functools import cached_property

import Stemmer

from shared.errors import InvalidArgument

# Lucene's default English stop words, as Elasticsearch's `_english_` and Anserini use.
# fmt: off
ENGLISH_STOP_WORDS: frozenset[str] = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
))
# fmt: on
_WORD = re.compile(r"\w+")


class LexicalAnalyzer:
    """Text -> BM25 terms. `language` names a Snowball stemmer; "" turns stemming off."""

    def __init__(self, language: str = "english", stop_words: frozenset[str] = ENGLISH_STOP_WORDS):
        self.language = language
        self.stop_words = stop_words
        if language and language not in Stemmer.algorithms():
            raise InvalidArgument(
                f"no Snowball stemmer for '{language}'; choose one of "
                f"{', '.join(sorted(Stemmer.algorithms()))}, or '' for none"
            )

    @cached_property
    def _stemmer(self) -> Stemmer.Stemmer | None:
        return Stemmer.Stemmer(self.language) if self.language else None

    def terms(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if w not in self.stop_words]
        return self._stemmer.stemWords(words) if self._stemmer else words

    def index_text(self, text: str) -> str:
        """The terms joined by spaces: what the backend's BM25 indexes and queries with."""
        return " ".join(self.terms(text))

    @property
    def signature(self) -> str:
        """Identifies the analysis; a collection must be queried with the one it was built with."""
        return f"words+lowercase+stop{len(self.stop_words)}+stem:{self.language or 'none'}"
