"""Forward-pass batches of similar lengths (shared.models.encoder.length_batches): a short text
is not padded to a long one's length, and vectors come back in input order, the same as
embedding each text alone."""

from __future__ import annotations

import numpy as np
import pytest

from shared.models.encoder import MIN_BATCH_LENGTH_SHARE, length_batches


def test_batches_are_longest_first_of_similar_lengths_and_bounded() -> None:
    lengths = [100, 254, 80, 240, 120, 250, 60]
    batches = [b.tolist() for b in length_batches(lengths, batch_size=2)]
    assert batches == [[1, 5], [3], [4, 0], [2, 6]]
    for batch in batches:
        assert all(lengths[i] >= MIN_BATCH_LENGTH_SHARE * lengths[batch[0]] for i in batch)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [b.tolist() for b in length_batches([5] * 5, batch_size=2)] == [[0, 1], [2, 3], [4]]
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
