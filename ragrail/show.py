"""What the `ragrail` command prints: progress, search hits, a streamed answer with its
sources, pages, evidence and the rails' say, and errors that name the fix."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ragrail.client import GatewayClient, batches, find_documents

console = Console()


def fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(1)


def unreachable(gateway: str, exc: Exception) -> typer.Exit:
    return fail(f"gateway at {gateway} is not reachable ({exc}); start it with `ragrail up`")


def stage(name: str, what: str, since: float) -> None:
    """One line per stage of `ragrail up --sample` (start, ingest, answer) with its time;
    `make up` prints the install's the same way."""
    console.print(f"[bold cyan]{name:>7}[/bold cyan]  {what} in {time.monotonic() - since:.1f} s")


def ingest_with_progress(
    client: GatewayClient, paths: list[Path], collection: str
) -> tuple[int, int]:
    files = find_documents(paths)
    if not files:
        raise fail("no supported documents found (txt, md, html, pdf, docx)")
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


def print_hits(result: dict) -> None:
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


def stream_answer(client: GatewayClient, question: str, options: dict) -> None:
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
    print_sources(final)


def print_sources(final: dict) -> None:
    """Sources, rails and timings from the answer's last chunk."""
    citations = final.get("citations") or []
    if citations:
        console.print("\n[bold]Sources[/bold]")
    for c in citations:
        mark = "cited" if c["cited"] else "not cited"
        page = page_note(c)
        console.print(
            f"  [{c['index']}] {c['document_name']}{page}", markup=False, highlight=False, end=""
        )
        console.print(f"  [dim](score {c['score']:.3f}, {mark})[/dim]")
        evidence = evidence_line(c)
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
    console.print(f"[bold]Guardrails[/bold]: {rails_summary(final.get('guardrails') or {})}")
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


def page_note(citation: dict) -> str:
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


def evidence_line(citation: dict) -> Text | None:
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


def rails_summary(report: dict) -> str:
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
