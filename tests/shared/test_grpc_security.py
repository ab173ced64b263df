"""gRPC transport security against a real service process: shared token, TLS and mTLS.

The retriever (FAISS backend, nothing to load) stands in for every service: the token
interceptor and the credentials live in shared/server.py, which all of them run.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import grpc
import pytest

from shared.clients import ServiceClient
from shared.errors import RagrailError
from shared.grpc_security import GrpcSecuritySettings, secure_or_plain_channel
from shared.proto.ragrail.v1 import retriever_pb2, retriever_pb2_grpc
from tests.conftest import grpc_service


def retriever_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "RAGRAIL_RETRIEVER_BACKEND": "faiss",
        "RAGRAIL_RETRIEVER_FAISS_DIR": str(tmp_path / "faiss"),
        **extra,
    }


async def list_collections(
    target: str, settings: GrpcSecuritySettings | None, timeout: float = 10
) -> int:
    """Lists collections over a channel made inside the loop (None: a bare plaintext one)."""
    channel = (
        grpc.aio.insecure_channel(target)
        if settings is None
        else secure_or_plain_channel(target, [], settings)
    )
    stub = retriever_pb2_grpc.RetrieverStub(channel)
    try:
        reply = await stub.ListCollections(retriever_pb2.ListCollectionsRequest(), timeout=timeout)
        return len(reply.collections)
    finally:
        await channel.close()


def make_pki(where: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (openssl)."""
    files = {name: where / f"{name}.pem" for name in
             ("ca", "ca-key", "server", "server-key", "client", "client-key")}  # fmt: skip

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=where)

    ca, ca_key = str(files["ca"]), str(files["ca-key"])
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        "/CN=ragrail test CA", "-keyout", ca_key, "-out", ca)  # fmt: skip
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                            ("client", "extendedKeyUsage=clientAuth")):  # fmt: skip
        csr = where / f"{name}.csr"
        ext = where / f"{name}.ext"
        ext.write_text(extension + "\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", str(files[f"{name}-key"]), "-out", str(csr))  # fmt: skip
        run("x509", "-req", "-in", str(csr), "-CA", str(files["ca"]), "-CAkey",
            str(files["ca-key"]), "-CAcreateserial", "-days", "2", "-extfile", str(ext),
            "-out", str(files[name]))  # fmt: skip
    return files


def test_shared_token_is_required_but_health_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = retriever_env(tmp_path, RAGRAIL_GRPC_TOKEN="s3cret-token")
    with grpc_service("services.retriever", "RETRIEVER", env, tmp_path / "r.log") as target:
        # No token: refused with a message naming the setting. (The readiness probe above
        # already showed health answers without one.)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            asyncio.run(list_collections(target, None))
        assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "RAGRAIL_GRPC_TOKEN" in (missing.value.details() or "")

        wrong = GrpcSecuritySettings(token="guess")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            asyncio.run(list_collections(target, wrong))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        right = GrpcSecuritySettings(token="s3cret-token")
        assert asyncio.run(list_collections(target, right)) >= 0

        # The suite's own clients read the same variables.
        monkeypatch.setenv("RAGRAIL_GRPC_TOKEN", "s3cret-token")

        async def through_client() -> int:
            client = ServiceClient("retriever", target, retriever_pb2_grpc.RetrieverStub)
            try:
                reply = await client.call("ListCollections", retriever_pb2.ListCollectionsRequest())
                return len(reply.collections)
            finally:
                await client.close()

        assert asyncio.run(through_client()) >= 0
        monkeypatch.setenv("RAGRAIL_GRPC_TOKEN", "guess")
        with pytest.raises(RagrailError, match="token"):
            asyncio.run(through_client())


def test_mtls_needs_a_client_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pki = make_pki(tmp_path)
    server = {
        "RAGRAIL_GRPC_TLS_CERT_FILE": str(pki["server"]),
        "RAGRAIL_GRPC_TLS_KEY_FILE": str(pki["server-key"]),
        "RAGRAIL_GRPC_TLS_CLIENT_CA_FILE": str(pki["ca"]),
    }
    # The fixture's readiness probe is a client of this process: give it a client identity.
    monkeypatch.setenv("RAGRAIL_GRPC_TLS_CA_FILE", str(pki["ca"]))
    monkeypatch.setenv("RAGRAIL_GRPC_TLS_CERT_FILE", str(pki["client"]))
    monkeypatch.setenv("RAGRAIL_GRPC_TLS_KEY_FILE", str(pki["client-key"]))
    env = retriever_env(tmp_path, **server)
    with grpc_service("services.retriever", "RETRIEVER", env, tmp_path / "r.log") as target:
        with_cert = GrpcSecuritySettings(
            tls_ca_file=str(pki["ca"]),
            tls_cert_file=str(pki["client"]),
            tls_key_file=str(pki["client-key"]),
        )
        assert asyncio.run(list_collections(target, with_cert)) >= 0

        # TLS without a client certificate, and plaintext: both refused by the handshake.
        for name in ("TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"):
            monkeypatch.delenv(f"RAGRAIL_GRPC_{name}")
        server_only = GrpcSecuritySettings(tls_ca_file=str(pki["ca"]))
        for settings in (server_only, GrpcSecuritySettings()):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                asyncio.run(list_collections(target, settings, timeout=3))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_missing_certificate_stops_the_service_with_the_setting_named(tmp_path: Path) -> None:
    from tests.conftest import run_module

    env = dict(
        retriever_env(tmp_path),
        RAGRAIL_RETRIEVER_PORT="0",
        RAGRAIL_RETRIEVER_METRICS_PORT="-1",
        RAGRAIL_GRPC_TLS_CERT_FILE=str(tmp_path / "nope.pem"),
        RAGRAIL_GRPC_TLS_KEY_FILE=str(tmp_path / "nope-key.pem"),
    )
    done = run_module("services.retriever", env)
    assert done.returncode == 2
    assert "RAGRAIL_GRPC_TLS_" in done.stdout + done.stderr
