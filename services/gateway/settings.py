"""Gateway settings: RAGRAIL_GATEWAY_* environment variables or the `gateway:` YAML section."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from shared.settings import (
    DEFAULT_PORTS,
    ServerSettings,
    port_field,
    service_config,
    timeout_field,
)

# Models too small to answer better than the extractive reader (COVID-QA, docs/benchmarks.md):
# the packaged SmolLM2-135M-Instruct, and the names trainers/generator gives models trained
# from it.
READER_FIRST_MODELS = (
    "smollm2-135m",
    "smollm2-grounded",
    "smollm2-distilled",
    "smollm2-evidence",
)


def _local(service: str) -> str:
    return f"127.0.0.1:{DEFAULT_PORTS[service][0]}"


class GatewaySettings(ServerSettings):
    service_name: ClassVar[str] = "gateway"
    model_config = service_config("gateway")

    port: int = port_field(DEFAULT_PORTS["gateway"][0], "HTTP port (API, docs and /metrics)")
    shutdown_grace_s: float = Field(
        10.0, ge=0, description="In-flight requests get this long on SIGTERM."
    )

    embedder_url: str = Field(_local("embedder"), description="host:port of the embedder service.")
    reranker_url: str = Field(
        "",
        description="host:port of the reranker service; empty means searches are not "
        "reranked (ragrail up sets it when it starts a reranker).",
    )
    retriever_url: str = Field(
        _local("retriever"), description="host:port of the retriever service."
    )
    generator_url: str = Field(
        _local("generator"), description="host:port of the generator service (chat)."
    )
    guardrails_url: str = Field(
        "",
        description="host:port of the guardrails service; empty means chat runs without rails "
        "and says so (ragrail up sets it when it starts the guardrails service).",
    )

    request_timeout_s: float = timeout_field(30.0, "Deadline of a search request.")
    generation_timeout_s: float = timeout_field(
        120.0, "Deadline of a whole chat completion, every stage included."
    )
    guardrails_timeout_s: float = timeout_field(10.0, "Deadline of one rail check.")
    generator_info_max_age_s: float = Field(
        10.0,
        gt=0,
        description="The generator's Info (its model and context length) is asked again once "
        "the gateway's copy is this old (a reload may swap the model).",
    )
    ingest_timeout_s: float = timeout_field(600.0, "Deadline of an ingest request.")
    max_request_mb: float = Field(
        100.0, gt=0, description="Largest request body accepted (413 above)."
    )
    max_files_per_request: int = Field(1000, ge=1, description="Most files in one upload.")
    ingest_max_mb: float = Field(
        10.0,
        gt=0,
        description="Most document bytes in one POST /v1/documents (413 above); larger uploads "
        "go to POST /v1/ingest/jobs, up to max_request_mb.",
    )
    ingest_max_chunks: int = Field(
        2000,
        ge=1,
        description="Most chunks one POST /v1/documents may produce (413 above: each is "
        "embedded on the request's time); larger ingests go to POST /v1/ingest/jobs.",
    )
    ingest_job_max_chunks: int = Field(
        100_000, ge=1, description="Most chunks one ingest job may produce."
    )
    ingest_jobs_concurrency: int = Field(
        1, ge=1, description="Ingest jobs run at once; the rest wait their turn (queued)."
    )
    ingest_jobs_queue: int = Field(
        16,
        ge=1,
        description="Ingest jobs that may wait or run at once (each holds its upload in "
        "memory); beyond that POST /v1/ingest/jobs is a 429.",
    )
    ingest_jobs_kept: int = Field(
        100, ge=1, description="Finished ingest jobs remembered for GET (the oldest go first)."
    )
    chunk_size: int = Field(
        0, ge=0, description="Tokens per chunk; 0 fits the embedder's max input length."
    )
    chunk_overlap: int = Field(32, ge=0, description="Tokens shared by consecutive chunks.")
    ocr: bool = Field(
        True,
        description="Read PDF pages without a usable text layer, and PNG/JPEG/TIFF uploads, "
        "with Tesseract OCR (tesserocr, installed with the gateway); off, such pages are skipped "
        "with a warning and images are refused.",
    )
    ocr_languages: str = Field(
        "eng",
        pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
        description="Tesseract languages (eng+deu), each with its model: English is installed; "
        "another comes with `pip install tessdata.fast-<lang>`, or from "
        "RAGRAIL_GATEWAY_OCR_TESSDATA.",
    )
    ocr_tessdata: Path | None = Field(
        None,
        description="A folder of Tesseract .traineddata models (e.g. Debian's "
        "/usr/share/tesseract-ocr/5/tessdata); unset, the packaged tessdata wheels' folder.",
    )
    ocr_dpi: int = Field(300, ge=72, le=600, description="Resolution PDF pages are read at.")
    ocr_timeout_s: float = timeout_field(
        60.0, "Longest OCR of one page; a page over it is skipped, warned."
    )
    tables: bool = Field(
        True,
        description="Find tables on text-layer PDF pages (pdfplumber) and in DOCX/HTML and store "
        "each as Markdown table chunks, split by rows with the header repeated.",
    )
    embed_batch_size: int = Field(128, ge=1, description="Chunks per call to the embedder.")
    rerank_fusion: Literal["none", "rrf"] = Field(
        "none",
        description="How reranked results are ordered: none, by the cross-encoder alone; rrf, "
        "reciprocal rank fusion of the first stage's order and the cross-encoder's.",
    )
    rerank_rrf_k: int = Field(60, ge=1, description="k of rerank_fusion=rrf.")
    default_top_k: int = Field(10, ge=1, description="Results when a search gives no top_k.")
    search_vdb_top_k: int = Field(
        50,
        ge=1,
        le=1000,
        description="Candidates a reranked search takes from the retriever when it gives no "
        "vdb_top_k (the NVIDIA RAG blueprint uses 100; 50 keeps a CPU cross-encoder under "
        "~0.5 s).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins allowed by CORS, and so to send state-changing requests from a "
        "browser (other origins get a 403).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the gateway answers to besides localhost, 127.0.0.1, ::1 and "
        "the bind address ('*' any, '*.example.com' subdomains); others get a 421. Checked "
        "without API keys (against DNS rebinding), and with keys once set.",
    )
    csrf_require_header: bool = Field(
        False,
        description="Form and multipart posts must carry X-Requested-With or an API key even "
        "with no Origin header (browsers send Origin, so cross-origin posts are refused "
        "either way; this also refuses curl -F without -H).",
    )
    api_keys: list[str] = Field(
        default_factory=list,
        description="API keys accepted as 'Authorization: Bearer <key>' or 'X-API-Key'; none "
        "(and no api_keys_file) leaves the gateway open, as the local quickstart wants.",
    )
    api_keys_file: str = Field(
        "", description="File with one API key per line (a container secret), added to api_keys."
    )
    rate_limit_rpm: int = Field(
        0,
        ge=0,
        description="Requests a minute per API key (per client address without keys); 0: no limit.",
    )
    rate_limit_burst: int = Field(
        20, ge=1, description="Requests a key may make at once before rate_limit_rpm applies."
    )
    debug_log_prompts: bool = Field(
        False,
        description="Log questions, prompts and answers (debug only: they may hold personal data).",
    )

    # -- chat (/v1/chat/completions) ------------------------------------------------------
    chat_vdb_top_k: int = Field(
        20,
        ge=1,
        le=1000,
        description="Candidates retrieved for a question when it is reranked (first stage); "
        "without reranking, only the chunks kept are retrieved.",
    )
    chat_reranker_top_k: int = Field(
        4,
        ge=1,
        le=100,
        description="Chunks offered to the model after reranking (fewer when the context "
        "window is full).",
    )
    chat_max_tokens: int = Field(
        256,
        ge=1,
        description="Answer length when a request does not set max_tokens. The gateway always "
        "sends it, so for chat it wins over the generator's default_max_tokens (which serves "
        "gRPC clients that send none); the prompt is budgeted to leave room for it.",
    )
    chat_query_rewriting: Literal["none", "history"] = Field(
        "history",
        description="Retrieval query of a follow-up question: none, the last user message; "
        "history, the earlier user turns too, so 'and its side effects?' finds the right "
        "documents.",
    )
    chat_history_turns: int = Field(
        2, ge=0, description="Earlier user turns joined to the question by query rewriting."
    )
    chat_system_prompt: str = Field(
        "You are a helpful assistant. Answer the question using only the numbered sources "
        "below. Cite the sources you use as [1], [2]. If the sources do not contain the "
        "answer, say that you do not know.",
        description="System prompt of a grounded answer; the numbered sources follow it.",
    )
    chat_guardrails_optional: bool = Field(
        True,
        description="Requests may switch the rails off with enable_guardrails: false; set "
        "false where users must not.",
    )
    chat_stream_output_rails: Literal["buffer", "after"] = Field(
        "buffer",
        description="With output rails on, a streamed answer is held back until they pass it "
        "(buffer), or streamed as it comes and judged at the end, the verdict in the last "
        "chunk (after: faster first token, but a blocked answer has already been shown).",
    )
    chat_refusal: str = Field(
        "I can't help with that request.",
        description="Answer returned when a guardrail blocks the question or the answer.",
    )

    # -- grounded answers (chat/stages/evidence.py, chat/stages/answer.py) ---------------------
    chat_answer_mode: Literal["extractive", "generative", "auto"] = Field(
        "auto",
        description="How a grounded chat answers when the request does not say (answer_mode): "
        "extractive, the reader's sentence with its [n]; generative, the generator's answer "
        "from the selected evidence, sentence by sentence checked against the sources; auto, "
        "reader first or generator first as chat_auto_first decides, the extracted sentence "
        "answering whenever nothing generated is supported.",
    )
    chat_auto_first: Literal["model", "reader", "generator"] = Field(
        "model",
        description="What answers first in auto mode. reader: the reader's answer when it "
        "finds one (chat_auto_extract_margin), else the generator's; generator: the "
        "generator's grounded answer, the reader's only when no generated sentence is "
        "supported; model: reader for a generator whose model (its Info) is in "
        "chat_reader_first_models (the packaged SmolLM2-135M and models trained from it), "
        "generator for any other model, e.g. one behind a model server.",
    )
    chat_reader_first_models: list[str] = Field(
        default_factory=lambda: list(READER_FIRST_MODELS),
        description="With chat_auto_first=model: generator models answered reader first, as "
        "parts of the model name the generator reports (case-insensitive; a file name, a "
        "registry name or a server's model id all match). Add a small model of your own.",
    )
    chat_evidence_selection: bool = Field(
        True,
        description="Give the generator the sentences of the retrieved chunks that bear on the "
        "question (scored by the embedder, led by the reader's) instead of whole chunks.",
    )
    chat_evidence_max_sentences: int = Field(
        4, ge=1, le=50, description="Most evidence sentences in a prompt (neighbours included)."
    )
    chat_evidence_max_chars: int = Field(
        1000, ge=50, description="Most characters of evidence in a prompt (about 4 a token)."
    )
    chat_evidence_min_score: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="Cosine with the question below which a sentence joins the evidence only "
        "as the first one.",
    )
    chat_evidence_system_prompt: str = Field(
        "Answer the question in one or two sentences using only the numbered sources below. "
        "End each sentence with the number of its source, like [1].",
        description="System prompt of an answer from selected evidence; the sources follow.",
    )
    chat_reader_model: str = Field(
        "",
        description="Extractive reader, as a registry reference name[/version] under "
        "models/reader/; empty: the newest trained there (python -m trainers.reader), else "
        "the one published in published/reader/, none without a warning only at start-up; "
        "'none': no reader (the sentence closest to the question is extracted instead).",
    )
    chat_reader_threads: int = Field(
        1, ge=0, description="onnxruntime threads of the reader (0: one per core)."
    )
    chat_reader_similarity_weight: float = Field(
        1.0,
        ge=0,
        description="How much a retrieved sentence bears on the question, which ranks the "
        "evidence and picks the answer's sentence: this times its cosine with the question, "
        "plus the two terms below.",
    )
    chat_reader_overlap_weight: float = Field(
        1.0,
        ge=0,
        description="Plus this times the share of the question's content words that the "
        "sentence holds (the lexical half of hybrid search, at sentence level; chosen on the "
        "COVID-QA train and dev splits, docs/benchmarks.md); 0: not used.",
    )
    chat_reader_margin_weight: float = Field(
        0.25,
        ge=0,
        description="Plus this times the reader's margin (answer minus no-answer probability) "
        "in the sentence that holds its best span of a chunk, which is then the answer's span; "
        "large values let the reader's spans alone compete for the answer.",
    )
    chat_extractive_unit: Literal["sentence", "span"] = Field(
        "sentence",
        description="What an extractive answer is: the sentence that holds the reader's span, "
        "or the span alone (highlighted in its source either way).",
    )
    chat_extractive_max_sentences: int = Field(
        2,
        ge=1,
        le=8,
        description="Most sentences of an extractive answer (unit sentence): the reader's best "
        "span's, then those of its next best spans in other sentences that are at least "
        "chat_extractive_min_ratio as likely, in document order, each with its [n].",
    )
    chat_extractive_min_ratio: float = Field(
        0.25,
        gt=0,
        le=1,
        description="How likely, relative to the best span, another span must be for its "
        "sentence to join an extractive answer.",
    )
    chat_support_threshold: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Share of a generated sentence's content words a source must hold to "
        "support it.",
    )
    chat_unsupported: Literal["drop", "mark"] = Field(
        "drop",
        description="A generated sentence no source supports is dropped, or kept and marked "
        "[unsupported]; either way the answer's report lists it.",
    )
    chat_auto_extract_margin: float = Field(
        0.0,
        ge=-1,
        le=1.01,
        description="In auto mode with the reader first, the reader's margin (answer minus "
        "no-answer probability) from which its extract answers without generating; below it "
        "the generator writes from the evidence (1.01: always generate first). The extract is "
        "exact, cited and about as good as SmolLM2-135M's grounded answer on COVID-QA, at a "
        "quarter of the time (docs/benchmarks.md).",
    )
    chat_stop_at_unsupported: bool = Field(
        True,
        description="In auto mode with the reader first, end the generation at the first "
        "sentence no source supports (the extracted sentence answers if none came before): a "
        "small model seldom gets back on track, and the rest would cost time for nothing.",
    )
    chat_abstain_reader_margin: float = Field(
        0.0,
        ge=-1,
        le=1,
        description="The reader's answer probability minus its no-answer probability from "
        "which the sources count as holding an answer.",
    )
    chat_abstain_min_similarity: float = Field(
        0.35,
        ge=-1,
        le=1,
        description="Cosine of the closest sentence with the question below which the sources "
        "never count as holding an answer, whatever the reader says: a reader trained on "
        "questions about their own documents also finds confident spans for questions about "
        "something else.",
    )
    chat_abstain_similarity: float = Field(
        0.6,
        ge=-1,
        le=1,
        description="Cosine of the closest sentence with the question from which the sources "
        "count as holding an answer even when the reader finds none.",
    )
    chat_abstention: str = Field(
        "The documents do not say.",
        description="Answer when the sources do not hold the answer; the closest sources follow.",
    )
