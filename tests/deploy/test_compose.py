"""Static checks of compose.yaml, the service Dockerfiles and .dockerignore (no Docker needed).

They hold the deployment files to the code: every RAGRAIL_* variable names a real setting,
ports and URLs agree with what the services listen on, every container has a healthcheck
that depends_on can wait for, each image carries the code and the one extra it needs, and
each service README's settings table matches its settings class.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragrail.launcher import SERVICES as LAUNCHER_SERVICES
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.generator.settings import GeneratorSettings
from services.guardrails.settings import GuardrailsSettings
from services.reranker.settings import RerankerSettings
from services.retriever.settings import RetrieverSettings
from shared.settings import CONFIG_ENV, DEFAULT_PORTS, RagrailSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose.yaml"

# compose service name -> the settings class its container reads.
SETTINGS: dict[str, type[RagrailSettings]] = {
    "embedder": EmbedderSettings,
    "reranker": RerankerSettings,
    "retriever": RetrieverSettings,
    "gateway": GatewaySettings,
    "generator": GeneratorSettings,
    "guardrails": GuardrailsSettings,
}
# compose services that run a service's image under another name with other settings
# (generator-triton: the generator answering through Triton, gpu profile) -> that service.
VARIANTS: dict[str, str] = {"generator-triton": "generator"}
FIRST_PARTY = ("shared", "services", "ragrail", "trainers")
URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?P<host>[A-Za-z0-9_.-]+):(?P<port>\d+)(?:/\S*)?$")
MODULE_STRING = re.compile(rf"^(?P<module>(?:{'|'.join(FIRST_PARTY)})(?:\.\w+)+)(?::\w+)?$")


# -- compose ------------------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        "compose.yaml needs a top-level `services:` mapping"
    )
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def kind(name: str) -> str:
    """The ragrail service (SETTINGS key) a compose service runs."""
    return VARIANTS.get(name, name)


def built_services() -> list[str]:
    return [name for name, svc in services().items() if "build" in svc]


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {p[0]: p[1] if len(p) > 1 else "" for p in pairs}
    return {key: "" if value is None else str(value) for key, value in env.items()}


def container_port(spec: Any) -> int:
    """The container side of a `ports:` entry ("8080", "80:8080", "ip:80:8080/tcp", long form)."""
    if isinstance(spec, dict):
        return int(spec["target"])
    return int(str(spec).split("/")[0].rsplit(":", 1)[-1])


def dockerfile_path(name: str) -> Path:
    build = services()[name]["build"]
    if isinstance(build, str):
        build = {"context": build}
    context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
    return context / build.get("dockerfile", "Dockerfile")


# -- Dockerfiles --------------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@cache
def parse_dockerfile(path: Path) -> tuple[Stage, ...]:
    """Stages of a Dockerfile: continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        text = " ".join(pending)
        pending = []
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        else:
            assert stages, f"{path}:{start}: {keyword} before any FROM"
            stages[-1].instructions.append(Instruction(keyword, args.strip(), start))
    assert stages, f"{path}: no FROM instruction"
    return tuple(stages)


def final_stage(name: str) -> Stage:
    return parse_dockerfile(dockerfile_path(name))[-1]


def env_instructions(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage.all("ENV"):
        words = shlex.split(instruction.args)
        if words and "=" not in words[0]:  # legacy `ENV KEY value`
            env[words[0]] = " ".join(words[1:])
            continue
        for word in words:
            key, _, value = word.partition("=")
            env[key] = value
    return env


def exposed_ports(stage: Stage) -> set[int]:
    return {int(w.split("/")[0]) for i in stage.all("EXPOSE") for w in i.args.split()}


def copied_sources(stage: Stage) -> list[str]:
    """Sources of the stage's COPY/ADD from the build context (not --from another stage)."""
    sources: list[str] = []
    for instruction in stage.all("COPY") + stage.all("ADD"):
        words = shlex.split(instruction.args)
        if any(w.startswith("--from") for w in words):
            continue
        paths = [w for w in words if not w.startswith("--")]
        sources += [p.rstrip("/") for p in paths[:-1]]
    return sources


# -- resolved settings --------------------------------------------------------------------


def container_env(name: str) -> dict[str, str]:
    """What the container's environment holds: the image's ENV, then compose's environment."""
    return {**env_instructions(final_stage(name)), **environment(services()[name])}


def resolved_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> RagrailSettings:
    """The settings the service would run with in its container, read like it reads them."""
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)
    for key, value in container_env(name).items():
        if key.startswith("RAGRAIL_"):
            monkeypatch.setenv(key, value)
    return SETTINGS[kind(name)]()


