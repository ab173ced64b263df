"""A Hugging Face Llama-architecture checkpoint as a GGUF file llama.cpp loads, and llama.cpp's
own quantizer on it.

Neither the `gguf` package nor llama-cpp-python ships llama.cpp's convert_hf_to_gguf.py, so
this writes the file with gguf's GGUFWriter, as that script does for `LlamaForCausalLM`
(SmolLM2 is one): hyper-parameters from config.json, tensors renamed to llama.cpp's names, the
query and key projections permuted back to llama.cpp's rotary layout (transformers permutes
them the other way when it reads a GGUF), matrices in F16 or F32, norms in F32. The
tokenizer (vocabulary, merges, special ids, chat template) is copied from a reference GGUF of
the same tokenizer, by default the packaged SmolLM2 file every model here descends from; its
vocabulary size must match the model's. Tests compare llama.cpp's logits on the result with
transformers' on the checkpoint.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np

# Output types of `quantize`: llama.cpp's presets by their names, and Q4_K (below).
QUANT_TYPES = {
    name: f"LLAMA_FTYPE_MOSTLY_{name}" for name in ("Q8_0", "Q4_K_M", "Q4_K_S", "Q4_0")
} | {"Q4_K": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}
# K-quants pack rows in super-blocks of 256 values. SmolLM2-135M's width is 576, so llama.cpp's
# Q4_K_M can use Q4_K only for ffn_down (1536 wide) and falls back to Q5_0/Q8_0 elsewhere; it
# also keeps the tied token-embedding/output matrix (49152 x 576, a fifth of the weights and
# the largest matmul per token) at Q8_0. "Q4_K" is Q4_K_M with that matrix in Q4_0: measured
# here 1.5x F16's decode speed against Q4_K_M's 1.25x, for +1.2% held-out perplexity.
TENSOR_TYPES = {
    "Q4_K": {"token_embedding_type": "GGML_TYPE_Q4_0", "output_tensor_type": "GGML_TYPE_Q4_0"}
}
LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """transformers' rotary layout (halves) to llama.cpp's (interleaved pairs), per head."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def gguf_name(name: str) -> str | None:
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    parts = name.split(".")
    if parts[:2] == ["model", "layers"] and parts[-1] == "weight":
        key = ".".join(parts[3:-1])
        if key in LAYER_NAMES:
            return f"blk.{parts[2]}.{LAYER_NAMES[key]}.weight"
    return None


def load_state(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{model_dir} has no .safetensors weights")
    state: dict[str, np.ndarray] = {}
    for file in files:
        state.update(load_file(str(file)))
    return state


def copy_tokenizer(reader: Any, writer: Any, vocab_size: int) -> None:
    import gguf

    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None or len(tokens.data) != vocab_size:
        have = len(tokens.data) if tokens is not None else 0
        raise SystemExit(
            f"the reference GGUF's vocabulary has {have} tokens, the model {vocab_size}; "
            "pass --tokenizer-gguf with a GGUF of this model's tokenizer"
        )
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def hf_to_gguf(
    model_dir: Path, out: Path, ftype: str = "F16", tokenizer_gguf: Path | None = None
) -> Path:
    """Write `model_dir` (a LlamaForCausalLM checkpoint) as a GGUF file of type F16 or F32."""
    import gguf

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise SystemExit(
            f"{model_dir} is a {config.get('model_type')!r} model; this exporter writes the "
            "Llama architecture (SmolLM2 and its fine-tunes)"
        )
    if ftype not in ("F16", "F32"):
        raise SystemExit(f"GGUF type {ftype}: write F16 or F32, then quantize")
    heads, kv_heads = (
        config["num_attention_heads"],
        config.get("num_key_value_heads") or config["num_attention_heads"],
    )
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    rope = config.get("rope_parameters") or {}
    theta = rope.get("rope_theta", config.get("rope_theta", 10000.0))
    if (rope.get("rope_type") or "default") != "default":
        raise SystemExit(f"rope scaling {rope.get('rope_type')} is not exported by this writer")
    if tokenizer_gguf is None:
        from trainers.generator.base import packaged_gguf

        tokenizer_gguf = packaged_gguf()

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(model_dir.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(float(theta))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(config["vocab_size"])
    file_type = gguf.LlamaFileType.MOSTLY_F16 if ftype == "F16" else gguf.LlamaFileType.ALL_F32
    writer.add_file_type(int(file_type))
    copy_tokenizer(gguf.GGUFReader(str(tokenizer_gguf)), writer, config["vocab_size"])

    state = load_state(model_dir)
    for name, tensor in state.items():
        target = gguf_name(name)
        if target is None:
            if name.endswith("rotary_emb.inv_freq"):
                continue  # recomputed by llama.cpp from rope.freq_base
            raise SystemExit(f"{model_dir}: tensor {name} has no llama.cpp name")
        if target == "output.weight" and config.get("tie_word_embeddings"):
            continue  # llama.cpp reuses token_embd when output is absent
        data = tensor.astype(np.float32)
        if target.endswith("attn_q.weight"):
            data = permute(data, heads)
        elif target.endswith("attn_k.weight"):
            data = permute(data, kv_heads)
        if ftype == "F16" and data.ndim == 2:
            data = data.astype(np.float16)
        writer.add_tensor(target, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=True)
    writer.close()
    return out


def quantize(source: Path, out: Path, qtype: str, threads: int = 0) -> Path:
    """llama.cpp's quantizer (llama_model_quantize) from an F16/F32 GGUF to `qtype`."""
    import llama_cpp

    if qtype not in QUANT_TYPES:
        raise SystemExit(f"quantization {qtype}: choose one of {sorted(QUANT_TYPES)}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[qtype])
    params.nthread = threads
    for field, ggml_type in TENSOR_TYPES.get(qtype, {}).items():
        setattr(params, field, getattr(llama_cpp, ggml_type))
    code = llama_cpp.llama_model_quantize(
        str(source).encode(), str(out).encode(), ctypes.byref(params)
    )
    if code != 0 or not out.is_file():
        raise SystemExit(f"llama.cpp could not quantize {source} to {qtype} (code {code})")
    return out
