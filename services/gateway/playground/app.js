// ragrail playground: plain JavaScript against the gateway's own JSON API (same origin), no
// build step. Everything the page shows is set with textContent, never innerHTML, because
// answers, snippets and document names are untrusted text.
"use strict";

const $ = (id) => document.getElementById(id);

// The conversation so far, sent whole with each question so follow-ups can be rewritten
// into a retrieval query by the gateway.
let history = [];
let running = null; // AbortController of the answer being streamed
let configured = {}; // services the gateway reports in /v1/health

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function headers(json = true) {
  const h = json ? { "content-type": "application/json" } : {};
  const key = $("api-key").value.trim();
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

// -- the API key ---------------------------------------------------------------------------
// A gateway with keys answers 401 without one: the page then asks for it. The key lives in
// sessionStorage (this tab, until it closes), never in localStorage or a cookie; the gateway
// shows a key only the collections and documents it may read, so the page lists only those.

const KEY_STORE = "ragrail.apiKey";

function useKey(key) {
  $("api-key").value = key;
  if (key) sessionStorage.setItem(KEY_STORE, key);
  else sessionStorage.removeItem(KEY_STORE);
}

function askForKey(message) {
  $("key-status").textContent = message;
  $("key-form").hidden = false;
  $("key-input").focus();
}

async function submitKey(event) {
  event.preventDefault();
  useKey($("key-input").value.trim());
  $("key-input").value = "";
  $("key-form").hidden = true;
  await reloadForKey();
}

async function reloadForKey() {
  $("upload-status").textContent = "";
  $("upload-status").className = "";
  try {
    await loadCollections();
  } catch (err) {
    $("upload-status").textContent = `collections: ${err.message}`;
    $("upload-status").className = "error";
  }
}

// fetch for the gateway's API: a 401 (no key, or one the gateway does not know) asks for a key.
async function call(path, options = {}) {
  const response = await fetch(path, options);
  if (response.status === 401) askForKey(await errorOf(response.clone()));
  return response;
}

// The gateway's errors are {"error": {"message", ...}}; anything else is shown as it came.
async function errorOf(response) {
  const text = await response.text();
  try {
    return `${response.status}: ${JSON.parse(text).error.message}`;
  } catch {
    return `${response.status}: ${text.slice(0, 300) || response.statusText}`;
  }
}

async function api(path, options = {}) {
  const response = await call(path, options);
  if (!response.ok) throw new Error(await errorOf(response));
  return response.status === 204 ? null : response.json();
}

// -- services ------------------------------------------------------------------------------

async function loadHealth() {
  let body;
  try {
    const response = await fetch("/v1/health", { headers: headers(false) });
    body = await response.json();
  } catch (err) {
    $("health").textContent = `gateway unreachable: ${err.message}`;
    $("health").className = "bad";
    return;
  }
  configured = body.services || {};
  const down = Object.entries(configured).filter(([, s]) => s.status !== "SERVING");
  $("health").textContent = down.length
    ? `not serving: ${down.map(([name]) => name).join(", ")}`
    : `all services up (${Object.keys(configured).join(", ")})`;
  $("health").className = down.length ? "bad" : "ok";
  // Optional stages the gateway was not given cannot be switched on: asking for them is a
  // 4xx by design, so the toggle is disabled and says why.
  for (const stage of ["reranker", "guardrails"]) {
    const box = $(stage);
    const present = stage in configured;
    box.disabled = !present;
    box.checked = present;
    document.querySelector(`small[data-for="${stage}"]`).textContent = present
      ? ""
      : "(not configured)";
  }
}

// -- collections and documents -------------------------------------------------------------

async function loadCollections(select) {
  const { collections } = await api("/v1/collections", { headers: headers(false) });
  const box = $("collection");
  const keep = select || box.value || localStorage.getItem("ragrail.collection");
  box.replaceChildren(el("option", { value: "", text: "(none: ask the model directly)" }));
  for (const c of collections) box.append(el("option", { value: c.name, text: c.name }));
  if (collections.some((c) => c.name === keep)) box.value = keep;
  await loadDocuments();
}

async function loadDocuments() {
  const name = $("collection").value;
  localStorage.setItem("ragrail.collection", name);
  const list = $("documents");
  list.replaceChildren();
  if (!name) return;
  try {
    const { documents } = await api(`/v1/documents?collection=${encodeURIComponent(name)}`, {
      headers: headers(false),
    });
    if (!documents.length) list.append(el("li", { class: "muted", text: "no documents yet" }));
    for (const d of documents) {
      list.append(el("li", { text: `${d.name} · ${d.chunks} chunk${d.chunks === 1 ? "" : "s"}` }));
    }
  } catch (err) {
    list.append(el("li", { class: "error", text: err.message }));
  }
}

async function createCollection(event) {
  event.preventDefault();
  const name = $("new-collection").value.trim();
  const status = $("upload-status");
  try {
    const response = await call("/v1/collections", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ name }),
    });
    if (response.status === 409) status.textContent = `collection ${name} already exists`;
    else if (!response.ok) throw new Error(await errorOf(response));
    else status.textContent = `created collection ${name}`;
    status.className = "";
    $("new-collection").value = "";
    await loadCollections(name);
  } catch (err) {
    status.textContent = err.message;
    status.className = "error";
  }
}

