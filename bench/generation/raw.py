"""The raw libraries the generator's engines wrap, run in this process as their users call
them: the side the service is measured against."""

from __future__ import annotations

import time
from pathlib import Path

from bench.generation.runs import Run


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
