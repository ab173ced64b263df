"""Switching registry versions on a running generator: a torch service on generator/sw (its
newest version, a LoRA fine-tune), a second version trained while it serves, SIGHUP while
requests stream without pause. No request fails, requests that began before the switch end
with the old version's answer, and afterwards the service answers with the new version."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc
import pytest

from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from tests.generator.conftest import start, stop, wait_serving
from tests.trainers.generator_tiny import grounding_set, sft_two_steps, tiny_registry

pytestmark = pytest.mark.integration
MAX_TOKENS = 64


def train(root: Path, data: Path, version: str, seed: str) -> Path:
    return sft_two_steps(root, data, "sw", version, "--seed", seed)


def request() -> generator_pb2.GenerateRequest:
    return generator_pb2.GenerateRequest(
        messages=[common_pb2.ChatMessage(role="user", content="What do bees do?")],
        sampling=generator_pb2.SamplingParams(temperature=0, max_tokens=MAX_TOKENS),
    )


def test_sighup_switches_version_with_no_failed_request(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("registry")
    tiny_registry(root)
    data = grounding_set(tmp_path_factory.mktemp("grounding"))
    v1 = train(root, data, "v1", "1")
    service = start("switch", tmp_path_factory.mktemp("logs"), engine="torch",
                    registry_model="sw", models_dir=str(root))  # fmt: skip
    try:
        wait_serving(service, timeout=120)
        assert service.info().service.details["adapter"] == str(v1)
        old_answer = service.call("Generate", request()).text
        time.sleep(1.1)  # created_at has whole seconds
        v2 = train(root, data, "v2", "2")

        async def traffic() -> tuple[list[tuple[float, float, str]], float]:
            """(start, end, text) of every request, sent by 3 clients without pause from
            before SIGHUP until a second after Info reports the new adapter."""
            results: list[tuple[float, float, str]] = []
            switched_at = 0.0
            async with grpc.aio.insecure_channel(service.target) as channel:
                stub = generator_pb2_grpc.GeneratorStub(channel)
                done = asyncio.Event()

                async def client() -> None:
                    while not done.is_set():
                        began = time.monotonic()
                        reply = await stub.Generate(request(), timeout=120)
                        results.append((began, time.monotonic(), reply.text))

                async def watcher() -> None:
                    nonlocal switched_at
                    await asyncio.sleep(0.5)
                    service.process.send_signal(signal.SIGHUP)
                    while True:
                        info = await stub.Info(common_pb2.InfoRequest(), timeout=10)
                        if info.service.details["adapter"] == str(v2):
                            switched_at = time.monotonic()
                            break
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(1.0)  # more requests on the new version
                    done.set()

                await asyncio.wait_for(asyncio.gather(client(), client(), client(), watcher()), 120)
            return results, switched_at

        results, switched_at = asyncio.run(traffic())  # any failed request raises here
        assert switched_at > 0
        before = [r for r in results if r[1] < switched_at]
        after = [r for r in results if r[0] > switched_at]
        assert before and after, (len(before), len(after))
        assert all(r[2] == old_answer for r in results if r[0] < results[0][0] + 0.4)
        new_answer = after[-1][2]
        assert new_answer != old_answer  # the second fine-tune answers differently
        assert all(r[2] in (old_answer, new_answer) for r in results)  # never a mixed answer
        assert all(r[2] == new_answer for r in after)
        assert "reload: switched model" in service.log.read_text()
    finally:
        stop([service])