async function upload(files) {
  const status = $("upload-status");
  const name = $("collection").value;
  if (!files.length) return;
  if (!name) {
    status.textContent = "create or choose a collection first";
    status.className = "error";
    return;
  }
  const form = new FormData();
  form.append("collection", name);
  for (const file of files) form.append("files", file, file.name);
  status.textContent = `uploading ${files.length} file(s) to ${name}…`;
  status.className = "";
  try {
    const result = await api("/v1/documents", { method: "POST", headers: headers(false), body: form });
    const names = result.documents.map((d) => d.name).join(", ");
    status.textContent = `ingested ${names} into ${name} (${result.total_chunks} chunks)`;
  } catch (err) {
    status.textContent = `upload failed: ${err.message}`;
    status.className = "error";
  }
  $("files").value = "";
  await loadDocuments();
}

// -- chat ----------------------------------------------------------------------------------

function numberOf(id) {
  const value = $(id).value;
  return value === "" ? undefined : Number(value);
}

// The request body: OpenAI's fields plus ragrail's extra RAG fields. An optional stage the
// gateway lacks is left out rather than sent as false, so the answer's warnings stay the
// gateway's own ("no guardrails service is configured").
function requestBody() {
  const body = { messages: history, stream: true };
  const collection = $("collection").value;
  if ($("use-kb").checked && collection) {
    body.collection = collection;
    body.vdb_top_k = numberOf("vdb-top-k");
    body.reranker_top_k = numberOf("reranker-top-k");
    body.search_mode = $("search-mode").value;
    body.enable_query_rewriting = $("rewriting").checked;
    body.enable_citations = $("citations").checked;
    if ("reranker" in configured) body.enable_reranker = $("reranker").checked;
    if ($("grounding").checked) {
      if ($("answer-mode").value) body.answer_mode = $("answer-mode").value;
    } else {
      // The generator's text as it comes, from whole chunks: today's pipeline, to compare.
      Object.assign(body, {
        answer_mode: "generative",
        evidence_selection: false,
        enable_grounding: false,
      });
    }
  } else {
    body.use_knowledge_base = false;
  }
  if ("guardrails" in configured) body.enable_guardrails = $("guardrails").checked;
  body.max_tokens = numberOf("max-tokens");
  body.temperature = numberOf("temperature");
  return body;
}

function addMessage(role, text) {
  const item = el("li", { class: `message ${role}` });
  item.append(el("span", { class: "role", text: role === "user" ? "You" : "Assistant" }));
  const content = el("div", { class: "content", text });
  if (role === "assistant") content.setAttribute("aria-label", "Answer");
  item.append(content);
  $("messages").append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

// Server-sent events arrive in arbitrary pieces: keep the unfinished tail in `buffer` and
// hand over each complete event (ended by a blank line) once it is whole.
async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) yield data;
    }
  }
}

