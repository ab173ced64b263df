"""/v1/ingest/jobs: large uploads ingested in the background, with progress and cancel."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request, Response

from services.gateway.documents import protocol
from services.gateway.documents.ingest.jobs import IngestJobs, Job
from services.gateway.documents.ingest.request import read_ingest_request
from services.gateway.documents.router import _INGEST_BODY, authorize_ingest
from services.gateway.http import audit
from services.gateway.http.access import authorize, get_principal, principal_of
from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services, get_settings
from services.gateway.http.errors import ErrorResponse
from services.gateway.http.principals import OPEN, Action, Principal
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1/ingest/jobs", tags=["documents"])
JobPath = Path(max_length=64, description="The id POST /v1/ingest/jobs returned.")
_ERRORS = {404: {"model": ErrorResponse, "description": "Unknown job."}}


async def get_jobs(request: Request) -> IngestJobs:
    return request.app.state.ingest_jobs


@router.post(
    "",
    status_code=202,
    response_model=protocol.IngestJob,
    openapi_extra=_INGEST_BODY,
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
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
    jobs: IngestJobs = Depends(get_jobs),
) -> protocol.IngestJob:
    """Starts ingesting the documents (the body of POST /v1/documents) in the background and
    answers at once with the job; GET its URL for progress, DELETE it to stop it. Documents
    are stored whole as the job goes, so a stopped job keeps those it reported done."""
    ingest = await read_ingest_request(request, settings)
    await authorize_ingest(request, services, ingest)
    # An unknown collection is the client's mistake to hear now, not in the job's error.
    await services.retriever.get_collection(ingest.collection)
    job = jobs.submit(ingest, principal_of(request).name)
    response.headers["Location"] = f"/v1/ingest/jobs/{job.id}"
    return job.status()


def _scope(principal: Principal) -> str | None:
    """Whose jobs a key sees: its own, or every job when the gateway has no keys."""
    return None if principal is OPEN else principal.name


def _job(request: Request, jobs: IngestJobs, job_id: str, action: Action) -> Job:
    """The key's own job, else the 404 of a job that does not exist (audited as a denial)."""
    principal = principal_of(request)
    job = jobs.jobs.get(job_id)
    if job is not None and _scope(principal) not in (None, job.owner):
        audit.denied(request.scope, principal.name, "foreign_job", job.collection, action.name)
    job = jobs.get(job_id, _scope(principal))
    # The key may have lost its scope on the job's collection since (a SIGHUP reload).
    authorize(request, action, job.collection)
    return job


@router.get("", response_model=protocol.IngestJobList)
async def list_ingest_jobs(
    jobs: IngestJobs = Depends(get_jobs), principal: Principal = Depends(get_principal)
) -> protocol.IngestJobList:
    """The jobs of this key that this gateway remembers, newest first."""
    owner = _scope(principal)
    return protocol.IngestJobList(
        jobs=[j.status() for j in reversed(jobs.jobs.values()) if owner is None or j.owner == owner]
    )


@router.get("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def get_ingest_job(
    request: Request,
    job_id: str = JobPath,
    jobs: IngestJobs = Depends(get_jobs),
) -> protocol.IngestJob:
    """A job's state (queued, running, succeeded, failed, cancelled) and progress."""
    return _job(request, jobs, job_id, Action.read).status()


@router.delete("/{job_id}", response_model=protocol.IngestJob, responses=_ERRORS)
async def cancel_ingest_job(
    request: Request,
    job_id: str = JobPath,
    jobs: IngestJobs = Depends(get_jobs),
) -> protocol.IngestJob:
    """Stops a queued or running job (its embedding calls with it) and answers with its final
    state; a job already finished is answered as it is."""
    job = _job(request, jobs, job_id, Action.write)
    return (await jobs.cancel(job.id)).status()
