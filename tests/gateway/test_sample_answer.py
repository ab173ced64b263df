"""The sample question of `make up`, asked of the default stack as `ragrail up --sample` asks
it: the real embedder, retriever and generator (SmolLM2-135M), the gateway's defaults
(answer_mode auto, evidence selection, grounding) and the reader the gateway finds: the
newest that `python -m trainers.reader` registered under models/reader/, else the published
one (published/reader/, what a fresh clone and CI answer with). It must answer with the
waggle dance (direction from the run's angle, distance from its length), citing [1], the
honeybee document."""

from __future__ import annotations

import contextlib
import re

import pytest

from ragrail.sample import SAMPLE_QUESTION
from shared.models import registry
from tests.conftest import REPO

pytestmark = pytest.mark.integration
COLLECTION = "sample_answer"


@pytest.fixture(scope="module")
def reader() -> registry.Entry:
    # Where the suite's gateway looks (ReaderSlot): the registry from the repository, which
    # falls back to published/ when models/ holds no reader.
    with contextlib.chdir(REPO):
        found = registry.entries("reader")
    if not found:
        pytest.skip(
            "no extractive reader in models/reader/ nor published/reader/: the default stack "
            "answers with one (python -m trainers.reader)"
        )
    return found[-1]


def test_the_sample_question_is_answered_from_the_honeybee_document(suite, reader) -> None:  # type: ignore[no-untyped-def]
    suite.ingest_sample(COLLECTION, new=False)

    reply = suite.http.post(
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": SAMPLE_QUESTION}],
            "collection": COLLECTION,
            "max_tokens": 96,  # as ragrail up --sample asks
        },
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    answer = body["choices"][0]["message"]["content"]
    words = answer.lower()
    assert "waggle" in words or "dance" in words, answer
    assert "direction" in words or "angle" in words, answer
    assert "distance" in words or "length" in words, answer
    assert "[1]" in answer, answer
    first = body["citations"][0]
    assert first["index"] == 1 and first["cited"]
    assert first["document_name"] == "honeybee-colonies.md"
    # Every [n] of the answer is a cited source, and every cited source is in the answer.
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    assert numbers == {c["index"] for c in body["citations"] if c["cited"]}
    assert first["evidence"], "the cited source shows the evidence it gave"
    assert body["answer"]["mode"] in ("generative", "extractive")
    assert not body["answer"]["abstained"]
