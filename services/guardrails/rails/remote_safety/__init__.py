"""Remote safety: an LLM safety model (NemoGuard content safety, Llama Guard 3) served behind
an OpenAI-compatible API (NIM, vLLM), beside the local guard model. Off by default: name the
server in custom_data.ragrail.remote_safety and list its flows in config.yml."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.remote_safety.actions import load
from services.guardrails.rails.remote_safety.settings import RemoteSafetySettings

RAIL = Rail(
    name="remote_safety",
    settings=RemoteSafetySettings,
    flows=(
        Flow(
            "ragrail remote safety",
            "input",
            "ragrail_remote_safety",
            {"text": "$user_message", "source": "input"},
        ),
        Flow(
            "ragrail remote safety on output",
            "output",
            "ragrail_remote_safety",
            {"text": "$bot_message", "source": "output", "question": "$user_message"},
        ),
    ),
    load=load,
    folder=Path(__file__).parent,
)
