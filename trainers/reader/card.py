"""The model card (README.md) written beside a trained reader."""

from __future__ import annotations

from typing import Any

EVAL_SETS = (
    ("covidqa_test", "COVID-QA test"),
    ("covidqa_dev", "COVID-QA dev articles"),
    ("xquad_heldout", "XQuAD held-out"),
)


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    rows = []
    for key, label in EVAL_SETS:
        for engine in ("torch_fp32", "onnx_int8"):
            r = m.get(engine, {}).get(key)
            if r:
                rows.append(
                    f"| {label} | {engine} | {r['questions']} | {r['f1']} | {r['em']} | "
                    f"{r['sentence_f1']} | {r.get('answer_found_rate', '')} | "
                    f"{r.get('own_article_declined', '')} | "
                    f"{r.get('other_articles_declined', '')} | {r['ms_per_question']} |"
                )
    table = "\n".join(rows)
    return f"""# reader {manifest["name"]} / {manifest["version"]}

Extractive reader for ragrail's gateway (`shared.models.reader.Reader`): {manifest["method"]}.
Base: {manifest["base"]}. Trained on {manifest["data"]["train_examples"]} questions
({manifest["data"]["sources"]}), {m["train"]["steps"]} steps in {m["train"]["seconds"]} s.

| set | engine | questions | span F1 | span EM | sentence F1 | answer found | \
declined: own article | declined: other articles | ms/question |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
{table}

Each question is read with a window of its article that holds the answer, about a chunk
long ("answer found": the share where the reader finds one); "declined" is the share of
windows without the answer that it declines: elsewhere in its own article, or the chunk of
another article that BM25 ranks highest for it. `manifest.json` records the arguments, data
hashes, the dev articles left out and library versions. Data licences: COVID-QA Apache-2.0,
XQuAD CC BY-SA 4.0.
"""
