"""Triton Python model with the interface of TensorRT-LLM's inflight_batcher_llm `ensemble`,
for tests (loaded as ensemble/1/model.py with ensemble.pbtxt as its config.pbtxt).

Towards a client it behaves as the ensemble does: a batch dimension on every tensor,
text_input, max_tokens, stream, sampling scalars, stop_words and random_seed in; each
streamed response carries only the new text; no finish reason; the last response is an
empty one with the COMPLETE_FINAL flag. Generation is peer_llm's llama.cpp model.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from peer_llm import PeerLLM, PeerSampling, scalar, strings


def tensor(request: Any, name: str) -> Any:
    found = pb_utils.get_input_tensor_by_name(request, name)
    return None if found is None else found.as_numpy()


class TritonPythonModel:
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
            sender.send(
                pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    def answer(self, request: Any, sender: Any) -> None:
        prompts = strings(tensor(request, "text_input"))
        sampling = PeerSampling(
            max_tokens=int(scalar(tensor(request, "max_tokens"), 16)),
            temperature=float(scalar(tensor(request, "temperature"), 1.0)),
            top_p=float(scalar(tensor(request, "top_p"), 1.0)),
            top_k=int(scalar(tensor(request, "top_k"), 0)),
            repetition_penalty=float(scalar(tensor(request, "repetition_penalty"), 1.0)),
            seed=scalar(tensor(request, "random_seed"), None),
            stop=strings(tensor(request, "stop_words")),
        )
        stream = bool(scalar(tensor(request, "stream"), False))

        def response(text: str) -> Any:
            array = np.array([[text.encode()]], dtype=np.object_)  # [batch, 1]
            return pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("text_output", array)]
            )

        text, pieces = "", 0
        for piece, end in self.llm.generate(prompts[0], sampling, sender.is_cancelled):
            if end is None:
                text, pieces = text + piece, pieces + 1
                if stream:
                    sender.send(response(piece))
                continue
            if end != "cancelled" and not stream:
                sender.send(response(text))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            self.llm.record(self.model_name, request.request_id(), end, pieces, sampling)
