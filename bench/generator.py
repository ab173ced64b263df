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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.console import Console
from rich.table import Table

from bench.common import REPO
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc

console = Console(width=max(Console().width, 140))

# Open questions, so greedy answers run long rather than ending after a sentence.
PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain in detail how a bicycle stays upright while moving.",
    "Describe the water cycle step by step for a ten-year-old.",
    "Write a letter to a friend about your trip to the mountains.",
    "Explain how bread dough rises and what yeast does, in several paragraphs.",
    "Tell me about the history of the printing press and why it mattered.",
    "Describe a busy market in the morning, with its sounds and smells.",
    "Give detailed advice on how to start learning to play the guitar.",
]


# A grounded-chat system prompt as the gateway builds one (its default instructions, then a
# numbered source), shared by every request of the "shared system prompt" workload.
SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the question using only the numbered sources below. "
    "Cite the sources you use as [1], [2]. If the sources do not contain the answer, say that "
    "you do not know.\n\nSources:\n\n[1] notes.md\nA bicycle stays upright mostly through "
    "steering: when it leans, the rider (or the fork's geometry) turns the front wheel into the "
    "lean, which brings the wheels back under the centre of mass. Bread rises because yeast "
    "ferments sugars into carbon dioxide, which the gluten network traps as bubbles. In the "
    "water cycle, the sun evaporates water, vapour condenses into clouds and falls as rain or "
    "snow, and rivers carry it back to the sea. The printing press, from about 1440, made books "
    "cheap enough to spread literacy and new ideas across Europe."
)
WORKLOADS = {"shared system prompt": SYSTEM_PROMPT, "bare questions": ""}


@dataclass
class Run:
    """One answer: seconds to the first token and in all, tokens, text."""

    ttft: float
    total: float
    tokens: int
    text: str
    prompt_tokens: int = 0


@dataclass
class PathResult:
    label: str
    runs: list[Run] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.runs) / sum(r.total for r in self.runs)

    @property
    def decode_per_s(self) -> float:
        """Tokens after the first over the time after the first: the decoding rate alone."""
        tokens = sum(max(r.tokens - 1, 0) for r in self.runs)
        return tokens / sum(r.total - r.ttft for r in self.runs)

    @property
    def ttft_ms(self) -> float:
        return statistics.median(r.ttft for r in self.runs) * 1000

    @property
    def prefill_per_s(self) -> float:
        """Prompt tokens over the time to the first token: the rate of forward passes that
        carry many tokens, which bounds what batching can reach on this hardware."""
        return sum(r.prompt_tokens for r in self.runs) / sum(r.ttft for r in self.runs)


# -- the service ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        full = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
        full.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            RAGRAIL_GENERATOR_PORT=str(self.port),
            RAGRAIL_GENERATOR_METRICS_PORT="-1",
            RAGRAIL_GENERATOR_LOG_FORMAT="text",
            **env,
        )
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.generator"],
                cwd=REPO,
                env=full,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.target = f"127.0.0.1:{self.port}"

    async def wait(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise SystemExit(f"generator exited; log:\n{self.log.read_text()[-3000:]}")
                try:
                    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.3)
        raise SystemExit(f"generator not serving after {timeout} s; see {self.log}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def stream_one(
    stub: generator_pb2_grpc.GeneratorStub,
    prompt: str,
    max_tokens: int,
    greedy: bool,
    seed: int,
    system: str = "",
) -> Run:
    sampling = generator_pb2.SamplingParams(max_tokens=max_tokens, seed=seed)
    sampling.temperature = 0.0 if greedy else 0.8
    messages = [common_pb2.ChatMessage(role="user", content=prompt)]
    if system:
        messages.insert(0, common_pb2.ChatMessage(role="system", content=system))
    req = generator_pb2.GenerateRequest(messages=messages, sampling=sampling)
    started = time.perf_counter()
    first = None
    parts: list[str] = []
    usage = generator_pb2.Usage()
    async for chunk in stub.GenerateStream(req, timeout=600):
        if first is None and chunk.delta:
            first = time.perf_counter()
        parts.append(chunk.delta)
        if chunk.finish_reason:
            usage = chunk.usage
    end = time.perf_counter()
    return Run(
        (first or end) - started,
        end - started,
        usage.completion_tokens,
        "".join(parts),
        usage.prompt_tokens,
    )


