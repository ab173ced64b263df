"""The web playground at `/`, driven in headless Chromium (Debian's `chromium` package through
Playwright) against the real gateway, embedder, retriever and generator processes: create a
collection, upload a sample document, ask, and see the answer stream in with its sources."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from itertools import pairwise
from typing import Any

import pytest

from ragrail.sample import SAMPLE_CORPUS
from services.gateway.documents.ingest.parsers import SUPPORTED
from services.gateway.playground.router import PLAYGROUND_DIR
from tests.conftest import ops_key

pytestmark = pytest.mark.integration
INSTALL = "apt-get install -y --no-install-recommends chromium && pip install -e '.[dev]'"
# Generation on a busy 2-core CPU: an answer can take tens of seconds.
ANSWER_TIMEOUT_MS = 180_000
BEES = "How do honeybees tell each other where the flowers are?"


def _chromium() -> str | None:
    """The system Chromium. `playwright install` downloads its own build from a CDN this
    project's machines cannot reach, so Playwright drives the distribution's browser."""
    names = ("chromium", "chromium-browser", "google-chrome")
    return os.environ.get("RAGRAIL_CHROMIUM") or next(filter(None, map(shutil.which, names)), None)


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return f"playwright is not installed ({INSTALL})"
    if _chromium() is None:
        return f"no Chromium found (install it: {INSTALL}; or set RAGRAIL_CHROMIUM)"
    return None


MISSING = _missing()
# Without a browser these tests are skipped on a developer's machine, before the suite starts;
# CI installs one (.ci/run, the dev extra), so there a missing browser fails them instead.
needs_browser = pytest.mark.skipif(
    MISSING is not None and not os.environ.get("CI"), reason=MISSING or ""
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if MISSING:
        pytest.fail(MISSING)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Playwright passes --no-sandbox by default, which Chromium needs when run as root (CI).
        browser = p.chromium.launch(executable_path=_chromium(), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, suite: Any) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    context = browser.new_context(base_url=suite.gateway_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))

    def console(msg: Any) -> None:
        # Chromium logs every 4xx fetch as an error; the page shows those itself.
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            errors.append(f"console: {msg.text}")

    page.on("console", console)
    try:
        yield page
    finally:
        context.close()
    assert not errors, "the page reported errors:\n" + "\n".join(errors)


@needs_browser
def test_upload_ask_and_see_a_streamed_answer_citing_the_document(page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/")
    expect(page).to_have_title("ragrail playground")
    expect(page.get_by_role("status", name="Service health")).to_contain_text("all services up")

    page.get_by_label("New collection").fill("playground")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_label("Collection", exact=True)).to_have_value("playground")

    document = SAMPLE_CORPUS / "honeybee-colonies.md"
    page.get_by_label("Documents to upload").set_input_files(document)
    expect(page.get_by_role("status", name="Upload status")).to_contain_text(
        "ingested honeybee-colonies.md into playground"
    )
    expect(page.get_by_role("list", name="Documents")).to_contain_text("honeybee-colonies.md")

    # With output rails on, the gateway holds an answer back until they pass it (the default
    # chat_stream_output_rails=buffer), so it would arrive whole: switch them off when present.
    rails = page.get_by_role("checkbox", name="Guardrails")
    if rails.is_enabled():
        rails.uncheck()
    page.get_by_label("Max answer tokens").fill("32")
    page.get_by_label("Temperature").fill("0")
    page.get_by_label("Chunks for the model (reranker_top_k)").fill("2")
    # A grounded answer arrives a checked sentence at a time; the generator's own text
    # (grounding off) token by token, which is what this test watches.
    page.get_by_role("checkbox", name="Grounding").uncheck()
    # Record every state the answer passes through, to see it arrive in pieces.
    page.evaluate(
        """() => {
          window.answerStates = [];
          new MutationObserver(() => {
            const answer = document.querySelector('.message.assistant .content');
            const text = answer ? answer.textContent : '';
            if (text && window.answerStates.at(-1) !== text) window.answerStates.push(text);
          }).observe(document.getElementById('messages'),
                     {subtree: true, childList: true, characterData: true});
        }"""
    )
    with page.expect_request("**/v1/chat/completions") as sent:
        page.get_by_label("Question").fill(BEES)
        page.get_by_role("button", name="Send").click()
    body = sent.value.post_data_json
    assert body["stream"] is True and body["collection"] == "playground"
    assert body["reranker_top_k"] == 2 and body["max_tokens"] == 32
    assert body["messages"] == [{"role": "user", "content": BEES}]
    assert body["enable_grounding"] is False and body["answer_mode"] == "generative"

    sources = page.get_by_role("list", name="Sources")
    expect(sources).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    expect(sources.get_by_role("listitem").first).to_contain_text("[1] honeybee-colonies.md")
    expect(sources.get_by_role("listitem").first).to_contain_text("score")
    expect(sources.locator("blockquote").first).not_to_be_empty()
    answer = page.get_by_label("Answer", exact=True)
    expect(answer).not_to_be_empty()
    states: list[str] = page.evaluate("window.answerStates")
    assert len(states) >= 3, f"the answer did not stream in pieces: {states}"
    assert all(b.startswith(a) for a, b in pairwise(states)), states
    assert states[-1] == answer.text_content()
    expect(page.get_by_label("Timings")).to_contain_text("retrieval")
    expect(page.get_by_label("Timings")).to_contain_text("first token")
    expect(page.get_by_label("Guardrail outcome")).to_contain_text("guardrails:")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()

    # Knowledge base off: the follow-up goes straight to the model, with the conversation.
    page.get_by_role("checkbox", name="Knowledge base").uncheck()
    with page.expect_request("**/v1/chat/completions") as sent:
        page.get_by_label("Question").fill("Say hello.")
        page.get_by_role("button", name="Send").click()
    body = sent.value.post_data_json
    assert body["use_knowledge_base"] is False and "collection" not in body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    second = page.locator(".message.assistant").nth(1)
    expect(second.get_by_label("Timings")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    expect(second.get_by_role("list", name="Sources")).to_have_count(0)
    if shot := os.environ.get("RAGRAIL_PLAYGROUND_SCREENSHOT"):  # to look at the page by eye
        page.screenshot(path=shot, full_page=True)


@needs_browser
def test_a_source_shows_its_page_and_opens_the_document_there(page: Any, suite: Any) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    from bench import docset

    report = docset.build_reports(1, seed=7, rows=6)[0]
    fact = [q for q in report.questions if q.kind == "scan"][1]  # on page 2
    url = "https://docs.example.com/report.pdf"
    assert suite.http.post("/v1/collections", json={"name": "paged"}).status_code == 201
    reply = suite.http.post(
        "/v1/documents",
        data={"collection": "paged", "metadata": json.dumps({"url": url})},
        files=[("files", ("report.pdf", docset.report_pdf(report)))],
    )
    assert reply.status_code == 200, reply.text

    page.goto("/")
    page.get_by_label("Collection", exact=True).select_option("paged")
    rails = page.get_by_role("checkbox", name="Guardrails")
    if rails.is_enabled():
        rails.uncheck()
    page.get_by_label("Max answer tokens").fill("8")
    page.get_by_label("Chunks for the model (reranker_top_k)").fill("1")
    page.get_by_label("Question").fill(fact.text)
    page.get_by_role("button", name="Send").click()
    sources = page.get_by_role("list", name="Sources")
    expect(sources).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    first = sources.get_by_role("listitem").first
    expect(first).to_contain_text("[1] report.pdf")
    # The source's pages ("p. 2", or "pp. 1-2" for a chunk that runs on from page 1) hold
    # the fact's page; the link opens the first of them.
    link = first.get_by_role("link", name=re.compile(r"^pp?\. \d"))
    expect(link).to_have_count(1)
    pages = [int(n) for n in re.findall(r"\d+", link.inner_text())]
    assert pages[0] <= fact.page <= pages[-1], link.inner_text()
    expect(link).to_have_attribute("href", f"{url}#page={pages[0]}")
    expect(link).to_have_attribute("target", "_blank")


@needs_browser
def test_dropped_files_are_uploaded_to_the_chosen_collection(page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/")
    page.get_by_label("New collection").fill("dropped")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_label("Collection", exact=True)).to_have_value("dropped")
    # What a drag from the desktop delivers: a drop event whose DataTransfer holds files.
    files = page.evaluate_handle(
        """() => {
          const dt = new DataTransfer();
          dt.items.add(new File(['# Kilns\\nA kiln fires clay into stoneware.'], 'kilns.md',
                                {type: 'text/markdown'}));
          return dt;
        }"""
    )
    page.get_by_text("drop files here").dispatch_event("drop", {"dataTransfer": files})
    expect(page.get_by_role("status", name="Upload status")).to_contain_text(
        "ingested kilns.md into dropped"
    )
    expect(page.get_by_role("list", name="Documents")).to_contain_text("kilns.md · 1 chunk")


@needs_browser
def test_gateway_errors_are_shown_not_swallowed(page: Any) -> None:
    page.goto("/")
    page.get_by_label("New collection").fill("Bad-Name")
    # The input's pattern would stop the browser from submitting; the API's message is the one
    # to see, so skip the browser's own validation.
    page.evaluate("document.getElementById('create-form').noValidate = true")
    page.get_by_role("button", name="Create").click()
    from playwright.sync_api import expect

    expect(page.get_by_role("status", name="Upload status")).to_contain_text("422")


def test_pages_and_api_share_the_port_without_clashing(suite: Any) -> None:  # type: ignore[no-untyped-def]
    page = suite.http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        asset = suite.http.get(f"/playground/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    # Unknown paths, under /v1 or beside the playground, stay JSON errors for API clients.
    for path in ("/v1/nope", "/playground/nope.js", "/playground/../app.py", "/nope"):
        reply = suite.http.get(path)
        assert reply.status_code == 404, path
        assert reply.json()["error"]["code"] == 404, path
    assert "/" not in suite.http.get("/openapi.json").json()["paths"]


def test_file_picker_offers_every_type_the_gateway_parses() -> None:
    class Inputs(HTMLParser):
        accept = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found = dict(attrs)
            if tag == "input" and found.get("id") == "files":
                self.accept = found.get("accept") or ""

    parser = Inputs()
    parser.feed((PLAYGROUND_DIR / "index.html").read_text(encoding="utf-8"))
    assert set(re.split(r"\s*,\s*", parser.accept)) == set(SUPPORTED)


# -- a gateway with scoped keys ------------------------------------------------------------

KEY_A = "rr-play-team-a-0123456789"
KEY_OPS = "rr-play-ops-9876543210"
SCOPED_KEYS = f"""
keys:
  - name: team-a
    key: {KEY_A}
    read: ["play_a", "play_shared"]
    groups: ["team-a"]
