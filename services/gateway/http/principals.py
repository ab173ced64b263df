"""Who a request is: API keys mapped to principals with collection scopes and document groups.

Two key-file formats, told apart by content:

- one key per line (the original format): each key has full access, as before;
- YAML with a `keys:` list, one principal each:

      keys:
        - name: team-a                 # what logs, metrics and errors call the key
          key_sha256: 9f86d0...        # or key: <the key itself>; the hash keeps it off disk
          read: ["team_a_*", "shared"] # collection globs (fnmatch); admin > write > read
          write: ["team_a_*"]
          admin: ["team_a_*"]          # create and delete collections
          groups: ["team-a"]           # documents it may see; omitted: only documents with
                                       # no access list; ["*"]: every document
          rate_limit_rpm: 600          # optional; else the gateway's rate_limit_rpm

Keys are held as SHA-256 digests and looked up by digest, so no comparison depends on how much
of a key matched, and a key never reaches a log or an error.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import re
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.gateway.settings import GatewaySettings

log = logging.getLogger("ragrail.gateway")

ALL_GROUPS = "*"


class Action(IntEnum):
    """Each action includes the ones below it."""

    read = 1
    write = 2
    admin = 3


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id(key: str) -> str:
    """A key's public name when it has no other: the first 8 hex digits of its SHA-256."""
    return key_digest(key)[:8]


@dataclass(frozen=True)
class Principal:
    name: str
    read: tuple[str, ...] = ("*",)
    write: tuple[str, ...] = ("*",)
    admin: tuple[str, ...] = ("*",)
    # None: every document (no mandatory filter); else the groups whose documents it sees,
    # besides documents with no access list.
    groups: tuple[str, ...] | None = None
    rate_limit_rpm: int | None = None

    def can(self, action: Action, collection: str) -> bool:
        globs = self.admin
        if action <= Action.write:
            globs = globs + self.write
        if action <= Action.read:
            globs = globs + self.read
        return any(fnmatch.fnmatchcase(collection, g) for g in globs)

    @property
    def all_documents(self) -> bool:
        return self.groups is None


# The principal of every request when no key is configured (the local quickstart).
OPEN = Principal("anonymous")

_GLOB = re.compile(r"[a-z0-9_*?\[\]!-]{1,64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_GROUP = re.compile(r"[^\x00-\x1f\x7f]{1,128}")


class _KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_NAME.pattern)
    key: str | None = Field(None, min_length=8)
    key_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)
    admin: list[str] = Field(default_factory=list)
    groups: list[str] | None = None
    rate_limit_rpm: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _check(self) -> _KeyEntry:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key and key_sha256")
        for glob in self.read + self.write + self.admin:
            if not _GLOB.fullmatch(glob):
                raise ValueError(f"collection glob {glob!r} is invalid")
        for group in self.groups or []:
            if not _GROUP.fullmatch(group):
                raise ValueError("a group is 1-128 characters without control characters")
        return self

    def principal(self) -> Principal:
        groups = self.groups
        return Principal(
            name=self.name,
            read=tuple(self.read),
            write=tuple(self.write),
            admin=tuple(self.admin),
            groups=None if groups is not None and ALL_GROUPS in groups else tuple(groups or ()),
            rate_limit_rpm=self.rate_limit_rpm,
        )

    def digest(self) -> str:
        return key_digest(self.key) if self.key is not None else str(self.key_sha256).lower()


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keys: list[_KeyEntry]


class KeyFileError(Exception):
    pass


@dataclass(frozen=True)
class KeyRing:
    """Principals by key digest; empty means the gateway is open."""

    by_digest: dict[str, Principal]

    def __bool__(self) -> bool:
        return bool(self.by_digest)

    def lookup(self, key: str) -> Principal | None:
        return self.by_digest.get(key_digest(key))


def _full_access(key: str) -> tuple[str, Principal]:
    return key_digest(key), Principal(f"key-{key_id(key)}")


def _scoped(data: Any, where: str) -> dict[str, Principal]:
    try:
        parsed = _KeyFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise KeyFileError(f"{where}: {at}: {first['msg']}") from None
    ring: dict[str, Principal] = {}
    names: set[str] = set()
    for entry in parsed.keys:
        digest = entry.digest()
        if digest in ring or entry.name in names:
            raise KeyFileError(f"{where}: key '{entry.name}' is listed twice (name or key)")
        names.add(entry.name)
        ring[digest] = entry.principal()
    return ring


def parse_key_file(text: str, where: str) -> dict[str, Principal]:
    """A key file's principals: YAML with `keys:`, or one full-access key per line."""
    stripped = [line.strip() for line in text.splitlines()]
    if any(line.startswith("keys:") for line in stripped):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            # The YAML error quotes lines, which may hold keys: report the position only.
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise KeyFileError(f"{where} is not valid YAML{at}") from None
        return _scoped(data, where)
    return dict(_full_access(line) for line in stripped if line and not line.startswith("#"))


def load_keys(settings: GatewaySettings) -> KeyRing:
    """api_keys (full access) plus api_keys_file; KeyFileError when the file cannot be used."""
    ring = dict(_full_access(k) for k in settings.api_keys if k)
    if settings.api_keys_file:
        path = Path(settings.api_keys_file).expanduser()
        where = f"RAGRAIL_GATEWAY_API_KEYS_FILE {path}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise KeyFileError(f"cannot read {where}: {exc.strerror}") from None
        from_file = parse_key_file(text, where)
        if not from_file:
            raise KeyFileError(
                f"{where} holds no key; put one key per line, or a YAML 'keys:' list"
            )
        ring.update(from_file)
    return KeyRing(ring)


class Keys:
    """The key ring in use, replaced whole by `reload()` (SIGHUP): a request sees the old ring
    or the new one, never half of each. A file that cannot be used keeps the old ring."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        try:
            self.ring = load_keys(settings)
        except KeyFileError as exc:
            raise SystemExit(str(exc)) from None

    def reload(self) -> bool:
        try:
            ring = load_keys(self.settings)
        except KeyFileError as exc:
            log.error("API keys not reloaded; the previous keys stay", extra={"error": str(exc)})
            return False
        if bool(ring) != bool(self.ring):
            # Open <-> closed needs the other middleware (browser checks) set up again.
            log.error(
                "API keys not reloaded: a reload cannot switch keys on or off; restart instead"
            )
            return False
        self.ring = ring
        log.info("API keys reloaded", extra={"principals": len(ring.by_digest)})
        return True
