"""The published prompt formats of two LLM safety models, and how their answers read: what
a rail sends to such a model behind an OpenAI-compatible server, and the verdict it gets back.

* **NemoGuard content safety** (nvidia/llama-3.1-nemoguard-8b-content-safety, "Llama Nemotron
  Safety Guard V2"; NIM or vLLM): the Aegis 2.0 taxonomy, S1 Violence ... S23
  Immoral/Unethical. The prompt is the instruction of NVIDIA's model card and NIM
  documentation (the one NeMo Guardrails' `content_safety` rail is configured with), sent as
  the user message of a chat; the model answers JSON: {"User Safety": "unsafe", "Response
  Safety": "safe", "Safety Categories": "Violence, Threat"}, the categories by name.
* **Llama Guard 3** (meta-llama/Llama-Guard-3-8B / -1B; vLLM, NIM): the MLCommons hazard
  taxonomy, S1 Violent Crimes ... S14 Code Interpreter Abuse, in Meta's prompt format (model
  card), sent as a completion prompt; the model answers "safe", or "unsafe" and on the next
  line the violated codes, "S1,S10". As NeMo Guardrails' `llama_guard` rail, the prompt is
  rendered here, so the categories it lists can be narrowed (they keep their numbers: the
  model learned that S4 means child exploitation).

An answer that follows neither shape raises `UnreadableAnswer`: the caller decides what an
unreadable verdict means (the guardrails rail: its `on_error`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

Format = Literal["nemoguard", "llama_guard"]
FORMATS: tuple[Format, ...] = ("nemoguard", "llama_guard")
Stage = Literal["input", "output"]

# NVIDIA's Aegis 2.0 content-safety taxonomy, as the NemoGuard prompt lists it.
NEMOGUARD_CATEGORIES: dict[str, str] = {
    "S1": "Violence",
    "S2": "Sexual",
    "S3": "Criminal Planning/Confessions",
    "S4": "Guns and Illegal Weapons",
    "S5": "Controlled/Regulated Substances",
    "S6": "Suicide and Self Harm",
    "S7": "Sexual (minor)",
    "S8": "Hate/Identity Hate",
    "S9": "PII/Privacy",
    "S10": "Harassment",
    "S11": "Threat",
    "S12": "Profanity",
    "S13": "Needs Caution",
    "S14": "Other",
    "S15": "Manipulation",
    "S16": "Fraud/Deception",
    "S17": "Malware",
    "S18": "High Risk Gov Decision Making",
    "S19": "Political/Misinformation/Conspiracy",
    "S20": "Copyright/Trademark/Plagiarism",
    "S21": "Unauthorized Advice",
    "S22": "Illegal Activity",
    "S23": "Immoral/Unethical",
}

# The MLCommons hazard taxonomy as Llama Guard 3's prompt lists it.
LLAMA_GUARD_CATEGORIES: dict[str, str] = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex Crimes",
    "S4": "Child Exploitation",
    "S5": "Defamation",
    "S6": "Specialized Advice",
    "S7": "Privacy",
    "S8": "Intellectual Property",
    "S9": "Indiscriminate Weapons",
    "S10": "Hate",
    "S11": "Self-Harm",
    "S12": "Sexual Content",
    "S13": "Elections",
    "S14": "Code Interpreter Abuse",
}

CATEGORIES: dict[Format, dict[str, str]] = {
    "nemoguard": NEMOGUARD_CATEGORIES,
    "llama_guard": LLAMA_GUARD_CATEGORIES,
}

# How each format reaches the server: NemoGuard as a chat (the server applies Llama 3.1's
# chat template, as NIM's API does), Llama Guard as a raw completion of its own format.
ENDPOINTS: dict[Format, Literal["chat/completions", "completions"]] = {
    "nemoguard": "chat/completions",
    "llama_guard": "completions",
}
# Enough tokens for the longest verdict the format allows (NeMo Guardrails' configs use 50
# for NemoGuard; a Llama Guard verdict listing a few codes is under 20).
MAX_TOKENS: dict[Format, int] = {"nemoguard": 50, "llama_guard": 20}

_NEMOGUARD_TASK = (
    "Task: Check if there is unsafe content in the user or agent messages in the below "
    "conversation in accordance with our safety policy with the below categories. Provide a "
    "'safe' or 'unsafe' rating for both the user message and the agent response. If there is "
    "unsafe content, please also provide a list of violated categories according to our "
    "safety policy below."
)
_NEMOGUARD_ANSWER = (
    "Provide your safety assessment for the above conversation in the below output JSON "
    "format:\n"
    '{"User Safety": safe or unsafe rating for the user message, "Response Safety": safe or '
    'unsafe rating for the agent response. Omit if no agent response present. "Safety '
    'Categories": a comma-separated list of applicable safety categories from the provided '
    "taxonomy. Omit if all safe.}\n\n"
    "Do not include anything other than the output JSON in your response.\n"
    "Output JSON: "
)
# Llama 3.1's header tokens, written out: the prompt is sent as a completion. No
# <|begin_of_text|>: vLLM's and llama.cpp's completion endpoints add the BOS token themselves.
_LLAMA_GUARD_HEAD = "<|start_header_id|>user<|end_header_id|>\n\n"
_LLAMA_GUARD_TAIL = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"


class UnreadableAnswer(ValueError):
    """The safety model's answer is not a verdict in its format."""


@dataclass(frozen=True)
class SafetyVerdict:
    """What the safety model said about the text it judged: safe or not, and the violated
    categories as codes (S1, ...) with their names."""

    safe: bool
    categories: tuple[str, ...] = ()  # codes where known, else the name the model gave
    names: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """'S1 Violence, S11 Threat' (or the names the model gave)."""
        return ", ".join(
            f"{code} {name}" if name and name != code else code
            for code, name in zip(self.categories, self.names, strict=True)
        )


