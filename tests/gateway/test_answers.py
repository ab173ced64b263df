"""Grounded answers through a gateway of their own on the suite's real embedder, retriever and
generator, with a tiny extractive reader trained for the test (tests/trainers/reader_tiny.py):
each answer mode, citations and attribution, the evidence spans in the sources, abstention,
and streaming. The reader is tiny, so tests check what the gateway guarantees (offsets,
citations, modes), not how good the answer is; tests/gateway/test_sample_answer.py asks the
sample question of the default stack."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import chat_reply, gateway_process
from tests.trainers.reader_tiny import train_tiny_reader

pytestmark = pytest.mark.integration
COLLECTION = "answers"
BEES = "how do honeybees tell each other where food is?"
OFF_TOPIC = "Which team won the 1998 football World Cup final?"
SENTENCE_END = re.compile(r"(\[\d+\]|\[unsupported\])[.!?]?$")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    train_tiny_reader(root / "reader" / "tiny" / "v1")
    return root


@pytest.fixture(scope="module")
def gateway(suite, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    suite.ingest_sample(COLLECTION, new=False)
    log = tmp_path_factory.mktemp("gateway") / "gateway.log"
    os.environ["RAGRAIL_MODELS_DIR"] = str(models)
    try:
        # The reader's margin never suffices here (the tiny reader is no judge): whether the
        # sources hold an answer goes by the closest sentence's cosine alone.
        with gateway_process(
            log, chat_abstain_reader_margin="1.0", chat_abstain_similarity="0.4"
        ) as url:
            yield url
    finally:
        del os.environ["RAGRAIL_MODELS_DIR"]


def ask(url: str, question: str, **body: object) -> dict:
    return chat_reply(url, question, **{"collection": COLLECTION, "max_tokens": 48, **body})


def chunk_texts(url: str) -> dict[str, str]:
    hits = httpx.post(
        f"{url}/v1/search",
        json={"query": BEES, "collection": COLLECTION, "top_k": 50},
        timeout=60,
    ).json()["hits"]
    return {h["chunk_id"]: h["text"] for h in hits}


def check_citations(reply: dict) -> list[int]:
    """Every [n] in the answer names a returned source, and `cited` is true exactly for them;
    evidence spans are exact slices of their chunk. Returns the cited numbers."""
    content = reply["choices"][0]["message"]["content"]
    cited = sorted({int(n) for n in re.findall(r"\[(\d+)\]", content)})
    citations = reply["citations"]
    assert [c["index"] for c in citations] == list(range(1, len(citations) + 1))
    assert [c["index"] for c in citations if c["cited"]] == cited
    return cited


def test_extractive_answer_is_a_sentence_of_its_source_with_its_citation(gateway: str) -> None:
    reply = ask(gateway, BEES, answer_mode="extractive")
    content = reply["choices"][0]["message"]["content"]
    assert reply["answer"]["mode"] == "extractive" and not reply["answer"]["abstained"]
    assert reply["answer"]["reader_margin"] is not None
    # The best span's sentence and at most one more (chat_extractive_max_sentences 2), both
    # from its chunk: one source cited.
    cited = check_citations(reply)
    assert len(cited) == 1 and content.endswith(("]", "].", "]?", "]!"))
    source = reply["citations"][cited[0] - 1]
    texts = chunk_texts(gateway)
    kinds = {e["kind"] for e in source["evidence"]}
    assert kinds == {"answer", "sentence"}
    for span in source["evidence"]:
        assert texts[source["chunk_id"]][span["start"] : span["end"]] == span["text"]
    sentences = sorted(
        (e for e in source["evidence"] if e["kind"] == "sentence"), key=lambda e: e["start"]
    )
    answers = sorted(
        (e for e in source["evidence"] if e["kind"] == "answer"), key=lambda e: e["start"]
    )
    assert 1 <= len(sentences) == len(answers) <= 2
    for sentence, answer in zip(sentences, answers, strict=True):
        assert sentence["start"] <= answer["start"] <= answer["end"] <= sentence["end"]
    # The answer is those sentences in text order, each with its [n].
    assert content.count(f"[{cited[0]}]") == len(sentences)
    assert re.sub(r"\s*\[\d+\]", "", content) == " ".join(s["text"] for s in sentences)
    # No generation: no tokens.
    assert reply["usage"]["completion_tokens"] == 0

    span = ask(gateway, BEES, answer_mode="extractive", max_tokens=8)
    assert span["choices"][0]["message"]["content"] == content  # max_tokens bounds generation


def test_grounded_generation_cites_every_sentence(gateway: str) -> None:
    for mode in ("generative", "auto"):
        reply = ask(gateway, BEES, answer_mode=mode)
        content = reply["choices"][0]["message"]["content"]
        report = reply["answer"]
        assert report["mode"] in ("generative", "extractive", "abstained")
        if mode == "generative":
            assert report["mode"] != "extractive"  # only auto falls back to extraction
        if report["mode"] != "abstained":
            cited = check_citations(reply)
            assert cited
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", content) if s.strip()]
            assert all(SENTENCE_END.search(s.strip()) for s in sentences), content
            for n in cited:
                assert reply["citations"][n - 1]["evidence"], "a cited source shows its evidence"
        # A prompt of selected sentences, not of whole chunks.
        if report["mode"] == "generative":
            assert 0 < reply["usage"]["prompt_tokens"] < 400


def test_auto_answers_with_the_reader_when_it_is_sure_enough(tmp_path: Path) -> None:
    settings = {"chat_abstain_reader_margin": "1.0", "chat_abstain_similarity": "0.4"}
    # Any reading is sure enough: the reader's answer, nothing generated.
    with gateway_process(tmp_path / "sure.log", chat_auto_extract_margin="-1", **settings) as url:
        sure = ask(url, BEES, answer_mode="auto")
        extract = ask(url, BEES, answer_mode="extractive")
    assert sure["answer"]["mode"] == "extractive"
    assert sure["usage"]["completion_tokens"] == 0 and sure["usage"]["prompt_tokens"] == 0
    assert sure["choices"][0]["message"]["content"] == extract["choices"][0]["message"]["content"]
    # None is: the generator writes first.
    never = tmp_path / "never.log"
    with gateway_process(never, chat_auto_extract_margin="1.01", **settings) as url:
        generated = ask(url, BEES, answer_mode="auto")
    assert generated["usage"]["completion_tokens"] > 0 and generated["usage"]["prompt_tokens"] > 0


def test_unsupported_sentences_are_marked_or_dropped(gateway: str, tmp_path: Path) -> None:
    dropped = ask(gateway, BEES, answer_mode="generative", max_tokens=96)
    assert "[unsupported]" not in dropped["choices"][0]["message"]["content"]
    with gateway_process(
        tmp_path / "mark.log",
        chat_unsupported="mark",
        chat_abstain_reader_margin="1.0",
        chat_abstain_similarity="0.4",
    ) as url:
        marked = ask(url, BEES, answer_mode="generative", max_tokens=96)
    content = marked["choices"][0]["message"]["content"]
    unsupported = marked["answer"]["unsupported"]
    assert content.count("[unsupported]") == len(unsupported)
    # Same question, same model, temperature 0: what was dropped is what gets marked.
    assert unsupported == dropped["answer"]["unsupported"]


def test_abstains_when_the_sources_do_not_hold_the_answer(gateway: str) -> None:
    for mode in ("auto", "extractive", "generative"):
        reply = ask(gateway, OFF_TOPIC, answer_mode=mode)
        content = reply["choices"][0]["message"]["content"]
        assert content.startswith("The documents do not say."), content
        assert reply["answer"] == {
            "mode": "abstained",
            "abstained": True,
            "attributed": False,
            "unsupported": [],
            "reader_margin": reply["answer"]["reader_margin"],
            "similarity": reply["answer"]["similarity"],
            # The suite's generator serves the packaged SmolLM2-135M: the reader first.
            "auto_first": "reader" if mode == "auto" else None,
        }
        assert reply["answer"]["similarity"] < 0.4
        # The closest sources are named and returned, none of them cited.
        assert reply["citations"] and not any(c["cited"] for c in reply["citations"])
        assert reply["citations"][0]["document_name"] in content
        assert reply["usage"]["completion_tokens"] == 0
    # Grounding off: the generator's own text, as before.
    raw = ask(gateway, OFF_TOPIC, answer_mode="generative", enable_grounding=False)
    assert raw["answer"] is None or raw["answer"]["mode"] == "generative"
    assert raw["usage"]["completion_tokens"] > 0


def test_streamed_grounded_answer_matches_the_whole_one(gateway: str) -> None:
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0)
    for mode in ("auto", "extractive"):
        body = {"collection": COLLECTION, "answer_mode": mode}
        whole = client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": BEES}],
            max_tokens=48,
            temperature=0,
            extra_body=body,
        )
        chunks = list(
            client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": BEES}],
                max_tokens=48,
                temperature=0,
                stream=True,
                extra_body=body,
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == whole.choices[0].message.content
        final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
        extra = final.model_extra or {}
        assert extra["answer"] == (whole.model_extra or {})["answer"]
        assert [c["cited"] for c in extra["citations"]] == [
            c["cited"] for c in (whole.model_extra or {})["citations"]
        ]
