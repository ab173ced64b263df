"""The suite the benchmark asks: its settings (--config, --env, --keep-index), its two
collections (every article; all but the held-out ones) and its chat model's name."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tqdm import tqdm

from ragrail.client import GatewayClient
from shared.settings import CONFIG_ENV

FULL = "bench_answers"
HOLDOUT = "bench_answers_holdout"


def keep_index_env(directory: Path | None) -> dict[str, str]:
    """Settings that keep the suite's vector store in `directory` (created), so a later run
    skips the ingest; none without one."""
    if directory is None:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "RAGRAIL_RETRIEVER_MILVUS_URI": str(directory.resolve() / "milvus.db"),
        "RAGRAIL_RETRIEVER_FAISS_DIR": str(directory.resolve() / "faiss"),
    }


def ingest(client: GatewayClient, name: str, docs: list[dict], batch: int = 8) -> tuple[float, int]:
    """Ingests the articles unless the collection already holds exactly them (--keep-index)."""
    listed = client.http.get("/v1/documents", params={"collection": name, "limit": 1000})
    if listed.status_code == 200 and {d["id"] for d in listed.json()["documents"]} == {
        d["id"] for d in docs
    }:
        return 0.0, -1
    client.http.delete(f"/v1/collections/{name}")
    client.ensure_collection(name)
    items = [{"name": d["id"], "text": d["text"]} for d in docs]
    chunks = 0
    start = time.perf_counter()
    with tqdm(total=len(items), desc=f"ingest {name}", unit="doc") as bar:
        for i in range(0, len(items), batch):
            result = client.ingest_texts(name, items[i : i + batch])
            chunks += result["total_chunks"]
            bar.update(len(result["documents"]))
    return time.perf_counter() - start, chunks


def generator_model(client: GatewayClient) -> str:
    """The chat model as the gateway names it (/v1/models), so each table says what it
    measured."""
    reply = client.http.get("/v1/models")
    reply.raise_for_status()
    models = reply.json()["data"]
    return next((m["id"] for m in models if m.get("service") == "generator"), "unknown")


def suite_env(args: argparse.Namespace) -> dict[str, str]:
    """The settings of the suite this run starts: --config as RAGRAIL_CONFIG, --env on top,
    each checked before anything starts."""
    env = keep_index_env(args.keep_index)
    if args.config:
        if not args.config.is_file():
            raise SystemExit(f"--config {args.config} is not a file")
        env[CONFIG_ENV] = str(args.config.resolve())
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(
                f"--env {item!r}: expected NAME=VALUE, e.g. RAGRAIL_GENERATOR_ENGINE=openai"
            )
        env[name] = value
    return env
