"""API keys and rate limits, against a gateway process of their own (the suite's services)."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest

from tests.conftest import gateway_process

pytestmark = pytest.mark.integration
KEY = "rr-test-key-0123456789"


def test_api_keys_are_required_when_configured(suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    keys = tmp_path / "keys"
    keys.write_text(f"\n{KEY}\nsecond-key\n")
    log = tmp_path / "gateway.log"
    with gateway_process(log, api_keys_file=str(keys)) as url:
        missing = httpx.get(f"{url}/v1/collections")
        assert missing.status_code == 401
        assert "Authorization: Bearer" in missing.json()["error"]["message"]
        wrong = httpx.get(f"{url}/v1/collections", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "nope" not in wrong.text
        bearer = httpx.get(f"{url}/v1/collections", headers={"Authorization": f"Bearer {KEY}"})
        assert bearer.status_code == 200, bearer.text
        header = httpx.get(f"{url}/v1/collections", headers={"X-API-Key": "second-key"})
        assert header.status_code == 200
        assert httpx.get(f"{url}/v1/health").status_code in (200, 503)  # open to probes
        assert httpx.get(f"{url}/metrics").status_code == 200

        models = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0).models.list()
        assert any(m.model_extra["service"] == "generator" for m in models)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{url}/v1", api_key="bad", max_retries=0).models.list()
    assert KEY not in log.read_text()  # keys never reach the log


def test_an_unreadable_keys_file_stops_the_gateway(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "gateway.log"
    absent = str(tmp_path / "absent")
    with pytest.raises(AssertionError, match="exited"), gateway_process(log, api_keys_file=absent):
        pass
    assert "RAGRAIL_GATEWAY_API_KEYS_FILE" in log.read_text()


def test_rate_limit_answers_429_with_retry_after(suite) -> None:  # type: ignore[no-untyped-def]
    with gateway_process(
        api_keys=f'["{KEY}", "other"]', rate_limit_rpm="6", rate_limit_burst="2"
    ) as url:

        def get(key: str) -> httpx.Response:
            return httpx.get(f"{url}/v1/collections", headers={"Authorization": f"Bearer {key}"})

        assert [get(KEY).status_code for _ in range(2)] == [200, 200]
        limited = get(KEY)
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["Retry-After"]) <= 10
        assert "6 requests a minute" in limited.json()["error"]["message"]
        assert get("other").status_code == 200  # each key has its own bucket


def test_the_cli_sends_its_api_key(suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`ragrail` against a gateway that requires keys (compose's): refused without one,
    served with RAGRAIL_API_KEY or --api-key."""
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n")
    env = {k: v for k, v in os.environ.items() if k != "RAGRAIL_API_KEY"}
    with gateway_process(tmp_path / "gateway.log", api_keys_file=str(keys)) as url:

        def search(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "ragrail.cli", "search", "bees", "--url", url]
            return subprocess.run(
                [*command, "-c", "absent", *args], env={**env, **extra, "COLUMNS": "200"},
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        refused = search()
        assert refused.returncode == 1 and "missing API key" in refused.stdout
        # Past the key check: the made-up collection is the next thing the gateway refuses.
        for served in (search(RAGRAIL_API_KEY=KEY), search("--api-key", KEY)):
            assert served.returncode == 1, served.stdout
            assert "absent" in served.stdout and "API key" not in served.stdout, served.stdout
