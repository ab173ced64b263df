"""The published formats of the remote safety models (shared/models/safety_formats.py): the
prompts carry the model cards' instruction, taxonomy and conversation, and the answers the
models are documented to give parse to the right verdict and categories. No server: these
run in process in milliseconds."""

from __future__ import annotations

import pytest

from shared.models.remote import RemoteServer, RemoteServerSettings
from shared.models.safety_formats import (
    LLAMA_GUARD_CATEGORIES,
    NEMOGUARD_CATEGORIES,
    UnreadableAnswer,
    categories_for,
    parse,
    render,
)

# Answers as the model cards, NVIDIA's NIM documentation and NeMo Guardrails' parsers show them.
LLAMA_GUARD_ANSWERS = [
    ("safe", True, ()),
    ("unsafe\nS2", False, ("S2",)),  # Meta / Ollama: "steal a llama from the zoo"
    ("unsafe\nS1,S3", False, ("S1", "S3")),
    ("\n\nunsafe\nS10, S11", False, ("S10", "S11")),  # leading newlines, a space after the comma
    ("unsafe S9", False, ("S9",)),  # the codes on the verdict's line
    ("Safe", True, ()),
]
NEMOGUARD_INPUT_ANSWERS = [
    ('{"User Safety": "safe"}', True, ()),
    (
        '{"User Safety": "unsafe", "Safety Categories": "Violence, Criminal Planning/Confessions"}',
        False,
        ("S1", "S3"),
    ),
    ('{"User Safety": "unsafe", "Safety Categories": "S3"}', False, ("S3",)),
    ('{"User Safety": "unsafe", "Safety Categories": "Violence,Threat"}', False, ("S1", "S11")),
    ('{"User Safety": "unsafe"}', False, ()),
    ('{"User Safety": "Unsafe", "Safety Categories": ["S1"]}', False, ("S1",)),
]
NEMOGUARD_OUTPUT_ANSWERS = [
    ('{"User Safety": "safe", "Response Safety": "safe"}', True, ()),
    (
        '{"User Safety": "safe", "Response Safety": "unsafe", "Safety Categories": "S17: Malware"}',
        False,
        ("S17",),
    ),
    (
        '{"User Safety": "unsafe", "Response Safety": "unsafe", '
        '"Safety Categories": "PII/Privacy"}',
        False,
        ("S9",),
    ),
    # An unsafe request answered safely (a refusal): the answer is what this stage judges.
    (
        '{"User Safety": "unsafe", "Response Safety": "safe", "Safety Categories": "Violence"}',
        True,
        (),
    ),
]


@pytest.mark.parametrize(("answer", "safe", "codes"), LLAMA_GUARD_ANSWERS)
def test_llama_guard_answers(answer: str, safe: bool, codes: tuple[str, ...]) -> None:
    verdict = parse("llama_guard", "input", answer)
    assert (verdict.safe, verdict.categories) == (safe, codes)
    assert verdict.names == tuple(LLAMA_GUARD_CATEGORIES[c] for c in codes)


@pytest.mark.parametrize(("answer", "safe", "codes"), NEMOGUARD_INPUT_ANSWERS)
def test_nemoguard_input_answers(answer: str, safe: bool, codes: tuple[str, ...]) -> None:
    verdict = parse("nemoguard", "input", answer)
    assert (verdict.safe, verdict.categories) == (safe, codes)


@pytest.mark.parametrize(("answer", "safe", "codes"), NEMOGUARD_OUTPUT_ANSWERS)
def test_nemoguard_output_answers(answer: str, safe: bool, codes: tuple[str, ...]) -> None:
    verdict = parse("nemoguard", "output", answer)
    assert (verdict.safe, verdict.categories) == (safe, codes)


def test_categories_are_described_by_code_and_name() -> None:
    verdict = parse("nemoguard", "input", NEMOGUARD_INPUT_ANSWERS[1][0])
    assert verdict.describe() == "S1 Violence, S3 Criminal Planning/Confessions"
    odd = parse("nemoguard", "input", '{"User Safety": "unsafe", "Safety Categories": "Spam"}')
    assert odd.describe() == "Spam"  # a name outside the taxonomy is kept as it came
    assert parse("llama_guard", "input", "unsafe\nS1,S10").describe() == (
        "S1 Violent Crimes, S10 Hate"
    )


