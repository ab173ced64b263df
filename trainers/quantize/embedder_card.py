"""The model card (README.md) of a quantized embedder."""

from __future__ import annotations

from typing import Any

from shared.models import quantize as qtools
from shared.models.quantize import FP32_FILE
from trainers.data import card_facts
from trainers.quantize.common import onnx_line
from trainers.quantize.embedder_model import ONNX_OUTPUT
from trainers.quantize.texts import ONE_WORD_TEXTS, SHORT_TEXTS


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    speed = m["texts_per_s"]
    cos = m["cosine_vs_torch_fp32"]
    word = m["cosine_one_word_vs_torch_fp32"]["onnx_int8"]
    rows = qtools.speed_rows(speed, "PyTorch FP32 (sentence-transformers)")
    ndcg = ""
    if m.get("ndcg@10"):
        n = m["ndcg@10"]
        ndcg = f"""
Dense retrieval on `{n["data"]}` split `{n["split"]}` ({n["queries"]} queries over
{n["documents"]} documents: every relevant one, the rest in corpus order), nDCG@10:
PyTorch FP32 {n["torch_fp32"]:.4f}, ONNX INT8 {n["onnx_int8"]:.4f}
(difference {n["onnx_int8"] - n["torch_fp32"]:+.4f}).
"""
    variants = ""
    if m.get("variants"):
        lines = "\n".join(
            f"| {v['variant']} | {v['texts_per_s']:.1f} | {v['cosine']['min']:.4f} | "
            f"{v['cosine']['mean']:.4f} | {v['cosine_one_word']['min']:.4f} |"
            for v in m["variants"]
        )
        variants = f"""
Variants measured (`--variant auto`, {m["variants"][0]["cosine"]["texts"]} texts, the kept one
is the fastest with minimum cosine ≥ {manifest["params"]["min_cosine"]}):

| variant | texts/s | min cosine | mean cosine | min cosine, one word |
| --- | --- | --- | --- | --- |
{lines}
"""
    files, quantization = qtools.card_lines(
        manifest, "tokenizer and sentence-transformers configuration"
    )
    facts = card_facts(
        manifest,
        {
            "files": files,
            "ONNX": onnx_line(manifest, f"{ONNX_OUTPUT} (batch and sequence dynamic)"),
            "quantization": quantization,
            "pooling": f"{m['pooling']}, L2-normalised, max {m['max_seq_length']} tokens",
        },
    )
    return f"""# {manifest["name"]} / {manifest["version"]}

An ONNX export of a sentence-transformers embedder with an INT8 copy for CPU inference, for
the embedder service's onnx backend. Written by `python -m trainers.quantize embedder`.

{facts}

## Measured

{m["texts"]["count"]} texts from `{m["texts"]["source"]}` (mean {m["texts"]["mean_tokens"]}
tokens after truncation), batch {m["batch_size"]}, {m["threads"]} thread(s), median of
{len(speed["runs"]["torch_fp32"])} interleaved run(s), on {m["cpu"]}:

| engine | texts/s | vs PyTorch FP32 |
| --- | --- | --- |
{rows}

Cosine similarity to the PyTorch FP32 vectors over {cos["onnx_int8"]["texts"]} texts (those
passages and {len(SHORT_TEXTS)} short queries): INT8 min {cos["onnx_int8"]["min"]:.4f},
mean {cos["onnx_int8"]["mean"]:.4f}; ONNX FP32 min {cos["onnx_fp32"]["min"]:.6f}. On
{len(ONE_WORD_TEXTS)} one-word texts embedded alone, INT8 min {word["min"]:.4f}, mean
{word["mean"]:.4f}: the weakest case of per-batch activation scales.
{ndcg}{variants}
## Use

```bash
# from the repository root
RAGRAIL_EMBEDDER_BACKEND=onnx RAGRAIL_EMBEDDER_MODEL={manifest["path"]} python -m services.embedder
# the FP32 export instead of INT8:
RAGRAIL_EMBEDDER_BACKEND=onnx RAGRAIL_EMBEDDER_ONNX_FILE={FP32_FILE} \\
    RAGRAIL_EMBEDDER_MODEL={manifest["path"]} python -m services.embedder
```

Vectors are interchangeable with the sentence-transformers backend's on the same base model
(a collection ingested with one can be searched with the other) within the cosine above.
`manifest.json` records the arguments, library versions and file hashes; `metrics.json` the
numbers above.
"""
