"""trainers.generator.export on a tiny LoRA fine-tune: the merged checkpoint equals base plus
adapter, the F16 GGUF gives llama.cpp the logits transformers gives, Q8_0, Q4_K_M and Q4_K
quantize (Q4_K with the embedding matrix in Q4_0), the Q8_0 version serves in the llamacpp
engine by registry name, and ModelOpt refuses on a CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared.models import registry
from tests.generator.conftest import start, stop, wait_serving
from tests.trainers.generator_tiny import registry_with_sft
from trainers.generator import export

TEXT = "According to [1]: honeybees dance to point at flowers. [1]"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llama_cpp", reason="the generator extra is not installed")
    root, _ = registry_with_sft(tmp_path_factory, "g")
    argv = ["--models-dir", str(root), "gguf", "g/v1", "--types", "F16", "Q8_0", "Q4_K_M", "Q4_K"]
    assert export.main(argv) == 0
    return root


def logits_hf(model_dir: Path, ids: list[int], adapter: Path | None = None) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_merged_checkpoint_equals_base_plus_adapter(exported: Path) -> None:
    from transformers import AutoTokenizer

    merged = registry.resolve("generator", "g", "v1-merged", exported)
    assert merged.format == "hf" and merged.base == "generator/g/v1"
    base = registry.resolve("generator", "tiny", "base", exported).path
    ids = AutoTokenizer.from_pretrained(str(merged.path))(TEXT)["input_ids"]
    adapted = logits_hf(base, ids, registry.resolve("generator", "g", "v1", exported).path)
    assert np.abs(logits_hf(merged.path, ids) - adapted).max() < 1e-4
    assert np.abs(logits_hf(base, ids) - adapted).max() > 1e-3  # the adapter did something


def test_gguf_f16_gives_llamacpp_the_logits_of_transformers(exported: Path) -> None:
    import llama_cpp
    from transformers import AutoTokenizer

    merged = registry.resolve("generator", "g", "v1-merged", exported).path
    f16 = registry.resolve("generator", "g", "v1-f16", exported)
    assert f16.format == "gguf"
    ids = AutoTokenizer.from_pretrained(str(merged))(TEXT)["input_ids"]
    llm = llama_cpp.Llama(str(f16.path / f16.manifest["file"]), logits_all=True, n_ctx=128,
                          verbose=False)  # fmt: skip
    assert llm.tokenize(TEXT.encode(), add_bos=False, special=True) == ids  # same tokenizer
    llm.eval(ids)
    got = np.array(llm.scores[: len(ids)])
    want = logits_hf(merged, ids)
    assert np.abs(got - want).max() < 0.01 * np.abs(want).max() + 1e-3
    assert (got.argmax(-1) == want.argmax(-1)).all()
    sizes = {
        t: registry.resolve("generator", "g", f"v1-{t}", exported).manifest["bytes"]
        for t in ("f16", "q8_0", "q4_k_m")
    }
    assert sizes["q8_0"] < sizes["f16"] and sizes["q4_k_m"] <= sizes["q8_0"]


def test_q4_k_puts_the_embedding_matrix_in_q4_0(exported: Path) -> None:
    import gguf

    def embedding_type(version: str) -> str:
        entry = registry.resolve("generator", "g", version, exported)
        tensors = gguf.GGUFReader(entry.path / entry.manifest["file"]).tensors
        return next(t.tensor_type.name for t in tensors if t.name == "token_embd.weight")

    assert embedding_type("v1-q4_k") == "Q4_0"
    assert embedding_type("v1-q4_k_m") != "Q4_0"  # llama.cpp's preset keeps it wider
    q4_k = registry.resolve("generator", "g", "v1-q4_k", exported)
    assert (
        q4_k.manifest["bytes"]
        < registry.resolve("generator", "g", "v1-q4_k_m", exported).manifest["bytes"]
    )


def test_quantized_version_serves_in_the_llamacpp_engine(exported: Path, tmp_path: Path) -> None:
    service = start("llamacpp-q8", tmp_path, engine="llamacpp", registry_model="g/v1-q8_0",
                    models_dir=str(exported))  # fmt: skip
    try:
        wait_serving(service, timeout=120)
        q8 = registry.resolve("generator", "g", "v1-q8_0", exported)
        assert service.info().service.model == str(q8.path / q8.manifest["file"])
        reply = service.generate(temperature=0, max_tokens=6)
        assert reply.usage.completion_tokens >= 1
    finally:
        stop([service])


def test_modelopt_refuses_on_cpu(exported: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit, match="no GPU is present"):
        export.main(["--models-dir", str(exported), "modelopt", "g/v1", "--quant", "int4_awq"])
