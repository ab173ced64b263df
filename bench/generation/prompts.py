"""The chats every path of the generation benchmark answers."""

from __future__ import annotations

# Open questions, so greedy answers run long rather than ending after a sentence.
PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain in detail how a bicycle stays upright while moving.",
    "Describe the water cycle step by step for a ten-year-old.",
    "Write a letter to a friend about your trip to the mountains.",
    "Explain how bread dough rises and what yeast does, in several paragraphs.",
    "Tell me about the history of the printing press and why it mattered.",
    "Describe a busy market in the morning, with its sounds and smells.",
    "Give detailed advice on how to start learning to play the guitar.",
]


# A grounded-chat system prompt as the gateway builds one (its default instructions, then a
# numbered source), shared by every request of the "shared system prompt" workload.
SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the question using only the numbered sources below. "
    "Cite the sources you use as [1], [2]. If the sources do not contain the answer, say that "
    "you do not know.\n\nSources:\n\n[1] notes.md\nA bicycle stays upright mostly through "
    "steering: when it leans, the rider (or the fork's geometry) turns the front wheel into the "
    "lean, which brings the wheels back under the centre of mass. Bread rises because yeast "
    "ferments sugars into carbon dioxide, which the gluten network traps as bubbles. In the "
    "water cycle, the sun evaporates water, vapour condenses into clouds and falls as rain or "
    "snow, and rivers carry it back to the sea. The printing press, from about 1440, made books "
    "cheap enough to spread literacy and new ideas across Europe."
)
WORKLOADS = {"shared system prompt": SYSTEM_PROMPT, "bare questions": ""}


# With PROMPTS (and some with the gateway's system prompt), the 20 chat requests of the parity
# count: the figure is 20.
PARITY_QUESTIONS = [
    "What is the capital of France?",
    "Why is the sky blue?",
    "Write a haiku about bread.",
    "List three uses of copper.",
    "How do vaccines train the immune system?",
    "Summarise the plot of Romeo and Juliet.",
    "What does a compiler do?",
    "Give two tips for sleeping better.",
    "Explain what a black hole is.",
    "Why do leaves change colour in autumn?",
    "What is the difference between weather and climate?",
    "How does a refrigerator keep food cold?",
]


def parity_chats() -> list[tuple[str, str]]:
    """(system, question) for the 20 requests: every PROMPT bare, the questions alternately
    bare and under the gateway's grounded-chat system prompt."""
    chats = [("", p) for p in PROMPTS]
    chats += [(SYSTEM_PROMPT if i % 2 else "", q) for i, q in enumerate(PARITY_QUESTIONS)]
    return chats[:20]
