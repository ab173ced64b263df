"""Ingest jobs: a large upload ingested in the background (POST /v1/ingest/jobs), its progress
read with GET and stopped with DELETE.

A job runs the same pipeline as POST /v1/documents, with a larger chunk limit
(`ingest_job_max_chunks`), `ingest_jobs_concurrency` at a time. Documents are stored whole,
group by group, so a job cancelled or failed part-way leaves the documents it reported done
(and the group whose upsert the retriever had already received, if any), never part of one;
running the same upload again completes it, as ids are stable.

Jobs live in the gateway's memory: a restarted gateway forgets them (their stored documents
stay), and only the `ingest_jobs_kept` most recent finished jobs are remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from prometheus_client import Counter

from services.gateway.documents import protocol as schemas
from services.gateway.documents.ingest.pipeline import IngestPipeline
from services.gateway.documents.ingest.request import (
    IngestProgress,
    IngestRequest,
    ingest_response,
    parse_documents,
)
from services.gateway.settings import GatewaySettings
from shared.errors import NotFound, RagrailError, ResourceExhausted

log = logging.getLogger("ragrail.gateway")
State = schemas.IngestJobState
FINISHED = frozenset({State.succeeded, State.failed, State.cancelled})
INGEST_JOBS = Counter(
    "ragrail_ingest_jobs_total", "Ingest jobs finished, by final state.", ["state"]
)


@dataclass
class Job:
    id: str
    collection: str
    progress: IngestProgress
    state: State = State.queued
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    error: schemas.ErrorBody | None = None
    result: schemas.IngestResponse | None = None
    task: asyncio.Task[None] | None = None
    owner: str = ""  # the principal's name: another key's job is a 404 to it

    def status(self) -> schemas.IngestJob:
        p = self.progress
        return schemas.IngestJob(
            id=self.id,
            state=self.state,
            collection=self.collection,
            documents_total=p.documents_total,
            documents_done=p.documents_done,
            chunks_total=p.chunks_total,
            chunks_done=p.chunks_done,
            pages_total=p.pages_total,
            pages_done=p.pages_done,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            error=self.error,
            result=self.result,
        )


class IngestJobs:
    def __init__(self, pipeline: IngestPipeline, settings: GatewaySettings) -> None:
        self.pipeline = pipeline
        self.settings = settings
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.slots = asyncio.Semaphore(settings.ingest_jobs_concurrency)

    def _unfinished(self) -> int:
        return sum(1 for j in self.jobs.values() if j.state not in FINISHED)

    def submit(self, ingest: IngestRequest, owner: str = "") -> Job:
        # Each waiting job holds its upload in memory: bound how many may wait.
        if self._unfinished() >= self.settings.ingest_jobs_queue:
            raise ResourceExhausted(
                f"{self.settings.ingest_jobs_queue} ingest jobs are waiting or running "
                "(RAGRAIL_GATEWAY_INGEST_JOBS_QUEUE); retry when one has finished"
            )
        progress = IngestProgress(
            self.settings.ingest_job_max_chunks,
            "RAGRAIL_GATEWAY_INGEST_JOB_MAX_CHUNKS",
            "; split the upload into several jobs",
        )
        progress.documents_total = len(ingest.documents)
        job = Job(f"ingest-{uuid.uuid4().hex[:20]}", ingest.collection, progress, owner=owner)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, ingest))
        self._forget_old()
        return job

    def get(self, job_id: str, owner: str | None = None) -> Job:
        """The job; `owner` set, only if that principal submitted it (else the same 404)."""
        job = self.jobs.get(job_id)
        if job is None or (owner is not None and job.owner != owner):
            raise NotFound(
                f"no ingest job '{job_id[:80]}' (jobs are forgotten when the gateway restarts)"
            )
        return job

    async def cancel(self, job_id: str, owner: str | None = None) -> Job:
        """Stops a queued or running job (its gRPC calls with it); a finished one is left as
        it is."""
        job = self.get(job_id, owner)
        if job.task is not None and not job.task.done():
            job.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job.task
        return job

    async def close(self) -> None:
        tasks = [j.task for j in self.jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _forget_old(self) -> None:
        finished = [j.id for j in self.jobs.values() if j.state in FINISHED]
        for job_id in finished[: max(len(finished) - self.settings.ingest_jobs_kept, 0)]:
            del self.jobs[job_id]

    async def _run(self, job: Job, ingest: IngestRequest) -> None:
        started = time.perf_counter()
        try:
            async with self.slots:
                job.state = State.running
                job.started_at = time.time()
                docs = await parse_documents(ingest, self.settings, job.progress)
                del ingest.documents[:]  # the bytes are parsed: let them go
                options = ingest.options
                chunker = await self.pipeline.chunker(options.chunk_size, options.chunk_overlap)
                outcomes, replaced = await self.pipeline.run(
                    job.collection, docs, chunker, job.progress
                )
            job.result = ingest_response(job.collection, outcomes, replaced, started)
            job.state = State.succeeded
        except asyncio.CancelledError:
            job.state = State.cancelled
            # Not re-raised: the job's task ends here, cancelled as asked.
        except RagrailError as exc:
            job.state = State.failed
            job.error = schemas.ErrorBody(
                message=exc.message, type=type(exc).__name__, code=exc.http_status
            )
        except Exception:
            log.exception("ingest job failed", extra={"job": job.id})
            job.state = State.failed
            job.error = schemas.ErrorBody(
                message="internal error; the gateway log has the details", type="Internal", code=500
            )
        finally:
            job.finished_at = time.time()
            INGEST_JOBS.labels(job.state.value).inc()
            p = job.progress
            log.info(
                "ingest job",
                extra={
                    "job": job.id,
                    "collection": job.collection,
                    "state": job.state.value,
                    "documents_done": p.documents_done,
                    "chunks_done": p.chunks_done,
                    "chunks_total": p.chunks_total,
                    "error": job.error.message if job.error else None,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            self._forget_old()
