"""The `ragrail` command: bring the suite up, ingest documents, search them, ask questions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragrail.client import DEFAULT_URL, GatewayClient, GatewayError
from ragrail.first_start import (
    say_models,
    starting_line,
    use_config,
    wait_for_rails,
    wait_for_reader,
)
from ragrail.sample import demo
from ragrail.show import (
    console,
    fail,
    ingest_with_progress,
    print_hits,
    stage,
    stream_answer,
    unreachable,
)

app = typer.Typer(
    help="ragrail: retrieval-augmented generation services with guardrails.",
    no_args_is_help=True,
    add_completion=False,
)

GatewayOpt = Annotated[
    str,
    typer.Option("--gateway", "--url", envvar="RAGRAIL_GATEWAY_URL", help="Gateway base URL."),
]
ApiKeyOpt = Annotated[
    str,
    typer.Option(
        "--api-key",
        envvar="RAGRAIL_API_KEY",
        help="The gateway's API key, when it requires one (compose: a line of deploy/api_keys).",
        show_default=False,
    ),
]
CollectionOpt = Annotated[str, typer.Option("--collection", "-c", help="Collection name.")]


@app.command()
def up(
    data_dir: Annotated[Path, typer.Option(help="Where data and logs live.")] = Path("data"),
    sample: Annotated[
        bool, typer.Option(help="Ingest the sample corpus, run a search and ask a question.")
    ] = False,
    rails: Annotated[
        bool,
        typer.Option(
            "--rails/--no-rails",
            help="Start the guardrails service (the default) or run the gateway without rails.",
        ),
    ] = True,
    train: Annotated[
        bool,
        typer.Option(
            "--train/--no-train",
            help="Train the guard model or the extractive reader in the background where none "
            "is found (the published ones ship in published/: none to train on a fresh clone).",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="RAGRAIL_CONFIG",
            help="YAML settings for the services, a section each (generator:, embedder:, "
            "reranker:...), e.g. examples/ollama.yaml to answer through a model server "
            "(docs/model-servers.md); RAGRAIL_* variables still win over it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start every service and the gateway as local processes; Ctrl-C stops them all."""
    from ragrail.launcher import Supervisor, start_metrics

    if config is not None:
        use_config(config)
    supervisor = Supervisor(data_dir.resolve(), console.print, rails=rails, train=train)
    metrics_port = start_metrics(console.print)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        console.print(
            f"starting {', '.join(c.spec.name for c in supervisor.children)} "
            f"(logs in {data_dir / 'logs'}) ..."
        )
        started = time.monotonic()
        starting = asyncio.create_task(supervisor.up())
        stopped = asyncio.create_task(stop.wait())
        with console.status("") as line:
            while not starting.done() and not stop.is_set():
                line.update(starting_line(supervisor, time.monotonic() - started))
                await asyncio.wait({starting, stopped}, timeout=0.5)
        if stop.is_set():
            starting.cancel()
            return
        starting.result()
        gateway = supervisor.child("gateway")
        for child in supervisor.children:
            console.print(f"  [green]ready[/green] {child.spec.name:10} {child.url}")
        stage("start", f"{len(supervisor.children)} services ready", started)
        await say_models(supervisor)
        console.print(f"API docs: {gateway.url}/docs   health: {gateway.url}/v1/health")
        if metrics_port > 0:
            console.print(f"launcher metrics (restarts): http://127.0.0.1:{metrics_port}/metrics")
        # Restarts, and the reload after a training, run from here on (also while the sample
        # question waits for a training asked for with --train).
        watching = asyncio.create_task(supervisor.watch(stop))
        if (
            sample
            and await wait_for_rails(supervisor, stop)
            and await wait_for_reader(supervisor, stop)
        ):
            await asyncio.to_thread(demo, gateway.url)
        console.print("[bold]ragrail is up.[/bold] Press Ctrl-C to stop.")
        await watching

    try:
        asyncio.run(main())
    except RuntimeError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    finally:
        console.print("stopping services ...")
        supervisor.down()
        console.print("stopped.")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest.")],
    collection: CollectionOpt,
    gateway: GatewayOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = "",
) -> None:
    """Ingest documents (txt, md, html, pdf, docx; png, jpeg, tiff read by OCR) into a
    collection, creating it if needed."""
    client = GatewayClient(gateway, api_key=api_key)
    try:
        docs, chunks = ingest_with_progress(client, paths, collection)
    except (GatewayError, FileNotFoundError) as exc:
        raise fail(str(exc)) from None
    console.print(f"ingested {docs} documents ({chunks} chunks) into '{collection}'")


