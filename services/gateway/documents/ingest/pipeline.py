"""Ingest: parsed documents -> token chunks -> vectors -> retriever upserts.

Chunks are cut with the embedder's own tokenizer (its Tokenize call), so a chunk never
exceeds what the model reads. Chunk ids derive from the document id and chunk position, and
every upsert carries all chunks of its documents with `replace_documents`, so re-ingesting a
document replaces it in place: nothing duplicates, and an interrupted ingest is repaired by
running it again. Embedding of the next group overlaps the upsert of the previous one.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.gateway.documents.ingest.parsers import ParsedDocument
from services.gateway.documents.ingest.tables import embedding_text, split_table
from services.gateway.http.clients import Services
from services.gateway.http.validation import check_document_id
from services.gateway.settings import GatewaySettings
from shared.chunking import Chunker, TextChunk, TokenSpans
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import retriever_pb2
from shared.structs import dict_to_struct

if TYPE_CHECKING:
    from services.gateway.documents.ingest.request import IngestProgress

# Document metadata that would be large and is turned into per-chunk fields instead: a
# chunk's page / pages, and ocr=true when OCR read one of its pages.
_PER_CHUNK_KEYS = ("page_starts", "ocr_pages", "skipped_pages")
_TOKENIZE_BATCH = 512  # texts per Tokenize call (the embedder's max_batch_texts is 2048)


@dataclass
class PendingDocument:
    """A parsed document on its way in, with its caller-chosen id and metadata."""

    id: str
    name: str
    parsed: ParsedDocument
    metadata: dict[str, Any] = field(default_factory=dict)
    chunks: list[TextChunk] = field(default_factory=list)
    # Per-chunk metadata of the table chunks (by chunk index): they have no place in `text`.
    table_chunks: dict[int, dict[str, Any]] = field(default_factory=dict)

    def embedding_texts(self) -> list[str]:
        """What each chunk's vector is computed from: its text, a table piece's without its
        Markdown (tables.embedding_text)."""
        return [
            embedding_text(c.text) if c.index in self.table_chunks else c.text for c in self.chunks
        ]

    def split(self, chunker: Chunker, spans: TokenSpans, table_spans: list[TokenSpans]) -> None:
        """Cuts the text into token windows, then each table into row pieces after them.
        Windows run across the pages of a text layer, as they do across paragraphs (on short
        pages, cutting at every page would double the chunks to embed); a page read by OCR is
        cut on its own, so its chunks cite it alone. A chunk's pages come from its character
        offsets (`_chunk_metadata`)."""
        metadata = self.parsed.metadata
        cuts = _ocr_cuts(metadata.get("page_starts"), metadata.get("ocr_pages"))
        self.chunks = _split_at(chunker, self.parsed.text, spans, cuts)
        self.table_chunks = {}
        for number, (table, tspans) in enumerate(
            zip(self.parsed.tables, table_spans, strict=True), start=1
        ):
            for piece, tokens in split_table(table, tspans, chunker.chunk_size):
                index = len(self.chunks)
                self.chunks.append(TextChunk(index, piece, 0, 0, tokens))
                meta: dict[str, Any] = {"kind": "table", "table": number}
                if table.page is not None:
                    meta["page"] = table.page
                    meta["pages"] = [table.page]
                self.table_chunks[index] = meta


def _ocr_cuts(page_starts: list[int] | None, ocr_pages: list[int] | None) -> list[int]:
    """Offsets no chunk may cross: where each OCR'd page starts and where it ends."""
    if not page_starts or not ocr_pages:
        return []
    cuts: set[int] = set()
    for number in ocr_pages:
        cuts.add(page_starts[number - 1])
        if number < len(page_starts):
            cuts.add(page_starts[number])
    return sorted(c for c in cuts if c > 0)


