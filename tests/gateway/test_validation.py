"""Validation at the edge, against the real gateway and services: the ten requests that were
500s (issue 17) are 4xx naming the field, and a document id that cannot be stored is refused
before anything is."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.integration
COLLECTION = "validation"


def _nested(depth: int, leaf: object) -> dict:
    value: object = leaf
    for _ in range(depth):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


def _raw(suite, method: str, path: str, body: str) -> httpx.Response:  # type: ignore[no-untyped-def]
    """Sends `body` as it is written: JSON escapes such as \\ud800 must reach the gateway
    unchanged (httpx's json= would refuse to encode a lone surrogate)."""
    return suite.http.request(
        method, path, content=body.encode(), headers={"Content-Type": "application/json"}
    )


@pytest.fixture(scope="module")
def collection(suite) -> str:  # type: ignore[no-untyped-def]
    reply = suite.http.post("/v1/collections", json={"name": COLLECTION})
    assert reply.status_code == 201, reply.text
    reply = suite.http.post(
        "/v1/documents",
        json={"collection": COLLECTION, "documents": [{"name": "a.md", "text": "bees dance"}]},
    )
    assert reply.status_code == 200, reply.text
    return COLLECTION


CHAT = '{"messages": [{"role": "user", "content": %s}], "max_tokens": %s%s}'
# The ten requests of issue 17 that were answered 500, each with the status it must get now and
# a fragment of the message that names the field at fault.
ISSUE_17 = [
    ("GET", "/v1/documents?collection=validation&offset=2147483648", None, "offset"),
    ("POST", "/v1/chat/completions", CHAT % ('"hi"', "2147483648", ""), "max_tokens"),
    (
        "POST",
        "/v1/chat/completions",
        CHAT % ('"hi"', "4", ', "seed": 18446744073709551616'),
        "seed",
    ),
    (
        "POST",
        "/v1/chat/completions",
        CHAT % ('"hi"', "4", ', "seed": -9223372036854775809'),
        "seed",
    ),
    ("POST", "/v1/chat/completions", CHAT % ('"hi"', "4", ', "top_k": 2147483648'), "top_k"),
    ("POST", "/v1/chat/completions", CHAT % ('"hi \\udfff"', "4", ""), "messages[0].content"),
    ("POST", "/v1/embeddings", '{"input": "a \\ud800 b"}', "input"),
    (
        "POST",
        "/v1/search",
        '{"query": "q", "collection": "validation", "filter": {"team": "\\ud800"}}',
        "filter.team",
    ),
    (
        "POST",
        "/v1/search",
        '{"query": "q", "collection": "validation", "filter": {"year": {"$gt": 1%s}}}'
        % ("0" * 400),
        "filter.year.$gt",
    ),
    (
        "POST",
        "/v1/search",
        json.dumps({"query": "q", "collection": "validation", "filter": _nested(60, 1)}),
        "filter",
    ),
    (
        "POST",
        "/v1/documents",
        json.dumps(
            {
                "collection": "validation",
                "documents": [{"name": "deep.md", "text": "x", "metadata": _nested(41, "x")}],
            }
        ),
        "metadata",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    ISSUE_17,
    ids=[
        "offset-int32",
        "max_tokens-int32",
        "seed-above-uint64",
        "seed-below-int64",
        "top_k-int32",
        "chat-lone-surrogate",
        "embeddings-lone-surrogate",
        "filter-lone-surrogate",
        "filter-400-digit-number",
        "filter-60-levels",
        "metadata-41-levels",
    ],
)
def test_issue_17_requests_are_4xx_naming_the_field(  # type: ignore[no-untyped-def]
    suite, collection, method, path, body, field
) -> None:
    reply = suite.http.get(path) if body is None else _raw(suite, method, path, body)
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["type"] == "InvalidArgument"
    assert field in error["message"], error["message"]


@pytest.mark.parametrize(
    "body",
    [
        '{"query": "q", "collection": "validation", "filter": {"x": NaN}}',
        '{"query": "q", "collection": "validation", "filter": {"x": 1e400}}',
        '{"query": "q", "collection": "validation", "filter": {"x": {"$in": [9007199254740993]}}}',
        '{"query": "q \\udc00", "collection": "validation"}',
        '{"query": "q", "collection": "validation", "filter": {"\\ud800": 1}}',
    ],
)
def test_other_numbers_and_strings_protobuf_cannot_carry_are_422(suite, collection, body) -> None:  # type: ignore[no-untyped-def]
    reply = _raw(suite, "POST", "/v1/search", body)
    assert reply.status_code == 422, reply.text


def test_a_surrogate_pair_is_a_valid_character(suite, collection) -> None:  # type: ignore[no-untyped-def]
    reply = _raw(
        suite, "POST", "/v1/search", '{"query": "bees \\ud83d\\udc1d", "collection": "validation"}'
    )
    assert reply.status_code == 200, reply.text


def test_an_id_with_a_control_character_is_refused_before_anything_is_stored(  # type: ignore[no-untyped-def]
    suite, collection
) -> None:
    before = suite.http.get("/v1/documents", params={"collection": collection}).json()["total"]
    reply = suite.http.post(
        "/v1/documents",
        json={"collection": collection, "documents": [{"name": "bad\x01name.md", "text": "x y"}]},
    )
    assert reply.status_code == 422, reply.text
    assert "documents[0].name" in reply.json()["error"]["message"]
    assert "U+0001" in reply.json()["error"]["message"]
    # Written by hand: httpx would percent-encode the file name's control character.
    boundary = "x-boundary"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="collection"\r\n\r\n'
        f"{collection}\r\n--{boundary}\r\n"
        'Content-Disposition: form-data; name="files"; filename="tab\there.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nsome text\r\n--{boundary}--\r\n"
    )
    upload = suite.http.post(
        "/v1/documents",
        content=form.encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert upload.status_code == 422, upload.text
    assert "files[0]" in upload.json()["error"]["message"]
    listed = suite.http.get("/v1/documents", params={"collection": collection})
    assert listed.status_code == 200, listed.text
    assert listed.json()["total"] == before


def test_ids_with_other_unicode_are_kept(suite, collection) -> None:  # type: ignore[no-untyped-def]
    name = "Screenshot 10.00\u202fAM \U0001f41d.txt"  # a macOS screenshot's narrow space
    reply = suite.http.post(
        "/v1/documents", data={"collection": collection}, files=[("files", (name, b"bees"))]
    )
    assert reply.status_code == 200, reply.text
    listed = suite.http.get("/v1/documents", params={"collection": collection}).json()
    assert name in {d["id"] for d in listed["documents"]}
    deleted = suite.http.delete(f"/v1/documents/{name}", params={"collection": collection})
    assert deleted.status_code == 200, deleted.text


def test_multipart_metadata_is_validated_like_json(suite, collection) -> None:  # type: ignore[no-untyped-def]
    reply = suite.http.post(
        "/v1/documents",
        data={"collection": collection, "metadata": json.dumps(_nested(40, 1))},
        files=[("files", ("m.txt", b"text"))],
    )
    assert reply.status_code == 422 and "metadata" in reply.text
    reply = suite.http.post(
        "/v1/documents",
        data={"collection": collection, "metadata": '{"k": "\\ud800"}'},
        files=[("files", ("m.txt", b"text"))],
    )
    assert reply.status_code == 422 and "metadata" in reply.text


def test_the_openapi_document_references_only_schemas_it_defines() -> None:
    from services.gateway.app import create_app
    from services.gateway.settings import GatewaySettings

    document = create_app(GatewaySettings()).openapi()
    defined = set(document["components"]["schemas"])
    text = json.dumps(document)
    referenced = {ref.split('"', 1)[0] for ref in text.split('"$ref": "#/components/schemas/')[1:]}
    assert referenced <= defined, referenced - defined
    assert "DocumentsIngest" in defined and "HTTPValidationError" not in defined
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status[0] in "45":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (
                        path,
                        method,
                        status,
                    )
