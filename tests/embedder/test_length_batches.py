"""Forward-pass batches of similar lengths (shared.models.encoder.length_batches): a short text
is not padded to a long one's length, and vectors come back in input order, the same as
embedding each text alone."""

from __future__ import annotations

import numpy as np
import pytest

from shared.models.encoder import MIN_BATCH_LENGTH_SHARE, MIN_SPLIT_GAP_CHARS, length_batches


def test_batches_are_longest_first_of_similar_lengths_and_bounded() -> None:
    # Characters: two full windows, a table, a short last window, a title.
    lengths = [400, 1100, 1000, 1080, 760, 30]
    batches = [b.tolist() for b in length_batches(lengths, batch_size=2)]
    assert batches == [[1, 3], [2, 4], [0], [5]]
    for batch in batches:
        first = lengths[batch[0]]
        assert all(
            lengths[i] >= MIN_BATCH_LENGTH_SHARE * first or first - lengths[i] < MIN_SPLIT_GAP_CHARS
            for i in batch[1:]
        )
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    # Without split (a GPU), by count alone, as sentence-transformers batches.
    unsplit = length_batches(lengths, batch_size=4, split=False)
    assert [b.tolist() for b in unsplit] == [[1, 3, 2, 4], [0, 5]]
    assert length_batches([], batch_size=4) == []


def test_mixed_lengths_embed_as_each_text_alone() -> None:
    pytest.importorskip("sentence_transformers")
    from shared.models.encoder import TorchEncoder, packaged_minilm

    encoder = TorchEncoder.load(packaged_minilm(), device="cpu", batch_size=4)
    long = "The board reviewed the plan for the coming year and noted steady demand. " * 12
    texts = ["Revenue by segment", long, "| Payments | 7,125 | 9,367 |", long[:200], "bees"]
    together = encoder.embed(texts)
    alone = np.vstack([encoder.embed([t]) for t in texts])
    assert together.shape == (len(texts), encoder.dimension)
    assert np.allclose(together, alone, atol=1e-5)
    assert encoder.embed([]).shape == (0, encoder.dimension)
