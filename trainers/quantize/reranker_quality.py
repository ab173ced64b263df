"""How close the reranker's INT8 scores stay to PyTorch FP32's, and nDCG@10 of reranking
with each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from trainers.data import Beir
from trainers.quantize.reranker_pairs import Pair, pair_length
from trainers.reranker.evaluation import EvalSet

Score = Callable[[list[Pair]], np.ndarray]


def score_all(score: Score, pairs: list[Pair], batch_size: int, desc: str) -> np.ndarray:
    scores, _ = qtools.run_batches(
        score, pairs, qtools.length_batches(pairs, batch_size, pair_length), desc, "pair"
    )
    return scores


def difference(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    # Nine decimals: ONNX FP32 differs from PyTorch by about 1e-8, which six would show as 0.
    return {
        "max_abs": round(float(diff.max()), 9),
        "mean_abs": round(float(diff.mean()), 9),
        "pairs": len(diff),
    }


def ranking_ndcg(
    engines: dict[str, Score], data: Beir, evalset: EvalSet, batch_size: int, depth: int
) -> dict[str, Any]:
    pairs = evalset.pairs(data.corpus)
    print(f"nDCG@10: scoring {len(pairs)} pairs of {len(evalset.qrels)} queries", flush=True)
    scores = {name: score_all(s, pairs, batch_size, f"nDCG {name}") for name, s in engines.items()}
    result: dict[str, Any] = {
        "data": str(data.root),
        "queries": len(evalset.qrels),
        "depth": depth,
        "pairs": len(pairs),
        "bm25": round(evalset.ndcg(None), 6),
        **{name: round(evalset.ndcg(s), 6) for name, s in scores.items()},
        "score_diff_int8_vs_torch": difference(scores["onnx_int8"], scores["torch_fp32"]),
    }
    result["difference"] = round(result["onnx_int8"] - result["torch_fp32"], 6)
    return result
