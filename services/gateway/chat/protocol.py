"""Request and response bodies of the OpenAI-compatible endpoints (/v1/chat/completions,
/v1/embeddings, /v1/models), with ragrail's RAG options as extra body fields as the NVIDIA RAG
blueprint does (`collection_names`, `vdb_top_k`, `reranker_top_k`, `enable_reranker`, ...).

Unknown fields are ignored, as OpenAI clients send many (logprobs, user, ...); fields whose
meaning the gateway cannot honour (n > 1, tools, images) are refused with a 422 naming them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.gateway.collections.protocol import COLLECTION_NAME
from services.gateway.http.validation import INT32_MAX, INT64_MAX, INT64_MIN, FilterObject
from services.gateway.search.protocol import SearchMode
from shared.verdict import Verdict

if TYPE_CHECKING:
    from services.gateway.search.passage import Passage

MAX_STOP_SEQUENCES = 4
SNIPPET_CHARS = 300  # of a source's text, in its citation


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def only_text(cls, content: str | list[TextPart] | None) -> str | list[TextPart] | None:
        if isinstance(content, list):
            for part in content:
                if part.type != "text":
                    raise ValueError(f"content parts of type {part.type!r} are not supported")
        return content

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content)
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(None, description="Ignored beyond being echoed: one model serves.")
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=200)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    # Bounded by the protobuf field each travels in (int32, int64); the generator then
    # applies its own, smaller limits with a message that names them.
    max_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="One choice per request.")
    tools: list[dict[str, Any]] | None = None

    # Extra sampling fields (vLLM and NIM accept them too).
    top_k: int | None = Field(None, ge=0, le=INT32_MAX)
    repetition_penalty: float | None = Field(None, gt=0, le=2)

    # -- RAG options ----------------------------------------------------------------------
    collection: str | None = Field(
        None, pattern=COLLECTION_NAME, description="Knowledge base to answer from."
    )
    collection_names: list[str] | None = Field(
        None, max_length=5, description="Several knowledge bases (the RAG blueprint's field)."
    )
    use_knowledge_base: bool | None = Field(
        None, description="Retrieve before answering; default: when a collection is named."
    )
    # The retrieval depths by their meaning (RetrievalPlan's names), the blueprint's on the
    # wire. `top_k` above is OpenAI's sampling top-k, not a depth.
    fetch_k: int | None = Field(
        None, alias="vdb_top_k", ge=1, le=1000, description="First-stage chunks."
    )
    keep_k: int | None = Field(
        None,
        alias="reranker_top_k",
        ge=1,
        le=100,
        description="Chunks offered to the model after reranking.",
    )
    enable_reranker: bool | None = Field(
        None, description="Rerank the first stage; default: when a reranker is configured."
    )
    enable_guardrails: bool | None = Field(
        None, description="Run the rails; default: when a guardrails service is configured."
    )
    enable_query_rewriting: bool | None = Field(
        None, description="Add earlier user turns to the retrieval query (default: settings)."
    )
    enable_citations: bool = Field(True, description="Return the sources with the answer.")
    search_mode: SearchMode = SearchMode.hybrid
    filter: FilterObject | None = Field(None, description="Metadata filter, as /v1/search.")
    answer_mode: Literal["extractive", "generative", "auto"] | None = Field(
        None,
        description="extractive: the reader's answer with its [n]; generative: the "
        "generator's, every sentence checked against the sources; auto: the reader's answer "
        "first for the packaged small model, the generator's first for any other "
        "(chat_auto_first), and the extracted sentence when nothing generated is supported. "
        "Default: settings (auto).",
    )
    evidence_selection: bool | None = Field(
        None,
        description="Give the model the sentences that bear on the question instead of whole "
        "chunks (default: settings, on).",
    )
    enable_grounding: bool | None = Field(
        None,
        description="Check each answer sentence against the sources (cite, attribute, drop or "
        "mark) and abstain when they do not hold the answer (default true; false with "
        "answer_mode generative: the generator's text as it comes).",
    )

    @field_validator("stop")
    @classmethod
    def bounded_stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        if isinstance(stop, list) and len(stop) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences")
        return stop

    @field_validator("collection_names")
    @classmethod
    def valid_names(cls, names: list[str] | None) -> list[str] | None:
        import re

        for name in names or []:
            if not re.fullmatch(COLLECTION_NAME, name):
                raise ValueError(f"{name!r} is not a collection name ({COLLECTION_NAME})")
        return names

    @model_validator(mode="after")
    def supported(self) -> ChatCompletionRequest:
        if self.tools:
            raise ValueError("tools (function calling) are not supported by this gateway")
        if self.messages[-1].role != "user":
            raise ValueError("the last message must be the user's question (role 'user')")
        if not self.messages[-1].text.strip():
            raise ValueError("the last user message is empty")
        if self.use_knowledge_base and not self.collections:
            raise ValueError("use_knowledge_base is true but no collection or collection_names")
        return self

    @property
    def collections(self) -> list[str]:
        names = list(self.collection_names or [])
        if self.collection and self.collection not in names:
            names.insert(0, self.collection)
        return names

    @property
    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


# -- responses -------------------------------------------------------------------------------


class EvidenceSpan(BaseModel):
    start: int
    end: int
    text: str = Field(description="The chunk's text[start:end].")
    kind: Literal["answer", "sentence", "support"]


class AnswerReport(BaseModel):
    """How a grounded answer was made (absent without a knowledge base)."""

    mode: Literal["extractive", "generative", "abstained"] = Field(
        description="What produced the answer: the reader, the generator, or an abstention."
    )
    abstained: bool = False
    attributed: bool = Field(
        False,
        description="The gateway chose the [n] of some sentence: the model cited no source, "
        "or one that does not support it.",
    )
    unsupported: list[str] = Field(
        default_factory=list,
        description="Generated sentences no source supports: dropped, or kept and marked "
        "[unsupported] (RAGRAIL_GATEWAY_CHAT_UNSUPPORTED).",
    )
    reader_margin: float | None = Field(
        None, description="The reader's answer probability minus its no-answer probability."
    )
    similarity: float | None = Field(
        None, description="Cosine of the sentence closest to the question (the embedder's)."
    )
    auto_first: Literal["reader", "generator"] | None = Field(
        None,
        description="answer_mode auto only: who answered first, the reader (the packaged "
        "small model) or the generator (any other model); RAGRAIL_GATEWAY_CHAT_AUTO_FIRST.",
    )


def _http_url(value: object) -> str | None:
    """An http(s) URL from document metadata, else None (nothing else is a link to follow)."""
    if isinstance(value, str) and value.lower().startswith(("http://", "https://")):
        return value
    return None


class Citation(BaseModel):
    index: int = Field(description="The [n] the model was told to cite.")
    document_id: str
    document_name: str
    chunk_id: str
    chunk_index: int
    collection: str
    score: float
    snippet: str
    page: int | None = Field(None, description="First page of a paged document it is from.")
    pages: list[int] | None = Field(None, description="Every page the source spans.")
    url: str | None = Field(
        None,
        description="The document's http(s) `url` metadata, if ingest gave one (with `page`, "
        "`url#page=N` opens a PDF at the source's page).",
    )
    cited: bool = Field(description="The answer contains [index].")
    evidence: list[EvidenceSpan] = Field(
        default_factory=list,
        description="What in this chunk supports the answer: character offsets into the "
        "chunk's text (answer: the extracted span; sentence: its sentence; support: the "
        "sentence that supports a generated one).",
    )

    @classmethod
    def of(
        cls, index: int, source: Passage, answer: str, evidence: list[EvidenceSpan] | None = None
    ) -> Citation:
        return cls(
            index=index,
            document_id=source.document_id,
            document_name=source.document_name,
            chunk_id=source.chunk_id,
            chunk_index=source.chunk_index,
            collection=source.collection,
            score=source.score,
            snippet=source.text[:SNIPPET_CHARS],
            page=source.page,
            pages=source.pages,
            url=_http_url(source.metadata.get("url")),
            cited=f"[{index}]" in answer,
            evidence=evidence or [],
        )


class RailOutcome(BaseModel):
    verdict: Verdict
    rail: str = ""
    reason: str = ""
    modified: bool = False
    duration_ms: float = 0.0


class ChunkOutcome(BaseModel):
    """A retrieved chunk the retrieval rails dropped (block) or redacted (modify)."""

    chunk_id: str
    verdict: Verdict
    rail: str = Field(description="The rail that decided.")
    reason: str


class GuardrailsReport(BaseModel):
    enabled: bool
    input: RailOutcome | None = None
    retrieval: list[ChunkOutcome] = Field(
        default_factory=list, description="Chunks dropped or redacted, in retrieval order."
    )
    output: RailOutcome | None = None


class StageTimings(BaseModel):
    retrieval_ms: float = 0.0
    rerank_ms: float = 0.0
    guardrails_ms: float = 0.0
    prompt_ms: float = 0.0
    ttft_ms: float = 0.0
    generation_ms: float = 0.0
    total_ms: float = 0.0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    # ragrail's additions, ignored by OpenAI clients (and readable as attributes there).
    citations: list[Citation] = Field(default_factory=list)
    answer: AnswerReport | None = None
    guardrails: GuardrailsReport
    timings: StageTimings
    warnings: list[str] = Field(default_factory=list)


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    input: str | list[str] = Field(description="A text or up to 2048 texts.")
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    input_type: Literal["query", "passage"] = Field(
        "passage", description="Embedder prefix to use (NIM's field): query or passage."
    )

    @field_validator("input")
    @classmethod
    def bounded(cls, value: str | list[str]) -> str | list[str]:
        texts = [value] if isinstance(value, str) else value
        if not texts or len(texts) > 2048:
            raise ValueError("input must hold 1 to 2048 texts")
        if any(not t for t in texts):
            raise ValueError("input texts must not be empty")
        return value


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "ragrail"
    # Which service serves it: generator (chat) or embedder (embeddings).
    service: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