def _split_at(chunker: Chunker, text: str, spans: TokenSpans, cuts: list[int]) -> list[TextChunk]:
    """The chunker's windows over `text`, cut apart at the offsets `cuts` (none: the
    chunker's own split of the whole text)."""
    if not cuts:
        return chunker.split(text, spans)
    chunks: list[TextChunk] = []
    bounds = [0, *cuts, len(text)]
    token = 0
    for start, end in itertools.pairwise(bounds):
        part = TokenSpans()
        while token < len(spans) and spans.starts[token] < end:
            if spans.starts[token] >= start:
                part.starts.append(spans.starts[token] - start)
                part.ends.append(min(spans.ends[token], end) - start)
            token += 1
        for chunk in chunker.split(text[start:end], part):
            chunks.append(
                TextChunk(
                    len(chunks),
                    chunk.text,
                    chunk.start_char + start,
                    chunk.end_char + start,
                    chunk.num_tokens,
                )
            )
    return chunks


def chunk_pages(text: str, page_starts: list[int], start: int, end: int) -> list[int]:
    """The 1-based pages that the characters text[start:end] are on (pages without text,
    e.g. a skipped one, are not among them even when the chunk runs past them)."""
    first = bisect.bisect_right(page_starts, start)
    last = bisect.bisect_right(page_starts, max(end - 1, start))
    if first == last:
        return [first]
    bounds = [*page_starts, len(text)]
    return [
        n
        for n in range(first, last + 1)
        if text[max(bounds[n - 1], start) : min(bounds[n], end)].strip()
    ]


@dataclass
class DocumentOutcome:
    id: str
    name: str
    content_type: str
    chunks: int
    characters: int
    pages: int | None = None
    ocr_pages: int = 0
    tables: int = 0
    warnings: list[str] = field(default_factory=list)


def chunk_id(document_id: str, index: int) -> str:
    digest = hashlib.sha1(document_id.encode("utf-8")).hexdigest()[:20]
    return f"{digest}-{index:06d}"


def document_id_for(name: str, explicit: str | None) -> str:
    return check_document_id(explicit or name, "id" if explicit else "name")


def _chunk_metadata(doc: PendingDocument, chunk: TextChunk) -> dict[str, Any]:
    meta = {k: v for k, v in doc.parsed.metadata.items() if k not in _PER_CHUNK_KEYS}
    meta.update(doc.metadata)
    meta.setdefault("title", doc.parsed.title)
    meta["content_type"] = doc.parsed.content_type
    table = doc.table_chunks.get(chunk.index)
    if table is not None:
        meta.update(table)
    else:
        page_starts = doc.parsed.metadata.get("page_starts")
        if page_starts:
            pages = chunk_pages(doc.parsed.text, page_starts, chunk.start_char, chunk.end_char)
            meta["page"] = pages[0]
            meta["pages"] = pages
    ocr_pages = doc.parsed.metadata.get("ocr_pages")
    if ocr_pages and "pages" in meta and set(meta["pages"]) & set(ocr_pages):
        meta["ocr"] = True
    return meta


