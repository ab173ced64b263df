"""The published models (published/, trainers/publish.py): what ships in the repository is what
its record says, names how it was made, is what services find when nothing is trained, and
the recorded recipe still runs (on a small slice of its data, then published and loaded)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from shared.models import registry
from shared.models.guard import GUARD_FILE, GuardModel, newest_guard_model
from shared.models.reader import Reader
from tests.conftest import REPO
from trainers import publish

ROLES = ("guardrails", "reader")


def published(role: str) -> tuple[str, dict]:
    models = publish.read_record()["models"]
    refs = sorted(r for r, e in models.items() if e["role"] == role)
    assert refs, f"no published {role} model in {publish.RECORD}"
    return refs[-1], models[refs[-1]]


def test_published_files_match_their_record() -> None:
    assert publish.check() == []
    assert publish.main(["--check"]) == 0


@pytest.mark.parametrize("role", ROLES)
def test_record_names_the_command_seed_and_data(role: str) -> None:
    ref, entry = published(role)
    command = shlex.split(entry["command"])
    module = {"guardrails": "trainers.guardrails", "reader": "trainers.reader"}[role]
    assert command[:3] == ["python", "-m", module], entry["command"]
    assert entry["seed"] is not None and f"--seed {entry['seed']}" in entry["command"]
    assert entry["data"]["sha256_of"], "the data a model was trained on is hashed"
    assert entry["recipe_commit"], "the commit of the recipe is recorded"
    files = entry["files"]
    assert "manifest.json" in files and "metrics.json" in files and "model_int8.onnx" in files
    # Only what services load: no FP32 graph, no PyTorch weights.
    assert not {"model.onnx", "model.safetensors", "checkpoint.pt"} & set(files)
    total = sum(f["bytes"] for f in files.values())
    assert total < 130e6, f"{ref}: {total / 1e6:.0f} MB published"


def test_a_changed_file_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "published"
    ref, _ = published("reader")
    source = publish.PUBLISHED_ROOT / ref
    entry = publish.publish(source, root / "manifest.json", root)
    assert entry["path"] == f"published/{ref}"
    assert publish.check(root / "manifest.json", root) == []
    (root / ref / "metrics.json").write_text("{}\n")
    (root / ref / "stray.bin").write_bytes(b"x")
    problems = publish.check(root / "manifest.json", root)
    assert any("metrics.json differs" in p for p in problems), problems
    assert any("stray.bin is not in the record" in p for p in problems), problems


def test_a_new_version_is_published_over_the_first_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One version of a model ships, written over the directory the model was first published
    in: git stores it as a delta against the files it replaces."""
    root = tmp_path / "published"
    ref, _ = published("reader")
    source = publish.PUBLISHED_ROOT / ref
    old = tmp_path / "trained" / "reader-x" / "v1"
    new = tmp_path / "trained" / "reader-x" / "v2"
    for target, version in ((old, "v1"), (new, "v2")):
        publish.shutil.copytree(source, target)
        manifest = json.loads((target / "manifest.json").read_text())
        (target / "manifest.json").write_text(json.dumps({**manifest, "version": version}))
    (new / "metrics.json").write_text('{"new": true}\n')
    kept = publish.publish(source, root / "manifest.json", root)  # another model: kept
    publish.publish(old, root / "manifest.json", root)
    entry = publish.publish(new, root / "manifest.json", root)
    assert entry["path"] == "published/reader/reader-x/v1" and entry["version"] == "v2"
    assert sorted(p.name for p in (root / "reader" / "reader-x").iterdir()) == ["v1"]
    assert (root / "reader" / "reader-x" / "v1" / "metrics.json").read_text() == '{"new": true}\n'
    models = publish.read_record(root / "manifest.json")["models"]
    assert set(models) == {"reader/reader-x/v1", kept["path"].removeprefix("published/")}
    assert publish.check(root / "manifest.json", root) == []
    # The services see the manifest's version, in the first directory.
    monkeypatch.setenv("RAGRAIL_MODELS_DIR", str(tmp_path / "models"))  # nothing trained
    monkeypatch.setenv("RAGRAIL_PUBLISHED_DIR", str(root))
    found = registry.resolve_ref("reader/reader-x")
    assert (found.version, found.path) == ("v2", root / "reader" / "reader-x" / "v1")


