"""Runs the tritonserver binary that nvidia-pytriton ships on a model repository, on loopback.

Run by the .venv-pytriton interpreter (nvidia-pytriton pins numpy<2, which the project's
own environment cannot have); tests/generator/test_triton_engine.py starts it as a process:

    .venv-pytriton/bin/python tests/generator/triton_peer/serve.py --repository DIR \\
        --grpc-port P --http-port P --metrics-port P --workspace DIR

PyTriton prepares the server (its binaries, the Python backend stub for this interpreter's
version, shared-memory settings) and loads every model in the repository. The stub puts only
a model's own directory on sys.path (not PYTHONPATH), so the test copies peer_llm.py next to
each model.py. It serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sysconfig
from pathlib import Path
from types import FrameType

from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig


def prepare_environment() -> None:
    """tritonserver's Python backend stub links against libpython3.X.so, which pyenv keeps
    outside the loader's default path: give the server this interpreter's LIBDIR."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    paths = [p for p in (libdir, os.environ.get("LD_LIBRARY_PATH", "")) if p]
    os.environ["LD_LIBRARY_PATH"] = ":".join(paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    args = parser.parse_args()
    prepare_environment()
    config = TritonConfig(
        model_repository=args.repository,
        grpc_address="127.0.0.1",
        grpc_port=args.grpc_port,
        http_address="127.0.0.1",
        http_port=args.http_port,
        metrics_address="127.0.0.1",
        metrics_port=args.metrics_port,
        allow_gpu_metrics=False,
        exit_timeout_secs=5,
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # serve() returns on SIGINT; a SIGTERM from the test should stop it the same way.
    signal.signal(signal.SIGTERM, stop)
    # No access token on the management endpoints: the server listens on loopback for a
    # test, and PyTriton's own startup check failed against them with one (HTTP 403).
    security = TritonSecurityConfig(restricted_endpoints=[])
    with (
        Triton(config=config, workspace=args.workspace, security_config=security) as triton,
        contextlib.suppress(KeyboardInterrupt),
    ):
        triton.serve()


if __name__ == "__main__":
    main()
