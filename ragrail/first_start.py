"""`ragrail up` beyond starting processes: the --config check, the status line while the
services load, which models the rails and answers run on, and the waits for a training asked
for with --train before the sample question."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ragrail.show import console, fail

if TYPE_CHECKING:
    from ragrail.launcher import Supervisor


def use_config(path: Path) -> None:
    """Checks the file with every service's settings class, then hands it to them all."""
    from ragrail.config import ConfigError, check_config
    from shared.settings import CONFIG_ENV

    try:
        checked = check_config(path)
    except ConfigError as exc:
        raise fail(f"{exc}\nfix the file (services/<name>/README.md lists the settings)") from None
    os.environ[CONFIG_ENV] = str(path.resolve())
    generator = checked.get("generator")
    where = f" at {generator.remote_url}" if getattr(generator, "remote_url", "") else ""
    console.print(
        f"config {path}: {', '.join(checked) or 'no sections'}"
        + (f" (generator engine {generator.engine}{where})" if generator else "")
    )


def starting_line(supervisor: Supervisor, elapsed: float) -> str:
    """What the start waits on, refreshed while services load their models."""
    waiting = [c.spec.name for c in supervisor.children if not c.ready]
    return f"starting, {elapsed:.0f} s: waiting for {', '.join(waiting) or 'the gateway'}"


def with_version(model_dir: str | Path) -> str:
    """A model directory, with the version its manifest names where that is not the
    directory's own name (a published model is republished over its first directory)."""
    from shared.models.registry import manifest_version

    version = manifest_version(Path(model_dir))
    return (
        f"{model_dir} (version {version})"
        if version and version != Path(model_dir).name
        else str(model_dir)
    )


async def say_models(supervisor: Supervisor) -> None:
    """Which guard model the rails run and which reader answers (or why none)."""
    from ragrail.launcher import guard_model_state, reader_in_use

    child = supervisor.rails_child()
    if child is not None:
        state = await guard_model_state(child.url)
        if state and state not in ("pending", "none"):
            console.print(f"guardrails: every rail on, guard model {with_version(state)}")
        else:
            console.print(f"guardrails: the rails on the guard model are {state or 'unknown'}")
    reader = reader_in_use()
    if reader:
        console.print(f"answers: extractive reader {with_version(reader)}")


def last_line(path: Path, width: int = 70) -> str:
    """The trainer's latest progress line, shortened to fit a status line."""
    try:
        with path.open("rb") as log:
            log.seek(max(log.seek(0, 2) - 4096, 0))
            lines = log.read().decode("utf-8", "replace").replace("\r", "\n").splitlines()
    except OSError:
        return ""
    line = next((x.strip() for x in reversed(lines) if x.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


async def wait_for_rails(supervisor: Supervisor, stop: asyncio.Event) -> bool:
    """`up --sample` on a first start: wait for the guard model's training and the
    guardrails service's reload, so the sample question is answered with every rail on.
    False when stopped meanwhile."""
    from ragrail.launcher import guard_model_state

    training, child = supervisor.training, supervisor.rails_child()
    if training is None or child is None:
        return True  # nothing is training: the rails are as complete as they get
    with console.status("") as line:
        while not stop.is_set():
            if training.outcome == "failed":
                console.print("asking the sample question with the guard model's rails pending")
                return True
            if training.outcome == "done" and not supervisor.reload_due:
                state = await guard_model_state(child.url)
                if state not in ("", "pending"):
                    console.print(f"every rail is on (guard model {state})")
                    return True
                doing = "the guardrails service is loading the guard model"
            else:
                doing = f"training the guard model ({last_line(training.log_path)})"
            line.update(f"{doing}, {training.elapsed()} so far; the sample question waits")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return False


async def wait_for_reader(supervisor: Supervisor, stop: asyncio.Event) -> bool:
    """`up --sample` on a first start: wait for the extractive reader's training (it starts
    once the guard model's has ended), so the sample question is answered as every later one
    will be. False when stopped meanwhile."""
    with console.status("") as line:
        while not stop.is_set():
            training = supervisor.reader_training
            if supervisor.reader_checked and (training is None or not training.running):
                if training is not None and training.outcome == "failed":
                    console.print("asking the sample question without the extractive reader")
                return True
            if training is not None:
                line.update(
                    f"training the extractive reader ({last_line(training.log_path)}), "
                    f"{training.elapsed()} so far; the sample question waits"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return False
