"""Triton Python model with the interface of TensorRT-LLM's inflight_batcher_llm `ensemble`,
for tests (loaded as ensemble/1/model.py with ensemble.pbtxt as its config.pbtxt).

Towards a client it behaves as the ensemble does: a batch dimension on every tensor,
text_input, max_tokens, stream, sampling scalars, stop_words and random_seed in; each
streamed response carries only the new text; no finish reason; the last response is an
empty one with the COMPLETE_FINAL flag. Generation is peer_llm's llama.cpp model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from peer_llm import PeerModel, read_sampling, scalar, strings, tensor

# PeerSampling's fields -> the ensemble's inputs.
SAMPLING = {
    **{name: name for name in ("max_tokens", "temperature", "top_p", "top_k")},
    "repetition_penalty": "repetition_penalty",
    "seed": "random_seed",
    "stop": "stop_words",
}


class TritonPythonModel(PeerModel):
    def answer(self, request: Any, sender: Any) -> None:
        prompts = strings(tensor(request, "text_input"))
        sampling = read_sampling(request, SAMPLING, max_tokens=16)
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
