"""The web playground: a static page at `/` and its assets under `/playground/`, plain HTML,
CSS and JavaScript from services/gateway/playground/ that call the JSON API of this same
gateway (so no CORS settings are needed for it)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

PLAYGROUND_DIR = Path(__file__).resolve().parent
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
}
# Only the files that ship are served, looked up by name: a request path never reaches the
# filesystem, so there is no traversal to guard against.
ASSETS: dict[str, Path] = {
    p.name: p for p in sorted(PLAYGROUND_DIR.iterdir()) if p.suffix in _MEDIA_TYPES
}
# Revalidate on every load (ETag / Last-Modified make that a 304): an upgraded gateway must
# not run with yesterday's app.js from the browser's cache.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

router = APIRouter(include_in_schema=False)


def _file(name: str) -> FileResponse:
    path = ASSETS.get(name)
    if path is None:
        raise HTTPException(404, f"no playground file named {name!r}")
    return FileResponse(path, media_type=_MEDIA_TYPES[path.suffix], headers=_HEADERS)


@router.get("/")
async def index() -> FileResponse:
    """The playground page."""
    return _file("index.html")


@router.get("/playground/{name}")
async def asset(name: str) -> FileResponse:
    """One of the playground's own files (app.js, style.css, index.html)."""
    return _file(name)