@dataclass
class Level:
    """Requests sent `clients` at a time: every answer, and the wall time of each wave."""

    runs: list[Run] = field(default_factory=list)
    wall: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.runs) / self.wall

    @property
    def p50_ms(self) -> float:
        return statistics.median(r.total for r in self.runs) * 1000

    @property
    def ttft_ms(self) -> float:
        return statistics.median(r.ttft for r in self.runs) * 1000


async def clients(
    target: str, n: int, questions: list[str], max_tokens: int, system: str
) -> tuple[float, list[Run]]:
    """The questions (seed = their index) sent by `n` clients at a time, each taking the
    next question when its answer is done; (wall seconds, answers in question order)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = generator_pb2_grpc.GeneratorStub(channel)
        runs: list[Run | None] = [None] * len(questions)
        todo = iter(range(len(questions)))

        async def client() -> None:
            for i in todo:
                runs[i] = await stream_one(stub, questions[i], max_tokens, False, i, system)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(n)))
        return time.perf_counter() - started, [r for r in runs if r is not None]


def concurrency_levels(
    service: Service, args: argparse.Namespace
) -> dict[tuple[str, int, int], Level]:
    """(workload, max_tokens, clients) -> Level, over alternating rounds: in each round every
    client count answers the same questions, so load on the machine falls on all alike."""
    questions = [PROMPTS[i % len(PROMPTS)] for i in range(max(args.concurrency))]
    levels: dict[tuple[str, int, int], Level] = {}
    for workload, system in WORKLOADS.items():
        for max_tokens in args.concurrent_max_tokens:
            # Warm-up: the first answers of a workload pay for reading its prompts once.
            asyncio.run(clients(service.target, max(args.concurrency), questions, 4, system))
            for _ in range(args.rounds):
                for n in args.concurrency:
                    wall, runs = asyncio.run(
                        clients(service.target, n, questions, max_tokens, system)
                    )
                    level = levels.setdefault((workload, max_tokens, n), Level())
                    level.runs.extend(runs)
                    level.wall += wall
            for n in args.concurrency:
                level = levels[(workload, max_tokens, n)]
                console.print(
                    f"  {workload}, max_tokens {max_tokens}, {n} clients: "
                    f"{level.tokens_per_s:.1f} tok/s, p50 {level.p50_ms:.0f} ms"
                )
    return levels


# -- the raw libraries ----------------------------------------------------------------------


class RawLlamaCpp:
    """llama-cpp-python's Llama, as its users call it."""

    label = "llama-cpp-python raw: create_completion(stream=True)"

    def __init__(self, model: Path, threads: int, context: int) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.llm = Llama(
            str(model),
            n_ctx=context,
            n_threads=threads,
            n_threads_batch=threads,  # Llama's default is every core for prompts
            flash_attn=True,
            verbose=False,
        )
        meta = self.llm.metadata
        self.formatter = Jinja2ChatFormatter(
            template=meta["tokenizer.chat_template"],
            eos_token=self.llm._model.token_get_text(int(meta["tokenizer.ggml.eos_token_id"])),
            bos_token=self.llm._model.token_get_text(int(meta["tokenizer.ggml.bos_token_id"])),
        )

    def run(self, question: str, max_tokens: int) -> Run:
        prompt = self.formatter(messages=[{"role": "user", "content": question}]).prompt
        self.llm.reset()  # no prompt reuse: each measured prompt is new to the service too
        started = time.perf_counter()
        first = None
        parts = []
        for chunk in self.llm.create_completion(
            prompt, max_tokens=max_tokens, temperature=0.0, stream=True
        ):
            if first is None:
                first = time.perf_counter()
            parts.append(chunk["choices"][0]["text"])
        end = time.perf_counter()
        text = "".join(parts)
        tokens = len(self.llm.tokenize(text.encode(), add_bos=False, special=False))
        prompt_tokens = len(self.llm.tokenize(prompt.encode(), add_bos=False, special=True))
        return Run((first or end) - started, end - started, tokens, text, prompt_tokens)


