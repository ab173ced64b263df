"""The model card (README.md) of a quantized reranker."""

from __future__ import annotations

from typing import Any

from shared.models import quantize as qtools
from shared.models.quantize import FP32_FILE, INT8_FILE
from trainers.quantize.common import onnx_line


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    speed = m["pairs_per_s"]
    diff = m["score_diff_vs_torch_fp32"]
    rows = qtools.speed_rows(speed, "PyTorch FP32 (CrossEncoder.predict)")
    ndcg = ""
    if m.get("ndcg@10"):
        n = m["ndcg@10"]
        d = n["score_diff_int8_vs_torch"]
        ndcg = f"""
Reranking the BM25 top {n["depth"]} of {n["queries"]} queries ({n["pairs"]} pairs) of
`{n["data"]}`, split `{m["eval_split"]}`:

| ranking | nDCG@10 |
| --- | --- |
| BM25 alone | {n["bm25"]:.4f} |
| PyTorch FP32 | {n["torch_fp32"]:.4f} |
| ONNX INT8 | {n["onnx_int8"]:.4f} ({n["difference"]:+.4f}) |

INT8 scores of those pairs differ from PyTorch's by at most {d["max_abs"]:.4f} (mean
{d["mean_abs"]:.4f}).
"""
    src = manifest["source"]
    files, quantization = qtools.card_lines(
        manifest, "tokenizer, configuration and PyTorch weights"
    )
    onnx = onnx_line(manifest, f"logits (batch, 1); {manifest['onnx']['source']}")
    return f"""# {manifest["name"]} / {manifest["version"]}

An INT8 copy of a cross-encoder reranker for CPU inference with the reranker service's onnx
backend, next to its FP32 ONNX export and PyTorch weights. Written by
`python -m trainers.quantize reranker`.

| | |
| --- | --- |
| model | `{src["path"]}` ({src.get("name", "?")} / {src.get("version", "?")}) |
| method | {manifest["method"]} |
| files | {files} |
| ONNX | {onnx} |
| quantization | {quantization} |
| created | {manifest["created_at"]} |

## Measured

{m["pairs"]["count"]} (query, passage) pairs: {m["pairs"]["source"]}.
Mean {m["pairs"]["mean_tokens"]} tokens per pair, truncated at {m["max_length"]}; batch
{m["batch_size"]}, {m["threads"]} thread(s), median of {len(speed["runs"]["torch_fp32"])}
interleaved run(s), {m["cpu"]}:

| engine | pairs/s | vs PyTorch FP32 |
| --- | --- | --- |
{rows}

Scores (after the model's activation) against PyTorch FP32's on those pairs:

| engine | max abs difference | mean abs difference |
| --- | --- | --- |
| ONNX FP32 | {diff["onnx_fp32"]["max_abs"]:.2e} | {diff["onnx_fp32"]["mean_abs"]:.2e} |
| ONNX INT8 | {diff["onnx_int8"]["max_abs"]:.4f} | {diff["onnx_int8"]["mean_abs"]:.4f} |
{ndcg}
## Use

```bash
# from the repository root
RAGRAIL_RERANKER_BACKEND=onnx RAGRAIL_RERANKER_ONNX_FILE={INT8_FILE} \\
    RAGRAIL_RERANKER_MODEL={manifest["path"]} python -m services.reranker
# FP32: leave RAGRAIL_RERANKER_ONNX_FILE at its default, {FP32_FILE}
```

`manifest.json` records the arguments, library versions and file hashes; `metrics.json` the
numbers above.
"""
