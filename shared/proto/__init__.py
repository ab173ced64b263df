"""The gRPC contract. `.proto` sources live in ragrail/v1/; Python stubs are generated beside them.

Regenerate the stubs after editing a `.proto` file:

    python -m shared.proto.codegen

`tests/shared/test_proto_stubs.py` fails when the committed stubs differ from what this
command produces.
"""
