"""/v1/ingest/jobs: large uploads ingested in the background, with progress and cancel."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request, Response

from services.gateway.documents import protocol
from services.gateway.documents.ingest.jobs import Job
from services.gateway.documents.ingest.request import read_ingest_request
from services.gateway.documents.router import authorize_ingest, get_documents
from services.gateway.documents.serving import DocumentsServing
from services.gateway.http import audit
from services.gateway.http.access import authorize, get_principal, principal_of
from services.gateway.http.deps import get_settings
from services.gateway.http.errors import ErrorResponse
from services.gateway.http.principals import Action, Principal
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1/ingest/jobs", tags=["documents"])
JobPath = Path(max_length=64, description="The id POST /v1/ingest/jobs returned.")
_ERRORS = {404: {"model": ErrorResponse, "description": "Unknown job."}}


@router.post(
    "",
    status_code=202,
    response_model=protocol.IngestJob,
    openapi_extra=protocol.INGEST_BODY,
    responses={
        404: {"model": ErrorResponse, "description": "Unknown collection."},
        413: {"model": ErrorResponse, "description": "Request body too large."},
        415: {"model": ErrorResponse, "description": "Unsupported content type."},
        422: {"model": ErrorResponse, "description": "Invalid parameters."},
        429: {"model": ErrorResponse, "description": "Too many jobs waiting."},
    },
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


def _job(request: Request, documents: DocumentsServing, job_id: str, action: Action) -> Job:
    """The key's own job, else the 404 of a job that does not exist (audited as a denial)."""
    principal = principal_of(request)
    foreign = documents.foreign_job(job_id, principal)
    if foreign is not None:
        audit.denied(request.scope, principal.name, "foreign_job", foreign.collection, action.name)
    job = documents.job(job_id, principal)
    # The key may have lost its scope on the job's collection since (a SIGHUP reload).
    authorize(request, action, job.collection)
    return job


@router.get("", response_model=protocol.IngestJobList)
async def list_ingest_jobs(
    documents: DocumentsServing = Depends(get_documents),
    principal: Principal = Depends(get_principal),
) -> protocol.IngestJobList:
    """The jobs of this key that this gateway remembers, newest first."""
    return protocol.IngestJobList(jobs=[j.status() for j in documents.jobs_of(principal)])


@router.get("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def get_ingest_job(
    request: Request,
    job_id: str = JobPath,
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.IngestJob:
    """A job's state (queued, running, succeeded, failed, cancelled) and progress."""
    return _job(request, documents, job_id, Action.read).status()


@router.delete("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def cancel_ingest_job(
    request: Request,
    job_id: str = JobPath,
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.IngestJob:
    """Stops a queued or running job (its embedding calls with it) and answers with its final
    state; a job already finished is answered as it is."""
    job = _job(request, documents, job_id, Action.write)
    return (await documents.cancel(job)).status()