function showDetails(item, final) {
  const details = el("div", { class: "details" });
  const citations = final.citations || [];
  if (citations.length) {
    const list = el("ol", { class: "sources", "aria-label": "Sources" });
    for (const c of citations) {
      const head = el(
        "div",
        { class: "source-head" },
        el("strong", { text: `[${c.index}] ${c.document_name}` }),
        pageOf(c),
        el("span", { class: "score", text: `score ${c.score.toFixed(3)}` }),
        el("span", {
          class: c.cited ? "badge cited" : "badge",
          text: c.cited ? "cited" : "not cited",
        }),
      );
      list.append(el("li", {}, head, evidenceOf(c)));
    }
    details.append(el("h3", { text: "Sources" }), list);
  }
  if (final.answer) details.append(answerModeOf(final.answer));
  details.append(railsOf(final.guardrails), timingsOf(final.timings || {}));
  if ((final.warnings || []).length) {
    const list = el("ul", { class: "warnings", "aria-label": "Warnings" });
    for (const w of final.warnings) list.append(el("li", { text: w }));
    details.append(list);
  }
  item.append(details);
}

// The page a source is on (paged documents): a link that opens the document at that page
// when its metadata gave an http(s) `url` (PDF viewers honour #page=N), else plain text.
function pageOf(citation) {
  if (citation.page == null) return null;
  const pages = citation.pages || [citation.page];
  const last = pages[pages.length - 1];
  // Pages run on, but skip a page without text (a blank or unreadable one): "pp. 1, 3".
  const text = pages.length === 1 ? `p. ${citation.page}`
    : last - pages[0] === pages.length - 1 ? `pp. ${pages[0]}–${last}` : `pp. ${pages.join(", ")}`;
  const url = citation.url || "";
  if (/^https?:\/\//i.test(url)) {
    const href = `${url.split("#")[0]}#page=${citation.page}`;
    return el("a", { class: "page", href, target: "_blank", rel: "noopener noreferrer", text });
  }
  return el("span", { class: "page", text });
}

// What in a source supports the answer: its evidence sentence with the extracted span
// marked (offsets into the chunk, from the gateway), else the chunk's snippet.
function evidenceOf(citation) {
  const spans = citation.evidence || [];
  const sentence = spans.find((e) => e.kind === "sentence" || e.kind === "support");
  if (!sentence) return el("blockquote", { text: citation.snippet });
  const quote = el("blockquote", { class: "evidence", "aria-label": "Evidence" });
  const span = spans.find((e) => e.kind === "answer");
  if (span && span.start >= sentence.start && span.end <= sentence.end) {
    const text = sentence.text;
    const a = span.start - sentence.start;
    const b = span.end - sentence.start;
    quote.append(text.slice(0, a), el("mark", { text: text.slice(a, b) }), text.slice(b));
  } else {
    quote.append(el("mark", { text: sentence.text }));
  }
  return quote;
}

// Which answer mode produced the answer, and whether the gateway attributed citations or
// left out sentences no source supports.
function answerModeOf(report) {
  const box = el("div", { class: "answer-mode", "aria-label": "Answer mode" });
  box.append(el("span", { class: "badge", text: `answer: ${report.mode}` }));
  if (report.attributed) {
    box.append(el("span", { class: "muted", text: " citations attributed by the gateway" }));
  }
  if ((report.unsupported || []).length) {
    const n = report.unsupported.length;
    box.append(el("span", { class: "muted", text: ` ${n} unsupported sentence(s)` }));
  }
  return box;
}

