"""The two tensor interfaces TensorRT-LLM models expose in Triton, as the triton engine speaks
them: what a request becomes, and what a streamed response means.

- `llmapi`: TensorRT-LLM's LLM API model (`triton_backend/all_models/llmapi/tensorrt_llm` in
  the TensorRT-LLM repository; the PyTorch-backend path since `trtllm-build` was retired).
  Inputs `text_input`, `streaming`, `sampling_param_{temperature,top_p,top_k,max_tokens,stop,
  seed,...}`, `return_finish_reason`; outputs `text_output` and `finish_reason`. No batch
  dimension (`max_batch_size: 0`). Each streamed response carries the whole text so far
  (`RequestOutput.outputs[i].text`), not the new piece.
- `ensemble`: the inflight_batcher_llm ensemble of older releases (preprocessing, tensorrt_llm,
  postprocessing). Inputs `text_input`, `max_tokens`, `stream`, `temperature`, `top_p`,
  `top_k`, `repetition_penalty`, `stop_words`, `random_seed` (`seed` since 2025); output
  `text_output`, with a batch dimension. Each streamed response carries only the new tokens'
  text, and no finish reason.

Types and shapes are not hard-coded: they come from the model's own metadata (releases moved
`max_tokens` and `top_k` from UINT32 to INT32, and renamed `random_seed` to `seed`), and
inputs the model does not declare are not sent (Triton rejects unknown inputs).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from tritonclient.grpc import InferInput, InferRequestedOutput, InferResult
from tritonclient.utils import triton_to_np_dtype

from services.generator.backends.base import FinishReason, GenerationRequest, Sampling
from shared.errors import FailedPrecondition, InvalidArgument

log = logging.getLogger(__name__)

Value = str | list[str] | bool | int | float


@dataclass(frozen=True)
class TensorSpec:
    datatype: str  # Triton's name: BYTES, BOOL, INT32, UINT32, UINT64, FP32...
    shape: tuple[int, ...]  # as the model declares it, batch dimension included, -1 variable


@dataclass(frozen=True)
class ModelSchema:
    """What Triton says about the model (get_model_metadata and get_model_config)."""

    name: str
    inputs: dict[str, TensorSpec]
    outputs: frozenset[str]
    decoupled: bool

    @classmethod
    def from_triton(cls, metadata: dict[str, Any], config: dict[str, Any]) -> ModelSchema:
        def specs(items: list[dict[str, Any]]) -> dict[str, TensorSpec]:
            return {
                t["name"]: TensorSpec(t["datatype"], tuple(int(d) for d in t.get("shape", [])))
                for t in items
            }

        policy = config.get("model_transaction_policy") or {}
        return cls(
            name=metadata["name"],
            inputs=specs(metadata.get("inputs", [])),
            outputs=frozenset(specs(metadata.get("outputs", []))),
            decoupled=bool(policy.get("decoupled", False)),
        )


def encode(name: str, spec: TensorSpec, value: Value) -> InferInput:
    """One input tensor with the model's datatype and shape. A list fills the last variable
    dimension (stop strings); every other dimension, the batch one included, is 1."""
    items = value if isinstance(value, list) else [value]
    shape = [1] * len(spec.shape)
    if isinstance(value, list) and shape:
        shape[-1] = len(items)
    if spec.datatype == "BYTES":
        array = np.array([str(v).encode("utf-8") for v in items], dtype=np.object_)
    else:
        array = np.array(items, dtype=triton_to_np_dtype(spec.datatype))
    tensor = InferInput(name, shape, spec.datatype)
    tensor.set_data_from_numpy(array.reshape(shape))
    return tensor


def first_text(result: InferResult, name: str) -> str | None:
    """The first string of a BYTES output, or None when the response does not carry it."""
    array = result.as_numpy(name)
    if array is None or array.size == 0:
        return None
    item = array.reshape(-1)[0]
    return item.decode("utf-8", errors="replace") if isinstance(item, bytes) else str(item)


@dataclass
class StreamState:
    """What a protocol remembers between the responses of one request."""

    text: str = ""  # llmapi: the whole text received so far
    revised: bool = False  # a warning about revised text was logged
    extra: dict[str, Any] = field(default_factory=dict)


class TritonProtocol(ABC):
    name: ClassVar[str]
    default_model: ClassVar[str]
    required: ClassVar[tuple[str, ...]]  # inputs the model must declare

    @abstractmethod
    def values(self, request: GenerationRequest) -> dict[str, Value | None]:
        """Input tensor name -> value (None: leave out, the model's default applies).
        Names with alternatives are written "a|b": the first the model declares is used."""

    @abstractmethod
    def outputs(self) -> tuple[str, ...]:
        """Outputs to ask for (those the model declares)."""

    @abstractmethod
    def read(self, result: InferResult, state: StreamState) -> tuple[str, FinishReason | None]:
        """(new text, finish reason if the response says) of one streamed response."""

    # Sampling fields with no input in the model: ones the servicer does itself (stop strings
    # are cut there too) are dropped; these would change the answer, so they are refused.
    must_honour: ClassVar[dict[str, str]] = {}

    def check(self, schema: ModelSchema) -> None:
        missing = [name for name in self.required if name not in schema.inputs]
        if missing:
            raise FailedPrecondition(
                f"Triton model '{schema.name}' has no input {', '.join(missing)}, which the "
                f"{self.name} protocol needs (it declares {', '.join(sorted(schema.inputs))}); "
                "set RAGRAIL_GENERATOR_TRITON_PROTOCOL to the model's kind (llmapi or ensemble) "
                "or RAGRAIL_GENERATOR_TRITON_MODEL to the right model"
            )
        if not schema.decoupled:
            raise FailedPrecondition(
                f"Triton model '{schema.name}' is not decoupled, so it cannot stream; set "
                "`decoupled: true` (llmapi: triton_config in model.yaml; ensemble: the "
                "tensorrt_llm model's decoupled_mode)"
            )

    def request_inputs(self, request: GenerationRequest, schema: ModelSchema) -> list[InferInput]:
        tensors = []
        for key, value in self.values(request).items():
            name = next((n for n in key.split("|") if n in schema.inputs), None)
            if value is None:
                continue
            if name is None:
                field_name = self.must_honour.get(key)
                if field_name:
                    raise InvalidArgument(
                        f"{field_name} cannot be honoured: Triton model '{schema.name}' has no "
                        f"{key.replace('|', ' or ')} input; leave {field_name} unset"
                    )
                continue
            tensors.append(encode(name, schema.inputs[name], value))
        return tensors

    def requested_outputs(self, schema: ModelSchema) -> list[InferRequestedOutput]:
        return [InferRequestedOutput(n) for n in self.outputs() if n in schema.outputs]


def _sampling_values(sampling: Sampling) -> tuple[float, int | None, float | None]:
    """(temperature, top_k or None for off, top_p or None for off). Greedy is sent as top_k 1
    as well as temperature 0, which every TensorRT-LLM release reads as greedy."""
    top_k = 1 if sampling.greedy else (sampling.top_k or None)
    top_p = sampling.top_p if sampling.top_p < 1.0 else None
    return sampling.temperature, top_k, top_p


def _seed(sampling: Sampling) -> int | None:
    # The proto's seed is int64; the models take UINT64, so negative seeds wrap.
    return None if sampling.seed is None else sampling.seed & 0xFFFF_FFFF_FFFF_FFFF


class LlmApiProtocol(TritonProtocol):
    name = "llmapi"
    default_model = "tensorrt_llm"
    required = ("text_input", "streaming", "sampling_param_max_tokens")
    must_honour = {
        "sampling_param_seed": "sampling.seed",
        "sampling_param_repetition_penalty": "sampling.repetition_penalty",
    }
    _FINISH: ClassVar[dict[str, FinishReason]] = {
        "stop": FinishReason.STOP,
        "length": FinishReason.LENGTH,
        "cancelled": FinishReason.CANCELLED,
        "timeout": FinishReason.CANCELLED,
    }

    def values(self, request: GenerationRequest) -> dict[str, Value | None]:
        sampling = request.sampling
        temperature, top_k, top_p = _sampling_values(sampling)
        return {
            "text_input": [request.prompt],
            "streaming": True,
            "sampling_param_max_tokens": sampling.max_tokens,
            "sampling_param_temperature": temperature,
            "sampling_param_top_k": top_k,
            "sampling_param_top_p": top_p,
            "sampling_param_stop": list(sampling.stop) or None,
            "sampling_param_seed": _seed(sampling),
            # The Triton model has no repetition penalty input (its SamplingParams does).
            "sampling_param_repetition_penalty": (
                sampling.repetition_penalty if sampling.repetition_penalty != 1.0 else None
            ),
            "sampling_param_exclude_input_from_output": True,
            "return_finish_reason": True,
        }

    def outputs(self) -> tuple[str, ...]:
        return ("text_output", "finish_reason")

    def read(self, result: InferResult, state: StreamState) -> tuple[str, FinishReason | None]:
        text = first_text(result, "text_output")
        delta = ""
        if text is not None:
            # The whole text so far: the new piece is what extends the last one. Should the
            # server ever revise earlier text, what was sent stands and only the rest goes out.
            common = _common_prefix(state.text, text)
            if common < len(state.text) and not state.revised:
                state.revised = True
                log.warning("Triton revised text it had streamed; the revision is dropped")
            delta = text[max(common, len(state.text)) :]
            state.text = text
        reason = first_text(result, "finish_reason")
        return delta, self._FINISH.get(reason or "")


def _common_prefix(a: str, b: str) -> int:
    if b.startswith(a):
        return len(a)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class EnsembleProtocol(TritonProtocol):
    name = "ensemble"
    default_model = "ensemble"
    required = ("text_input", "max_tokens", "stream")
    must_honour = {
        "seed|random_seed": "sampling.seed",
        "repetition_penalty": "sampling.repetition_penalty",
    }

    def values(self, request: GenerationRequest) -> dict[str, Value | None]:
        sampling = request.sampling
        temperature, top_k, top_p = _sampling_values(sampling)
        return {
            "text_input": [request.prompt],
            "max_tokens": sampling.max_tokens,
            "stream": True,
            "temperature": temperature,
            "top_k": top_k,
            "top_p": top_p,
            "repetition_penalty": (
                sampling.repetition_penalty if sampling.repetition_penalty != 1.0 else None
            ),
            "stop_words": list(sampling.stop) or None,
            "seed|random_seed": _seed(sampling),
            # Newer releases: without it a non-streamed answer starts with the prompt.
            "exclude_input_in_output": True,
        }

    def outputs(self) -> tuple[str, ...]:
        return ("text_output",)

    def read(self, result: InferResult, state: StreamState) -> tuple[str, FinishReason | None]:
        return first_text(result, "text_output") or "", None


PROTOCOLS: dict[str, type[TritonProtocol]] = {
    LlmApiProtocol.name: LlmApiProtocol,
    EnsembleProtocol.name: EnsembleProtocol,
}