class IngestPipeline:
    def __init__(self, services: Services, settings: GatewaySettings) -> None:
        self.services = services
        self.embed_batch_size = settings.embed_batch_size
        self.timeout_s = settings.ingest_timeout_s
        self.default_chunk_size = settings.chunk_size
        self.default_overlap = settings.chunk_overlap

    async def chunker(self, chunk_size: int | None, overlap: int | None) -> Chunker:
        """A chunker for this request: its sizes, else the configured ones, else the model's."""
        embedder = await self.services.embedder.info()
        # Two special tokens ([CLS], [SEP]) and the passage prefix share the model's window.
        limit = embedder.max_length - 2 - len(embedder.passage_prefix.split()) * 2
        size = chunk_size or self.default_chunk_size or limit
        if size > limit:
            raise InvalidArgument(
                f"chunk_size {size} exceeds the embedder's input length ({limit} tokens); "
                "larger chunks would be truncated before embedding"
            )
        return Chunker(size, self.default_overlap if overlap is None else overlap)

    async def _tokenize(self, texts: list[str]) -> list[TokenSpans]:
        # In slices: tables add texts, and the embedder caps the texts of one request.
        spans: list[TokenSpans] = []
        for start in range(0, len(texts), _TOKENIZE_BATCH):
            offsets = await self.services.embedder.tokenize(
                texts[start : start + _TOKENIZE_BATCH], timeout_s=self.timeout_s
            )
            spans.extend(TokenSpans(t.starts, t.ends) for t in offsets)
        return spans

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        embedded = await self.services.embedder.embed(texts, "passage", timeout_s=self.timeout_s)
        return embedded.vectors

    async def _upsert(self, collection: str, chunks: list[retriever_pb2.Chunk]) -> int:
        reply = await self.services.retriever.upsert_chunks(
            collection, chunks, replace_documents=True, timeout_s=self.timeout_s
        )
        return int(reply.deleted)

    def _groups(self, docs: Sequence[PendingDocument]) -> list[list[PendingDocument]]:
        """Whole documents per group, about embed_batch_size chunks each (never split a doc:
        replace_documents needs every chunk of a document in one upsert)."""
        groups: list[list[PendingDocument]] = [[]]
        size = 0
        for doc in docs:
            if groups[-1] and size + len(doc.chunks) > self.embed_batch_size:
                groups.append([])
                size = 0
            groups[-1].append(doc)
            size += len(doc.chunks)
        return [g for g in groups if g]

    async def run(
        self,
        collection: str,
        docs: list[PendingDocument],
        chunker: Chunker,
        progress: IngestProgress | None = None,
    ) -> tuple[list[DocumentOutcome], int]:
        """Ingests the documents; returns what went in and how many stale chunks were removed.
        `progress` hears when the documents are chunked (and may refuse them: its chunk
        limit) and each time a group of whole documents is stored."""
        # Fail fast on an unknown collection, before any embedding work.
        await self.services.retriever.get_collection(collection)
        ids = [d.id for d in docs]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise InvalidArgument(
                f"documents share ids {dupes[:5]}; give each a distinct name or id"
            )
        # One Tokenize call for the texts and every table's Markdown.
        tables = [t.markdown() for d in docs for t in d.parsed.tables]
        spans = await self._tokenize([d.parsed.text for d in docs] + tables)
        table_spans = iter(spans[len(docs) :])
        for doc, doc_spans in zip(docs, spans[: len(docs)], strict=True):
            doc.split(chunker, doc_spans, [next(table_spans) for _ in doc.parsed.tables])
        docs = [d for d in docs if d.chunks]
        if progress is not None:
            progress.chunked(docs)
        replaced = 0
        pending: asyncio.Task[int] | None = None
        stored: list[PendingDocument] = []  # the group `pending` stores
        try:
            for group in self._groups(docs):
                texts = [t for d in group for t in d.embedding_texts()]
                vectors: list[list[float]] = []
                for start in range(0, len(texts), self.embed_batch_size):
                    vectors.extend(await self._embed(texts[start : start + self.embed_batch_size]))
                if pending is not None:
                    replaced += await pending
                    if progress is not None:
                        progress.stored(stored)
                records = self._records(group, vectors)
                pending = asyncio.create_task(self._upsert(collection, records))
                stored = group
            if pending is not None:
                replaced += await pending
                if progress is not None:
                    progress.stored(stored)
        finally:
            # A failed embed must not leave an upsert running unobserved.
            if pending is not None and not pending.done():
                pending.cancel()
        outcomes = [
            DocumentOutcome(
                id=d.id,
                name=d.name,
                content_type=d.parsed.content_type,
                chunks=len(d.chunks),
                characters=len(d.parsed.text),
                pages=d.parsed.metadata.get("pages"),
                ocr_pages=len(d.parsed.metadata.get("ocr_pages") or ()),
                tables=len(d.parsed.tables),
                warnings=list(d.parsed.warnings),
            )
            for d in docs
        ]
        return outcomes, replaced

    @staticmethod
    def _records(
        group: list[PendingDocument], vectors: list[list[float]]
    ) -> list[retriever_pb2.Chunk]:
        records = []
        it = iter(vectors)
        for doc in group:
            for chunk in doc.chunks:
                records.append(
                    retriever_pb2.Chunk(
                        id=chunk_id(doc.id, chunk.index),
                        document_id=doc.id,
                        document_name=doc.name,
                        chunk_index=chunk.index,
                        text=chunk.text,
                        vector=next(it),
                        metadata=dict_to_struct(_chunk_metadata(doc, chunk)),
                    )
                )
        return records
