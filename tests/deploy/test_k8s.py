"""deploy/k8s: every overlay renders (`kubectl kustomize`) and every object it renders is
valid against the Kubernetes OpenAPI schema, strictly and offline (the JSON schemas shipped
by the PyPI package kubernetes-validate); and the manifests agree with the code: ports,
gRPC probes, the config sections, the images.

kubectl (with its built-in kustomize) is on this project's machines; without it the render
tests skip, except in CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import TypeAdapter

from services.gateway.settings import GatewaySettings
from services.generator.settings import GeneratorSettings
from services.retriever.settings import RetrieverSettings
from shared.settings import CONFIG_ENV, DEFAULT_PORTS, RagrailSettings
from tests.deploy.test_compose import SETTINGS

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.33.0"
RAGRAIL = set(SETTINGS) - {"reranker"}  # the reranker runs only with a trained model


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is not installed: the k8s overlays cannot be rendered")
        pytest.skip("no kubectl to render the kustomize overlays")
    return found


@pytest.fixture(scope="module")
def k8s_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/k8s with a stand-in API keys file (the real one is never in git)."""
    copy = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, copy)
    (copy / "base" / "secrets" / "api_keys").write_text("a-test-key\n", encoding="utf-8")
    return copy


@cache
def render_cached(root: str, overlay: str) -> tuple[dict[str, Any], ...]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(Path(root) / "overlays" / overlay)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"kubectl kustomize overlays/{overlay}:\n{done.stderr}"
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


@pytest.fixture(params=OVERLAYS)
def rendered(request: pytest.FixtureRequest, k8s_copy: Path) -> list[dict[str, Any]]:
    return list(render_cached(str(k8s_copy), request.param))