@app.command()
def sync(
    folder: Annotated[Path, typer.Argument(help="The folder the collection should mirror.")],
    collection: CollectionOpt,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep going: look at the folder every --interval s.")
    ] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.5)] = 5.0,
    gateway: GatewayOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = "",
) -> None:
    """Make a collection mirror a folder: ingest new files, re-ingest changed ones (content
    hash), delete the documents of removed ones. Safe to interrupt and run again."""
    from ragrail.sync import FileHashes

    client = GatewayClient(gateway, api_key=api_key)
    hashes = FileHashes()
    if not watch:
        if _sync_pass(client, folder, collection, hashes, gateway, quiet=False):
            raise typer.Exit(1)
        return
    console.print(f"watching {folder} every {interval:g} s (Ctrl-C stops)")
    # The first Ctrl-C ends the watch between passes: a KeyboardInterrupt raised at any
    # bytecode could land inside the progress display's locks or an HTTP call (a CI run saw a
    # watch not stop in 30 s). A second Ctrl-C stops at once; a pass cut short is finished by
    # the next run.
    stopping: list[bool] = []  # a flag the handler sets: no lock a handler could deadlock on

    def on_ctrl_c(signum: int, frame: object) -> None:
        if stopping:
            raise KeyboardInterrupt
        stopping.append(True)

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            while not stopping:
                # A failed pass said why; the gateway may be restarting: try again next time.
                with contextlib.suppress(typer.Exit):
                    _sync_pass(client, folder, collection, hashes, gateway, quiet=True)
                next_pass = time.monotonic() + interval
                while not stopping and time.monotonic() < next_pass:
                    time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)


