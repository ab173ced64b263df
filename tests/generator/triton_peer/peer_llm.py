"""A CPU language model inside a real Triton server, standing in for TensorRT-LLM in tests.

The peer models (llmapi_model.py, ensemble_model.py) are Triton Python-backend models with
TensorRT-LLM's tensor names; they run in the tritonserver that nvidia-pytriton ships, under
the .venv-pytriton interpreter, and generate with llama.cpp on the GGUF named by PEER_GGUF
(the packaged SmolLM2-135M). Like TensorRT-LLM they take a raw prompt, stream one piece of
text per generated token, stop at stop strings and at max_tokens, and abort a request whose
client went away (Triton's request cancellation).

Every finished request is appended to the JSON-lines file PEER_EVENTS, if set, so tests can
see what the server did: {"model", "request_id", "end": stop|length|cancelled, "pieces"
(text pieces streamed, about one per token), "sampling"}.

What the two models do alike is PeerModel's: each answers a request on a thread of its own and
turns an exception into the request's final error response.
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import triton_python_backend_utils as pb_utils
from llama_cpp import Llama


@dataclass
class PeerSampling:
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)


class PeerLLM:
    def __init__(self) -> None:
        self.llm = Llama(
            model_path=os.environ["PEER_GGUF"],
            n_ctx=2048,
            n_threads=1,
            flash_attn=True,  # llama.cpp's default for a context, and the llamacpp engine's
            verbose=False,
        )
        # The first evaluation took about 10 s here (llama.cpp sets up its buffers); do it
        # while Triton loads the model, not in the first request.
        self.llm.create_completion("Hello", max_tokens=1)
        # One llama.cpp context: requests take turns (TensorRT-LLM would batch them).
        self.lock = threading.Lock()
        self.events = os.environ.get("PEER_EVENTS", "")
        self.events_lock = threading.Lock()

    def generate(
        self, prompt: str, sampling: PeerSampling, cancelled: Callable[[], bool]
    ) -> Iterator[tuple[str, str | None]]:
        """(new text, None) per token, then ("", "stop" | "length" | "cancelled") once."""
        seed = random.getrandbits(32) if sampling.seed is None else sampling.seed & 0xFFFFFFFF
        with self.lock:
            if cancelled():
                yield "", "cancelled"
                return
            pieces = self.llm.create_completion(
                prompt,
                max_tokens=sampling.max_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                repeat_penalty=sampling.repetition_penalty,
                seed=seed,
                stop=sampling.stop or None,
                stream=True,
            )
            end = "stop"
            try:
                for piece in pieces:
                    if cancelled():
                        end = "cancelled"
                        break
                    choice = piece["choices"][0]
                    if choice["text"]:
                        yield choice["text"], None
                    if choice.get("finish_reason"):
                        end = choice["finish_reason"]
            finally:
                pieces.close()
        yield "", end

    def record(
        self, model: str, request_id: str, end: str, pieces: int, sampling: PeerSampling
    ) -> None:
        if not self.events:
            return
        line = json.dumps(
            {
                "model": model,
                "request_id": request_id,
                "end": end,
                "pieces": pieces,
                "sampling": asdict(sampling),
            }
        )
        with self.events_lock, open(self.events, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def scalar(array: Any, default: Any) -> Any:
    """The one value of an optional scalar input (shape [1], or [1, 1] with a batch
    dimension), or `default` when the request left it out."""
    if array is None:
        return default
    value = array.reshape(-1)[0]
    return value.item() if hasattr(value, "item") else value


def strings(array: Any) -> list[str]:
    """Every string of an optional BYTES input (the prompt, stop strings)."""
    if array is None:
        return []
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]


def read_sampling(request: Any, names: dict[str, str], max_tokens: int) -> PeerSampling:
    """A request's sampling: `names` maps PeerSampling's fields to the model's input names; a
    field it leaves out, or an input the request leaves out, keeps PeerSampling's default
    (`max_tokens`: the model's own)."""

    def value(field: str, default: Any) -> Any:
        return scalar(tensor(request, names[field]), default) if field in names else default

    return PeerSampling(
        max_tokens=int(value("max_tokens", max_tokens)),
        temperature=float(value("temperature", 1.0)),
        top_p=float(value("top_p", 1.0)),
        top_k=int(value("top_k", 0)),
        repetition_penalty=float(value("repetition_penalty", 1.0)),
        seed=value("seed", None),
        stop=strings(tensor(request, names["stop"])),
    )


def tensor(request: Any, name: str) -> Any:
    """The input `name` of a Triton request as a numpy array, or None when it was left out."""
    found = pb_utils.get_input_tensor_by_name(request, name)
    return None if found is None else found.as_numpy()


class PeerModel:
    """A decoupled Triton Python model on PeerLLM: `execute` returns at once, each request is
    answered by `answer` on a thread of its own, and an exception there is sent as the
    request's final response, an error (its message after `error_prefix`)."""

    error_prefix = ""

    def initialize(self, args: dict[str, Any]) -> None:
        self.model_name = json.loads(args["model_config"])["name"]
        self.llm = PeerLLM()

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            threading.Thread(target=self.run, args=(request,), daemon=True).start()

    def run(self, request: Any) -> None:
        sender = request.get_response_sender()
        try:
            self.answer(request, sender)
        except Exception as exc:
            error = pb_utils.TritonError(f"{self.error_prefix}{exc}")
            sender.send(
                pb_utils.InferenceResponse(error=error),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    def answer(self, request: Any, sender: Any) -> None:
        raise NotImplementedError
