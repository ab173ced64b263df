"""The `ragrail` command: bring the suite up, ingest documents, search them, ask questions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ragrail.client import DEFAULT_URL, GatewayClient, GatewayError, batches, find_documents

if TYPE_CHECKING:
    from ragrail.launcher import Supervisor

app = typer.Typer(
    help="ragrail: retrieval-augmented generation services with guardrails.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "samples" / "corpus"
SAMPLE_QUESTION = "how do honeybees tell each other where food is?"

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


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(1)


def _ingest(client: GatewayClient, paths: list[Path], collection: str) -> tuple[int, int]:
    files = find_documents(paths)
    if not files:
        raise _fail("no supported documents found (txt, md, html, pdf, docx)")
    client.ensure_collection(collection)
    docs = chunks = 0
    with Progress(
        TextColumn("[bold]ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("ingest", total=len(files))
        for batch in batches(files):
            result = client.ingest_files(collection, batch)
            docs += len(result["documents"])
            chunks += result["total_chunks"]
            bar.advance(task, len(batch))
    return docs, chunks


def _print_hits(result: dict) -> None:
    table = Table(show_lines=False)
    table.add_column("#", no_wrap=True)
    table.add_column("score", no_wrap=True)
    table.add_column("document", no_wrap=True)
    table.add_column("text", overflow="fold")
    for i, hit in enumerate(result["hits"], start=1):
        snippet = " ".join(hit["text"].split())[:160]
        table.add_row(str(i), f"{hit['score']:.4f}", hit["document_name"], snippet)
    console.print(table)
    t = result["timings"]
    console.print(
        f"[dim]{result['mode']} search in {t['total_ms']:.0f} ms "
        f"(embed {t['embed_ms']:.0f} ms, retrieval {t['retrieval_ms']:.0f} ms)[/dim]"
    )


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
        _use_config(config)
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
                line.update(_starting_line(supervisor, time.monotonic() - started))
                await asyncio.wait({starting, stopped}, timeout=0.5)
        if stop.is_set():
            starting.cancel()
            return
        starting.result()
        gateway = supervisor.child("gateway")
        for child in supervisor.children:
            console.print(f"  [green]ready[/green] {child.spec.name:10} {child.url}")
        _stage("start", f"{len(supervisor.children)} services ready", started)
        await _say_models(supervisor)
        console.print(f"API docs: {gateway.url}/docs   health: {gateway.url}/v1/health")
        if metrics_port > 0:
            console.print(f"launcher metrics (restarts): http://127.0.0.1:{metrics_port}/metrics")
        # Restarts, and the reload after a training, run from here on (also while the sample
        # question waits for a training asked for with --train).
        watching = asyncio.create_task(supervisor.watch(stop))
        if (
            sample
            and await _wait_for_rails(supervisor, stop)
            and await _wait_for_reader(supervisor, stop)
        ):
            await asyncio.to_thread(_demo, gateway.url)
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


def _use_config(path: Path) -> None:
    """Checks the file with every service's settings class, then hands it to them all."""
    from ragrail.config import ConfigError, check_config
    from shared.settings import CONFIG_ENV

    try:
        checked = check_config(path)
    except ConfigError as exc:
        raise _fail(f"{exc}\nfix the file (services/<name>/README.md lists the settings)") from None
    os.environ[CONFIG_ENV] = str(path.resolve())
    generator = checked.get("generator")
    where = f" at {generator.remote_url}" if getattr(generator, "remote_url", "") else ""
    console.print(
        f"config {path}: {', '.join(checked) or 'no sections'}"
        + (f" (generator engine {generator.engine}{where})" if generator else "")
    )


def _stage(name: str, what: str, since: float) -> None:
    """One line per stage of `ragrail up --sample` (start, ingest, answer) with its time;
    `make up` prints the install's the same way."""
    console.print(f"[bold cyan]{name:>7}[/bold cyan]  {what} in {time.monotonic() - since:.1f} s")


def _starting_line(supervisor: Supervisor, elapsed: float) -> str:
    """What the start waits on, refreshed while services load their models."""
    waiting = [c.spec.name for c in supervisor.children if not c.ready]
    return f"starting, {elapsed:.0f} s: waiting for {', '.join(waiting) or 'the gateway'}"


