"""Storing contexts with several inserted needles as one shared document plus the insertions (exact rebuild).

`split_insertions` takes a context built by `insert_sentences` apart into the bare haystack and the pieces
inserted into it; `rebuild` puts them back, character for character. Contexts of one haystack share one
stored document (the longest bare one; the others are its prefixes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from longctx_eval.errors import DataError


@dataclass(frozen=True)
class Insertions:
    """A context as bare haystack text plus pieces: `insert_at` are offsets of the bare text, ascending."""

    bare: str
    insert_at: tuple[int, ...]
    insertion: tuple[str, ...]


def split_insertions(context: str, spans: Sequence[tuple[int, int]]) -> Insertions:
    """The bare haystack of `context` and its insertions, given every inserted sentence's char span.

    `insert_sentences` joins a sentence placed at the very start with a space after it (such sentences
    chain from offset 0) and any other with a space before it; that space goes with the inserted piece.
    """
    pieces: list[tuple[int, int]] = []
    chain_end = 0  # sentences placed at offset 0 follow one another from the start of the context
    for start, end in sorted(spans):
        if start == chain_end:
            pieces.append((start, end + 1))
            chain_end = end + 1
        else:
            pieces.append((start - 1, end))
    bare, at, text, prev, removed = [], [], [], 0, 0
    for a, b in pieces:
        if a < prev:
            raise DataError(f"inserted spans overlap at char {a}; expected separate sentences")
        bare.append(context[prev:a])
        at.append(a - removed)
        text.append(context[a:b])
        removed += b - a
        prev = b
    bare.append(context[prev:])
    return Insertions("".join(bare), tuple(at), tuple(text))


def rebuild(document: str, insert_at: Sequence[int], insertion: Sequence[str], doc_end: int) -> str:
    """`document[:doc_end]` with each insertion put back at its offset (offsets of the bare text, ascending)."""
    if len(insert_at) != len(insertion):
        raise DataError(f"{len(insert_at)} insert_at offsets for {len(insertion)} insertions; expected one each")
    if not 0 <= doc_end <= len(document):
        raise DataError(f"doc_end={doc_end}; expected 0 <= doc_end <= {len(document)} (the document's length)")
    out, prev = [], 0
    for at, piece in zip(insert_at, insertion, strict=True):
        if not prev <= at <= doc_end:
            raise DataError(f"insert_at={at}; expected ascending offsets from {prev} to doc_end={doc_end}")
        out += [document[prev:at], piece]
        prev = at
    out.append(document[prev:doc_end])
    return "".join(out)
