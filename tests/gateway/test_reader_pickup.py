"""A gateway started with no reader trained answers from the sentence closest to the question
(and says so), and picks up a reader registered while it runs, with no restart: what a first
`ragrail up` relies on while it trains the reader in the background."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragrail.sample import SAMPLE_CORPUS
from tests.conftest import gateway_process
from tests.trainers.reader_tiny import train_tiny_reader

pytestmark = pytest.mark.integration
COLLECTION = "reader_pickup"
BEES = "how do honeybees tell each other where food is?"


def ask(url: str) -> dict:
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": BEES}],
            "collection": COLLECTION,
            "answer_mode": "extractive",
        },
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_reader_trained_while_the_gateway_runs_answers_from_then_on(
    suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    reply = suite.http.post("/v1/collections", json={"name": COLLECTION})
    assert reply.status_code in (201, 409), reply.text
    bees = SAMPLE_CORPUS / "honeybee-colonies.md"
    files = [("files", (bees.name, bees.read_bytes()))]
    reply = suite.http.post("/v1/documents", data={"collection": COLLECTION}, files=files)
    assert reply.status_code == 200, reply.text
    models = tmp_path / "models"
    monkeypatch.setenv("RAGRAIL_MODELS_DIR", str(models))
    monkeypatch.setenv("RAGRAIL_PUBLISHED_DIR", "none")  # no published reader to fall back on
    with gateway_process(tmp_path / "gateway.log", chat_abstain_similarity="0.2") as url:
        before = ask(url)
        assert before["answer"]["reader_margin"] is None
        assert any("no extractive reader" in w for w in before["warnings"]), before["warnings"]

        train_tiny_reader(models / "reader" / "tiny" / "v1")
        after = ask(url)
        assert after["answer"]["reader_margin"] is not None, after
        assert not any("no extractive reader" in w for w in after["warnings"])
        assert after["answer"]["mode"] == "extractive"
        assert after["citations"][0]["document_name"] == "honeybee-colonies.md"
    assert "extractive reader loaded from" in (tmp_path / "gateway.log").read_text()
