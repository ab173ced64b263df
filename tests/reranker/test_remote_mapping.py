"""The remote rerankers' request and reply mapping against the published APIs: NVIDIA NIM's
/v1/ranking (docs.nvidia.com/nim/nemo-retriever/text-reranking, "Use Reranking" and the API
reference; no NIM runs here, so this is all that is checked of NIM itself), TEI's /rerank
and Cohere's. test_remote_backend.py runs the /rerank shape against a real server."""

from __future__ import annotations

import numpy as np
import pytest

from shared.models.remote_ranker import (
    nim_request,
    nim_scores,
    rerank_request,
    rerank_scores,
    sigmoid,
)

# NVIDIA's example, word for word.
NIM_MODEL = "nvidia/llama-3.2-nv-rerankqa-1b-v2"
NIM_QUERY = "which way should i go?"
NIM_PASSAGES = [
    "two roads diverged in a yellow wood, and sorry i could not travel both and be one "
    "traveler, long i stood and looked down one as far as i could to where it bent in the "
    "undergrowth;",
    "then took the other, as just as fair, and having perhaps the better claim because it was "
    "grassy and wanted wear, though as for that the passing there had worn them really about "
    "the same,",
    "and both that morning equally lay in leaves no step had trodden black. oh, i marked the "
    "first for another day! yet knowing how way leads on to way i doubted if i should ever "
    "come back.",
    "i shall be telling this with a sigh somewhere ages and ages hence: two roads diverged in "
    "a wood, and i, i took the one less traveled by, and that has made all the difference.",
]
NIM_REPLY = {
    "rankings": [
        {"index": 0, "logit": -1.2421875},
        {"index": 3, "logit": -3.029296875},
        {"index": 2, "logit": -5.41015625},
        {"index": 1, "logit": -8.2421875},
    ],
    "usage": {"prompt_tokens": 123, "total_tokens": 123},
}


def test_nim_request_is_nvidias_example() -> None:
    published = {
        "model": NIM_MODEL,
        "query": {"text": NIM_QUERY},
        "passages": [{"text": text} for text in NIM_PASSAGES],
        "truncate": "END",
    }
    assert nim_request(NIM_QUERY, NIM_PASSAGES, NIM_MODEL, "END") == published
    assert "truncate" not in nim_request(NIM_QUERY, NIM_PASSAGES, NIM_MODEL)  # NIM's NONE


def test_nim_reply_maps_to_scores_in_passage_order() -> None:
    scores = nim_scores(NIM_REPLY, 4)
    logits = np.array([-1.2421875, -8.2421875, -5.41015625, -3.029296875])
    assert np.allclose(scores, 1 / (1 + np.exp(-logits)), rtol=1e-6)
    # The service's order (highest first, services/reranker/server.py) is NIM's own.
    assert np.argsort(-scores, kind="stable").tolist() == [0, 3, 2, 1]
    assert ((scores > 0) & (scores < 1)).all()


def test_sigmoid_holds_at_extreme_logits() -> None:
    assert sigmoid(np.array([-1000.0, 0.0, 1000.0])).tolist() == [0.0, 0.5, 1.0]


def test_tei_shape() -> None:
    # TEI's example: {"query", "texts"} -> [{"index", "score"}], best first.
    body = rerank_request(
        "What is Deep Learning?", ["Deep Learning is...", "Deep Learning is not..."], "", "texts"
    )
    assert body == {
        "query": "What is Deep Learning?",
        "texts": ["Deep Learning is...", "Deep Learning is not..."],
    }
    scores = rerank_scores([{"index": 1, "score": 0.01}, {"index": 0, "score": 0.98}], 2)
    assert scores.tolist() == pytest.approx([0.98, 0.01])


def test_cohere_and_infinity_shape() -> None:
    body = rerank_request("q", ["a", "b", "c"], "rerank-v3.5")
    assert body == {"query": "q", "documents": ["a", "b", "c"], "model": "rerank-v3.5"}
    reply = {
        "id": "x",
        "results": [
            {"index": 2, "relevance_score": 0.9},
            {"index": 0, "relevance_score": 0.5},
            {"index": 1, "relevance_score": 0.1},
        ],
        "meta": {"billed_units": {"search_units": 1}},
    }
    assert rerank_scores(reply, 3).tolist() == pytest.approx([0.5, 0.1, 0.9])


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ({"rankings": NIM_REPLY["rankings"][:3]}, "3 scores in the reply to 4"),
        ({"rankings": [*NIM_REPLY["rankings"][:3], {"index": 0, "logit": 1.0}]}, "repeated"),
        ({"rankings": [*NIM_REPLY["rankings"][:3], {"index": 1}]}, "no numeric score"),
        ({"results": []}, "no rankings"),
    ],
)
def test_a_nim_reply_that_does_not_fit_is_refused(reply: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        nim_scores(reply, 4)


def test_a_rerank_reply_missing_a_passage_is_refused() -> None:
    # Cohere returns only top_n results when asked: ragrail never asks, and needs them all.
    with pytest.raises(ValueError, match="1 scores in the reply to 2"):
        rerank_scores({"results": [{"index": 0, "relevance_score": 0.3}]}, 2)
