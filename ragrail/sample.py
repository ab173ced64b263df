"""The sample `ragrail up --sample` ends with: the packaged corpus ingested, a search and
the sample question answered, each stage timed."""

from __future__ import annotations

import time
from pathlib import Path

from ragrail.client import GatewayClient, GatewayError
from ragrail.show import console, ingest_with_progress, print_hits, stage, stream_answer

SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "samples" / "corpus"
SAMPLE_QUESTION = "how do honeybees tell each other where food is?"


def demo(gateway_url: str) -> None:
    client = GatewayClient(gateway_url)
    started = time.monotonic()
    docs, chunks = ingest_with_progress(client, [SAMPLE_CORPUS], "sample")
    stage("ingest", f"{docs} sample documents ({chunks} chunks) into collection 'sample'", started)
    console.print(f"search: [bold]{SAMPLE_QUESTION}[/bold]")
    print_hits(client.search(SAMPLE_QUESTION, "sample", top_k=3))
    console.print(f"ask: [bold]{SAMPLE_QUESTION}[/bold]")
    started = time.monotonic()
    try:
        stream_answer(client, SAMPLE_QUESTION, {"collection": "sample", "max_tokens": 96})
        stage("answer", "the sample question answered", started)
    except GatewayError as exc:  # the suite still serves; say why the demo answer failed
        console.print(f"[red]the demo question failed:[/red] {exc.message}")
    console.print('try: ragrail ask "your question"   or   ragrail search "..." -c sample')