def categories_for(fmt: Format, chosen: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The categories the prompt lists: all of the format's, or the chosen codes (in the
    taxonomy's order, with their own numbers). An unknown code raises ValueError."""
    table = CATEGORIES[fmt]
    unknown = [c for c in chosen if c.upper() not in table]
    if unknown:
        raise ValueError(f"unknown {fmt} categories {unknown}; it has {', '.join(table)}")
    wanted = {c.upper() for c in chosen}
    return {code: name for code, name in table.items() if not wanted or code in wanted}


def render(
    fmt: Format,
    stage: Stage,
    text: str,
    question: str = "",
    categories: dict[str, str] | None = None,
) -> str:
    """The prompt for judging `text`: the user's message (stage input), or the agent's
    answer (stage output) to `question`."""
    listed = categories if categories is not None else CATEGORIES[fmt]
    taxonomy = "".join(f"{code}: {name}.\n" for code, name in listed.items())
    if fmt == "nemoguard":
        if stage == "input":
            conversation = f"user: {text}\n\n"
        else:
            conversation = f"user: {question}\n\nresponse: agent: {text}\n\n"
        return (
            f"{_NEMOGUARD_TASK}\n\n<BEGIN UNSAFE CONTENT CATEGORIES>\n{taxonomy}"
            f"<END UNSAFE CONTENT CATEGORIES>\n\n<BEGIN CONVERSATION>\n\n{conversation}"
            f"<END CONVERSATION>\n\n{_NEMOGUARD_ANSWER}"
        )
    role = "User" if stage == "input" else "Agent"
    if stage == "input":
        conversation = f"User: {text}\n\n"
    else:
        conversation = f"User: {question}\n\nAgent: {text}\n\n"
    return (
        f"{_LLAMA_GUARD_HEAD}Task: Check if there is unsafe content in '{role}' messages in "
        "conversations according our safety policy with the below categories.\n\n"
        f"<BEGIN UNSAFE CONTENT CATEGORIES>\n{taxonomy}<END UNSAFE CONTENT CATEGORIES>\n\n"
        f"<BEGIN CONVERSATION>\n\n{conversation}<END CONVERSATION>\n\n"
        f"Provide your safety assessment for ONLY THE LAST {role} message in the above "
        "conversation:\n - First line must read 'safe' or 'unsafe'.\n - If unsafe, a second "
        f"line must include a comma-separated list of violated categories.{_LLAMA_GUARD_TAIL}"
    )


def parse(fmt: Format, stage: Stage, answer: str) -> SafetyVerdict:
    """The verdict in the model's answer; UnreadableAnswer when it holds none."""
    if fmt == "nemoguard":
        return _parse_nemoguard(stage, answer)
    return _parse_llama_guard(answer)


def _short(answer: str) -> str:
    return repr(answer.strip()[:120])


def _parse_llama_guard(answer: str) -> SafetyVerdict:
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    first = lines[0].lower() if lines else ""
    if first == "safe":
        return SafetyVerdict(True)
    if not first.startswith("unsafe"):
        raise UnreadableAnswer(
            f"expected 'safe' or 'unsafe' on the first line, got {_short(answer)}"
        )
    # The codes follow on the next line ("S1,S10"); some servers keep them on one line.
    rest = " ".join([lines[0][len("unsafe") :], *lines[1:2]])
    codes = tuple(dict.fromkeys(c.upper() for c in re.findall(r"\b[sS]\d{1,2}\b", rest)))
    names = tuple(LLAMA_GUARD_CATEGORIES.get(c, c) for c in codes)
    return SafetyVerdict(False, codes, names)


_NAMES_TO_CODES = {name.lower(): code for code, name in NEMOGUARD_CATEGORIES.items()}


def _parse_nemoguard(stage: Stage, answer: str) -> SafetyVerdict:
    text = answer.strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise UnreadableAnswer(f"expected a JSON object, got {_short(answer)}")
    try:
        body = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise UnreadableAnswer(f"not JSON ({exc.msg}): {_short(answer)}") from exc
    key = "User Safety" if stage == "input" else "Response Safety"
    rating = body.get(key) if isinstance(body, dict) else None
    if not isinstance(rating, str) or rating.strip().lower() not in ("safe", "unsafe"):
        raise UnreadableAnswer(f'expected "{key}": "safe" or "unsafe", got {_short(answer)}')
    if rating.strip().lower() == "safe":
        return SafetyVerdict(True)
    listed = body.get("Safety Categories") or ""
    items = listed if isinstance(listed, list) else str(listed).split(",")
    pairs = [_nemoguard_category(str(item)) for item in items if str(item).strip()]
    return SafetyVerdict(False, tuple(c for c, _ in pairs), tuple(n for _, n in pairs))


def _nemoguard_category(item: str) -> tuple[str, str]:
    """(code, name) of one listed category: the model card's name ("Violence"), a code
    ("S1"), or both ("S17: Malware"), as NemoGuard versions and NeMo Guardrails' tests
    show; a name outside the taxonomy is kept as it came."""
    item = item.strip().rstrip(".")
    found = re.match(r"^[sS](\d{1,2})\b[:.]?\s*(.*)$", item)
    if found:
        code = f"S{found.group(1)}"
        return code, found.group(2).strip() or NEMOGUARD_CATEGORIES.get(code, code)
    return _NAMES_TO_CODES.get(item.lower(), item), item
