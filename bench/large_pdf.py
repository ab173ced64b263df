"""Memory of a long PDF's ingest (issue 29): a 300-page text PDF against a 30-page one.

    python bench/large_pdf.py                  # 30 and 300 pages
    python bench/large_pdf.py --pages 30 100   # others

Each PDF (bench/docset.py's long_report_pdf: prose pages with a fact each and a ruled table
every tenth page) goes through POST /v1/ingest/jobs of a fresh gateway process on the suite's
embedder and retriever, so that the gateway's peak resident memory (VmHWM) is this ingest's
alone. It prints, per PDF: pages, chunks, seconds, the gateway's resident memory before and
its peak during the ingest, and the peak of the whole job (gateway, embedder and retriever
together, sampled every 50 ms) above their level before it. Memory that is bounded by pages
grows little from 30 to 300 pages; memory that holds every page grows tenfold.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import docset
from bench.common import suite_supervisor
from bench.documents import gateway_process


def status_kb(pid: int, field: str) -> int:
    """A /proc/PID/status figure in kB (VmRSS: resident now, VmHWM: its peak); 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakSampler(threading.Thread):
    """The highest sum of resident memory of `pids`, sampled until stopped."""

    def __init__(self, pids: list[int], every_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.every_s = every_s
        self.peak_kb = 0
        self._stop_event = threading.Event()

    def total_kb(self) -> int:
        return sum(status_kb(p, "VmRSS") for p in self.pids)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_kb = max(self.peak_kb, self.total_kb())
            time.sleep(self.every_s)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak_kb


def ingest_job(url: str, name: str, data: bytes) -> dict:
    """Runs one file through POST /v1/ingest/jobs; its final status."""
    with httpx.Client(base_url=url, timeout=600) as http:
        http.delete("/v1/collections/large")
        http.post("/v1/collections", json={"name": "large"}).raise_for_status()
        reply = http.post(
            "/v1/ingest/jobs", data={"collection": "large"}, files=[("files", (name, data))]
        )
        reply.raise_for_status()
        job = reply.json()
        shown = -1
        while job["state"] in ("queued", "running"):
            time.sleep(0.5)
            job = http.get(f"/v1/ingest/jobs/{job['id']}").json()
            if job["pages_done"] != shown:  # the job's own progress, as a client sees it
                shown = job["pages_done"]
                print(f"    {shown}/{job['pages_total']} pages", end="\r", flush=True)
        if job["state"] != "succeeded":
            raise SystemExit(f"the {name} job ended {job['state']}: {job.get('error')}")
        return job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[30, 300])
    args = parser.parse_args()
    pdfs = {n: docset.long_report_pdf(n) for n in args.pages}
    rows = []
    with suite_supervisor() as supervisor:
        services = [supervisor.child(n).process.pid for n in ("embedder", "retriever")]
        for pages, data in pdfs.items():
            with gateway_process({}) as (url, pid):
                sampler = PeakSampler([pid, *services])
                before_gateway, before_all = status_kb(pid, "VmRSS"), sampler.total_kb()
                sampler.start()
                started = time.perf_counter()
                job = ingest_job(url, f"long-{pages}.pdf", data)
                took = time.perf_counter() - started
                peak_all = sampler.stop()
                peak_gateway = status_kb(pid, "VmHWM")
            rows.append(
                (
                    pages,
                    f"{len(data) / 1e6:.2f}",
                    job["chunks_total"],
                    f"{took:.1f}",
                    f"{before_gateway / 1024:.0f}",
                    f"{peak_gateway / 1024:.0f}",
                    f"{(peak_gateway - before_gateway) / 1024:+.0f}",
                    f"{(peak_all - before_all) / 1024:+.0f}",
                )
            )
            print(f"  {pages} pages: {rows[-1]}", flush=True)
    head = (
        "pages",
        "MB",
        "chunks",
        "seconds",
        "gateway MiB before",
        "gateway peak MiB",
        "gateway growth",
        "job peak growth (all)",
    )
    print("\n| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


if __name__ == "__main__":
    main()
