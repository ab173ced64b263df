"""A small synchronous client of the gateway's REST API, used by the CLI and the benchmarks."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from shared.formats import SUPPORTED

DEFAULT_URL = os.environ.get("RAGRAIL_GATEWAY_URL", "http://127.0.0.1:8080")


class GatewayError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class GatewayClient:
    def __init__(
        self, base_url: str = DEFAULT_URL, timeout_s: float = 600.0, api_key: str | None = None
    ) -> None:
        """api_key: sent as a bearer token; default RAGRAIL_API_KEY, and none when that is
        unset (the local quickstart's gateway has no keys; compose's requires one)."""
        key = os.environ.get("RAGRAIL_API_KEY", "") if api_key is None else api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(base_url=base_url, timeout=timeout_s, headers=headers)

    def _check(self, reply: httpx.Response) -> Any:
        if reply.status_code >= 400:
            try:
                message = reply.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = reply.text[:500]
            raise GatewayError(reply.status_code, message)
        return reply.json() if reply.content else None

    def health(self) -> dict[str, Any]:
        reply = self.http.get("/v1/health")
        return reply.json()

    def ensure_collection(self, name: str, description: str = "") -> None:
        reply = self.http.post("/v1/collections", json={"name": name, "description": description})
        if reply.status_code != 409:
            self._check(reply)

    def ingest_files(
        self,
        collection: str,
        files: list[tuple[str, Path]],
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Uploads (document name, path) pairs; the name is the document's id."""
        parts = [("files", (name, path.read_bytes())) for name, path in files]
        data = {"collection": collection}
        if metadata:
            data["metadata"] = json.dumps(metadata)
        return self._check(self.http.post("/v1/documents", data=data, files=parts))

    def ingest_texts(
        self, collection: str, documents: list[dict[str, Any]], **options: Any
    ) -> dict[str, Any]:
        body = {"collection": collection, "documents": documents, **options}
        return self._check(self.http.post("/v1/documents", json=body))

    def list_documents(self, collection: str, limit: int = 1000, offset: int = 0) -> dict[str, Any]:
        params = {"collection": collection, "limit": limit, "offset": offset}
        return self._check(self.http.get("/v1/documents", params=params))

    def delete_document(self, collection: str, document_id: str) -> bool:
        """Deletes a document's chunks; False when it was not there (already deleted)."""
        path = "/v1/documents/" + quote(document_id, safe="/")
        reply = self.http.delete(path, params={"collection": collection})
        if reply.status_code == 404 and "is not in collection" in reply.text:
            return False
        self._check(reply)
        return True

    def search(self, query: str, collection: str, **options: Any) -> dict[str, Any]:
        body = {"query": query, "collection": collection, **options}
        return self._check(self.http.post("/v1/search", json=body))

    def chat_stream(self, messages: list[dict[str, str]], **options: Any) -> Iterator[dict]:
        """POSTs a streamed /v1/chat/completions and yields each OpenAI chunk as it arrives;
        the last one with a finish_reason carries ragrail's citations, guardrails, timings and
        warnings. A failure after the stream began (sent in-stream, as the status was already
        200) raises GatewayError like one before it."""
        body = {**options, "messages": messages, "stream": True}
        with self.http.stream("POST", "/v1/chat/completions", json=body) as reply:
            if reply.status_code >= 400:
                reply.read()
                self._check(reply)
            for line in reply.iter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, comments, other SSE fields
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                chunk = json.loads(data)
                if "error" in chunk:
                    raise GatewayError(reply.status_code, chunk["error"]["message"])
                yield chunk

    def close(self) -> None:
        self.http.close()


def find_documents(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """(document name, file) for every parsable file under the given paths, sorted by name.

    A file inside a directory argument is named by its path relative to that directory, so
    `notes/a.md` and `drafts/a.md` stay two documents; a file argument by its own name.
    """
    found: dict[str, Path] = {}
    for path in paths:
        if path.is_dir():
            for p in path.rglob("*"):
                if p.is_file() and p.suffix.lower() in SUPPORTED:
                    found[p.relative_to(path).as_posix()] = p
        elif path.is_file():
            found[path.name] = path
        else:
            raise FileNotFoundError(f"{path} does not exist")
    return sorted(found.items())


def batches(
    files: list[tuple[str, Path]], max_files: int = 16, max_bytes: int = 16 * 1024 * 1024
) -> list[list[tuple[str, Path]]]:
    """Groups files into upload requests of at most max_files files and about max_bytes."""
    out: list[list[tuple[str, Path]]] = [[]]
    size = 0
    for name, path in files:
        n = path.stat().st_size
        if out[-1] and (len(out[-1]) >= max_files or size + n > max_bytes):
            out.append([])
            size = 0
        out[-1].append((name, path))
        size += n
    return [b for b in out if b]
