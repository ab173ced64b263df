"""The committed stubs must be exactly what `python -m shared.proto.codegen` writes."""

from shared.proto.codegen import stale_stubs
from shared.proto.ragrail.v1 import (
    embedder_pb2,
    generator_pb2,
    guardrails_pb2,
    reranker_pb2,
    retriever_pb2,
)


def test_committed_stubs_match_the_protos() -> None:
    assert stale_stubs() == [], "run: python -m shared.proto.codegen"


def test_every_service_has_info() -> None:
    for module, name in [
        (embedder_pb2, "Embedder"),
        (reranker_pb2, "Reranker"),
        (retriever_pb2, "Retriever"),
        (guardrails_pb2, "Guardrails"),
        (generator_pb2, "Generator"),
    ]:
        service = module.DESCRIPTOR.services_by_name[name]
        assert service.full_name == f"ragrail.v1.{name}"
        assert "Info" in service.methods_by_name
