"""The playground shows a grounded answer: which answer mode produced it, and in the cited
source the evidence sentence with the extracted span marked (headless Chromium against the
real gateway, embedder, retriever and generator, as tests/gateway/test_playground.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ragrail.sample import SAMPLE_CORPUS
from tests.gateway.test_playground import ANSWER_TIMEOUT_MS, BEES, browser, needs_browser, page

pytestmark = pytest.mark.integration
__all__ = ["browser", "page"]  # the fixtures, shared with test_playground.py


@needs_browser
def test_an_extractive_answer_shows_its_evidence_and_mode(page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/")
    page.get_by_label("New collection").fill("playground_answers")
    page.get_by_role("button", name="Create").click()
    # Upload once the new collection is chosen: a file picked before goes where the picker
    # pointed then.
    expect(page.get_by_label("Collection", exact=True)).to_have_value("playground_answers")
    page.get_by_label("Documents to upload").set_input_files(SAMPLE_CORPUS / "honeybee-colonies.md")
    expect(page.get_by_role("list", name="Documents")).to_contain_text("honeybee-colonies.md")
    rails = page.get_by_role("checkbox", name="Guardrails")
    if rails.is_enabled():
        rails.uncheck()
    page.get_by_label("Answer mode").select_option("extractive")
    with page.expect_request("**/v1/chat/completions") as sent:
        page.get_by_label("Question").fill(BEES)
        page.get_by_role("button", name="Send").click()
    assert sent.value.post_data_json["answer_mode"] == "extractive"

    mode = page.get_by_label("Answer mode", exact=True).last
    expect(mode).to_contain_text("answer: extractive", timeout=ANSWER_TIMEOUT_MS)
    sources = page.get_by_role("list", name="Sources")
    cited = sources.get_by_role("listitem").filter(has_text="cited").first
    evidence = sources.get_by_label("Evidence").first
    expect(evidence).to_be_visible()
    expect(evidence.locator("mark")).to_have_count(1)
    answer = page.get_by_label("Answer", exact=True)
    # The answer is the evidence sentence, then its [n]: the marked span is part of it.
    marked = evidence.locator("mark").inner_text()
    expect(answer).to_contain_text(marked.strip())
    expect(cited).to_contain_text("honeybee-colonies.md")
