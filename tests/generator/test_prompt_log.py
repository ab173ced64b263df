"""The generator's prompt log: one JSON line per prompt, readable by its owner only."""

from __future__ import annotations

import hashlib
import json
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from services.generator.prompt_log import PromptLog


def test_each_prompt_is_one_line_with_its_hash_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "prompts.jsonl"
    log = PromptLog(str(path))
    prompts = [f"<|user|>question {i}\nwith a second line ✓" for i in range(200)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: log.write(f"r{i}", prompts[i]), range(200)))
    log.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["request_id"] for line in lines) == sorted(f"r{i}" for i in range(200))
    for line in lines:
        prompt = prompts[int(line["request_id"][1:])]
        assert line["prompt"] == prompt
        assert line["sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    PromptLog(str(path)).close()  # reopening appends, never truncates
    assert len(path.read_text(encoding="utf-8").splitlines()) == 200
