"""What config.yml says about the registered rails (services/guardrails/rails/):

* `custom_data.ragrail.<rail>`: each rail's settings, validated by its settings model, so a
  misspelt key or a bad value stops the service at startup with the field named;
* the Colang flows: each rail's flows.co joins the flows of the configuration directory. A
  flow the directory defines itself wins, so a configuration that carries its own copy of a
  rail's flow (an edited one, or the rails.co older versions shipped) keeps working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from services.guardrails.rails import RAILS
from shared.errors import FailedPrecondition


def _sections() -> type[BaseModel]:
    fields: dict[str, Any] = {
        rail.name: (rail.settings, Field(default_factory=rail.settings))
        for rail in RAILS
        if rail.settings is not None
    }
    return create_model(  # type: ignore[no-any-return, call-overload]
        "RagrailRails", __config__=ConfigDict(extra="forbid"), **fields
    )


# The `custom_data.ragrail` section: one field per registered rail, named as the rail.
RagrailRails = _sections()


def ragrail_section(custom_data: dict[str, Any], config_file: Path) -> BaseModel:
    try:
        return RagrailRails.model_validate(custom_data.get("ragrail") or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"custom_data.ragrail.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        )
        raise FailedPrecondition(f"{config_file}: {problems}") from exc


def rail_flows() -> list[dict[str, Any]]:
    """Every registered rail's flows.co, parsed (Colang 1.0). Parsed under the name
    `flows.co`, as NeMo Guardrails' library files are: nemo_runtime.prune_library_flows leaves a
    rail's flows out of the runtime when no configured rail uses them."""
    from nemoguardrails.colang import parse_colang_file

    parsed = []
    for rail in RAILS:
        path = rail.flows_file
        if path is None:
            continue
        try:
            text = path.read_text(encoding="utf-8")
            parsed.append(parse_colang_file(path.name, content=text, version="1.0"))
        except Exception as exc:
            raise FailedPrecondition(
                f"cannot parse {path}: {type(exc).__name__}: {str(exc)[:300]}"
            ) from exc
    return parsed


def add_rail_flows(rails_config: Any) -> list[str]:
    """Adds the rails' flows to a NeMo Guardrails configuration (Colang 1.0) that does not
    define them itself. Returns the names of the flows the configuration overrides."""
    if str(getattr(rails_config, "colang_version", "1.0")) != "1.0":
        raise FailedPrecondition(
            f"the configuration uses Colang {rails_config.colang_version}; ragrail's rails "
            'are written in Colang 1.0 (colang_version: "1.0" in config.yml)'
        )
    own = {_flow_id(f) for f in rails_config.flows}
    overridden = []
    for parsed in rail_flows():
        for flow in parsed.get("flows", []):
            if _flow_id(flow) in own:
                overridden.append(_flow_id(flow))
                continue
            rails_config.flows.append(flow)
        for key in ("bot_messages", "user_messages"):
            for name, texts in (parsed.get(key) or {}).items():
                getattr(rails_config, key).setdefault(name, texts)
    return overridden


def _flow_id(flow: Any) -> str:
    return str(flow.get("id") if isinstance(flow, dict) else getattr(flow, "id", ""))
