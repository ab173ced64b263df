"""`custom_data.ragrail.remote_safety`: the safety model server (RemoteServerSettings: URL,
model, API key, headers, timeout, retries), the model's format and categories, how its
verdict combines with the local guard model's, and what a missing verdict means."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from services.guardrails.rails.base import RailSettings
from shared.models.remote import RemoteServerSettings
from shared.models.safety_formats import Format

Combine = Literal["either", "both", "remote"]


class RemoteSafetySettings(RailSettings, RemoteServerSettings):
    # remote_url empty: the rail cannot run (a configured flow stops startup saying so).
    # A safety verdict should come fast or not at all: shorter than a generator's limit.
    remote_timeout_s: float = Field(
        10.0, gt=0, description="The longest one judgement may take, retries included."
    )
    remote_retries: int = Field(1, ge=0, le=10)
    # The name of an environment variable holding the API key (NeMo Guardrails'
    # api_key_env_var, e.g. NVIDIA_API_KEY); remote_api_key_file still wins.
    remote_api_key_env: str = ""
    # Fields merged into every request body, for what the server needs beyond OpenAI's
    # (vLLM's guided decoding, llama.cpp's grammar, NIM's nvext).
    remote_extra_body: dict[str, Any] = {}
    # The model's published prompt and answer format: nemoguard (NVIDIA's Llama 3.1
    # NemoGuard 8B content safety: JSON, Aegis 2.0 categories S1-S23, sent as a chat) or
    # llama_guard (Meta's Llama Guard 3: "safe" / "unsafe\nS1,S10", categories S1-S14, sent
    # as a completion).
    format: Format = "nemoguard"
    # Codes of the categories the prompt lists (S1, S10, ...); empty: all of the format's.
    categories: list[str] = []
    # Most tokens of a verdict; empty: the format's (nemoguard 50, llama_guard 20).
    max_tokens: int | None = Field(None, ge=1, le=4096)
    # How the verdict combines with the local guard model's content-safety head (its
    # thresholds and categories from custom_data.ragrail.content_safety), which this rail
    # runs itself, beside the remote call:
    #   either: block when either says unsafe (more caught);
    #   both:   block only when both do (fewer false refusals);
    #   remote: the remote model alone decides.
    # With either/both, list this rail's flow *instead of* `ragrail content safety` (both
    # would let the local head block on its own first). Until a guard model is trained, the
    # remote verdict alone decides.
    combine: Combine = "either"
    # When the remote verdict is missing (server down, timeout, error status, an answer that
    # is not a verdict): block (fail closed, the default), allow (fail open), or local (the
    # local guard model's verdict alone decides; block when there is none). Always reported
    # as errored, with why.
    on_error: Literal["block", "allow", "local"] = "block"  # type: ignore[assignment]
