"""onnxruntime sessions and the file checks every ONNX model of the suite shares."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from shared.errors import FailedPrecondition


def offline() -> None:
    """Models are never downloaded: the Hugging Face libraries stay offline (and tokenizers
    single-threaded, which forks and thread pools prefer), unless the environment says
    otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def read_json(path: Path) -> Any:
    """A JSON file of a model directory; one that does not read stops the caller with the
    file named."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FailedPrecondition(f"cannot read {path}: {exc}") from exc


def read_object(path: Path) -> dict[str, Any]:
    """`read_json` for a file that should hold an object ({} when it holds something else)."""
    data = read_json(path)
    return data if isinstance(data, dict) else {}


def onnx_files(path: Path) -> list[str]:
    """The ONNX files of a model directory, for error messages that say what is there."""
    return sorted(p.name for p in path.glob("*.onnx")) if path.is_dir() else []


def pruned(file: Path, outputs: list[str]) -> bytes | None:
    """The graph of `file` cut to the nodes `outputs` need (onnx.utils.Extractor), serialized
    for `session`; None without the onnx package. onnxruntime runs every node of a graph
    whatever outputs a run asks for: a caller that needs fewer outputs than the graph gives
    runs less with this, and the nodes it keeps compute what they did in the whole graph."""
    try:
        import onnx
        from onnx.utils import Extractor
    except ImportError:
        return None
    model = onnx.load(str(file))
    inputs = [i.name for i in model.graph.input]
    return bytes(Extractor(model).extract_model(inputs, outputs).SerializeToString())


def session(file: Path | bytes, threads: int = 0, *, spinning: bool = False) -> Any:
    """An onnxruntime CPU session on `file` (a path, or a serialized graph from `pruned`).

    `threads`: intra-op threads (0: onnxruntime's default, one per physical core). Runs are
    sequential with one inter-op thread and every graph optimisation, onnxruntime's defaults
    written out. `spinning=False` lets idle intra-op threads sleep after a run instead of
    spinning: the suite's services share few cores, and threads spinning after each call took
    the CPU from the next model call (a guardrails check doubled in time).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    model = file if isinstance(file, bytes) else str(file)
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def check_inputs(session: Any, tokenizer: Any, file: Path, remedy: str) -> list[str]:
    """The session's input names, which the tokenizer must all produce."""
    names = [i.name for i in session.get_inputs()]
    missing = sorted(set(names) - set(tokenizer.model_input_names))
    if missing:
        raise FailedPrecondition(
            f"{file} takes inputs {missing} that the tokenizer does not produce; {remedy}"
        )
    return names


class OnnxModel:
    """One ONNX file of a model directory and the directory's tokenizer, on a CPU session.
    Subclasses name their default file, the setting that picks another and the command that
    writes it (for errors), say how many tokens an input may have (`token_limit`) and check
    the rest once the session is open (`setup`)."""

    default_file: ClassVar[str] = "model.onnx"
    file_setting: ClassVar[str] = "the ONNX file setting"
    export_hint: ClassVar[str] = "export the model again"

    def __init__(
        self,
        path: Path,
        onnx_file: str = "",
        *,
        threads: int = 0,
        batch_size: int = 32,
        max_length: int = 0,
        spinning: bool = False,
    ) -> None:
        from transformers import AutoTokenizer

        file = path / (onnx_file or self.default_file)
        if not file.is_file():
            raise FailedPrecondition(
                f"{file} does not exist (ONNX files there: {onnx_files(path) or 'none'}); "
                f"set {self.file_setting}, or write it with {self.export_hint}"
            )
        self.path = path
        self.file = file
        self.device = "cpu"
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.max_length = self.token_limit(max_length)
        self.session = session(file, threads, spinning=spinning)
        self.input_names = check_inputs(
            self.session, self.tokenizer, file, f"export it again with {self.export_hint}"
        )
        self.setup()

    def token_limit(self, requested: int) -> int:
        """The tokens an input is truncated to: `requested`, else the model's own."""
        raise NotImplementedError

    def setup(self) -> None:
        """Checks and settings that need the open session."""