// Which rails fired: a block or a modification at the input, dropped or redacted chunks at
// retrieval, a block or modification of the answer.
function railsOf(report) {
  const box = el("div", { class: "rails", "aria-label": "Guardrail outcome" });
  if (!report || !report.enabled) {
    box.append(el("span", { class: "muted", text: "guardrails: off" }));
    return box;
  }
  const fired = [];
  for (const stage of ["input", "output"]) {
    const o = report[stage];
    if (o && o.verdict !== "allow") {
      fired.push(`${stage}: ${o.verdict} by ${o.rail || "a rail"}${o.reason ? ` (${o.reason})` : ""}`);
    }
  }
  for (const c of report.retrieval || []) {
    fired.push(`retrieval: ${c.verdict} chunk ${c.id} by ${c.rail}${c.reason ? ` (${c.reason})` : ""}`);
  }
  box.append(el("strong", { text: "guardrails: " }));
  box.append(el("span", { text: fired.length ? fired.join("; ") : "all passed" }));
  if (fired.length) box.classList.add("fired");
  return box;
}

function timingsOf(t) {
  const stages = [
    ["retrieval", t.retrieval_ms],
    ["rerank", t.rerank_ms],
    ["guardrails", t.guardrails_ms],
    ["prompt", t.prompt_ms],
    ["first token", t.ttft_ms],
    ["generation", t.generation_ms],
    ["total", t.total_ms],
  ];
  const list = el("dl", { class: "timings", "aria-label": "Timings" });
  for (const [name, ms] of stages) {
    if (!ms && name !== "total") continue;
    list.append(el("dt", { text: name }), el("dd", { text: `${Math.round(ms || 0)} ms` }));
  }
  return list;
}

async function ask(event) {
  event.preventDefault();
  if (running) return;
  const question = $("question").value.trim();
  if (!question) return;
  $("question").value = "";
  addMessage("user", question);
  history.push({ role: "user", content: question });
  const item = addMessage("assistant", "");
  item.setAttribute("aria-busy", "true");
  const content = item.querySelector(".content");
  running = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  let answer = "";
  try {
    const response = await call("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(requestBody()),
      signal: running.signal,
    });
    if (!response.ok) throw new Error(await errorOf(response));
    for await (const data of sseEvents(response)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = (chunk.choices || [])[0];
      if (choice && choice.delta && choice.delta.content) {
        answer += choice.delta.content;
        content.textContent = answer;
      }
      // ragrail's last chunk carries finish_reason with citations, rails, timings, warnings.
      if (choice && choice.finish_reason) {
        if (choice.finish_reason === "content_filter") item.classList.add("blocked");
        showDetails(item, chunk);
      }
    }
    history.push({ role: "assistant", content: answer });
  } catch (err) {
    history.pop(); // the question goes unanswered: it is not part of the conversation
    const text = err.name === "AbortError" ? "stopped" : err.message;
    item.append(el("p", { class: "error", role: "alert", text }));
  } finally {
    item.removeAttribute("aria-busy");
    running = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    item.scrollIntoView({ block: "end" });
  }
}

// -- wiring --------------------------------------------------------------------------------

function wire() {
  $("key-form").addEventListener("submit", submitKey);
  $("api-key").addEventListener("change", () => {
    useKey($("api-key").value.trim());
    reloadForKey();
  });
  $("collection").addEventListener("change", loadDocuments);
  $("create-form").addEventListener("submit", createCollection);
  $("files").addEventListener("change", () => upload([...$("files").files]));
  const drop = $("drop");
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, (e) => {
      e.preventDefault();
      drop.classList.add("over");
    });
  }
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    upload([...e.dataTransfer.files]);
  });
  $("ask-form").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => running && running.abort());
  $("clear").addEventListener("click", () => {
    if (running) running.abort();
    history = [];
    $("messages").replaceChildren();
  });
  $("use-kb").addEventListener("change", () => {
    // The collection stays selectable: uploads go to it even while chat ignores it.
    for (const id of ["vdb-top-k", "reranker-top-k", "search-mode", "citations", "rewriting"]) {
      $(id).disabled = !$("use-kb").checked;
    }
    $("reranker").disabled = !$("use-kb").checked || !("reranker" in configured);
  });
}

wire();
useKey(sessionStorage.getItem(KEY_STORE) || "");
loadHealth().finally(reloadForKey);