def objects(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def containers(deployment: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from deployment["spec"]["template"]["spec"]["containers"]


def test_there_are_cpu_and_gpu_overlays() -> None:
    assert {"cpu", "gpu"} <= set(OVERLAYS)


def test_every_object_is_valid_kubernetes(rendered: list[dict[str, Any]]) -> None:
    assert len(rendered) > 10
    for doc in rendered:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{name}: {exc.message} at {list(exc.path)}") from None


def test_the_validator_rejects_what_kubernetes_would() -> None:
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "two", "selector": {}, "template": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_every_service_has_a_deployment_service_and_pdb(rendered: list[dict[str, Any]]) -> None:
    deployments = objects(rendered, "Deployment")
    services = objects(rendered, "Service")
    budgets = objects(rendered, "PodDisruptionBudget")
    for name in RAGRAIL:
        assert name in deployments and name in services, f"{name}: no Deployment or Service"
        assert name in budgets, f"{name}: no PodDisruptionBudget"
        labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert services[name]["spec"]["selector"].items() <= labels.items()
        assert budgets[name]["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_grpc_services_use_native_grpc_probes_on_their_port(
    rendered: list[dict[str, Any]],
) -> None:
    deployments = objects(rendered, "Deployment")
    for name in RAGRAIL - {"gateway"}:
        port = DEFAULT_PORTS[name][0]
        (container,) = containers(deployments[name])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == port, f"{name} {probe}"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {"grpc": port, "metrics": DEFAULT_PORTS[name][1]}
        service_ports = {p["name"]: p for p in objects(rendered, "Service")[name]["spec"]["ports"]}
        assert service_ports["grpc"]["port"] == port
        assert service_ports["grpc"].get("appProtocol") == "grpc"


def test_gateway_probes_and_keys(rendered: list[dict[str, Any]]) -> None:
    (gateway,) = containers(objects(rendered, "Deployment")["gateway"])
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/v1/health"
    assert "tcpSocket" in gateway["livenessProbe"], "a peer outage must not restart the gateway"
    mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
    config = base_config()
    assert Path(config["gateway"]["api_keys_file"]).parent == Path(mounts["api-keys"])
    volumes = objects(rendered, "Deployment")["gateway"]["spec"]["template"]["spec"]["volumes"]
    secret = next(v["secret"]["secretName"] for v in volumes if v["name"] == "api-keys")
    assert secret in objects(rendered, "Secret"), "the API keys Secret is not rendered"


def test_gateway_and_embedder_autoscale(rendered: list[dict[str, Any]]) -> None:
    autoscalers = objects(rendered, "HorizontalPodAutoscaler")
    assert {"gateway", "embedder"} <= set(autoscalers)
    for name in ("gateway", "embedder"):
        spec = autoscalers[name]["spec"]
        assert spec["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
        }
        assert 2 <= spec["minReplicas"] < spec["maxReplicas"]
        deployment = objects(rendered, "Deployment")[name]
        assert "replicas" not in deployment["spec"], f"{name}: the HPA owns replicas"


def test_pods_run_as_non_root_with_the_config(rendered: list[dict[str, Any]]) -> None:
    configmaps = objects(rendered, "ConfigMap")
    for name in RAGRAIL:
        pod = objects(rendered, "Deployment")[name]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        (container,) = pod["containers"]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env[CONFIG_ENV] == "/etc/ragrail/ragrail.yaml"
        configmap = next(v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "config")
        assert configmap in configmaps, f"{name} mounts ConfigMap {configmap}, not rendered"
        assert "ragrail.yaml" in configmaps[configmap]["data"]


def test_images_are_the_compose_images_renamed(rendered: list[dict[str, Any]]) -> None:
    for name in RAGRAIL:
        (container,) = containers(objects(rendered, "Deployment")[name])
        assert container["image"].rsplit("/", 1)[-1].startswith(name), container["image"]
        assert ":local" not in container["image"], "overlays point at a registry"


@cache
def base_config() -> dict[str, Any]:
    return dict(yaml.safe_load((K8S / "base" / "ragrail.yaml").read_text(encoding="utf-8")))


@pytest.mark.parametrize("section", ["gateway", "retriever", "generator"])
def test_config_sections_validate_as_settings(
    section: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)
    config = tmp_path / "ragrail.yaml"
    config.write_text(yaml.safe_dump(base_config()), encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    cls: type[RagrailSettings] = {
        "gateway": GatewaySettings, "retriever": RetrieverSettings, "generator": GeneratorSettings
    }[section]  # fmt: skip
    settings = cls()  # raises on an unknown field or a bad value
    if isinstance(settings, GatewaySettings):
        for peer in ("embedder", "retriever", "generator", "guardrails"):
            host, port = getattr(settings, f"{peer}_url").rsplit(":", 1)
            assert host == peer and int(port) == DEFAULT_PORTS[peer][0], peer
    if isinstance(settings, RetrieverSettings):
        assert settings.milvus_uri.startswith("http://milvus."), "Milvus distributed, by Helm"


def test_gpu_overlay_runs_triton_on_a_gpu(k8s_copy: Path) -> None:
    docs = list(render_cached(str(k8s_copy), "gpu"))
    (triton,) = containers(objects(docs, "Deployment")["triton"])
    assert triton["image"].startswith("nvcr.io/nvidia/tritonserver:")
    assert triton["resources"]["limits"]["nvidia.com/gpu"] == 1
    (generator,) = containers(objects(docs, "Deployment")["generator-triton"])
    env = {e["name"]: e.get("value") for e in generator["env"]}
    assert env["RAGRAIL_GENERATOR_ENGINE"] == "triton"
    assert env["RAGRAIL_GENERATOR_TRITON_URL"] == "triton:8001"
    (gateway,) = containers(objects(docs, "Deployment")["gateway"])
    gateway_env = {e["name"]: e.get("value") for e in gateway["env"]}
    assert gateway_env["RAGRAIL_GATEWAY_GENERATOR_URL"] == "generator-triton:50055"
    cpu = list(render_cached(str(k8s_copy), "cpu"))
    assert "triton" not in objects(cpu, "Deployment")
    for doc in cpu:
        assert "nvidia.com/gpu" not in yaml.safe_dump(doc), f"{doc['kind']} asks for a GPU"


def test_milvus_comes_from_its_helm_chart_not_a_copy() -> None:
    values = yaml.safe_load((K8S / "milvus" / "values.yaml").read_text(encoding="utf-8"))
    assert values["cluster"]["enabled"] is True
    for path in K8S.rglob("*.yaml"):
        if path.parent.name == "milvus":
            continue
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and "image" in yaml.safe_dump(doc):
                assert "milvusdb/milvus" not in yaml.safe_dump(doc), f"{path} copies Milvus"


def test_remote_models_overlay_points_the_model_services_at_model_servers(
    k8s_copy: Path,
) -> None:
    """Generator, embedder and reranker take their RAGRAIL_<SERVICE>_* settings from one
    ConfigMap, every name a field of the service's settings class, and the API key from an
    optional Secret (a server without keys needs none); the gateway reranks through it."""
    docs = list(render_cached(str(k8s_copy), "remote-models"))
    deployments = objects(docs, "Deployment")
    (configmap,) = [
        c for n, c in objects(docs, "ConfigMap").items() if n.startswith("ragrail-model-servers")
    ]
    data: dict[str, str] = configmap["data"]
    assert data["RAGRAIL_GENERATOR_ENGINE"] == "openai"
    assert data["RAGRAIL_EMBEDDER_BACKEND"] == "openai"
    assert data["RAGRAIL_RERANKER_BACKEND"] in ("nim", "rerank")
    for key, value in data.items():
        _, service, field = key.split("_", 2)
        cls = SETTINGS[service.lower()]
        assert field.lower() in cls.model_fields, f"{key}: {cls.__name__} has no such field"
        TypeAdapter(cls.model_fields[field.lower()].annotation).validate_python(value)
    for name in ("generator", "embedder", "reranker"):
        (container,) = containers(deployments[name])
        refs = [e["configMapRef"]["name"] for e in container["envFrom"]]
        assert refs == [configmap["metadata"]["name"]], name
        key = next(e for e in container["env"] if e["name"].endswith("_REMOTE_API_KEY"))
        assert key["name"] == f"RAGRAIL_{name.upper()}_REMOTE_API_KEY"
        assert key["valueFrom"]["secretKeyRef"]["optional"] is True
        assert container["resources"]["requests"]["cpu"] == "250m", "no model to run here"
    (reranker,) = containers(deployments["reranker"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert reranker[probe]["grpc"]["port"] == DEFAULT_PORTS["reranker"][0]
    assert "reranker" in objects(docs, "Service") and "reranker" in objects(
        docs, "PodDisruptionBudget"
    )
    (gateway,) = containers(deployments["gateway"])
    env = {e["name"]: e.get("value") for e in gateway["env"]}
    assert env["RAGRAIL_GATEWAY_RERANKER_URL"] == f"reranker:{DEFAULT_PORTS['reranker'][0]}"