def _sync_pass(  # type: ignore[no-untyped-def]
    client: GatewayClient, folder: Path, collection: str, hashes, gateway: str, *, quiet: bool
) -> int:
    """One sync; prints its summary (when quiet, only if it did something) and each failure;
    returns how many files failed."""
    from ragrail.sync import sync_once

    try:
        with Progress(
            TextColumn("[bold]sync"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
            TimeElapsedColumn(), console=console, transient=True,
        ) as bar:  # fmt: skip

            def on_plan(todo):  # type: ignore[no-untyped-def]
                task = bar.add_task("sync", total=todo.steps)
                return lambda n: bar.advance(task, n)

            report = sync_once(client, folder, collection, hashes, on_plan)
    except (GatewayError, FileNotFoundError) as exc:
        raise fail(str(exc)) from None
    except httpx.TransportError as exc:
        raise unreachable(gateway, exc) from None
    if not quiet or report.added or report.updated or report.deleted or report.failed:
        console.print(f"'{collection}' <- {folder}: {report.summary()}")
    for name, why in report.failed:
        console.print(f"  [red]failed[/red] {name}: {why}")
    return len(report.failed)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to search for.")],
    collection: CollectionOpt = "sample",
    top_k: Annotated[int, typer.Option("--top-k", "-k")] = 5,
    mode: Annotated[str, typer.Option(help="dense, sparse or hybrid.")] = "hybrid",
    filter: Annotated[str | None, typer.Option(help="Metadata filter as JSON.")] = None,
    gateway: GatewayOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw response.")] = False,
) -> None:
    """Search a collection through the gateway."""
    client = GatewayClient(gateway, api_key=api_key)
    options: dict = {"top_k": top_k, "mode": mode}
    if filter:
        options["filter"] = json.loads(filter)
    try:
        result = client.search(query, collection, **options)
    except GatewayError as exc:
        raise fail(exc.message) from None
    if as_json:
        console.print_json(data=result)
    else:
        print_hits(result)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    collection: CollectionOpt = "sample",
    knowledge_base: Annotated[
        bool, typer.Option("--kb/--no-kb", help="Answer from the collection, or ask the model.")
    ] = True,
    top_k: Annotated[
        int | None, typer.Option("--top-k", "-k", help="Chunks given to the model.")
    ] = None,
    vdb_top_k: Annotated[int | None, typer.Option(help="Chunks retrieved first.")] = None,
    mode: Annotated[str, typer.Option(help="dense, sparse or hybrid.")] = "hybrid",
    rails: Annotated[
        bool | None,
        typer.Option("--rails/--no-rails", help="Guardrails on or off (default: the gateway's)."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Longest answer, in tokens.")] = None,
    temperature: Annotated[float | None, typer.Option(help="0 for the likeliest answer.")] = None,
    answer_mode: Annotated[
        str | None,
        typer.Option(help="extractive, generative or auto (default: the gateway's, auto)."),
    ] = None,
    gateway: GatewayOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = "",
) -> None:
    """Ask a question: the answer streams in, then its numbered sources (the evidence in each
    cited one highlighted), the answer mode and the rails' say."""
    options: dict = {
        "answer_mode": answer_mode,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "enable_guardrails": rails,
    }
    if knowledge_base:
        options.update(
            collection=collection, reranker_top_k=top_k, vdb_top_k=vdb_top_k, search_mode=mode
        )
    else:
        options["use_knowledge_base"] = False
    options = {k: v for k, v in options.items() if v is not None}
    # The gateway decides when it is done (its own generation deadline); this only bounds a
    # silent connection.
    client = GatewayClient(gateway, timeout_s=300, api_key=api_key)
    try:
        stream_answer(client, question, options)
    except httpx.TransportError as exc:
        raise unreachable(gateway, exc) from None
    except GatewayError as exc:
        raise fail(exc.message) from None
    finally:
        client.close()


@app.command()
def status(gateway: GatewayOpt = DEFAULT_URL, api_key: ApiKeyOpt = "") -> None:
    """Show the health of the gateway and every service."""
    try:
        health = GatewayClient(gateway, timeout_s=5, api_key=api_key).health()
    except Exception as exc:
        raise unreachable(gateway, exc) from None
    console.print_json(data=health)
    if health.get("status") != "ok":
        raise typer.Exit(1)


# -- train / export: the trainers/ commands, their flags passed through unchanged -----------

# command -> module whose main(argv) runs it; imported only when called (torch is heavy).
TRAINERS = {
    "embedder": "trainers.embedder.train",
    "reranker": "trainers.reranker.train",
    # The guard model every rail runs on (the v3 single-head classifier: python -m
    # trainers.guardrails.baseline --data DIR).
    "guardrails": "trainers.guardrails.guard",
    "reader": "trainers.reader.train",
    "generator-base": "trainers.generator.base",
    "generator-data": "trainers.generator.data",
    "generator-sft": "trainers.generator.sft",
}
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
train_app = typer.Typer(
    help="Fine-tune a model into models/<role>/<name>/<version>/ (trainers/). Flags go to the "
    "trainer: `ragrail train generator-sft --help`.",
    no_args_is_help=True,
)
app.add_typer(train_app, name="train")


def _run_main(module: str, argv: list[str]) -> None:
    import importlib

    code = importlib.import_module(module).main(argv)
    if code:
        raise typer.Exit(code)


def _trainer_command(name: str, module: str) -> None:
    @train_app.command(name, context_settings=PASS_THROUGH, help=f"python -m {module}")
    def command(ctx: typer.Context) -> None:
        _run_main(module, list(ctx.args))


for _name, _module in TRAINERS.items():
    _trainer_command(_name, _module)


@app.command("export", context_settings=PASS_THROUGH)
def export(ctx: typer.Context) -> None:
    """Export a registry generator: merge (LoRA into HF), gguf (F16/Q8_0/Q4_K), modelopt
    (FP8/INT4-AWQ, GPU). Flags go to trainers.generator.export: `ragrail export --help`."""
    _run_main("trainers.generator.export", list(ctx.args))


if __name__ == "__main__":
    app()
