"""A rail is one folder (services/guardrails/rails/<rail>/) plus one line in RAILS: every folder
is registered, its flows.co defines the flows its spec declares and executes the actions the
direct engine calls, its settings are its config.yml section, and a configuration that
defines a rail's flow itself (an edited copy, or the rails.co older versions shipped) keeps
loading. No models: these run in process in a second."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from services.guardrails.rail_config import RagrailRails, add_rail_flows, ragrail_section
from services.guardrails.rails import RAILS, flows_by_name
from services.guardrails.rails.base import Flow, Rail
from tests.guardrails.conftest import PACKAGED_CONFIG

RAILS_DIR = PACKAGED_CONFIG.parent / "rails"
# The packaged config's flows no ragrail rail defines: NeMo Guardrails' library.
NEMO_FLOWS = {"injection detection", "self check input", "self check output"}

os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")


def ragrail_rails() -> list[Rail]:
    return [r for r in RAILS if not r.from_nemo]


def test_every_rail_folder_is_registered_once() -> None:
    folders = sorted(p.parent.name for p in RAILS_DIR.glob("*/__init__.py"))
    assert sorted(r.folder.name for r in ragrail_rails() if r.folder) == folders
    names = [r.name for r in RAILS]
    assert len(names) == len(set(names))
    for rail in ragrail_rails():
        assert rail.folder is not None and rail.folder.name == rail.name
        for part in ("settings.py", "actions.py", "flows.co"):
            assert (rail.folder / part).is_file(), f"{rail.name} has no {part}"


def test_flow_and_action_names_are_unique_across_rails() -> None:
    flows = [f.name for r in RAILS for f in r.flows]
    assert len(flows) == len(set(flows))
    owner: dict[str, str] = {}
    for rail in RAILS:
        for flow in rail.flows:
            assert owner.setdefault(flow.action, rail.name) == rail.name, flow.action


def executes(flow_config: dict) -> list[tuple[str, dict]]:
    """(action, parameters) of each `execute` in a parsed Colang 1.0 flow (`stop` is parsed
    as the action `utter`)."""
    return [
        (e["action_name"], dict(e.get("action_params") or {}))
        for e in flow_config["elements"]
        if e.get("_type") == "run_action" and e["action_name"] != "utter"
    ]


@pytest.mark.parametrize("rail", ragrail_rails(), ids=lambda r: r.name)
def test_flows_co_does_what_the_spec_says(rail: Rail) -> None:
    from nemoguardrails.colang import parse_colang_file

    assert rail.flows_file is not None
    text = rail.flows_file.read_text(encoding="utf-8")
    parsed = parse_colang_file("flows.co", content=text, version="1.0")
    defined = {f["id"]: f for f in parsed["flows"]}
    assert sorted(defined) == sorted(f.name for f in rail.flows)
    for flow in rail.flows:
        assert executes(defined[flow.name]) == [(flow.action, flow.call_params())], flow.name


@pytest.mark.parametrize("rail", [r for r in RAILS if r.settings], ids=lambda r: r.name)
def test_each_rail_has_its_config_section(rail: Rail) -> None:
    field = RagrailRails.model_fields[rail.name]
    assert field.annotation is rail.settings
    assert ragrail_section({}, Path("config.yml")).model_dump()[rail.name] == (
        rail.settings().model_dump()  # type: ignore[misc]
    )


def test_packaged_config_validates_and_names_known_flows() -> None:
    config = yaml.safe_load((PACKAGED_CONFIG / "config.yml").read_text(encoding="utf-8"))
    sections = ragrail_section(config["custom_data"], PACKAGED_CONFIG / "config.yml")
    assert sections.deny_list.patterns  # type: ignore[attr-defined]
    known = set(flows_by_name()) | NEMO_FLOWS
    for stage in ("input", "retrieval", "output"):
        for flow in config["rails"][stage]["flows"]:
            assert flow in known, flow
            if flow in flows_by_name():
                assert flows_by_name()[flow][1].stage == stage, flow


def test_direct_engine_reads_only_variables_it_can_supply() -> None:
    variables = {
        "$user_message",
        "$bot_message",
        "$ragrail_context",
        "$ragrail_chunks",
        "$ragrail_grounded",
    }
    for _, flow in flows_by_name().values():
        assert isinstance(flow, Flow)
        used = {v for v in flow.call_params().values() if v.startswith("$")}
        assert used <= variables, flow.name


OWN_LIMITS = """
define flow ragrail limits
  $r = execute ragrail_limits(text=$user_message)
  if $r.verdict == "block"
    stop
"""


def test_a_config_that_defines_a_rail_flow_itself_keeps_it(tmp_path: Path) -> None:
    from nemoguardrails import RailsConfig

    from services.guardrails.server import load_rails_config

    config = tmp_path / "config"
    config.mkdir()
    (config / "config.yml").write_bytes((PACKAGED_CONFIG / "config.yml").read_bytes())
    (config / "rails.co").write_text(OWN_LIMITS, encoding="utf-8")
    rails_config = load_rails_config(config)
    flows = [f["id"] for f in rails_config.flows]
    assert flows.count("ragrail limits") == 1
    limits = next(f for f in rails_config.flows if f["id"] == "ragrail limits")
    # The configuration's own: no `modify` branch.
    assert len(limits["elements"]) < len(
        RailsConfig.from_content(
            colang_content=(RAILS_DIR / "limits" / "flows.co").read_text(encoding="utf-8")
        ).flows[0]["elements"]
    )
    # Every other rail flow came from its folder.
    for name in flows_by_name():
        if not flows_by_name()[name][0].from_nemo:
            assert name in flows, name


def test_adding_rail_flows_twice_adds_nothing(tmp_path: Path) -> None:
    from services.guardrails.server import load_rails_config

    rails_config = load_rails_config(PACKAGED_CONFIG)
    count = len(rails_config.flows)
    assert sorted(add_rail_flows(rails_config)) == sorted(
        f.name for r in ragrail_rails() for f in r.flows
    )
    assert len(rails_config.flows) == count
