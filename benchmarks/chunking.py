"""Ours, as benchmarked: 512-token sentence-aware chunks, 64-token overlap, GPT-2 tokens, full offset index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.gpt2 import our_tokenizer

MAX_TOKENS = 512
OVERLAP = 64

Chunker = Callable[[str], "Spans"]


@dataclass
class Spans:
    """What a method returned, normalised: chunk texts and the character offsets it *claims* for them."""

    texts: list[str]
    starts: list[int]  # as reported; a wrong one (langchain's -1) is kept, so the check can count it
    ends: list[int]
    token_spans: list[tuple[int, int]] | None = None  # global token offsets, for methods that give them
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. our OffsetIndex, for the check


def ours(backend: str = "tiktoken") -> Chunker:
    """`chunk_document` + `OffsetIndex` with GPT-2 through `backend` (setup: load the tokenizer)."""
    from longctx_eval.text import ChunkConfig, OffsetIndex, chunk_document

    tokenizer = our_tokenizer(backend)
    config = ChunkConfig(max_tokens=MAX_TOKENS, overlap=OVERLAP)

    def run(text: str) -> Spans:
        chunks = chunk_document(text, tokenizer, config)
        index = OffsetIndex(chunks, len(text), chunks[-1].token_end if chunks else 0)
        return Spans(
            texts=[c.text for c in chunks],
            starts=[c.char_start for c in chunks],
            ends=[c.char_end for c in chunks],
            token_spans=[(c.token_start, c.token_end) for c in chunks],
            extra={"index": index, "tokenizer": tokenizer},
        )

    return run
