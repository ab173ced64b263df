"""Static checks of the GPU deployment: compose's `gpu` profile (Triton with TensorRT-LLM and
the generator that answers through it) and the Triton model repository in deploy/triton.

They hold the files to each other and to the generator's triton engine: the repository
compose mounts is the one in deploy/, the checkpoint path in model.yaml is where compose
mounts ./models, the generator reaches Triton's gRPC port with the same checkpoint's tokenizer
and context length, and config.pbtxt declares every tensor the engine sends with the
datatype TensorRT-LLM's llmapi model declares. (The test server in tests/generator loads this
config.pbtxt for real; these checks need no server.)
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from services.generator.backends.base import GenerationRequest, Sampling
from services.generator.backends.triton_protocols import LlmApiProtocol
from services.generator.settings import GeneratorSettings
from tests.deploy.test_compose import (
    REPO,
    VARIANTS,
    environment,
    kind,
    resolved_settings,
    services,
)

REPOSITORY = REPO / "deploy" / "triton" / "model_repository"
LLMAPI = REPOSITORY / "tensorrt_llm"
TRITON_IMAGE = re.compile(r"^nvcr\.io/nvidia/tritonserver:\d{2}\.\d{2}-trtllm-python-py3$")

# The llmapi model's tensors as TensorRT-LLM declares them
# (triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt): name -> (datatype, dims).
LLMAPI_INPUTS = {
    "text_input": ("TYPE_STRING", "-1"),
    "streaming": ("TYPE_BOOL", "1"),
    "sampling_param_best_of": ("TYPE_INT32", "1"),
    "sampling_param_temperature": ("TYPE_FP32", "1"),
    "sampling_param_top_k": ("TYPE_INT32", "1"),
    "sampling_param_top_p": ("TYPE_FP32", "1"),
    "sampling_param_frequency_penalty": ("TYPE_FP32", "1"),
    "sampling_param_presence_penalty": ("TYPE_FP32", "1"),
    "sampling_param_max_tokens": ("TYPE_INT32", "1"),
    "sampling_param_stop": ("TYPE_STRING", "-1"),
    "sampling_param_seed": ("TYPE_UINT64", "1"),
    "sampling_param_exclude_input_from_output": ("TYPE_BOOL", "1"),
    "return_finish_reason": ("TYPE_BOOL", "1"),
    "return_stop_reason": ("TYPE_BOOL", "1"),
    "return_cumulative_logprob": ("TYPE_BOOL", "1"),
    "stop": ("TYPE_BOOL", "1"),
}
LLMAPI_OUTPUTS = {
    "text_output": ("TYPE_STRING", "-1"),
    "finish_reason": ("TYPE_STRING", "-1"),
    "stop_reason": ("TYPE_STRING", "-1"),
    "cumulative_logprob": ("TYPE_FP32", "-1"),
}


# -- parsing --------------------------------------------------------------------------------


def pbtxt_tensors(text: str, section: str) -> dict[str, tuple[str, str]]:
    """name -> (data_type, dims) of the `input [...]` or `output [...]` list of a config.pbtxt."""
    text = re.sub(r"#[^\n]*", "", text)
    match = re.search(rf"^{section}\s*\[(.*?)^\]", text, flags=re.S | re.M)
    assert match, f"config.pbtxt has no {section} list"
    tensors = {}
    for block in re.findall(r"\{(.*?)\}", match[1], flags=re.S):
        name = re.search(r'name:\s*"([^"]+)"', block)
        dtype = re.search(r"data_type:\s*(\w+)", block)
        dims = re.search(r"dims:\s*\[([^\]]*)\]", block)
        assert name and dtype and dims, f"incomplete tensor in {section}: {block}"
        tensors[name[1]] = (dtype[1], ",".join(d.strip() for d in dims[1].split(",")))
    return tensors


def config_text() -> str:
    return (LLMAPI / "config.pbtxt").read_text(encoding="utf-8")


def model_yaml() -> dict[str, Any]:
    return dict(yaml.safe_load((LLMAPI / "1" / "model.yaml").read_text(encoding="utf-8")))


def mounts(name: str) -> dict[str, str]:
    """container path -> host path of a compose service's bind mounts (host relative to the
    repository, as written: ./models)."""
    out = {}
    for volume in services()[name].get("volumes") or []:
        parts = str(volume).split(":")
        if parts[0].startswith((".", "/")):
            out[parts[1]] = parts[0]
    return out


def host_path(name: str, container_path: str) -> PurePosixPath:
    """Where a path inside a container comes from on the host, through its bind mounts."""
    path = PurePosixPath(container_path)
    for target, source in mounts(name).items():
        if path == PurePosixPath(target) or PurePosixPath(target) in path.parents:
            return PurePosixPath(source) / path.relative_to(target)
    raise AssertionError(f"compose service '{name}' mounts nothing at {container_path}")


def gpu_services() -> list[str]:
    return [n for n, svc in services().items() if "gpu" in (svc.get("profiles") or [])]


# -- compose: the gpu profile -------------------------------------------------------------


def test_gpu_profile_adds_triton_and_its_generator_only() -> None:
    assert sorted(gpu_services()) == ["generator-triton", "triton"]
    for name, svc in services().items():
        if name in gpu_services():
            continue
        for other in svc.get("depends_on") or {}:
            assert other not in gpu_services(), (
                f"'{name}' runs without a profile but depends on '{other}' (gpu profile)"
            )


def test_cpu_and_milvus_stacks_keep_the_embedded_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(services()["generator"]["profiles"]) == {"cpu", "milvus"}
    settings = resolved_settings("generator", monkeypatch)
    assert isinstance(settings, GeneratorSettings)
    assert settings.engine == "llamacpp"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_run_the_image_of_their_service(name: str) -> None:
    variant, original = services()[name], services()[kind(name)]
    assert variant["build"] == original["build"] and variant["image"] == original["image"], (
        f"'{name}' should run the image of '{kind(name)}' (same build and image)"
    )


def test_triton_runs_the_tensorrt_llm_image_on_gpus() -> None:
    triton = services()["triton"]
    assert TRITON_IMAGE.match(triton["image"]), triton["image"]
    devices = triton["deploy"]["resources"]["reservations"]["devices"]
    assert any(
        d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices
    ), f"triton reserves no NVIDIA GPU: {devices}"
    exposed = {int(p) for p in triton["expose"]}
    assert {8000, 8001, 8002} <= exposed


def test_triton_healthcheck_asks_readiness() -> None:
    check = services()["triton"]["healthcheck"]
    test = check["test"]
    assert test[0] == "CMD" and test[1:3] == ["python3", "-c"], test
    compile(test[3], "triton healthcheck", "exec")
    assert "http://localhost:8000/v2/health/ready" in test[3]
    # Loading a checkpoint onto the GPUs takes minutes; it must not count as failing.
    assert int(str(check["start_period"]).rstrip("s")) >= 300


def test_triton_serves_the_repository_in_deploy() -> None:
    triton = services()["triton"]
    command = " ".join(triton["command"])
    match = re.search(r"--model-repository[= ](\S+)", command)
    assert match, f"triton's command names no --model-repository: {command}"
    assert host_path("triton", match[1]) == PurePosixPath("./deploy/triton/model_repository")
    # The entrypoint refuses to start without TensorRT-LLM's model.py, with a message.
    assert f"{match[1]}/tensorrt_llm/1/model.py" in command


def test_checkpoint_path_of_model_yaml_is_mounted() -> None:
    checkpoint = model_yaml()["model"]
    source = host_path("triton", checkpoint)  # ./models/generator/llm, written as models/...
    assert source.parts[0] == "models", f"model.yaml's model {checkpoint} is not under ./models"


def test_generator_triton_talks_to_triton_with_the_same_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "generator-triton"
    settings = resolved_settings(name, monkeypatch)
    assert isinstance(settings, GeneratorSettings)
    assert settings.engine == "triton" and settings.triton_protocol == "llmapi"
    host, port = settings.triton_url.rsplit(":", 1)
    assert host == "triton" and int(port) == 8001, "the generator needs Triton's gRPC port"
    model = settings.triton_model or LlmApiProtocol.default_model
    assert (REPOSITORY / model / "config.pbtxt").is_file(), f"deploy/triton has no '{model}'"
    assert host_path(name, settings.tokenizer) == host_path("triton", model_yaml()["model"]), (
        "the generator's tokenizer should be the served checkpoint's own"
    )
    assert settings.context_length == model_yaml()["max_seq_len"], (
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH should be model.yaml's max_seq_len"
    )
    depends = services()[name]["depends_on"]
    assert depends["triton"]["condition"] == "service_healthy"
    assert "RAGRAIL_GENERATOR_MODEL" not in environment(services()[name])


# -- deploy/triton ------------------------------------------------------------------------


def test_llmapi_config_declares_the_llmapi_tensors() -> None:
    text = config_text()
    assert re.search(r'^name:\s*"tensorrt_llm"', text, flags=re.M)
    assert re.search(r'^backend:\s*"python"', text, flags=re.M)
    # Set from model.yaml's triton_config when the model loads, as TensorRT-LLM does.
    assert not re.search(r"^(max_batch_size|model_transaction_policy)", text, flags=re.M)
    assert pbtxt_tensors(text, "input") == LLMAPI_INPUTS
    assert pbtxt_tensors(text, "output") == LLMAPI_OUTPUTS


def test_llmapi_config_has_every_input_the_engine_sends() -> None:
    request = GenerationRequest(
        "id",
        "prompt",
        (1,),
        Sampling(temperature=0.5, top_p=0.9, top_k=5, max_tokens=8, stop=("x",), seed=3),
    )
    protocol = LlmApiProtocol()
    declared = pbtxt_tensors(config_text(), "input")
    sent = {name for name, value in protocol.values(request).items() if value is not None}
    assert sent <= set(declared), sorted(sent - set(declared))
    assert set(protocol.required) <= set(declared)
    assert set(protocol.outputs()) <= set(pbtxt_tensors(config_text(), "output"))


def test_model_yaml_streams_and_names_llm_api_arguments() -> None:
    config = model_yaml()
    triton = config["triton_config"]
    assert triton["decoupled"] is True, "the generator streams: decoupled must be true"
    assert triton["max_batch_size"] == 0
    assert config["backend"] == "pytorch"
    assert PurePosixPath(config["model"]).is_absolute()
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_batch_size", "max_seq_len"):
        assert isinstance(config[key], int) and config[key] >= 1, key
    assert 0 < config["kv_cache_config"]["free_gpu_memory_fraction"] <= 1