""" + ops_key(KEY_OPS)


@pytest.fixture(scope="module")
def keyed_gateway(suite: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A gateway on the suite's services whose key file has team A and an ops key, with a
    collection of team A's, one of team B's and a shared one holding a document of each."""
    import httpx

    from tests.conftest import gateway_process

    keys = tmp_path_factory.mktemp("playground-keys") / "keys.yaml"
    keys.write_text(SCOPED_KEYS)
    with gateway_process(api_keys_file=str(keys)) as url:
        ops = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {KEY_OPS}"}, timeout=120
        )
        docs = {
            "play_a": [("a-notes.md", None)],
            "play_b": [("b-notes.md", None)],
            "play_shared": [("a-plan.md", ["team-a"]), ("b-plan.md", ["team-b"])],
        }
        for name, items in docs.items():
            ops.delete(f"/v1/collections/{name}")
            assert ops.post("/v1/collections", json={"name": name}).status_code == 201
            documents = [
                {"id": doc, "name": doc, "text": f"Notes of {doc}.",
                 "metadata": {"access_groups": g} if g else {}}
                for doc, g in items
            ]  # fmt: skip
            reply = ops.post("/v1/documents", json={"collection": name, "documents": documents})
            assert reply.status_code == 200, reply.text
        yield url
        for name in docs:
            ops.delete(f"/v1/collections/{name}")