class RawTransformers:
    """transformers' generate with a streamer that notes when each token arrives."""

    label = "transformers raw: generate(streamer=...)"

    def __init__(self, model: str, threads: int, device: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from shared.models.generator_files import configured_model

        path = configured_model(model)
        where, extra = (str(path.parent), {"gguf_file": path.name}) if path.is_file() else (
            str(path), {})  # fmt: skip
        if device == "cpu":
            torch.set_num_threads(threads)
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        self.tokenizer = AutoTokenizer.from_pretrained(where, **extra)
        self.model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, **extra)
        self.model = self.model.to(device).eval()
        self.device = device
        self.torch = torch

    def run(self, question: str, max_tokens: int) -> Run:
        from transformers.generation.streamers import BaseStreamer

        prompt = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
        ids = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").to(self.device)
        stamps: list[float] = []
        out: list[int] = []

        class Stamps(BaseStreamer):
            def __init__(self) -> None:
                self.prompt_seen = False

            def put(self, value: object) -> None:
                if not self.prompt_seen:  # the first call carries the prompt
                    self.prompt_seen = True
                    return
                stamps.append(time.perf_counter())
                out.extend(int(t) for t in value.reshape(-1).tolist())  # type: ignore[attr-defined]

            def end(self) -> None:
                pass

        started = time.perf_counter()
        with self.torch.inference_mode():
            self.model.generate(
                **ids,
                max_new_tokens=max_tokens,
                do_sample=False,
                streamer=Stamps(),
                pad_token_id=self.tokenizer.eos_token_id,
            )
        if self.device != "cpu":
            self.torch.cuda.synchronize()
        end = time.perf_counter()
        ends = {self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id}
        tokens = [t for t in out if t not in ends]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        first = (stamps[0] if stamps else end) - started
        return Run(first, end - started, len(tokens), text, int(ids["input_ids"].shape[1]))


# -- the openai engine against a llama.cpp server ----------------------------------------------

# With PROMPTS (and some with the gateway's system prompt), the 20 chat requests of the parity
# count: the figure is 20.
PARITY_QUESTIONS = [
    "What is the capital of France?",
    "Why is the sky blue?",
    "Write a haiku about bread.",
    "List three uses of copper.",
    "How do vaccines train the immune system?",
    "Summarise the plot of Romeo and Juliet.",
    "What does a compiler do?",
    "Give two tips for sleeping better.",
    "Explain what a black hole is.",
    "Why do leaves change colour in autumn?",
    "What is the difference between weather and climate?",
    "How does a refrigerator keep food cold?",
]


def parity_chats() -> list[tuple[str, str]]:
    """(system, question) for the 20 requests: every PROMPT bare, the questions alternately
    bare and under the gateway's grounded-chat system prompt."""
    chats = [("", p) for p in PROMPTS]
    chats += [(SYSTEM_PROMPT if i % 2 else "", q) for i, q in enumerate(PARITY_QUESTIONS)]
    return chats[:20]


def forget_prompt(url: str) -> None:
    """Makes llama-cpp-python's server read the next prompt whole. It keeps the last prompt's
    KV cache and reads only what a new prompt adds to their common prefix; that shorter pass
    takes another of llama.cpp's flash-attention kernels (see backends/llamacpp.py) and can
    change a greedy answer. A one-token completion of an unrelated prompt leaves no prefix."""
    import httpx

    body = {"prompt": "x", "max_tokens": 1, "temperature": 0.0}
    httpx.post(f"{url}/completions", json=body, timeout=60).raise_for_status()


