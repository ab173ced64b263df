"""Export to ONNX (FP32) and its dynamic INT8 variant, the file the runtime loads."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

ONNX_OPSET = 17
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_OUTPUTS = ("start_logits", "end_logits")
FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"


def export_onnx(model: Any, tokenizer: Any, out: Path) -> dict[str, Any]:
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            o = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return o.start_logits, o.end_logits

    from shared.models.quantize import DEFAULT_VARIANT, eager_attention, quantize_dynamic_variant

    wrapper = Logits(model).eval()
    sample = tokenizer(["what is exported"], ["A passage with a few tokens."], return_tensors="pt")
    path = out / FP32_FILE
    with eager_attention(model), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            tuple(sample[n] for n in ONNX_INPUTS),
            str(path),
            input_names=list(ONNX_INPUTS),
            output_names=list(ONNX_OUTPUTS),
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ONNX_INPUTS + ONNX_OUTPUTS},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    quant = quantize_dynamic_variant(path, out / INT8_FILE, DEFAULT_VARIANT)
    return {"file": INT8_FILE, "fp32_file": FP32_FILE, "opset": ONNX_OPSET, "quantization": quant}
