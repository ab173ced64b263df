"""/v1/ingest/jobs: large uploads ingested in the background, with progress and cancel."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request, Response

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.deps import get_services, get_settings
from services.gateway.ingest.jobs import IngestJobs
from services.gateway.ingest.request import read_ingest_request
from services.gateway.routes.documents import _INGEST_BODY
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1/ingest/jobs", tags=["documents"])
JobPath = Path(max_length=64, description="The id POST /v1/ingest/jobs returned.")
_ERRORS = {404: {"model": schemas.ErrorResponse, "description": "Unknown job."}}


async def get_jobs(request: Request) -> IngestJobs:
    return request.app.state.ingest_jobs


@router.post(
    "",
    status_code=202,
    response_model=schemas.IngestJob,
    openapi_extra=_INGEST_BODY,
    responses={
        404: {"model": schemas.ErrorResponse, "description": "Unknown collection."},
        413: {"model": schemas.ErrorResponse, "description": "Request body too large."},
        415: {"model": schemas.ErrorResponse, "description": "Unsupported content type."},
        422: {"model": schemas.ErrorResponse, "description": "Invalid parameters."},
        429: {"model": schemas.ErrorResponse, "description": "Too many jobs waiting."},
    },
)
async def submit_ingest_job(
    request: Request,
    response: Response,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
    jobs: IngestJobs = Depends(get_jobs),
) -> schemas.IngestJob:
    """Starts ingesting the documents (the body of POST /v1/documents) in the background and
    answers at once with the job; GET its URL for progress, DELETE it to stop it. Documents
    are stored whole as the job goes, so a stopped job keeps those it reported done."""
    ingest = await read_ingest_request(request, settings)
    # An unknown collection is the client's mistake to hear now, not in the job's error.
    await services.retriever.get_collection(ingest.collection)
    job = jobs.submit(ingest)
    response.headers["Location"] = f"/v1/ingest/jobs/{job.id}"
    return job.status()


@router.get("", response_model=schemas.IngestJobList)
async def list_ingest_jobs(jobs: IngestJobs = Depends(get_jobs)) -> schemas.IngestJobList:
    """The jobs this gateway remembers, newest first."""
    return schemas.IngestJobList(jobs=[j.status() for j in reversed(jobs.jobs.values())])


@router.get("/{job_id}", response_model=schemas.IngestJob, responses=_ERRORS)
async def get_ingest_job(
    job_id: str = JobPath, jobs: IngestJobs = Depends(get_jobs)
) -> schemas.IngestJob:
    """A job's state (queued, running, succeeded, failed, cancelled) and progress."""
    return jobs.get(job_id).status()


@router.delete("/{job_id}", response_model=schemas.IngestJob, responses=_ERRORS)
async def cancel_ingest_job(
    job_id: str = JobPath, jobs: IngestJobs = Depends(get_jobs)
) -> schemas.IngestJob:
    """Stops a queued or running job (its embedding calls with it) and answers with its final
    state; a job already finished is answered as it is."""
    return (await jobs.cancel(job_id)).status()
