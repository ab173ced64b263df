"""What an upload's file name says: its last path component, extension and stem, and the
extensions the ingest reads (for messages that list them)."""

from __future__ import annotations

from shared.formats import SUPPORTED


def supported_list() -> str:
    return ", ".join(sorted(SUPPORTED))


def basename(filename: str) -> str:
    """The last path component, whether the client sent a POSIX or a Windows path."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1].strip()


def extension(filename: str) -> str:
    name = basename(filename)
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def stem(filename: str) -> str:
    name = basename(filename)
    dot = name.rfind(".")
    stem = name[:dot] if dot > 0 else name
    return stem.strip() or "untitled"