def test_services_fall_back_on_the_published_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRAIL_MODELS_DIR", str(tmp_path / "models"))  # nothing trained
    monkeypatch.delenv("RAGRAIL_PUBLISHED_DIR", raising=False)
    guard_ref, _ = published("guardrails")
    reader_ref, _ = published("reader")
    assert newest_guard_model() == publish.PUBLISHED_ROOT / guard_ref
    assert registry.entries("reader")[-1].path == publish.PUBLISHED_ROOT / reader_ref
    # A model the user trained comes first.
    mine = tmp_path / "models" / "guardrails" / "mine" / "v1"
    mine.mkdir(parents=True)
    (mine / GUARD_FILE).write_text("{}")
    (mine / "manifest.json").write_text(json.dumps({"created_at": "2020-01-01T00:00:00+00:00"}))
    assert newest_guard_model() == mine
    # Turned off: nothing found, as before models were published.
    monkeypatch.setenv("RAGRAIL_PUBLISHED_DIR", "none")
    assert registry.entries("reader") == []
    mine.joinpath("manifest.json").unlink()
    assert newest_guard_model() is None


# Each published recipe, retrained on a slice of its own data: the recorded command with
# flags that shrink it (the last value of a repeated flag wins), then published and loaded.
SLICES = {
    "guardrails": ["--tiny", "--epochs", "1", "--max-length", "48", "--threads", "2"],
    "reader": [
        "--max-examples", "24", "--epochs", "1", "--max-length", "96", "--batch-size", "8",
        "--eval-max", "4", "--eval-negatives", "4", "--covidqa-test", "", "--skip-torch-eval",
        "--threads", "2",
    ],
}  # fmt: skip


@pytest.mark.parametrize("role", ROLES)
def test_the_published_recipe_retrains_on_a_slice(role: str, tmp_path: Path) -> None:
    import importlib

    _, entry = published(role)
    args = shlex.split(entry["command"])[3:]
    if "--out" in args:
        at = args.index("--out")
        del args[at : at + 2]
    args = [a for a in args if a != "--evaluate"]
    for option in ("--in-domain", "--benign-docs"):  # ../shared/data, where it is present
        if option in args:
            at = args.index(option)
            path = REPO / args[at + 1]  # recorded relative to the repository
            args[at : at + 2] = [option, str(path)] if path.exists() else []
    out = tmp_path / "trained" / "slice" / "v1"
    module = {"guardrails": "trainers.guardrails.guard", "reader": "trainers.reader.train"}[role]
    assert importlib.import_module(module).main([*args, *SLICES[role], "--out", str(out)]) == 0
    root = tmp_path / "published"
    record = publish.publish(out, root / "manifest.json", root)
    assert publish.check(root / "manifest.json", root) == []
    assert record["command"].startswith(f"python -m {module.rsplit('.', 1)[0]}")
    target = root / role / "slice" / "v1"
    if role == "guardrails":
        scores = GuardModel(target).score(["How do I bake bread?"])
        assert scores.logits.shape[0] == 1
    else:
        text = "The waggle dance tells other bees the direction of food."
        answer = Reader.load(target).read("What does the waggle dance tell?", [text])[0]
        assert 0 <= answer.start <= answer.end <= len(text)


def test_published_is_in_every_image_that_serves_it() -> None:
    dockerfile = (REPO / "deploy" / "docker" / "Dockerfile").read_text()
    assert "COPY published/guardrails/ /app/published/guardrails/" in dockerfile
    assert "COPY published/reader/ /app/published/reader/" in dockerfile
    ignored = (REPO / ".dockerignore").read_text().split()
    assert "published" not in ignored
