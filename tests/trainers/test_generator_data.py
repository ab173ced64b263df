"""trainers.generator.data on the fixtures, and shared.models.registry: the grounding set
never holds a test query, splits by claim, cites its source; the registry resolves names and
versions and the generator's settings load a version by name."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from services.generator.model_files import from_registry
from services.generator.settings import GeneratorSettings
from shared.errors import FailedPrecondition
from shared.models import registry
from tests.trainers.generator_tiny import FIXTURES
from trainers.generator import data as grounding

TINY_BEIR = FIXTURES / "beir_tiny"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grounding")
    args = ["--scifact", str(TINY_BEIR), "--injections", str(FIXTURES / "injections")]
    assert grounding.main([*args, "--out", str(out), "--heldout", "0.3"]) == 0
    return out


def rows(path: Path) -> list[dict]:
    return grounding.read_jsonl(path)


def test_only_train_claims_and_a_split_by_claim(built: Path) -> None:
    queries = {r["_id"]: r["text"] for r in grounding.read_jsonl(TINY_BEIR / "queries.jsonl")}
    test_ids = {
        line.split("\t")[0] for line in (TINY_BEIR / "qrels/test.tsv").read_text().splitlines()[1:]
    }
    train_ids = {
        line.split("\t")[0] for line in (TINY_BEIR / "qrels/train.tsv").read_text().splitlines()[1:]
    }
    assert test_ids - train_ids  # the fixture has test-only claims: they must not appear
    train, heldout = rows(built / "train.jsonl"), rows(built / "heldout.jsonl")
    assert train and heldout
    claims = {"train": set(), "heldout": set()}
    for split, items in (("train", train), ("heldout", heldout)):
        for row in items:
            kind, _, qid = row["id"].partition("-")
            if kind in ("grounded", "unanswerable"):
                assert qid in train_ids and qid not in test_ids - train_ids
                claims[split].add(queries[qid])
    assert not claims["train"] & claims["heldout"]
    kinds = {r["kind"] for r in train + heldout}
    assert kinds == {"grounded", "unanswerable", "injection"}


def test_rows_cite_their_source_or_decline(built: Path) -> None:
    for row in rows(built / "train.jsonl") + rows(built / "heldout.jsonl"):
        system, user, answer = row["messages"]
        assert system["content"] == grounding.SYSTEM and user["content"].startswith(
            "Sources:\n[1] "
        )
        if row["kind"] == "grounded":
            assert answer["content"].endswith("[1]") and row["evidence"] in user["content"]
            assert grounding.token_f1(answer["content"], row["evidence"]) > 0.8
        else:
            assert grounding.is_refusal(answer["content"])
    prefs = rows(built / "dpo_train.jsonl")
    assert prefs and all(p["chosen"] != p["rejected"] and len(p["prompt"]) == 2 for p in prefs)
    manifest = json.loads((built / "manifest.json").read_text())
    assert len(manifest["sha256"]) == 64 and manifest["counts"]["train"]["grounded"] > 0


def test_token_f1_and_refusals() -> None:
    assert grounding.token_f1("Bees dance [1]", "bees dance") == pytest.approx(0.8)
    assert grounding.token_f1("", "bees") == 0.0
    assert grounding.token_f1("ants", "bees") == 0.0
    assert grounding.is_refusal("I can't follow instructions that try to change my rules.")
    assert not grounding.is_refusal("According to [1]: bees dance.")


def register(root: Path, name: str, version: str, fmt: str, base: str = "", **extra: str) -> Path:
    path = registry.version_dir("generator", name, version, root)
    path.mkdir(parents=True)
    registry.write_manifest(
        path, registry.manifest("generator", name, version, base=base, method="t", fmt=fmt, **extra)
    )
    time.sleep(1.1)  # created_at has whole seconds: versions must differ in time
    return path


def test_registry_resolves_versions_and_the_generator_loads_them(tmp_path: Path) -> None:
    base = register(tmp_path, "m", "base", "hf")
    lora = register(tmp_path, "m", "v2", "peft-lora", base="generator/m/base")
    gguf = register(tmp_path, "m-gguf", "q4", "gguf", file="model-q4_k_m.gguf")
    assert registry.resolve("generator", "m", root=tmp_path).path == lora  # newest
    assert registry.resolve("generator", "m", "base", tmp_path).path == base
    assert registry.resolve_ref("generator/m-gguf", tmp_path).format == "gguf"
    assert [e.ref for e in registry.listing("generator", tmp_path)] == [
        "generator/m/base", "generator/m/v2", "generator/m-gguf/q4"
    ]  # fmt: skip
    with pytest.raises(registry.RegistryError, match=r"versions: \['base', 'v2'\]"):
        registry.resolve("generator", "m", "v9", tmp_path)
    with pytest.raises(registry.RegistryError, match="generator models there: \\['m', 'm-gguf'\\]"):
        registry.resolve("generator", "nope", root=tmp_path)

    def settings(engine: str, ref: str) -> GeneratorSettings:
        return from_registry(
            GeneratorSettings(engine=engine, registry_model=ref, models_dir=str(tmp_path))
        )

    torch_lora = settings("torch", "m")
    assert (torch_lora.model, torch_lora.adapter) == (str(base), str(lora))
    assert settings("llamacpp", "m-gguf/q4").model == str(gguf / "model-q4_k_m.gguf")
    with pytest.raises(FailedPrecondition, match="only the torch engine loads"):
        settings("llamacpp", "m/v2")
    with pytest.raises(FailedPrecondition, match="llamacpp loads GGUF"):
        settings("llamacpp", "m/base")
    with pytest.raises(ValueError, match="registry_model and model"):
        GeneratorSettings(engine="torch", registry_model="m", model="/x")


def test_ragrail_train_and_export_commands(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragrail.cli import app

    runner = CliRunner()
    args = ["--scifact", str(TINY_BEIR), "--injections", str(FIXTURES / "injections")]
    result = runner.invoke(app, ["train", "generator-data", *args, "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d" / "train.jsonl").is_file()
    result = runner.invoke(app, ["export", "--models-dir", str(tmp_path), "gguf", "none/v1"])
    assert result.exit_code != 0
    assert "no model generator/none" in str(result.exception)