async def _say_models(supervisor: Supervisor) -> None:
    """Which guard model the rails run and which reader answers (or why none)."""
    from ragrail.launcher import guard_model_state, reader_in_use

    child = supervisor.rails_child()
    if child is not None:
        state = await guard_model_state(child.url)
        if state and state not in ("pending", "none"):
            console.print(f"guardrails: every rail on, guard model {state}")
        else:
            console.print(f"guardrails: the rails on the guard model are {state or 'unknown'}")
    reader = reader_in_use()
    if reader:
        console.print(f"answers: extractive reader {reader}")


def _last_line(path: Path, width: int = 70) -> str:
    """The trainer's latest progress line, shortened to fit a status line."""
    try:
        with path.open("rb") as log:
            log.seek(max(log.seek(0, 2) - 4096, 0))
            lines = log.read().decode("utf-8", "replace").replace("\r", "\n").splitlines()
    except OSError:
        return ""
    line = next((x.strip() for x in reversed(lines) if x.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


async def _wait_for_rails(supervisor: Supervisor, stop: asyncio.Event) -> bool:
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
                doing = f"training the guard model ({_last_line(training.log_path)})"
            line.update(f"{doing}, {training.elapsed()} so far; the sample question waits")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return False


async def _wait_for_reader(supervisor: Supervisor, stop: asyncio.Event) -> bool:
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
                    f"training the extractive reader ({_last_line(training.log_path)}), "
                    f"{training.elapsed()} so far; the sample question waits"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return False


def _demo(gateway_url: str) -> None:
    client = GatewayClient(gateway_url)
    started = time.monotonic()
    docs, chunks = _ingest(client, [SAMPLE_CORPUS], "sample")
    _stage("ingest", f"{docs} sample documents ({chunks} chunks) into collection 'sample'", started)
    console.print(f"search: [bold]{SAMPLE_QUESTION}[/bold]")
    _print_hits(client.search(SAMPLE_QUESTION, "sample", top_k=3))
    console.print(f"ask: [bold]{SAMPLE_QUESTION}[/bold]")
    started = time.monotonic()
    try:
        _stream_answer(client, SAMPLE_QUESTION, {"collection": "sample", "max_tokens": 96})
        _stage("answer", "the sample question answered", started)
    except GatewayError as exc:  # the suite still serves; say why the demo answer failed
        console.print(f"[red]the demo question failed:[/red] {exc.message}")
    console.print('try: ragrail ask "your question"   or   ragrail search "..." -c sample')


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest.")],
    collection: CollectionOpt,
    gateway: GatewayOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = "",
) -> None:
    """Ingest documents (txt, md, html, pdf, docx) into a collection, creating it if needed."""
    client = GatewayClient(gateway, api_key=api_key)
    try:
        docs, chunks = _ingest(client, paths, collection)
    except (GatewayError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
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
    with contextlib.suppress(KeyboardInterrupt):  # a pass cut short is finished by the next
        while True:
            # A failed pass said why; the gateway may be restarting: try again next time.
            with contextlib.suppress(typer.Exit):
                _sync_pass(client, folder, collection, hashes, gateway, quiet=True)
            time.sleep(interval)


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
        raise _fail(str(exc)) from None
    except httpx.TransportError as exc:
        raise _unreachable(gateway, exc) from None
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
        raise _fail(exc.message) from None
    if as_json:
        console.print_json(data=result)
    else:
        _print_hits(result)


def _unreachable(gateway: str, exc: Exception) -> typer.Exit:
    return _fail(f"gateway at {gateway} is not reachable ({exc}); start it with `ragrail up`")


def _page_note(citation: dict) -> str:
    """', p. 3' (or ', pp. 3-4', or ', pp. 1, 3' around a page without text) for a source
    from a paged document, else ''."""
    page = citation.get("page")
    if page is None:
        return ""
    pages = citation.get("pages") or [page]
    if len(pages) == 1:
        return f", p. {page}"
    if pages[-1] - pages[0] == len(pages) - 1:
        return f", pp. {pages[0]}-{pages[-1]}"
    return f", pp. {', '.join(map(str, pages))}"


def _print_sources(final: dict) -> None:
    """Sources, rails and timings from the answer's last chunk."""
    citations = final.get("citations") or []
    if citations:
        console.print("\n[bold]Sources[/bold]")
    for c in citations:
        mark = "cited" if c["cited"] else "not cited"
        page = _page_note(c)
        console.print(
            f"  [{c['index']}] {c['document_name']}{page}", markup=False, highlight=False, end=""
        )
        console.print(f"  [dim](score {c['score']:.3f}, {mark})[/dim]")
        evidence = _evidence_line(c)
        if evidence is not None:
            console.print(evidence)
        else:
            snippet = " ".join(c["snippet"].split())
            console.print(f"      {snippet[:200]}{'…' if len(snippet) > 200 else ''}", markup=False)
    answer = final.get("answer")
    if answer:
        how = answer["mode"]
        if answer.get("attributed"):
            how += ", citations attributed by the gateway"
        if answer.get("unsupported"):
            how += f", {len(answer['unsupported'])} unsupported sentence(s) left out or marked"
        console.print(f"[bold]Answer mode[/bold]: {how}", highlight=False)
    console.print(f"[bold]Guardrails[/bold]: {_rails_summary(final.get('guardrails') or {})}")
    for warning in final.get("warnings") or []:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    t = final.get("timings") or {}
    stages = [
        ("retrieval", "retrieval_ms"),
        ("rerank", "rerank_ms"),
        ("guardrails", "guardrails_ms"),
        ("first token", "ttft_ms"),
        ("generation", "generation_ms"),
        ("total", "total_ms"),
    ]
    shown = [f"{name} {t[key]:.0f} ms" for name, key in stages if t.get(key)]
    if shown:
        console.print(f"[dim]{' · '.join(shown)}[/dim]")


def _evidence_line(citation: dict) -> Text | None:
    """The evidence sentence of a cited source with the extracted span highlighted (a rich
    Text, so the document's words are never read as markup), or None without evidence."""
    spans = citation.get("evidence") or []
    sentence = next((e for e in spans if e["kind"] in ("sentence", "support")), None)
    if sentence is None:
        return None
    line = Text("      ")
    span = next((e for e in spans if e["kind"] == "answer"), None)
    text = sentence["text"]
    if span and sentence["start"] <= span["start"] <= span["end"] <= sentence["end"]:
        a, b = span["start"] - sentence["start"], span["end"] - sentence["start"]
        line.append(text[:a], style="italic")
        line.append(text[a:b], style="bold reverse")
        line.append(text[b:], style="italic")
    else:
        line.append(text, style="bold")
    return line


def _rails_summary(report: dict) -> str:
    """Which rails fired: 'off', 'all passed', or each block / modification / dropped chunk."""
    if not report.get("enabled"):
        return "off"
    fired = []
    for stage in ("input", "output"):
        outcome = report.get(stage) or {}
        if outcome.get("verdict", "allow") != "allow":
            why = f" ({outcome['reason']})" if outcome.get("reason") else ""
            fired.append(f"{stage} {outcome['verdict']} by {outcome.get('rail') or 'a rail'}{why}")
    for change in report.get("retrieval") or []:
        # The gateway names a retrieved chunk by chunk_id (GuardrailsReport.retrieval).
        chunk = change.get("chunk_id") or change.get("id") or "?"
        rail = change.get("rail") or "a rail"
        fired.append(f"retrieval {change['verdict']} chunk {chunk} by {rail}")
    return "; ".join(fired) if fired else "all passed"


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
        _stream_answer(client, question, options)
    except httpx.TransportError as exc:
        raise _unreachable(gateway, exc) from None
    except GatewayError as exc:
        raise _fail(exc.message) from None
    finally:
        client.close()


def _stream_answer(client: GatewayClient, question: str, options: dict) -> None:
    """Prints the answer as it streams, then its sources and what the rails did."""
    final: dict = {}
    for chunk in client.chat_stream([{"role": "user", "content": question}], **options):
        choice = (chunk.get("choices") or [{}])[0]
        delta = (choice.get("delta") or {}).get("content")
        if delta:
            # No markup: an answer's "[1]" or "[b]" is text; soft_wrap: no inserted breaks.
            console.print(delta, end="", markup=False, highlight=False, soft_wrap=True)
            console.file.flush()
        if choice.get("finish_reason"):
            final = chunk
    console.print()
    if final.get("choices", [{}])[0].get("finish_reason") == "content_filter":
        console.print("[yellow](the guardrails blocked this)[/yellow]")
    _print_sources(final)


@app.command()
def status(gateway: GatewayOpt = DEFAULT_URL, api_key: ApiKeyOpt = "") -> None:
    """Show the health of the gateway and every service."""
    try:
        health = GatewayClient(gateway, timeout_s=5, api_key=api_key).health()
    except Exception as exc:
        raise _unreachable(gateway, exc) from None
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
