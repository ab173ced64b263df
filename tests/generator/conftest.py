"""The generator as real processes: llamacpp on the packaged GGUF; torch on a Hugging Face
directory made from that GGUF, alone and with a LoRA adapter made by peft in the test."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.proto.ragrail.v1 import common_pb2, generator_pb2
from tests.conftest import clean_env, free_port, start_module, stop_processes, wait_grpc_serving
from tests.generator import calls

# Small limits, so the capacity tests fill the batch and the queue with a few requests.
MAX_BATCH_SIZE = 2
QUEUE_SIZE = 1
CONTEXT_LENGTH = 1024
QUESTION = [common_pb2.ChatMessage(role="user", content="What is the capital of France?")]


@dataclass
class Service:
    name: str
    target: str
    metrics_port: int
    process: subprocess.Popen[bytes]
    log: Path

    def call(self, method: str, request: Any, timeout: float = 120) -> Any:
        return calls.call(self.target, method, request, timeout)

    def stream(self, request: Any, timeout: float = 120) -> list[generator_pb2.GenerateChunk]:
        return calls.stream(self.target, request, timeout)

    def generate(self, messages: Any = None, **sampling: Any) -> generator_pb2.GenerateResponse:
        return self.call("Generate", request(messages, **sampling))

    def info(self) -> generator_pb2.GeneratorInfo:
        return self.call("Info", common_pb2.InfoRequest(), timeout=10)

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text

    def wait_idle(self, timeout: float = 20) -> dict[str, str]:
        """Info details once no request is running or waiting."""
        deadline = time.monotonic() + timeout
        while True:
            details = dict(self.info().service.details)
            if details["running"] == "0" and details["waiting"] == "0":
                return details
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} still busy after {timeout} s: {details}")
            time.sleep(0.1)


def request(messages: Any = None, **sampling: Any) -> generator_pb2.GenerateRequest:
    return generator_pb2.GenerateRequest(
        messages=messages or QUESTION, sampling=generator_pb2.SamplingParams(**sampling)
    )


def start(name: str, logs: Path, **settings: str) -> Service:
    port, metrics_port = free_port(), free_port()
    env = clean_env(
        RAGRAIL_GENERATOR_PORT=str(port),
        RAGRAIL_GENERATOR_METRICS_PORT=str(metrics_port),
        RAGRAIL_GENERATOR_THREADS="1",
        RAGRAIL_GENERATOR_MAX_BATCH_SIZE=str(MAX_BATCH_SIZE),
        RAGRAIL_GENERATOR_QUEUE_SIZE=str(QUEUE_SIZE),
        RAGRAIL_GENERATOR_CONTEXT_LENGTH=str(CONTEXT_LENGTH),
        RAGRAIL_GENERATOR_KV_CACHE_TOKENS=str(CONTEXT_LENGTH * MAX_BATCH_SIZE),
        RAGRAIL_GENERATOR_LOG_FORMAT="text",
        **{f"RAGRAIL_GENERATOR_{k.upper()}": v for k, v in settings.items()},
    )
    log = logs / f"{name}.log"
    process = start_module("services.generator", env, log)
    return Service(name, f"127.0.0.1:{port}", metrics_port, process, log)


def wait_serving(service: Service, timeout: float = 300.0) -> None:
    what = f"generator ({service.name})"
    wait_grpc_serving(service.process, service.target, service.log, what, timeout, poll_s=0.3)


def stop(services: list[Service]) -> None:
    stop_processes([s.process for s in services])


@contextlib.contextmanager
def serving(name: str, logs: Path, **settings: str) -> Iterator[Service]:
    """A generator process (`start`'s settings) once it serves; stopped on leaving."""
    service = start(name, logs, **settings)
    try:
        wait_serving(service)
        yield service
    finally:
        stop([service])


@pytest.fixture(scope="session")
def llamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving("llamacpp", tmp_path_factory.mktemp("generator-logs"), engine="llamacpp") as s:
        yield s


def count_like_llamacpp(
    target: str, llamacpp: Service, message: generator_pb2.CountTokensRequest
) -> generator_pb2.CountTokensResponse:
    """CountTokens of `message` by the generator at `target`, which must count the prompt and
    each text as the llamacpp engine does (the gateway's budget does not depend on the engine)."""
    ours = calls.call(target, "CountTokens", message, 120)
    theirs = llamacpp.call("CountTokens", message)
    assert ours.prompt_tokens == theirs.prompt_tokens
    assert list(ours.text_tokens) == list(theirs.text_tokens)
    return ours


def hf_model_from_gguf(out: Path) -> Any:
    """The packaged GGUF as a Hugging Face directory (float32), and the loaded model.

    transformers de-quantizes a GGUF on load but will not save that model, so its weights go
    into a fresh model of the same configuration, which saves like any other."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shared.models.generator_files import packaged_gguf

    gguf = packaged_gguf()
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    model.config._name_or_path = model.name_or_path = str(out)  # the adapter's base model
    return model


def lora_adapter(model: Any, out: Path) -> None:
    """A peft LoRA adapter on q/v projections with random (non-zero) A and B matrices: what
    a few training steps produce, enough to change greedy answers. Both come from a seeded
    generator: peft draws A from the global RNG, whose state depends on which tests ran
    before (an in-process trainer seeds it), and one such A left every answer unchanged."""
    import torch
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
    peft_model.save_pretrained(out)


@dataclass
class TorchModels:
    model: Path
    adapter: Path


@pytest.fixture(scope="session")
def torch_models(tmp_path_factory: pytest.TempPathFactory) -> TorchModels:
    root = tmp_path_factory.mktemp("torch-models")
    model = hf_model_from_gguf(root / "smollm2")
    lora_adapter(model, root / "lora")
    assert (root / "lora" / "adapter_config.json").is_file()
    return TorchModels(root / "smollm2", root / "lora")


@pytest.fixture(scope="session")
def torch_services(
    torch_models: TorchModels, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Service]]:
    logs = tmp_path_factory.mktemp("generator-torch-logs")
    services = {
        "base": start("torch", logs, engine="torch", model=str(torch_models.model)),
        "lora": start(
            "torch-lora",
            logs,
            engine="torch",
            model=str(torch_models.model),
            adapter=str(torch_models.adapter),
        ),
    }
    try:
        for service in services.values():
            wait_serving(service)
        yield services
    finally:
        stop(list(services.values()))
