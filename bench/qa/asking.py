"""Asking the gateway: a streamed grounded chat (with its abstention and citations), and the
no-model rows' sentence picked from the same search."""

from __future__ import annotations

import re
import time

import numpy as np

from bench.common import stream_chat
from ragrail.client import GatewayClient
from shared.text import sentence_spans
from shared.text.qa_metrics import best, token_f1

# How an answer without the gateway's own abstention flag says it does not know (today's
# pipeline is told to "say that you do not know").
ABSTAINS = re.compile(
    r"\b(?:do(?:es)? not (?:say|know|contain|mention|provide)|don't know|do not have|"
    r"cannot (?:answer|find)|can't (?:answer|find)|no information|not (?:mentioned|stated))\b",
    re.IGNORECASE,
)


def ask(client: GatewayClient, question: str, collection: str, body: dict, max_tokens: int) -> dict:
    chat = stream_chat(
        client, question, collection, max_tokens, stream_options={"include_usage": True}, **body
    )
    content, final = chat.content, chat.final
    answer = final.get("answer") or {}
    abstained = answer["abstained"] if "abstained" in answer else bool(ABSTAINS.search(content))
    return {
        "content": content,
        "abstained": abstained,
        "mode": answer.get("mode", ""),
        "reader_margin": answer.get("reader_margin"),
        "similarity": answer.get("similarity"),
        "citations": [
            {"document_id": c["document_id"], "cited": c["cited"], "index": c["index"]}
            for c in final.get("citations", [])
        ],
        "prompt_tokens": chat.usage.get("prompt_tokens", 0),
        "ttft_ms": chat.ttft_ms,
        "total_ms": chat.total_ms,
        "finish_reason": (final.get("choices") or [{}])[0].get("finish_reason"),
        "warnings": final.get("warnings", []),
    }


def embed(client: GatewayClient, texts: list[str], input_type: str) -> np.ndarray:
    """Unit vectors from the suite's embedder (`/v1/embeddings`), as the gateway compares."""
    reply = client.http.post("/v1/embeddings", json={"input": texts, "input_type": input_type})
    reply.raise_for_status()
    vectors = np.array([d["embedding"] for d in reply.json()["data"]], dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


class Sentences:
    """The no-model rows: search as the chat does, split the chunks into sentences, and pick
    one by the embedder's cosine (baseline) or by F1 against the gold answer (oracle)."""

    def __init__(self, client: GatewayClient, top_k: int) -> None:
        self.client = client
        self.top_k = top_k

    def ask(self, question: dict, collection: str, oracle: bool) -> dict:
        start = time.perf_counter()
        hits = self.client.search(question["question"], collection, top_k=self.top_k)["hits"]
        candidates = [
            (h["document_id"], h["text"][s.start : s.end])
            for h in hits
            for s in sentence_spans(h["text"])
        ]
        if not candidates:
            pick = ("", "")
        elif oracle:
            pick = max(candidates, key=lambda c: best(token_f1, c[1], question["answers"]))
        else:
            q = embed(self.client, [question["question"]], "query")
            s = embed(self.client, [c[1] for c in candidates], "passage")
            pick = candidates[int(np.argmax(s @ q[0]))]
        total = (time.perf_counter() - start) * 1000
        return {
            "content": pick[1],
            "abstained": False,
            "mode": "oracle" if oracle else "baseline",
            "citations": [
                {"document_id": h["document_id"], "cited": h["document_id"] == pick[0], "index": i}
                for i, h in enumerate(hits, 1)
            ],
            "prompt_tokens": 0,
            "ttft_ms": total,
            "total_ms": total,
            "finish_reason": "stop",
            "warnings": [],
        }