class DirectServer:
    """llama-cpp-python's server read straight over HTTP (SSE), as an OpenAI client would."""

    label = "llama_cpp.server direct: /v1/chat/completions (SSE)"

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.client = httpx.Client(timeout=600)

    def run(self, system: str, question: str, max_tokens: int) -> Run:
        import json

        messages = [{"role": "user", "content": question}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        # The openai engine's sampling fields (the server's own defaults are not greedy).
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
                "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "stream": True}  # fmt: skip
        started = time.perf_counter()
        first = None
        parts: list[str] = []
        with self.client.stream("POST", f"{self.url}/chat/completions", json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if delta:
                    first = first or time.perf_counter()
                    parts.append(delta)
        end = time.perf_counter()
        # A piece per token, as the openai engine counts them.
        return Run((first or end) - started, end - started, len(parts), "".join(parts))


class Gateway:
    """The gateway as a process, in front of one generator (no other service: plain chat needs
    none), read over its OpenAI-compatible streaming chat, as an OpenAI client would."""

    label = "gateway /v1/chat/completions (SSE) -> openai engine"

    def __init__(self, generator: str, log: Path) -> None:
        import httpx

        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
        env.update(
            HF_HUB_OFFLINE="1",
            RAGRAIL_GATEWAY_PORT=str(self.port),
            RAGRAIL_GATEWAY_GENERATOR_URL=generator,
        )
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.gateway"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        # A connection per request, as the gRPC side opens a channel per request.
        self.client = httpx.Client(timeout=600, limits=httpx.Limits(max_keepalive_connections=0))

    def wait(self, timeout: float = 120) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"gateway exited; log:\n{self.log.read_text()[-3000:]}")
            try:  # any answer will do: its health says degraded without an embedder
                httpx.get(f"{self.url}/v1/health", timeout=5)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise SystemExit(f"gateway not answering after {timeout} s; see {self.log}")

    def run(self, system: str, question: str, max_tokens: int) -> Run:
        import json

        messages = [{"role": "user", "content": question}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        body = {"model": "any", "messages": messages, "max_tokens": max_tokens,
                "temperature": 0.0, "seed": 0, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        started = time.perf_counter()
        first = None
        parts: list[str] = []
        tokens = 0
        with self.client.stream("POST", f"{self.url}/v1/chat/completions", json=body) as reply:
            reply.raise_for_status()
            for line in reply.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise SystemExit(f"the gateway's stream failed: {event['error']}")
                for choice in event.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content") or ""
                    if delta:
                        first = first or time.perf_counter()
                        parts.append(delta)
                if event.get("usage"):
                    tokens = int(event["usage"].get("completion_tokens") or 0)
        end = time.perf_counter()
        return Run((first or end) - started, end - started, tokens, "".join(parts))

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class OpenAIResult:
    local: PathResult
    remote: PathResult
    direct: PathResult
    gateway: PathResult


def bench_openai(args: argparse.Namespace) -> OpenAIResult:
    from shared.models.generator_files import configured_model
    from tests.generator.openai_peer import LlamaServer, server_missing

    missing = server_missing()
    if missing:
        raise SystemExit(missing)
    gguf = configured_model(args.gguf)
    common = {
        "RAGRAIL_GENERATOR_THREADS": str(args.threads),
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
        "RAGRAIL_GENERATOR_MAX_BATCH_SIZE": "1",  # the server has one slot too
        "RAGRAIL_GENERATOR_KV_CACHE_TOKENS": str(args.context),
    }
    # Every prompt read whole, as the server is made to (forget_prompt).
    local_env = {**common, "RAGRAIL_GENERATOR_ENGINE": "llamacpp",
                 "RAGRAIL_GENERATOR_PREFIX_CACHE": "false"}  # fmt: skip
    if args.gguf:
        local_env["RAGRAIL_GENERATOR_MODEL"] = args.gguf
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-openai-") as tmp:
        server = LlamaServer(gguf, Path(tmp) / "llama-server.log", n_ctx=args.context,
                             threads=args.threads)  # fmt: skip
        console.print(
            "[bold]openai[/bold]: starting llama_cpp.server, two generators and a gateway"
        )
        server.start()
        remote_env = {
            **common,
            "RAGRAIL_GENERATOR_ENGINE": "openai",
            "RAGRAIL_GENERATOR_REMOTE_URL": server.url,
            "RAGRAIL_GENERATOR_TOKENIZER": str(gguf),
        }
        local = Service(local_env, Path(tmp) / "llamacpp.log")
        remote = Service(remote_env, Path(tmp) / "openai.log")
        gateway = Gateway(remote.target, Path(tmp) / "gateway.log")
        try:
            asyncio.run(local.wait())
            asyncio.run(remote.wait())
            gateway.wait()
            return measure_openai(local, remote, gateway, server.url, args)
        finally:
            gateway.stop()
            local.stop()
            remote.stop()
            server.stop()


async def service_run(service: Service, system: str, question: str, tokens: int) -> Run:
    """One greedy chat streamed from a generator over gRPC."""
    async with grpc.aio.insecure_channel(service.target) as channel:
        stub = generator_pb2_grpc.GeneratorStub(channel)
        return await stream_one(stub, question, tokens, True, 0, system)


REMOTE_LABEL = "service, openai engine -> llama_cpp.server: gRPC GenerateStream"


def measure_openai(
    local: Service, remote: Service, gateway: Gateway, url: str, args: argparse.Namespace
) -> OpenAIResult:
    direct = DirectServer(url)
    result = OpenAIResult(
        PathResult("service, llamacpp engine (in process): gRPC GenerateStream"),
        PathResult(REMOTE_LABEL),
        PathResult(direct.label),
        PathResult(gateway.label),
    )

    # Warm-up on a question not measured (first calls size buffers, read the template).
    for service in (local, remote):
        asyncio.run(service_run(service, "", "Say hello.", 4))
    gateway.run("", "Say hello.", 4)
    forget_prompt(url)
    tokens = args.max_tokens
    for i, (system, question) in enumerate(parity_chats(), 1):
        # Taking turns, so both paths see the same machine load.
        result.local.runs.append(asyncio.run(service_run(local, system, question, tokens)))
        forget_prompt(url)
        result.remote.runs.append(asyncio.run(service_run(remote, system, question, tokens)))
        forget_prompt(url)
        result.direct.runs.append(direct.run(system, question, tokens))
        forget_prompt(url)
        result.gateway.runs.append(gateway.run(system, question, tokens))
        a, b = result.local.runs[-1], result.remote.runs[-1]
        same = a.text == b.text and a.tokens == b.tokens
        console.print(
            f"  {i:2d}: {b.tokens} tokens, openai {b.tokens / b.total:.1f} tok/s, in process "
            f"{a.tokens / a.total:.1f} tok/s, {'same' if same else 'DIFFERENT'}"
        )
    return result


def openai_table(r: OpenAIResult, args: argparse.Namespace) -> Table:
    n = len(r.local.runs)
    table = Table(
        title=f"openai engine vs in-process llamacpp: {n} chat requests, greedy, up to "
        f"{args.max_tokens} tokens each, {args.threads} thread(s)"
    )
    columns = ("path", "TTFT p50 ms", "TTFT vs in process", "tokens/s", "decode tokens/s",
               "decode vs in process", "same tokens")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")

    def same(runs: list[Run]) -> str:
        pairs = zip(r.local.runs, runs, strict=True)
        return f"{sum(a.text == b.text and a.tokens == b.tokens for a, b in pairs)}/{n}"

    rows = ((r.local, ""), (r.remote, same(r.remote.runs)), (r.direct, same(r.direct.runs)),
            (r.gateway, same(r.gateway.runs)))  # fmt: skip
    for path, served in rows:
        table.add_row(
            path.label,
            f"{path.ttft_ms:.0f}",
            f"{path.ttft_ms - r.local.ttft_ms:+.0f} ms",
            f"{path.tokens_per_s:.1f}",
            f"{path.decode_per_s:.1f}",
            f"{path.decode_per_s / r.local.decode_per_s:.2f}",
            served,
        )
    table.caption = (
        "same tokens: the answer's text and token count equal the in-process engine's. Every "
        "prompt is read whole: left to itself llama-cpp-python's server reads only what a "
        "prompt adds to the last one's, in a shorter pass whose flash-attention kernel can "
        "change a greedy answer (6 of these 20 did, in a run without clearing). Target: "
        "decode >= 0.9 x in process, 20/20 the same."
    )
    return table


def bench_openai_gateway(args: argparse.Namespace) -> tuple[PathResult, PathResult, str]:
    """The gateway's TTFT overhead alone: llama_cpp.server, an openai generator and a gateway
    in front of it; (the generator over gRPC, the gateway, how they were asked)."""
    from shared.models.generator_files import configured_model
    from tests.generator.openai_peer import LlamaServer, server_missing

    missing = server_missing()
    if missing:
        raise SystemExit(missing)
    gguf = configured_model(args.gguf)
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-gateway-") as tmp:
        server = LlamaServer(gguf, Path(tmp) / "llama-server.log", n_ctx=args.context,
                             threads=args.threads)  # fmt: skip
        console.print(
            "[bold]openai-gateway[/bold]: starting llama_cpp.server, a generator and a gateway"
        )
        server.start()
        remote = Service(
            {
                "RAGRAIL_GENERATOR_ENGINE": "openai",
                "RAGRAIL_GENERATOR_REMOTE_URL": server.url,
                "RAGRAIL_GENERATOR_TOKENIZER": str(gguf),
                "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
            },
            Path(tmp) / "openai.log",
        )
        gateway = Gateway(remote.target, Path(tmp) / "gateway.log")
        try:
            asyncio.run(remote.wait())
            gateway.wait()
            grpc_path, gateway_path = PathResult(REMOTE_LABEL), PathResult(gateway.label)
            asyncio.run(service_run(remote, "", "Say hello.", 4))
            gateway.run("", "Say hello.", 4)
            for i, (system, question) in enumerate(parity_chats(), 1):
                # The server reads the prompt once, unmeasured; every measured request then
                # finds it in the server's cache, so TTFT is the path and one decoding step,
                # not a prefill whose time swings with the machine's load.
                forget_prompt(server.url)
                asyncio.run(service_run(remote, system, question, 1))
                diffs = []
                for r in range(args.rounds):

                    def by_grpc(s: str = system, q: str = question) -> Run:
                        return asyncio.run(service_run(remote, s, q, args.max_tokens))

                    def by_gateway(s: str = system, q: str = question) -> Run:
                        return gateway.run(s, q, args.max_tokens)

                    # Taking turns, and which goes first alternates.
                    if (i + r) % 2:
                        b, a = by_gateway(), by_grpc()
                    else:
                        a, b = by_grpc(), by_gateway()
                    grpc_path.runs.append(a)
                    gateway_path.runs.append(b)
                    diffs.append((b.ttft - a.ttft) * 1000)
                console.print(
                    f"  {i:2d}: TTFT gRPC {a.ttft * 1000:.0f} ms, gateway {b.ttft * 1000:.0f} ms;"
                    f" overhead median of {args.rounds}: {statistics.median(diffs):+.1f} ms"
                )
            how = (
                f"{len(parity_chats())} chats x {args.rounds} rounds, each prompt cached by the "
                "server, paths taking turns"
            )
            return grpc_path, gateway_path, how
        finally:
            gateway.stop()
            remote.stop()
            server.stop()


def gateway_table(
    direct: PathResult, gateway: PathResult, how: str, args: argparse.Namespace
) -> Table:
    """The gateway's time-to-first-token overhead over the generator read over gRPC."""
    n = len(direct.runs)
    table = Table(
        title=f"Gateway TTFT overhead, openai engine: {how}; greedy, up to {args.max_tokens} "
        "tokens each"
    )
    columns = ("path", "TTFT p50 ms", "TTFT mean ms", "overhead p50 ms", "overhead mean ms",
               "TTFT ratio", "same text")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    pairs = list(zip(direct.runs, gateway.runs, strict=True))
    diffs = [(b.ttft - a.ttft) * 1000 for a, b in pairs]
    same = sum(a.text == b.text for a, b in pairs)
    mean = statistics.mean(r.ttft for r in direct.runs) * 1000
    table.add_row(direct.label, f"{direct.ttft_ms:.0f}", f"{mean:.0f}", "", "", "1.00", "")
    gmean = statistics.mean(r.ttft for r in gateway.runs) * 1000
    table.add_row(
        gateway.label,
        f"{gateway.ttft_ms:.0f}",
        f"{gmean:.0f}",
        f"{statistics.median(diffs):+.1f}",
        f"{statistics.mean(diffs):+.1f}",
        f"{gateway.ttft_ms / direct.ttft_ms:.2f}",
        f"{same}/{n}",
    )
    table.caption = (
        f"overhead: gateway TTFT minus gRPC TTFT of the same chat, asked one after the other "
        f"(p50 and mean of the {n} differences); TTFT to the first piece of text, the "
        "gateway's read from its SSE stream (HTTP, the chat's checks and prompt fitting, then "
        "the same gRPC call). With every prompt read whole, prefill time swings with the load "
        "and buries the difference; --engines openai-gateway asks each prompt cached (where "
        "same text can then differ: a cached prompt's shorter pass takes another flash-"
        "attention kernel, see forget_prompt). Target (issue 27): <= 50 ms."
    )
    return table


# -- the run --------------------------------------------------------------------------------


@dataclass
class EngineResult:
    engine: str
    raw: PathResult
    service: PathResult
    concurrency: dict[tuple[str, int, int], Level]


def bench_engine(
    engine: str, args: argparse.Namespace, make_raw: Callable[[], RawLlamaCpp | RawTransformers]
) -> EngineResult:
    env = {
        "RAGRAIL_GENERATOR_ENGINE": engine,
        "RAGRAIL_GENERATOR_THREADS": str(args.threads),
        "RAGRAIL_GENERATOR_MAX_BATCH_SIZE": str(max(args.concurrency)),
        "RAGRAIL_GENERATOR_QUEUE_SIZE": "64",
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
        "RAGRAIL_GENERATOR_KV_CACHE_TOKENS": str(args.context * max(args.concurrency)),
    }
    if engine == "torch":
        env["RAGRAIL_GENERATOR_DEVICE"] = args.device
        env["RAGRAIL_GENERATOR_MODEL"] = args.torch_model
    elif args.gguf:
        env["RAGRAIL_GENERATOR_MODEL"] = args.gguf
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-generator-") as tmp:
        service = Service(env, Path(tmp) / f"{engine}.log")
        try:
            console.print(f"[bold]{engine}[/bold]: loading the raw library and the service")
            raw = make_raw()
            asyncio.run(service.wait())
            return measure(engine, service, raw, args)
        finally:
            service.stop()


def measure(
    engine: str, service: Service, raw: RawLlamaCpp | RawTransformers, args: argparse.Namespace
) -> EngineResult:
    prompts = PROMPTS[: args.prompts]
    raw_result = PathResult(raw.label)
    service_result = PathResult(f"service, {engine} engine: gRPC GenerateStream")

    async def service_run(prompt: str) -> Run:
        async with grpc.aio.insecure_channel(service.target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return await stream_one(stub, prompt, args.max_tokens, True, seed=0)

    # Warm both (first calls size buffers and compile kernels) on a prompt not measured, so
    # the service has no measured prompt to reuse; then take turns per prompt.
    raw.run(PROMPTS[-1], 4)
    asyncio.run(service_run(PROMPTS[-1]))
    for prompt in prompts:
        raw_result.runs.append(raw.run(prompt, args.max_tokens))
        service_result.runs.append(asyncio.run(service_run(prompt)))
        console.print(
            f"  {engine} single stream: {service_result.runs[-1].tokens} tokens, service "
            f"{service_result.runs[-1].tokens / service_result.runs[-1].total:.1f} tok/s, raw "
            f"{raw_result.runs[-1].tokens / raw_result.runs[-1].total:.1f} tok/s"
        )
    if isinstance(raw, RawTransformers):
        del raw.model  # free its memory (and threads) before the concurrent runs
    return EngineResult(engine, raw_result, service_result, concurrency_levels(service, args))


def single_table(results: list[EngineResult], args: argparse.Namespace) -> Table:
    table = Table(
        title=f"Single stream, greedy: {args.prompts} prompts, up to {args.max_tokens} tokens each"
    )
    columns = ("path", "TTFT p50 ms", "tokens/s", "decode tokens/s", "ratio vs raw",
               "same text", "prompt tokens/s")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    for r in results:
        same = sum(a.text == b.text for a, b in zip(r.raw.runs, r.service.runs, strict=True))
        ratio = f"{r.service.tokens_per_s / r.raw.tokens_per_s:.2f}"
        rows = ((r.raw, "1.00", ""), (r.service, ratio, f"{same}/{len(r.raw.runs)}"))
        for path, ratio, same_cell in rows:
            table.add_row(
                path.label,
                f"{path.ttft_ms:.0f}",
                f"{path.tokens_per_s:.1f}",
                f"{path.decode_per_s:.1f}",
                ratio,
                same_cell,
                f"{path.prefill_per_s:.0f}",
            )
    table.caption = (
        "tokens/s = answer tokens / time from request to last token (prefill included); "
        "decode tokens/s leaves out the time to the first token; prompt tokens/s (prompt "
        "tokens / TTFT) is the rate of passes carrying many tokens, the ceiling for batching. "
        "Target: service >= 0.9 x raw."
    )
    return table


def concurrency_table(results: list[EngineResult], args: argparse.Namespace) -> Table:
    table = Table(
        title=f"Concurrent clients through the service: {max(args.concurrency)} questions per "
        f"round, {args.rounds} rounds, sampled (seeded)"
    )
    columns = ("engine", "workload", "max_tokens", "clients", "aggregate tokens/s", "vs 1",
               "p50 latency ms", "vs 1", "TTFT p50 ms", "same text")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    for r in results:
        base_n = min(args.concurrency)
        for (workload, max_tokens, n), level in r.concurrency.items():
            base = r.concurrency[(workload, max_tokens, base_n)]
            same = sum(a.text == b.text for a, b in zip(base.runs, level.runs, strict=True))
            table.add_row(
                r.engine,
                workload,
                str(max_tokens),
                str(n),
                f"{level.tokens_per_s:.1f}",
                f"{level.tokens_per_s / base.tokens_per_s:.2f}",
                f"{level.p50_ms:.0f}",
                f"{level.p50_ms / base.p50_ms:.2f}",
                f"{level.ttft_ms:.0f}",
                f"{same}/{len(level.runs)}",
            )
    table.caption = (
        "aggregate tokens/s = answer tokens / wall time of the rounds; latency from request to "
        "last token. Target (issue 17): 4 clients >= 2.5 x the aggregate of 1 client, with p50 "
        "<= 2 x."
    )
    return table


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
