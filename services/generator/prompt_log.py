"""An optional record of the prompts the generator receives (RAGRAIL_GENERATOR_PROMPT_LOG_FILE).

One JSON line per request, appended as the prompt reaches the engine (chat template applied):
`time`, `request_id`, `sha256` of the prompt and the `prompt` itself. It answers "what did
the model actually read?": an audit of what retrieval put in front of the model (the
gateway's access tests check that no forbidden chunk ever reaches it), or a bad answer
debugged. Prompts hold the documents' text, so the file is as sensitive as the documents:
off by default, and written with mode 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path


class PromptLog:
    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")
        self._lock = threading.Lock()  # lines from concurrent requests never interleave

    def write(self, request_id: str, prompt: str) -> None:
        line = json.dumps(
            {
                "time": time.time(),
                "request_id": request_id,
                "sha256": hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
                "prompt": prompt,
            },
            ensure_ascii=False,
        )
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()  # a reader (a test, tail -f) sees each prompt as it arrives

    def close(self) -> None:
        with self._lock:
            self._file.close()
