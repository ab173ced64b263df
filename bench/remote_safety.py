"""What the remote safety rail adds to a check: the guardrails service's CheckInput and
CheckOutput latency with the local content-safety head alone, against the same with the
remote safety rail in its place (combine: either, so the local head still runs, beside the
remote call), each format, against llama-cpp-python's server on the packaged SmolLM2-135M.

    python bench/remote_safety.py                    # 50 checks each, the published guard model
    python bench/remote_safety.py --checks 100 --model models/guardrails/guard-minilm/<v>

SmolLM2 is no safety model. `--verdict grammar` (default) fixes each answer with llama.cpp's
grammar to the verdict a safety model gives for safe text ('safe'; {"User Safety": "safe"}):
every check is a full judgement, but llama-cpp-python's grammar sampler costs seconds per
verdict on a CPU. `--verdict one-token` sends the same prompts for one token, no grammar
(the verdict is unreadable, so the rail runs with on_error: allow and reports errored): the
server's prefill of the format's prompt (its taxonomy prefix cached from one request to the
next, as vLLM's prefix cache does) plus the rail, the protocol's floor. A real 8B safety
model on a GPU takes its own time; this measures the protocol's and the rail's part here.
The texts are the first --checks rows of ../shared/data's content_safety test split (or
built-in questions without it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import yaml
from rich.console import Console
from rich.table import Table

from bench.common import REPO, SHARED_DATA, free_port, percentiles
from bench.guardrails_service import Client, config_dir, input_request, service
from shared.models.generator_files import packaged_gguf
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2

console = Console()
FALLBACK = [
    "How do honeybees find flowers?",
    "What is the boiling point of water at altitude?",
    "How do I kill a Python process that hangs?",
    "Summarise the causes of the French Revolution.",
    "Which vaccines are recommended for adults?",
]
ANSWER = "Honeybees perform a waggle dance to tell other bees where flowers are."
SAFE_VERDICT = {
    "llama_guard": "safe",
    "nemoguard": '{"User Safety": "safe", "Response Safety": "safe"}',
}


def texts(n: int) -> list[str]:
    path = SHARED_DATA / "content_safety" / "test.jsonl"
    rows = []
    if path.exists():
        with path.open(encoding="utf-8") as f:
            rows = [json.loads(line)["text"] for line in f if line.strip()]
    rows = rows or FALLBACK
    return [rows[i % len(rows)] for i in range(n)]


def grammar(text: str) -> dict[str, str]:
    literal = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return {"grammar": f'root ::= "{literal}"'}


@contextlib.contextmanager
def llama_server(threads: int, log: Path) -> Iterator[str]:
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_gguf()),
        "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--flash_attn", "true", "--interrupt_requests", "false", "--verbose", "false",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=2).is_success:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"llama_cpp.server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def system_config(root: Path, name: str, url: str, fmt: str | None, verdict: str) -> Path:
    """Content safety on input and output: the local head's flows, or (fmt given) the
    remote safety rail's in their place, combine either."""
    if fmt is None:
        flows = ("ragrail content safety", "ragrail content safety on output")
        config = config_dir(root, name, input_flows=[flows[0]])
    else:
        flows = ("ragrail remote safety", "ragrail remote safety on output")
        section = {
            "remote_url": url,
            "format": fmt,
            "combine": "either",
            "remote_extra_body": grammar(SAFE_VERDICT[fmt]),
        }
        if verdict == "one-token":
            section.update(remote_extra_body={}, max_tokens=1, on_error="allow")
        config = config_dir(root, name, input_flows=[flows[0]], remote_safety=section)
    data = yaml.safe_load((config / "config.yml").read_text(encoding="utf-8"))
    data["rails"]["output"]["flows"] = [flows[1]]
    (config / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return config


def output_request(question: str) -> tuple[str, object]:
    return (
        "CheckOutput",
        guardrails_pb2.CheckOutputRequest(
            messages=[common_pb2.ChatMessage(role="user", content=question)],
            answer=ANSWER,
            context=[common_pb2.TextPassage(id="0", text=ANSWER)],
        ),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=50, help="Timed checks per system.")
    parser.add_argument("--model", type=Path, help="Guard model dir (default: as the service).")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads.")
    parser.add_argument("--engine", default="nemo", choices=("nemo", "direct"))
    parser.add_argument("--verdict", default="grammar", choices=("grammar", "one-token"))
    args = parser.parse_args()
    questions = texts(args.checks)
    systems = {"local content safety": None, "+ remote llama_guard": "llama_guard"}
    systems["+ remote nemoguard"] = "nemoguard"
    rows = []
    with tempfile.TemporaryDirectory(prefix="ragrail-remote-safety-") as tmp:
        root = Path(tmp)
        with llama_server(args.threads, root / "llama.log") as url:
            for name, fmt in systems.items():
                config = system_config(root, name.replace(" ", "_"), url, fmt, args.verdict)
                env = {
                    "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
                    "RAGRAIL_GUARDRAILS_ENGINE": args.engine,
                }
                if args.model:
                    env["RAGRAIL_GUARDRAILS_GUARD_MODEL"] = str(args.model)
                console.print(f"[bold]{name}[/bold]: {args.checks} CheckInput, CheckOutput")
                with service(env, root / f"{name}.log") as target:
                    client = Client(target)
                    warm = [input_request(q) for q in questions[:3]]
                    client.run(warm + [output_request(q) for q in questions[:3]], "warm-up")
                    replies, ins = client.run([input_request(q) for q in questions], "input")
                    _, outs = client.run([output_request(q) for q in questions], "output")
                errored = sum(any(a.errored for a in r.activations) for r in replies)
                blocked = sum(r.verdict == guardrails_pb2.VERDICT_BLOCK for r in replies)
                rows.append((name, percentiles(ins), percentiles(outs), errored, blocked))
                console.print(  # as it goes: a long run keeps what it measured
                    f"  input p50/p95 {rows[-1][1][0]:.1f}/{rows[-1][1][1]:.1f} ms, output "
                    f"{rows[-1][2][0]:.1f}/{rows[-1][2][1]:.1f} ms, errored {errored}, "
                    f"blocked {blocked}"
                )
    base_in, base_out = rows[0][1][0], rows[0][2][0]
    table = Table(
        title=f"Remote safety rail, {args.checks} checks each ({args.engine} engine, verdict "
        f"{args.verdict})"
    )
    for column in ("system", "input p50 / p95 ms", "added p50", "output p50 / p95 ms",
                   "added p50", "errored", "blocked"):  # fmt: skip
        table.add_column(column)
    for name, (i50, i95), (o50, o95), errored, blocked in rows:
        table.add_row(
            name,
            f"{i50:.1f} / {i95:.1f}",
            f"{i50 - base_in:+.1f}",
            f"{o50:.1f} / {o95:.1f}",
            f"{o50 - base_out:+.1f}",
            str(errored),
            str(blocked),
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
