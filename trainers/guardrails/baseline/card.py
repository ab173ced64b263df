"""The README.md model card of a trained prompt-injection classifier."""

from __future__ import annotations

from typing import Any

from trainers.data import card_facts


def _point(p: dict[str, Any]) -> str:
    return (
        f"TPR {p['tpr']:.3f} ({p['true_positives']}/{p['positives']}), FPR {p['fpr']:.3f} "
        f"({p['false_positives']}/{p['negatives']})"
    )


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    test = m["test"]
    cal = m["calibration"]
    oracle = next(v for k, v in test.items() if k.startswith("oracle_at_fpr_"))
    d = manifest["data"]
    train = m["train"]
    if m["method"] == "finetune":
        training = (
            f"{train['examples']} texts, {train['steps']} steps, loss {train['loss_first']} → "
            f"{train['loss_last']}, {train['seconds']} s"
        )
    else:
        training = f"{train['examples']} texts, logistic regression C={train['C']} (CV grid)"
    data = (
        f"`{d['path']}`: {d['train_rows']} training rows, {d['test_rows']} test rows, "
        f"sha256 `{d['sha256'][:16]}…`"
    )
    domain = d.get("in_domain")
    if domain:
        data += (
            f"; benign in-domain questions `{domain['path']}`: {domain['train_questions']} "
            f"(qrels/train.tsv) trained on, {domain['test_questions']} (qrels/test.tsv) "
            "measured only"
        )
    q = manifest["quantization"]
    oracle_row = f"best TPR with FPR ≤ {oracle_fpr(test)} if tuned on test (reference only)"
    facts = card_facts(
        manifest,
        {
            "data": data,
            "training": training,
            "files": "`model_int8.onnx` (served), `model.onnx` (FP32), tokenizer, `head.json`",
            "quantization": f"{q['variant']}, weights {q['weight_type']}",
            "max length": f"{m['max_length']} tokens",
        },
    )
    return f"""# {manifest["name"]} / {manifest["version"]}

A prompt-injection classifier for the guardrails service: all-MiniLM-L6-v2's normalised
mean-pooled embedding (INT8 ONNX) followed by a linear head; a text is flagged when its
logit reaches the threshold in `head.json`. Written by `python -m trainers.guardrails.baseline`.

{facts}

## Threshold (chosen on train only)

{cal["kind"]} scores of {cal["rows"]} training rows, target false-positive rate
{cal["target_fpr"]}: threshold **{m["threshold"]:.4f}** (logit), where train shows
{_point(cal)}; AUC {cal["auc"]:.4f}.{in_domain_calibration(cal)}

## Test split (never used to choose anything)

| | |
| --- | --- |
| INT8 at the stored threshold | **{_point(test["at_threshold"])}** |
| FP32 ONNX at the same threshold | {_point(test["fp32_at_threshold"])} |
| ROC AUC (INT8) | {test["auc"]:.4f} |
| {oracle_row} | {_point(oracle)} |
| INT8 vs FP32, largest probability difference | {test["int8_vs_fp32_probability_max_abs_diff"]} |
{in_domain_test(m)}
## Use

```bash
RAGRAIL_GUARDRAILS_INJECTION_MODEL={manifest["path"]} python -m services.guardrails
```

With no model configured the service loads the newest directory under
`models/guardrails/<name>/<version>/` holding `head.json`. `manifest.json` records the
arguments, data hash, file hashes and library versions; `metrics.json` the figures above.
"""


def oracle_fpr(test: dict[str, Any]) -> str:
    key = next(k for k in test if k.startswith("oracle_at_fpr_"))
    return key.removeprefix("oracle_at_fpr_")


def in_domain_calibration(cal: dict[str, Any]) -> str:
    d = cal.get("in_domain")
    if not d:
        return ""
    return (
        f" Held to at most {d['target_fpr']} of {d['rows']} benign in-domain questions too "
        f"(the prompt set alone gave {d['prompt_threshold']:.4f}, which flagged "
        f"{d['prompt_threshold_fpr']:.1%} of them); at the threshold {d['fpr']:.1%}."
    )


def in_domain_test(m: dict[str, Any]) -> str:
    t = (m.get("in_domain") or {}).get("test")
    if not t:
        return ""
    return (
        f"| benign in-domain test questions flagged (FPR) | **{t['fpr']:.3f}** "
        f"({t['flagged']}/{t['questions']}) |\n"
    )
