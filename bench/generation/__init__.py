"""The generation benchmark's parts; `bench/generator.py` is its command line and says what it
measures. One module a job: the prompts, the measurement types, the generator as a process, the
raw libraries, the in-process engines' runs, the HTTP paths (llama_cpp.server, the gateway),
the openai engine's runs and the gateway's overhead."""

from rich.console import Console

console = Console(width=max(Console().width, 140))
