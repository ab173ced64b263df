"""Chat templates and tokenizers, shared by the engines.

The local engines render prompts with the model they load; the triton engine has no model in
this process, so it loads only the tokenizer and chat template of the model Triton serves,
from the same sources: a GGUF file through llama.cpp (vocabulary only, no weights: well under
a second for the packaged model) or a Hugging Face directory through transformers. The same
functions render and tokenize in every engine, so a prompt is counted identically whichever
engine serves it.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from services.generator.backends.base import Message
from shared.errors import FailedPrecondition
from shared.models.generator_files import configured_model


def gguf_formatter(model: Any, path: Path) -> Any:
    """llama-cpp-python's Jinja2 chat formatter for a loaded llama.cpp model (`_internals.
    LlamaModel`), with the template, BOS and EOS tokens from the GGUF metadata."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    metadata = model.metadata()
    template = metadata.get("tokenizer.chat_template")
    if not template:
        raise FailedPrecondition(
            f"{path} carries no chat template (tokenizer.chat_template); the generator "
            "needs an instruct model with one"
        )
    eos = int(metadata.get("tokenizer.ggml.eos_token_id", -1))
    bos = int(metadata.get("tokenizer.ggml.bos_token_id", -1))
    return Jinja2ChatFormatter(
        template=template,
        eos_token=model.token_get_text(eos) if eos >= 0 else "",
        bos_token=model.token_get_text(bos) if bos >= 0 else "",
        add_generation_prompt=True,
    )


def gguf_render(formatter: Any, messages: list[Message]) -> str:
    rendered = formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
    return str(rendered.prompt)


def gguf_encode(model: Any, text: str, chat: bool) -> list[int]:
    # The template writes its own special tokens (llama-cpp-python's chat handler does the
    # same: no BOS added, special tokens parsed).
    return list(model.tokenize(text.encode("utf-8"), add_bos=False, special=chat))


def hf_render(tokenizer: Any, messages: list[Message]) -> str:
    prompt = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages],
        tokenize=False,
        add_generation_prompt=True,
    )
    return str(prompt)


def hf_encode(tokenizer: Any, text: str, chat: bool) -> list[int]:
    return list(
        tokenizer(text, add_special_tokens=False, split_special_tokens=not chat)["input_ids"]
    )


class ChatTokenizer(ABC):
    """The tokenizer and chat template of a model served elsewhere."""

    source: str  # what was loaded, for Info and logs
    context_length: int  # the model's training context in tokens; 0 when the files don't say

    @abstractmethod
    def render(self, messages: list[Message]) -> str:
        """The prompt with the chat template applied, ending with the assistant's turn."""

    @abstractmethod
    def encode(self, text: str, *, chat: bool) -> list[int]:
        """Token ids (see `Engine.tokenize` for `chat`). Thread-safe."""


class GgufTokenizer(ChatTokenizer):
    def __init__(self, path: Path) -> None:
        import llama_cpp
        from llama_cpp import _internals

        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = _internals.LlamaModel(path_model=str(path), params=params, verbose=False)
        self.formatter = gguf_formatter(self.model, path)
        metadata = self.model.metadata()
        architecture = metadata.get("general.architecture", "")
        # n_ctx_train() reads 0 without the weights; the metadata has the figure.
        self.context_length = int(metadata.get(f"{architecture}.context_length", 0) or 0)
        self.source = str(path)

    def render(self, messages: list[Message]) -> str:
        return gguf_render(self.formatter, messages)

    def encode(self, text: str, *, chat: bool) -> list[int]:
        return gguf_encode(self.model, text, chat)


class HfTokenizer(ChatTokenizer):
    def __init__(self, path: Path) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if self.tokenizer.chat_template is None:
            raise FailedPrecondition(
                f"the tokenizer in {path} has no chat template; the generator needs an "
                "instruct model's tokenizer"
            )
        # A fast tokenizer used from two threads at once can fail with "Already borrowed".
        self.lock = threading.Lock()
        self.context_length = _hf_context_length(path, self.tokenizer)
        self.source = str(path)

    def render(self, messages: list[Message]) -> str:
        with self.lock:
            return hf_render(self.tokenizer, messages)

    def encode(self, text: str, *, chat: bool) -> list[int]:
        with self.lock:
            return hf_encode(self.tokenizer, text, chat)


def _hf_context_length(path: Path, tokenizer: Any) -> int:
    config = path / "config.json"
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        text = data.get("text_config", data)
        if text.get("max_position_embeddings"):
            return int(text["max_position_embeddings"])
    # Tokenizers without a limit report a huge sentinel (int(1e30)).
    limit = int(getattr(tokenizer, "model_max_length", 0) or 0)
    return limit if limit < 10_000_000 else 0


def load_chat_tokenizer(setting: str) -> ChatTokenizer:
    """The RAGRAIL_GENERATOR_TOKENIZER source: a .gguf file, a Hugging Face directory, or the
    packaged GGUF when empty. Nothing is downloaded."""
    if setting and not Path(setting).expanduser().exists():
        raise FailedPrecondition(
            f"RAGRAIL_GENERATOR_TOKENIZER={setting} does not exist; point it at the served "
            "model's Hugging Face directory (or its tokenizer files) or a .gguf file"
        )
    path = configured_model(setting)
    if path.is_file():
        if path.suffix != ".gguf":
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_TOKENIZER={path} is a file but not a .gguf; use a .gguf "
                "file or a Hugging Face directory with tokenizer files"
            )
        return GgufTokenizer(path)
    return HfTokenizer(path)
