"""Schemathesis hooks for tests/gateway/test_schemathesis.py (loaded through
SCHEMATHESIS_HOOKS): bounded work per generated request on a CPU-only machine."""

from __future__ import annotations

from typing import Any

import schemathesis

# Tokens a generated chat may ask for: a valid max_tokens of 10^6 would be answered correctly
# and slowly (a CPU generator); the bounds themselves are tested in test_validation.py.
MAX_CHAT_TOKENS = 4


@schemathesis.hook
def before_call(
    context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]
) -> None:
    if case.operation.path != "/v1/chat/completions" or not isinstance(case.body, dict):
        return
    for field in ("max_tokens", "max_completion_tokens"):
        value = case.body.get(field)
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and MAX_CHAT_TOKENS < value < 2**31
        ):
            case.body[field] = MAX_CHAT_TOKENS
