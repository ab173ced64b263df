"""shared.models.guard.encode on one tokenizer from several threads at once (the guardrails
service's concurrent checks): every text is still cut at max_length."""

from __future__ import annotations

import threading

from shared.models.encoder import packaged_minilm
from shared.models.guard import encode, load_tokenizer


def test_concurrent_encodes_keep_their_truncation() -> None:
    tokenizer = load_tokenizer(packaged_minilm())
    texts = ["word " * 400] * 8
    lengths: list[int] = []

    def work() -> None:
        for _ in range(100):
            lengths.extend(len(ids) for ids in encode(tokenizer, texts, 128))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lengths) == 3 * 100 * len(texts)
    assert max(lengths) == 128
    # Left as load_tokenizer gives it: no truncation outside encode.
    assert len(tokenizer.encode("word " * 400).ids) > 128