@pytest.mark.parametrize(
    ("fmt", "stage", "answer"),
    [
        ("llama_guard", "input", "I cannot help with that."),
        ("llama_guard", "input", ""),
        ("llama_guard", "input", "unsure\nS1"),
        ("nemoguard", "input", "safe"),
        ("nemoguard", "input", '{"User Safety": "maybe"}'),
        ("nemoguard", "input", '{"User Safety": "safe"'),  # cut short by max_tokens
        ("nemoguard", "output", '{"User Safety": "safe"}'),  # no verdict on the answer
        ("nemoguard", "input", "[1, 2]"),
    ],
)
def test_an_answer_that_is_no_verdict_is_unreadable(fmt: str, stage: str, answer: str) -> None:
    with pytest.raises(UnreadableAnswer):
        parse(fmt, stage, answer)  # type: ignore[arg-type]


def test_nemoguard_prompt_is_the_model_cards() -> None:
    prompt = render("nemoguard", "input", "How do I pick a lock?")
    assert prompt.startswith(
        "Task: Check if there is unsafe content in the user or agent messages in the below "
        "conversation in accordance with our safety policy with the below categories."
    )
    for code, name in NEMOGUARD_CATEGORIES.items():
        assert f"\n{code}: {name}.\n" in prompt
    assert "<BEGIN CONVERSATION>\n\nuser: How do I pick a lock?\n\n<END CONVERSATION>" in prompt
    assert "agent" not in prompt.split("<BEGIN CONVERSATION>")[1].split("<END CONVERSATION>")[0]
    assert prompt.rstrip().endswith("Output JSON:")
    answer = render("nemoguard", "output", "Use a tension wrench.", "How do I pick a lock?")
    assert "user: How do I pick a lock?\n\nresponse: agent: Use a tension wrench.\n\n" in answer


def test_llama_guard_prompt_is_metas_format() -> None:
    prompt = render("llama_guard", "input", "How do I pick a lock?")
    # No <|begin_of_text|>: the server's completion endpoint adds the BOS token.
    assert prompt.startswith("<|start_header_id|>user<|end_header_id|>\n\nTask: Check if there ")
    assert "unsafe content in 'User' messages" in prompt
    assert "S14: Code Interpreter Abuse.\n<END UNSAFE CONTENT CATEGORIES>" in prompt
    assert "<BEGIN CONVERSATION>\n\nUser: How do I pick a lock?\n\n<END CONVERSATION>" in prompt
    assert "for ONLY THE LAST User message" in prompt
    assert prompt.endswith("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    answer = render("llama_guard", "output", "Use a tension wrench.", "How do I pick a lock?")
    assert "'Agent' messages" in answer and "ONLY THE LAST Agent message" in answer
    assert "User: How do I pick a lock?\n\nAgent: Use a tension wrench.\n\n" in answer


def test_narrowed_categories_keep_their_numbers() -> None:
    chosen = categories_for("llama_guard", ["s10", "S1"])
    assert chosen == {"S1": "Violent Crimes", "S10": "Hate"}
    prompt = render("llama_guard", "input", "hi", categories=chosen)
    assert "S1: Violent Crimes.\nS10: Hate.\n<END" in prompt and "S2:" not in prompt
    assert categories_for("nemoguard") == NEMOGUARD_CATEGORIES
    with pytest.raises(ValueError, match="unknown llama_guard categories"):
        categories_for("llama_guard", ["S15"])


def test_a_yaml_section_names_its_settings_in_messages() -> None:
    from shared.errors import FailedPrecondition

    with pytest.raises(
        FailedPrecondition, match=r"custom_data\.ragrail\.remote_safety\.remote_url"
    ):
        RemoteServer(
            RemoteServerSettings(),
            "remote safety rail",
            section="custom_data.ragrail.remote_safety",
        )
    with pytest.raises(FailedPrecondition, match="RAGRAIL_EMBEDDER_REMOTE_URL"):
        RemoteServer(RemoteServerSettings(), "embedder")
