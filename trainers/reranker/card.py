"""The model card (README.md) written beside a trained reranker."""

from __future__ import annotations

from shared.models.quantize import ONNX_OPSET


def model_card(manifest: dict) -> str:
    m = manifest["metrics"]
    ndcg = m["ndcg@10"]
    p = manifest["params"]
    d = manifest["data"]
    onnx = f"yes (`model.onnx`, opset {ONNX_OPSET})" if "onnx" in manifest["format"] else "no"
    data = f"`{d['path']}`, split `{d['train_split']}`, sha256 `{d['sha256'][:16]}…`"
    training = (
        f"{m['train']['pairs']} pairs from {d['train_queries']} queries "
        f"({p['negatives']} BM25 + {p.get('dense_negatives', 0)} dense negatives each), "
        f"{p['epochs']} epoch(s), batch "
        f"{p['batch_size']}, lr {p['lr']}, max length {p['max_length']}, seed {p['seed']}"
    )
    before = "not measured" if ndcg["before"] is None else f"{ndcg['before']:.4f}"
    return f"""# {manifest["name"]} / {manifest["version"]}

A cross-encoder reranker: given a query and a passage it returns one relevance score
(sigmoid of a single logit, 0 to 1). Trained by `python -m trainers.reranker`.

| | |
| --- | --- |
| base | {manifest["base"]}: its encoder, a fresh 1-logit head |
| method | {manifest["method"]} |
| data | {data} |
| training | {training} |
| ONNX | {onnx} |
| created | {manifest["created_at"]} |

## Evaluation

Reranking the BM25 top {m["depth"]} of the {m["eval_queries"]} queries of split
`{m["eval_split"]}` (nDCG@10, linear gains):

| ranking | nDCG@10 |
| --- | --- |
| BM25 alone | {ndcg["bm25"]:.4f} |
| base model before training | {before} |
| this model | {ndcg["after"]:.4f} |

## Use

```bash
# from the repository root
RAGRAIL_RERANKER_MODEL={manifest["path"]} python -m services.reranker
RAGRAIL_RERANKER_MODEL={manifest["path"]} RAGRAIL_RERANKER_BACKEND=onnx python -m services.reranker
```

```python
from sentence_transformers import CrossEncoder
model = CrossEncoder("{manifest["path"]}", local_files_only=True)
model.predict([("query", "passage")])
```

`manifest.json` records the arguments, library versions and data hash; `metrics.json` the
numbers above and the training loss.
"""
