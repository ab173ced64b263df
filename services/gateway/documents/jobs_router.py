"""/v1/ingest/jobs: large uploads ingested in the background, with progress and cancel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Depends, Path, Request, Response

from services.gateway.documents import protocol
from services.gateway.documents.ingest.jobs import Job
from services.gateway.documents.ingest.request import read_ingest_request
from services.gateway.documents.router import INGEST_ERRORS, authorize_ingest, get_documents
from services.gateway.documents.serving import DocumentsServing
from services.gateway.http import audit
from services.gateway.http.access import authorize, get_principal, principal_of
from services.gateway.http.deps import get_settings
from services.gateway.http.errors import error_responses
from services.gateway.http.principals import Action, Principal
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1/ingest/jobs", tags=["documents"])
JobPath = Path(max_length=64, description="The id POST /v1/ingest/jobs returned.")
_ERRORS = error_responses({404: "Unknown job."})


@router.post(
    "",
    status_code=202,
    response_model=protocol.IngestJob,
    openapi_extra=protocol.INGEST_BODY,
    responses=error_responses(
        {
            **INGEST_ERRORS,
            415: "Unsupported content type.",
            422: "Invalid parameters.",
            429: "Too many jobs waiting.",
        }
    ),
)
async def submit_ingest_job(
    request: Request,
    response: Response,
    settings: GatewaySettings = Depends(get_settings),
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.IngestJob:
    """Starts ingesting the documents (the body of POST /v1/documents) in the background and
    answers at once with the job; GET its URL for progress, DELETE it to stop it. Documents
    are stored whole as the job goes, so a stopped job keeps those it reported done."""
    ingest = await read_ingest_request(request, settings)
    await authorize_ingest(request, documents, ingest)
    job = await documents.submit(ingest, principal_of(request))
    response.headers["Location"] = f"/v1/ingest/jobs/{job.id}"
    return job.status()


def _job(action: Action) -> Callable[..., Awaitable[Job]]:
    """The dependency that resolves the path's job for `action`: the key's own job, else the
    404 of a job that does not exist (audited as a denial)."""

    async def job(
        request: Request,
        job_id: str = JobPath,
        documents: DocumentsServing = Depends(get_documents),
    ) -> Job:
        principal = principal_of(request)
        foreign = documents.foreign_job(job_id, principal)
        if foreign is not None:
            audit.denied(
                request.scope, principal.name, "foreign_job", foreign.collection, action.name
            )
        found = documents.job(job_id, principal)
        # The key may have lost its scope on the job's collection since (a SIGHUP reload).
        authorize(request, action, found.collection)
        return found

    return job


JobToRead = Depends(_job(Action.read))
JobToWrite = Depends(_job(Action.write))


@router.get("", response_model=protocol.IngestJobList)
async def list_ingest_jobs(
    documents: DocumentsServing = Depends(get_documents),
    principal: Principal = Depends(get_principal),
) -> protocol.IngestJobList:
    """The jobs of this key that this gateway remembers, newest first."""
    return protocol.IngestJobList(jobs=[j.status() for j in documents.jobs_of(principal)])


@router.get("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def get_ingest_job(job: Job = JobToRead) -> protocol.IngestJob:
    """A job's state (queued, running, succeeded, failed, cancelled) and progress."""
    return job.status()


@router.delete("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def cancel_ingest_job(
    job: Job = JobToWrite,
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.IngestJob:
    """Stops a queued or running job (its embedding calls with it) and answers with its final
    state; a job already finished is answered as it is."""
    return (await documents.cancel(job)).status()