def listening_ports(name: str, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    svc = services()[name]
    if kind(name) in SETTINGS and "build" in svc:
        settings = resolved_settings(name, monkeypatch)
        ports = {getattr(settings, f, 0) for f in ("port", "metrics_port")}
        return {p for p in ports if p > 0}
    ports = {int(str(p).split("/")[0]) for p in svc.get("expose") or []}
    return ports | {container_port(p) for p in svc.get("ports") or []}


# -- module imports -----------------------------------------------------------------------


def module_file(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def first_party_imports(path: Path) -> set[str]:
    """First-party modules a file imports, plus module names written as strings
    ("services.x.backends.milvus:MilvusStore", for importlib)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".strip(".")
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_STRING.match(node.value)
            if match and module_file(match["module"]) is not None:  # not "ragrail.v1.Embedder"
                found.add(match["module"])
    modules = {m for m in found if m.split(".")[0] in FIRST_PARTY}
    # Importing a.b.c runs a/__init__.py and a/b/__init__.py too.
    return modules | {m.rsplit(".", n)[0] for m in modules for n in range(1, m.count(".") + 1)}


def import_closure(entry: str) -> set[Path]:
    todo, seen = [entry], set()
    files: set[Path] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_file(module)
        if path is not None:
            files.add(path)
            todo += sorted(first_party_imports(path))
    return files


# -- tests --------------------------------------------------------------------------------


def test_every_built_service_is_a_known_ragrail_service() -> None:
    for name in built_services():
        assert kind(name) in SETTINGS, (
            f"compose service '{name}' is built from this repository but has no settings class "
            "in tests/deploy/test_compose.py SETTINGS (or VARIANTS entry); add it"
        )
    built = {kind(name) for name in built_services()}
    assert set(SETTINGS) <= built, (
        f"services missing from compose.yaml: {sorted(set(SETTINGS) - built)}"
    )


def test_launcher_and_compose_run_the_same_services() -> None:
    launched = {spec.name: spec.settings_cls for spec in LAUNCHER_SERVICES}
    assert launched == SETTINGS, (
        f"ragrail.launcher.SERVICES runs {sorted(launched)}, compose builds {sorted(SETTINGS)}; "
        "a service belongs in both (see docs/adding-a-service.md)"
    )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_dockerfile_exists_at_build_context(name: str) -> None:
    path = dockerfile_path(name)
    assert path.is_file(), f"compose service '{name}': no Dockerfile at {path}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_images_are_pinned_to_this_python(name: str) -> None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for stage in parse_dockerfile(dockerfile_path(name)):
        assert re.fullmatch(rf"python:{re.escape(version)}\.\d+-slim-bookworm", stage.image), (
            f"{name}: base image '{stage.image}' is not python:{version}.<patch>-slim-bookworm "
            f"(the Python the tests run on is {sys.version.split()[0]})"
        )
    assert len(parse_dockerfile(dockerfile_path(name))) >= 2, f"{name}: expected a builder stage"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_final_stage_exposes_the_default_ports(name: str) -> None:
    cls = SETTINGS[name]
    defaults = {
        cls.model_fields[f].default for f in ("port", "metrics_port") if f in cls.model_fields
    }
    defaults = {p for p in defaults if p > 0}
    assert defaults == set(DEFAULT_PORTS[name]), (
        f"{name}: settings default to ports {sorted(defaults)}, DEFAULT_PORTS says "
        f"{sorted(set(DEFAULT_PORTS[name]))}"
    )
    missing = defaults - exposed_ports(final_stage(name))
    assert not missing, f"{dockerfile_path(name)}: final stage does not EXPOSE {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_final_stage_runs_as_non_root(name: str) -> None:
    users = final_stage(name).all("USER")
    assert users, f"{name}: the final stage has no USER; the service would run as root"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0"), f"{name}: the final stage runs as {user}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_dockerfile_env_names_real_settings(name: str) -> None:
    check_ragrail_vars(name, env_instructions(final_stage(name)), f"{dockerfile_path(name)} ENV")


@pytest.mark.parametrize("name", sorted(services()))
def test_compose_env_names_real_settings(name: str) -> None:
    check_ragrail_vars(name, environment(services()[name]), "compose.yaml environment")


def check_ragrail_vars(name: str, env: dict[str, str], where: str) -> None:
    service = kind(name)
    for var in env:
        if not var.startswith("RAGRAIL_") or var == CONFIG_ENV:
            continue
        assert service in SETTINGS, (
            f"{where} of '{name}' sets {var}, but '{name}' is no ragrail service"
        )
        cls = SETTINGS[service]
        prefix = f"RAGRAIL_{service.upper()}_"
        assert var.startswith(prefix), (
            f"{where} of '{name}' sets {var}; {cls.__name__} reads only {prefix}*"
        )
        setting = var.removeprefix(prefix).lower()
        assert setting in cls.model_fields, (
            f"{where} of '{name}' sets {var}, but {cls.__name__} has no field "
            f"'{setting}'; known: {sorted(cls.model_fields)}"
        )


@pytest.mark.parametrize("name", sorted(built_services()))
def test_container_settings_validate_and_bind_all_interfaces(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = resolved_settings(name, monkeypatch)  # raises ValidationError naming the field
    host = getattr(settings, "host", None)
    assert host in ("0.0.0.0", "::"), (
        f"{name}: in its container it would bind {host}; set "
        f"RAGRAIL_{kind(name).upper()}_HOST=0.0.0.0 so other containers can reach it"
    )


@pytest.mark.parametrize("name", sorted(services()))
def test_every_container_has_a_healthcheck(name: str) -> None:
    check = services()[name].get("healthcheck") or {}
    assert not check.get("disable"), f"compose service '{name}' disables its healthcheck"
    if check.get("test"):
        return
    assert kind(name) in SETTINGS and "build" in services()[name], (
        f"compose service '{name}' has no healthcheck (and no Dockerfile HEALTHCHECK to inherit)"
    )
    assert final_stage(name).all("HEALTHCHECK"), (
        f"compose service '{name}': neither compose.yaml nor {dockerfile_path(name)} "
        "defines a healthcheck"
    )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_dockerfile_healthcheck_is_runnable_python(name: str) -> None:
    checks = final_stage(name).all("HEALTHCHECK")
    assert checks, f"{dockerfile_path(name)}: no HEALTHCHECK in the final stage"
    args = checks[-1].args
    assert " CMD " in f" {args} ", f"{name}: HEALTHCHECK has no CMD: {args}"
    command = json.loads(args.split("CMD", 1)[1])
    assert command[:2] == ["python", "-c"], f"{name}: HEALTHCHECK should run `python -c`"
    code = command[2]
    compile(code, f"{name} HEALTHCHECK", "exec")
    assert f"services.{name}.settings" in code, (
        f"{name}: HEALTHCHECK should read the port from {SETTINGS[name].__name__}"
    )
    probe = "/v1/health" if name == "gateway" else "grpc_health"
    assert probe in code, f"{name}: HEALTHCHECK should probe {probe}"


@pytest.mark.parametrize("name", sorted(services()))
def test_depends_on_waits_for_healthy_services(name: str) -> None:
    depends = services()[name].get("depends_on") or {}
    assert isinstance(depends, dict), (
        f"compose service '{name}': depends_on must be a mapping with condition: service_healthy"
    )
    for other, spec in depends.items():
        assert other in services(), f"compose service '{name}' depends on unknown '{other}'"
        condition = (spec or {}).get("condition")
        assert condition == "service_healthy", (
            f"compose service '{name}' depends on '{other}' with condition {condition!r}, "
            "not service_healthy"
        )


@pytest.mark.parametrize("name", sorted(services()))
def test_urls_in_env_point_at_listening_services(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = container_env(name) if "build" in services()[name] else environment(services()[name])
    for var, value in env.items():
        match = URL.match(value)
        if not match:
            continue
        host, port = match["host"], int(match["port"])
        assert host in services(), (
            f"compose service '{name}': {var}={value} names host '{host}', no compose service"
        )
        ports = listening_ports(host, monkeypatch)
        assert port in ports, (
            f"compose service '{name}': {var}={value}, but '{host}' listens on {sorted(ports)}"
        )


@pytest.mark.parametrize("name", sorted(built_services()))
def test_compose_expose_matches_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    exposed = {int(str(p).split("/")[0]) for p in services()[name].get("expose") or []}
    assert exposed <= listening_ports(name, monkeypatch), (
        f"compose service '{name}' exposes {sorted(exposed)}; its settings listen on "
        f"{sorted(listening_ports(name, monkeypatch))}"
    )


def test_gateway_is_published_on_its_default_port(monkeypatch: pytest.MonkeyPatch) -> None:
    ports = services()["gateway"].get("ports") or []
    assert ports, "compose service 'gateway' publishes no port"
    default = GatewaySettings.model_fields["port"].default
    running = resolved_settings("gateway", monkeypatch).port  # type: ignore[attr-defined]
    for spec in ports:
        assert container_port(spec) == running == default, (
            f"compose service 'gateway' publishes container port {container_port(spec)}; "
            f"the gateway listens on {running} (GatewaySettings default {default})"
        )


@cache
def optional_dependencies() -> dict[str, list[str]]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["project"]["optional-dependencies"]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_installs_only_its_own_extra(name: str) -> None:
    extras: set[str] = set()
    for stage in parse_dockerfile(dockerfile_path(name)):
        for run in stage.all("RUN"):
            for group in re.findall(r"\.\[([\w,\s-]+)\]", run.args):
                extras |= {e.strip() for e in group.split(",")}
    for extra in extras:
        assert extra in optional_dependencies(), (
            f"{dockerfile_path(name)} installs extra '{extra}', which pyproject.toml lacks"
        )
    assert extras == {name}, f"{name}: image installs extras {sorted(extras)}, expected ['{name}']"


def pinned_versions() -> dict[str, list[tuple[str, str]]]:
    """package -> [(version, where)] from the extras' == pins and constraints.txt."""
    pins: dict[str, list[tuple[str, str]]] = {}
    lines = [(r, "pyproject.toml") for group in optional_dependencies().values() for r in group]
    constraints = REPO / "constraints.txt"
    if constraints.is_file():
        text = constraints.read_text(encoding="utf-8")
        lines += [(line.split("#")[0].strip(), "constraints.txt") for line in text.splitlines()]
    for requirement, where in lines:
        package, _, version = requirement.partition("==")
        if version:
            name = re.sub(r"[-_.]+", "-", package.split("[")[0]).lower()
            pins.setdefault(name, []).append((version.strip(), where))
    return pins


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_pins_in_dockerfile_match_the_project(name: str) -> None:
    """A package the Dockerfile installs by itself (torch from the CPU index) keeps the
    version the project pins, or the extra's install would replace it or fail."""
    pins = pinned_versions()
    for stage in parse_dockerfile(dockerfile_path(name)):
        for run in stage.all("RUN"):
            for package, version in re.findall(r"([A-Za-z0-9_.-]+)==([\w.+-]+)", run.args):
                key = re.sub(r"[-_.]+", "-", package).lower()
                for pinned, where in pins.get(key, []):
                    assert version == pinned, (
                        f"{dockerfile_path(name)} installs {package}=={version}; "
                        f"{where} pins {package}=={pinned}"
                    )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_repository_install_uses_constraints(name: str) -> None:
    if not (REPO / "constraints.txt").is_file():
        pytest.skip("no constraints.txt")
    for stage in parse_dockerfile(dockerfile_path(name)):
        for run in stage.all("RUN"):
            if re.search(r"pip install .*\.\[", run.args):
                assert "-c constraints.txt" in run.args, (
                    f"{dockerfile_path(name)}:{run.line}: install the repository with "
                    "-c constraints.txt, as the Makefile does, so every image gets the pinned "
                    "versions of what the extras pull in"
                )
                assert "constraints.txt" in copied_sources(stage), (
                    f"{dockerfile_path(name)}: the {stage.name or 'build'} stage uses "
                    "constraints.txt without copying it"
                )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_copies_the_code_the_service_imports(name: str) -> None:
    sources = copied_sources(final_stage(name))
    assert "pyproject.toml" in sources, f"{name}: the final stage should copy pyproject.toml"
    for top in ("shared", "services", "ragrail"):
        assert top in sources, f"{name}: the final stage does not COPY {top}/"
    files = import_closure(f"services.{name}.__main__")
    assert REPO / "services" / name / "__main__.py" in files
    for path in sorted(files):
        relative = path.relative_to(REPO).as_posix()
        assert any(relative == s or relative.startswith(f"{s}/") for s in sources), (
            f"{name}: imports {relative}, but {dockerfile_path(name)} does not copy it into the "
            f"final stage (copies {sources})"
        )


def test_dockerignore_keeps_what_images_copy_and_drops_the_rest() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for name in SETTINGS:
        for stage in parse_dockerfile(dockerfile_path(name)):
            for source in copied_sources(stage):
                hit = [p for p in patterns if fnmatch.fnmatch(source, p.rstrip("/"))]
                assert not hit, f".dockerignore pattern {hit} drops {source}, which {name} copies"
    for required in (".venv", ".git", "data", "tests", "bench", "models", "**/__pycache__"):
        assert required in patterns, f".dockerignore should exclude {required}"


def readme_rows(name: str) -> dict[str, str]:
    """`RAGRAIL_*` variable -> default cell of the settings table in services/<name>/README.md."""
    readme = REPO / "services" / name / "README.md"
    assert readme.is_file(), f"services/{name}/README.md is missing"
    rows: dict[str, str] = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*`(RAGRAIL_[A-Z0-9_]+)`[^|]*\|\s*([^|]*?)\s*\|", line)
        if match:
            rows[match[1]] = match[2].strip("`")
    return rows


def shown_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "empty"
    return str(value)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_readme_lists_every_setting_with_its_default(name: str) -> None:
    cls = SETTINGS[name]
    prefix = f"RAGRAIL_{name.upper()}_"
    rows = readme_rows(name)
    expected = {f"{prefix}{field.upper()}": info for field, info in cls.model_fields.items()}
    missing, unknown = sorted(set(expected) - set(rows)), sorted(set(rows) - set(expected))
    assert not missing, f"services/{name}/README.md does not list {missing}"
    assert not unknown, f"services/{name}/README.md lists {unknown}, not in {cls.__name__}"
    for var, info in expected.items():
        default = info.get_default(call_default_factory=True)
        assert rows[var] == shown_default(default), (
            f"services/{name}/README.md gives {var} the default '{rows[var]}'; "
            f"{cls.__name__} has {default!r}"
        )


def test_compose_gateway_requires_api_keys_from_a_secret() -> None:
    gateway = services()["gateway"]
    env = gateway["environment"]
    assert gateway["secrets"] == ["api_keys"]
    assert env["RAGRAIL_GATEWAY_API_KEYS_FILE"] == "/run/secrets/api_keys"
    assert compose()["secrets"]["api_keys"]["file"] == "./deploy/api_keys"
    assert "deploy/api_keys" in (REPO / ".gitignore").read_text()  # keys stay out of git
    assert int(env["RAGRAIL_GATEWAY_RATE_LIMIT_RPM"]) > 0
    # chat needs the generator: the gateway waits for it like for the other services
    assert env["RAGRAIL_GATEWAY_GENERATOR_URL"] == "generator:50055"
    assert gateway["depends_on"]["generator"]["condition"] == "service_healthy"
