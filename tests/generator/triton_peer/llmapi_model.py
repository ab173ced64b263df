"""Triton Python model with the interface of TensorRT-LLM's LLM API model (`llmapi`), for tests.

Loaded as tensorrt_llm/1/model.py next to deploy/triton's config.pbtxt and model.yaml, so the
test exercises the deployment's own tensor declarations. It behaves as TensorRT-LLM's
model.py does towards a client: `triton_config` in model.yaml sets the decoupled policy and
max_batch_size at load (auto_complete_config), sampling_param_* and streaming are read as
scalars, each streamed response carries the whole text so far and a finish_reason ("None"
until the last, which carries the COMPLETE_FINAL flag), and a cancelled request is aborted.
Generation is peer_llm's llama.cpp model instead of TensorRT-LLM.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
import yaml
from peer_llm import PeerModel, read_sampling, scalar, strings, tensor

HERE = os.path.dirname(os.path.abspath(__file__))
# PeerSampling's fields -> the model's sampling_param_* inputs (no repetition penalty).
FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop")
SAMPLING = {field: f"sampling_param_{field}" for field in FIELDS}


def triton_config() -> dict[str, Any]:
    with open(os.path.join(HERE, "model.yaml"), encoding="utf-8") as file:
        return dict(yaml.safe_load(file)["triton_config"])


class TritonPythonModel(PeerModel):
    error_prefix = "Error generating request: "

    @classmethod
    def auto_complete_config(cls, config: Any) -> Any:
        settings = triton_config()
        config.set_model_transaction_policy({"decoupled": bool(settings["decoupled"])})
        config.set_max_batch_size(int(settings["max_batch_size"]))
        return config

    def initialize(self, args: dict[str, Any]) -> None:
        self.decoupled = bool(triton_config()["decoupled"])
        super().initialize(args)

    def answer(self, request: Any, sender: Any) -> None:
        prompts = strings(tensor(request, "text_input"))
        if not prompts:
            raise ValueError("text_input is missing from the request")
        sampling = read_sampling(request, SAMPLING, max_tokens=32)
        streaming = bool(scalar(tensor(request, "streaming"), False))
        if streaming and not self.decoupled:
            raise ValueError("Streaming is only supported in decoupled mode.")
        with_reason = bool(scalar(tensor(request, "return_finish_reason"), False))

        def response(text: str, reason: str | None) -> Any:
            outputs = [pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))]
            if with_reason:
                outputs.append(
                    pb_utils.Tensor("finish_reason", np.array([str(reason)], dtype=np.object_))
                )
            return pb_utils.InferenceResponse(output_tensors=outputs)

        text, pieces = "", 0
        for piece, end in self.llm.generate(prompts[0], sampling, sender.is_cancelled):
            if end == "cancelled":
                # TensorRT-LLM's model answers a cancelled request with a final error.
                sender.send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("Request cancelled by client")
                    ),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
            elif end is not None:
                final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                sender.send(response(text, end), flags=final)
            else:
                text, pieces = text + piece, pieces + 1
                if streaming:
                    sender.send(response(text, None))
            if end is not None:
                self.llm.record(self.model_name, request.request_id(), end, pieces, sampling)