@needs_browser
def test_the_page_asks_for_a_key_and_shows_only_what_it_may_see(
    browser: Any, keyed_gateway: str
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    context = browser.new_context(base_url=keyed_gateway)
    sent: list[str | None] = []
    context.on(
        "request",
        lambda r: sent.append(r.headers.get("authorization")) if "/v1/documents" in r.url else None,
    )
    try:
        page = context.new_page()
        page.goto("/")
        prompt = page.get_by_role("form", name="This gateway needs an API key")
        expect(prompt).to_be_visible()
        expect(page.get_by_role("status", name="Key status")).to_contain_text("missing API key")

        page.get_by_label("Your API key").fill("rr-not-a-key-000000")
        page.get_by_role("button", name="Use key").click()
        expect(page.get_by_role("status", name="Key status")).to_contain_text("unknown API key")
        expect(prompt).to_be_visible()

        page.get_by_label("Your API key").fill(KEY_A)
        page.get_by_role("button", name="Use key").click()
        expect(prompt).to_be_hidden()
        collection = page.get_by_label("Collection", exact=True)
        options = collection.locator("option")
        expect(options).to_have_text(["(none: ask the model directly)", "play_a", "play_shared"])
        collection.select_option("play_shared")
        documents = page.get_by_role("list", name="Documents")
        expect(documents).to_contain_text("a-plan.md")
        expect(documents).not_to_contain_text("b-plan.md")
        assert f"Bearer {KEY_A}" in sent

        # Kept for this tab: a reload does not ask again.
        page.reload()
        expect(options).to_have_text(["(none: ask the model directly)", "play_a", "play_shared"])
        expect(prompt).to_be_hidden()
        assert page.evaluate("sessionStorage.getItem('ragrail.apiKey')") == KEY_A
        assert page.evaluate("localStorage.getItem('ragrail.apiKey')") is None
    finally:
        context.close()
    # A new session (another browser context) starts without it.
    fresh = browser.new_context(base_url=keyed_gateway)
    try:
        page = fresh.new_page()
        page.goto("/")
        expect(page.get_by_role("form", name="This gateway needs an API key")).to_be_visible()
    finally:
        fresh.close()
