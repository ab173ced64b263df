"""ragrail.v1: generated stubs (do not edit; run python -m shared.proto.codegen)."""
