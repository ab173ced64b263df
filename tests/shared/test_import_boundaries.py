"""The layers hold: bench -> trainers -> services -> shared, with no arrow running back up.

Every .py file is parsed (no import runs) and each import, relative ones resolved, is checked:
- a service imports `shared` and its own package, never another service's
  (services/guardrails/ must not borrow the reranker's model code: shared/models/ has it);
- trainers/, bench/ and ragrail/ import no `services.*` module: what they share with a
  service lives in shared/ (shared/models/ for models, shared/topology.py for ports);
- shared/ imports nothing above it.
`importlib.import_module("...")` calls with a literal name count as imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP = ("services", "trainers", "bench", "ragrail")

# (file, imported module or package) -> why the import stands. Keep this short: an entry is
# a hole in a wall, to be closed when the code it needs finds a shared home.
ALLOWED: dict[tuple[str, str], str] = {}


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if not any(part.startswith(".") or part == "__pycache__" for part in path.parts):
            yield path


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the file."""
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    yield from parse_imports(path.read_text(encoding="utf-8"), package)


def parse_imports(source: str, package: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in `source`, a module of `package`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            yield node.lineno, name
            # `from services import reranker` imports the subpackage.
            for alias in node.names:
                yield node.lineno, f"{name}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violation(file: str, name: str) -> str:
    """Why `file` may not import `name` ("" when it may)."""
    layer = file.split("/", 1)[0]
    if layer == "services":
        own = "services." + file.split("/")[1]
        if under(name, "services") and name != "services" and not under(name, own):
            return f"a service imports another service ({name}); move what both need to shared/"
        if any(under(name, top) for top in ("trainers", "bench", "ragrail")):
            return f"a service imports {name}, a layer above it"
    elif layer in ("trainers", "bench", "ragrail"):
        if under(name, "services") and name != "services":
            allowed = any(f == file and under(name, m) for f, m in ALLOWED)
            if not allowed:
                return f"{layer}/ imports service internals ({name}); use shared/ instead"
        if layer == "trainers" and under(name, "bench"):
            return f"trainers/ imports {name}, a layer above it"
    elif layer == "shared" and any(under(name, top) for top in TOP):
        return f"shared/ imports {name}, a layer above it"
    return ""


def test_no_import_crosses_a_boundary() -> None:
    problems: dict[str, str] = {}  # file:line -> the first reason found there
    for top in ("shared", *TOP):
        for path in python_files(REPO / top):
            file = path.relative_to(REPO).as_posix()
            for line, name in imports(path):
                why = violation(file, name)
                if why:
                    problems.setdefault(f"{file}:{line}", why)
    assert not problems, "import boundaries crossed:\n" + "\n".join(
        f"{where}: {why}" for where, why in sorted(problems.items())
    )


def test_allowed_exceptions_are_still_needed() -> None:
    """An allow-list entry whose import is gone is removed, so the list only shrinks."""
    for file, module in ALLOWED:
        found = [name for _, name in imports(REPO / file) if under(name, module)]
        assert found, f"{file} no longer imports {module}; drop it from ALLOWED"


def test_the_checker_sees_each_kind_of_import() -> None:
    cases = {
        "services/gateway/x.py": ("from services.reranker.backends import load_backend", True),
        "services/gateway/y.py": ("import services.gateway.schemas", False),
        "services/gateway/z.py": ("from services import embedder", True),
        "services/gateway/r.py": ("from ..reranker import server", True),
        "services/gateway/s.py": ("from . import schemas", False),
        "trainers/q.py": ("def f():\n    from services.embedder import settings", True),
        "bench/b.py": ("import importlib\nimportlib.import_module('services.reranker')", True),
        "bench/trainers.py": ("from services.generator.backends import llamacpp", True),
        "shared/s.py": ("from trainers.data import ndcg_at", True),
        "ragrail/r.py": ("from shared.models import registry", False),
    }
    for file, (source, bad) in cases.items():
        package = file.removesuffix(".py").replace("/", ".").rpartition(".")[0]
        names = [name for _, name in parse_imports(source, package)]
        assert any(violation(file, n) for n in names) is bad, (file, names)
