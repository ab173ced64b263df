"""Chat examples as training tensors: the model's chat template, labels on assistant tokens only,
optional packing, padded batches."""

from __future__ import annotations

from typing import Any

IGNORE = -100  # label of a token the loss leaves out (PyTorch's cross_entropy ignore_index)


def encode_chat(
    tokenizer: Any, messages: list[dict[str, str]], max_length: int
) -> tuple[list[int], list[int]]:
    """(input ids, labels) of a conversation rendered with the tokenizer's chat template; labels
    are the ids on the assistant turns' tokens (their end-of-turn token included, so the model
    learns to stop) and IGNORE elsewhere. Truncated to max_length from the right.

    The assistant spans are found by rendering each prefix of the conversation: the template
    renders messages[:i] plus the generation prompt as a prefix of the whole, so the characters
    between that prefix and the rendering of messages[:i+1] are turn i's answer."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    spans: list[tuple[int, int]] = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(
            messages[:i], tokenize=False, add_generation_prompt=True
        )
        turn = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        if not (text.startswith(prompt) and text.startswith(turn)):
            raise ValueError(
                "the chat template does not render a conversation's prefixes as its prefixes"
            )
        start, end = len(prompt), len(turn)
        spans.append((start, end))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = encoded["input_ids"]
    labels = [
        tok if any(s <= a < e for s, e in spans) else IGNORE
        for tok, (a, _) in zip(ids, encoded["offset_mapping"], strict=True)
    ]
    return ids[:max_length], labels[:max_length]


def pack(
    examples: list[tuple[list[int], list[int]]], max_length: int
) -> list[tuple[list[int], list[int]]]:
    """Whole examples concatenated into sequences of at most max_length tokens (first fit, in
    order), so a batch holds little padding. Examples in one sequence attend to each other's
    tokens, as in TRL's classic packing; the loss still counts only assistant tokens, and the
    first token of each example (the template's <|im_start|>) carries no label, so nothing is
    learnt across the seam."""
    packed: list[tuple[list[int], list[int]]] = []
    ids: list[int] = []
    labels: list[int] = []
    for example_ids, example_labels in examples:
        if ids and len(ids) + len(example_ids) > max_length:
            packed.append((ids, labels))
            ids, labels = [], []
        ids = ids + example_ids
        labels = labels + example_labels
    if ids:
        packed.append((ids, labels))
    return packed


def collate(batch: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    """Right-padded tensors: input_ids, attention_mask, labels (IGNORE on padding)."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, labs) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(labs)] = torch.tensor(labs)
        mask[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}
