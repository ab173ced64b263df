"""trainers.generator.evidence_data: the short-evidence grounding set is the chat the gateway
sends (its evidence prompt and abstention), and each grounded answer cites the source that
holds it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from services.gateway.settings import GatewaySettings
from tests.conftest import TINY_BEIR
from tests.trainers.reader_tiny import QA_TINY
from trainers.generator import evidence_data


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_set_speaks_the_gateways_prompt(tmp_path: Path) -> None:
    settings = GatewaySettings()
    assert settings.chat_evidence_system_prompt == evidence_data.EVIDENCE_SYSTEM
    assert settings.chat_abstention == evidence_data.ABSTENTION

    out = tmp_path / "set"
    argv = ["--covidqa", str(QA_TINY), "--scifact", str(TINY_BEIR), "--out", str(out)]
    assert evidence_data.main([*argv, "--unanswerable", "0.5", "--heldout", "0.2"]) == 0
    rows = [r for s in ("train", "heldout") for r in read(out / f"{s}.jsonl")]
    assert {r["kind"] for r in rows} == {"grounded", "unanswerable"}
    assert any(r["id"].startswith("covidqa-") for r in rows)
    assert any(r["id"].startswith("scifact-") for r in rows)
    for r in rows:
        system, _, assistant = (m["content"] for m in r["messages"])
        assert system.startswith(evidence_data.EVIDENCE_SYSTEM + "\n\nSources:\n\n[1] ")
        blocks = dict(re.findall(r"\[(\d+)\] [^\n]*\n([^\n]*)", system))
        if r["kind"] == "unanswerable":
            assert assistant == evidence_data.ABSTENTION
            assert r["evidence"] == ""
            continue
        n = re.findall(r"\[(\d+)\]", assistant)
        assert len(n) == 1 and r["evidence"].strip() in blocks[n[0]]
        assert assistant.replace(f" [{n[0]}]", "") in (
            r["evidence"].strip(),
            r["evidence"].strip() + ".",
        )
    # A question's rows are on one side of the split.
    train = {r["id"].removesuffix("-none") for r in read(out / "train.jsonl")}
    held = {r["id"].removesuffix("-none") for r in read(out / "heldout.jsonl")}
    assert not train & held
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["system_prompt"] == evidence_data.EVIDENCE_SYSTEM
