"""Documents in a collection, as a key may see and write them: ingest while the client waits
or as a background job, list and delete. The routers authorize and shape the answers; the
parsing, chunking and embedding are ingest/."""

from __future__ import annotations

from services.gateway.documents import protocol
from services.gateway.documents.ingest.jobs import IngestJobs, Job
from services.gateway.documents.ingest.pipeline import IngestPipeline
from services.gateway.documents.ingest.request import (
    IngestProgress,
    IngestRequest,
    ingest_response,
    parse_documents,
)
from services.gateway.http.access import all_documents, hidden_document_ids, may_see
from services.gateway.http.clients import Services
from services.gateway.http.principals import OPEN, Principal
from services.gateway.settings import GatewaySettings
from shared.errors import NotFound, PermissionDenied
from shared.proto.ragrail.v1 import retriever_pb2
from shared.structs import struct_to_dict

# What a client whose upload is over POST /v1/documents' limits should do instead.
_USE_JOBS = "; send large uploads to POST /v1/ingest/jobs"


def job_owner(principal: Principal) -> str | None:
    """Whose jobs a key sees: its own, or every job when the gateway has no keys."""
    return None if principal is OPEN else principal.name


class DocumentsServing:
    def __init__(self, services: Services, settings: GatewaySettings) -> None:
        self.services = services
        self.settings = settings
        self.pipeline = IngestPipeline(services, settings)
        self.jobs = IngestJobs(self.pipeline, settings)

    async def close(self) -> None:
        await self.jobs.close()

    async def check_replacements(self, principal: Principal, ingest: IngestRequest) -> None:
        """For a key restricted to groups, no document id that replaces a document it cannot
        see."""
        if principal.all_documents:
            return
        hidden = await hidden_document_ids(self.services, ingest.collection, principal)
        taken = sorted({d.id for d in ingest.documents} & hidden)
        if taken:
            raise PermissionDenied(
                f"document id '{taken[0][:200]}' is taken by a document this key cannot see; "
                "choose another id"
            )

    def check_size(self, ingest: IngestRequest) -> IngestProgress:
        """413 when the documents are over what one request may ingest; the progress that
        holds the request to its chunk limit as it goes."""
        settings = self.settings
        ingest.check_size(settings.ingest_max_mb, "RAGRAIL_GATEWAY_INGEST_MAX_MB", _USE_JOBS)
        return IngestProgress(
            settings.ingest_max_chunks, "RAGRAIL_GATEWAY_INGEST_MAX_CHUNKS", _USE_JOBS
        )

    async def ingest(
        self, ingest: IngestRequest, progress: IngestProgress, started: float
    ) -> protocol.IngestResponse:
        """Parses, chunks, embeds and stores the documents; `started` is the request's
        time.perf_counter(), for the answer's elapsed time."""
        docs = await parse_documents(ingest, self.settings, progress)
        options = ingest.options
        chunker = await self.pipeline.chunker(options.chunk_size, options.chunk_overlap)
        outcomes, replaced = await self.pipeline.run(ingest.collection, docs, chunker, progress)
        return ingest_response(ingest.collection, outcomes, replaced, started)

    async def submit(self, ingest: IngestRequest, principal: Principal) -> Job:
        # An unknown collection is the client's mistake to hear now, not in the job's error.
        await self.services.retriever.get_collection(ingest.collection)
        return self.jobs.submit(ingest, principal.name)

    def jobs_of(self, principal: Principal) -> list[Job]:
        """The key's jobs this gateway remembers, newest first."""
        owner = job_owner(principal)
        return [j for j in reversed(self.jobs.jobs.values()) if owner is None or j.owner == owner]

    def foreign_job(self, job_id: str, principal: Principal) -> Job | None:
        """Another key's job of that id, if there is one: a denial the router audits."""
        job = self.jobs.jobs.get(job_id)
        return job if job is not None and job_owner(principal) not in (None, job.owner) else None

    def job(self, job_id: str, principal: Principal) -> Job:
        """The key's own job, else the 404 of a job that does not exist."""
        return self.jobs.get(job_id, job_owner(principal))

    async def cancel(self, job: Job) -> Job:
        return await self.jobs.cancel(job.id)

    async def page(
        self, collection: str, principal: Principal, limit: int, offset: int
    ) -> tuple[list[retriever_pb2.Document], int]:
        """A page of the documents the key may see, sorted by id, and how many there are."""
        if principal.all_documents:
            reply = await self.services.retriever.list_documents(
                collection, limit=limit, offset=offset
            )
            return list(reply.documents), reply.total
        # The retriever lists without a filter, so a restricted key's page is cut from every
        # document it may see (one pass over the collection's document list).
        visible = [
            d
            for d in await all_documents(self.services, collection)
            if may_see(principal, struct_to_dict(d.metadata))
        ]
        return visible[offset : offset + limit], len(visible)

    async def delete(self, collection: str, document_id: str, principal: Principal) -> int:
        """The number of chunks deleted; 404 for a document that is not there."""
        missing = NotFound(f"document '{document_id}' is not in collection '{collection}'")
        if not principal.all_documents and document_id in await hidden_document_ids(
            self.services, collection, principal
        ):
            raise missing  # a document the key cannot see is one that is not there
        deleted = await self.services.retriever.delete_documents(collection, [document_id])
        if deleted == 0:
            raise missing
        return deleted
