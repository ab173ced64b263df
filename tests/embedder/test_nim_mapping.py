"""The `openai` backend's request and reply mapping against NVIDIA's published NIM embedding
API (docs.nvidia.com/nim/nemo-retriever/text-embedding, "API Reference" and "Use the API"):
no NIM runs here, so this is all that is checked of NIM itself. The same functions serve
every /v1/embeddings server; test_remote_backend.py runs them against a real one."""

from __future__ import annotations

import numpy as np
import pytest

from shared.models.remote_encoder import embeddings_from, embeddings_request


def test_query_request_is_nvidias_example() -> None:
    # NVIDIA's example request, word for word ("With the input_type parameter").
    published = {
        "input": ["What is the population of Pittsburgh?"],
        "model": "nvidia/nv-embedqa-e5-v5",
        "input_type": "query",
    }
    built = embeddings_request(
        ["What is the population of Pittsburgh?"], "nvidia/nv-embedqa-e5-v5", "query"
    )
    assert built == published


def test_passage_request_with_truncate() -> None:
    # truncate is one of NONE, START, END (the reference's TruncateValue); "" sends none.
    built = embeddings_request(["a passage"], "nvidia/llama-3.2-nv-embedqa-1b-v2", "passage", "END")
    assert built == {
        "model": "nvidia/llama-3.2-nv-embedqa-1b-v2",
        "input": ["a passage"],
        "input_type": "passage",
        "truncate": "END",
    }
    # GTE/GTR models take no input_type ("both are processed the same way"): not sent.
    assert embeddings_request(["x"], "m") == {"model": "m", "input": ["x"]}


def test_reply_in_the_references_shape_is_read_in_input_order() -> None:
    """The reference's EmbeddingResponse: {"object": "list", "data": [{"index", "embedding",
    "object": "embedding"}], "model", "usage"}; the vectors' values here are made up (the
    published example elides them), and listed out of order on purpose."""
    reply = {
        "object": "list",
        "data": [
            {"index": 1, "embedding": [0.0, 1.0, 0.5], "object": "embedding"},
            {"index": 0, "embedding": [1.0, 0.0, -0.5], "object": "embedding"},
        ],
        "model": "nvidia/nv-embedqa-e5-v5",
        "usage": {"prompt_tokens": 12, "total_tokens": 12},
    }
    vectors = embeddings_from(reply, 2)
    assert vectors.dtype == np.float32
    assert vectors.tolist() == [[1.0, 0.0, -0.5], [0.0, 1.0, 0.5]]


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ({"data": []}, "0 embeddings in the reply to 1"),
        ({"error": {"message": "bad"}}, "no embeddings"),
        ({"data": [{"index": 0, "embedding": "AAAA"}]}, "base64"),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
            "repeated",
        ),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1, 2]}]}, "width"),
    ],
)
def test_a_reply_that_does_not_fit_is_refused(reply: dict, fragment: str) -> None:
    count = len(reply.get("data") or [None]) or 1
    with pytest.raises(ValueError, match=fragment):
        embeddings_from(reply, count)
