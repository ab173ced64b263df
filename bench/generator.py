"""Generation benchmark: the generator service over gRPC against the raw libraries it wraps.

    python bench/generator.py                          # llamacpp and torch, CPU
    python bench/generator.py --engines llamacpp --max-tokens 128
    python bench/generator.py --engines torch --device cuda --threads 8
    python bench/generator.py --engines llamacpp --prompts 1 --concurrency 1,4 \
        --concurrent-max-tokens 16,64 --rounds 3       # the concurrency table alone, mostly
    python bench/generator.py --engines openai         # openai engine vs in-process llamacpp
    python bench/generator.py --engines openai-gateway --max-tokens 16   # gateway TTFT alone

For each engine, in one run, on the same model and the same chat prompts (rendered with the
model's own template):
  * single stream, greedy: time to first token and tokens/s of the service's GenerateStream
    against the raw library in this process (llama-cpp-python's streaming create_completion;
    transformers' generate with a streamer), one prompt at a time, service and raw taking
    turns so both see the same machine load; the ratio, and whether the texts are the same;
  * concurrent clients: the same requests sent by one client after another and by N clients
    at once (continuous batching), in alternating rounds so both see the same machine load:
    aggregate tokens/s and p50 latency at each N against one client, for each answer length
    and two workloads, chat with a shared system prompt (instructions and a source, as the
    gateway sends, with a different question each) and bare questions. Sampled with a seed
    per question, so every N gives the same answers (checked: "same text").
The raw side gets the service's thread count (and llama.cpp's flash attention, as the
service uses by default), so the ratio measures the service, not a configuration.

`--engines openai` measures the openai engine instead: llama-cpp-python's server
(`python -m llama_cpp.server`, one slot, the same GGUF, threads and flash attention) behind a
generator with RAGRAIL_GENERATOR_ENGINE=openai, beside a generator running the same model in
process (llamacpp), and the server read directly over HTTP (what the engine adds is the
difference). 20 chat requests, greedy, taking turns: time to first token, decode tokens/s,
the ratios to the in-process engine, and how many answers are the same token for token (same
text and same token count). Every path reads every prompt whole (the in-process engine's
prefix cache off, the server's last prompt cleared by `forget_prompt`), so all do the same
work and greedy answers can be compared. A gateway in front of the openai generator answers
the same chats too (its OpenAI-compatible /v1/chat/completions, stream: true, no collection),
and a second table gives the gateway's time-to-first-token overhead over the generator read
directly over gRPC (issue 27's target: <= 50 ms).

`--engines openai-gateway` measures that overhead alone, with less to start and run: the
server, the openai generator and the gateway; the same 20 chats, `--rounds` times each, gRPC
and gateway taking turns (which goes first alternating). Each prompt is read once unmeasured
and then found in the server's cache, so a TTFT is the path plus one decoding step: with the
prompt read whole, prefill time swings with the machine's load by more than the overhead.

The parts live in bench/generation/, one module a job; this file is the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO
from bench.generation import console
from bench.generation.engines import (
    bench_engine,
    concurrency_table,
    single_table,
)
from bench.generation.gateway_overhead import bench_openai_gateway, gateway_table
from bench.generation.openai_engine import bench_openai, openai_table
from bench.generation.prompts import PROMPTS
from bench.generation.raw import RawLlamaCpp, RawTransformers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="llamacpp,torch")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=6, help=f"1 to {len(PROMPTS) - 1}")
    parser.add_argument("--concurrency", default="1,4", help="Client counts, comma-separated.")
    parser.add_argument(
        "--concurrent-max-tokens", default="16,64", help="Answer lengths of the client runs."
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="Alternating client rounds (openai-gateway: asks per chat).",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="CPU threads, service and raw (0: service default)."
    )
    parser.add_argument("--context", type=int, default=1024, help="Context window per request.")
    parser.add_argument("--gguf", default="", help="GGUF for llamacpp (default: packaged).")
    parser.add_argument(
        "--torch-model", default="", help="HF directory or GGUF for torch (default: packaged)."
    )
    parser.add_argument("--device", default="cpu", help="torch engine device: cpu or cuda.")
    args = parser.parse_args()
    args.concurrency = sorted({int(c) for c in args.concurrency.split(",")})
    args.concurrent_max_tokens = [int(t) for t in args.concurrent_max_tokens.split(",")]
    args.prompts = max(1, min(args.prompts, len(PROMPTS) - 1))  # the last one warms up
    os.chdir(REPO)
    from shared.models.generator_files import configured_model, cpu_threads

    args.threads = cpu_threads(args.threads)
    load = os.getloadavg()
    console.print(
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} before the run; "
        f"{args.threads} threads for the service and the raw library"
    )
    results = []
    engines = args.engines.split(",")
    if "openai" in engines:
        engines.remove("openai")
        result = bench_openai(args)
        console.print(openai_table(result, args))
        how = f"{len(result.remote.runs)} chats, each prompt read whole, taking turns"
        console.print(gateway_table(result.remote, result.gateway, how, args))
    if "openai-gateway" in engines:
        engines.remove("openai-gateway")
        console.print(gateway_table(*bench_openai_gateway(args), args))
    for engine in engines:
        if engine == "llamacpp":
            gguf = configured_model(args.gguf)
            results.append(
                bench_engine(
                    engine, args, lambda g=gguf: RawLlamaCpp(g, args.threads, args.context)
                )
            )
        elif engine == "torch":
            raw = lambda: RawTransformers(args.torch_model, args.threads, args.device)  # noqa: E731
            results.append(bench_engine(engine, args, raw))
        else:
            raise SystemExit(
                f"unknown engine {engine}; choose llamacpp, torch, openai, openai-gateway"
            )
    if results:
        console.print(single_table(results, args))
        console.print(concurrency_table(results, args))
    after = os.getloadavg()
    console.print(f"load average {after[0]:.2f} after the run (other processes count too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
