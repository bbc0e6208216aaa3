"""Coreference in a haystack: a gold document stretched to a target length with haystack prose between its
sentences, every gold mention shifted exactly; and the rendering of token lists as readable text.

The gold document's sentences stay in order and intact (no insertion point falls inside a mention); the
haystack paragraphs are spread evenly over the gaps, so every antecedent distance grows while the gold
stays exact: `stretched.tokens[shift(s):shift(e) + 1] == original.tokens[s:e + 1]` for every mention.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from data_builders.coref.conll import CorefDocument
from data_builders.haystack.assembly import HaystackSource
from longctx_eval.errors import DataError
from longctx_eval.text.tokenizer import Tokenizer

_WORD = re.compile(r"\w+|'\w+|[^\w\s]")
_NO_SPACE_BEFORE = re.compile(r"^(?:[.,;:!?%)\]}]+|'\w*|n't|\.\.\.)$")
_NO_SPACE_AFTER = frozenset({"(", "[", "{", "$", "``"})
_MAX_FIT_ROUNDS = 8


@dataclass(frozen=True)
class LongDoc:
    """A (possibly stretched) document: tokens, sentences, paragraphs, clusters and where the haystack went."""

    doc: CorefDocument
    paragraph_ends: tuple[int, ...]  # exclusive token index where each paragraph ends
    haystack: tuple[tuple[int, int], ...]  # inserted half-open token ranges
    native_tokens: int  # words of the original document
    shift: tuple[int, ...]  # original token i is token shift[i] here

    @property
    def inserted_tokens(self) -> int:
        """Words of haystack inserted."""
        return sum(e - s for s, e in self.haystack)


def split_words(text: str) -> list[str]:
    """Words and punctuation of `text` (PTB-like: "Clara's" -> "Clara", "'s")."""
    return _WORD.findall(text)


def render(
    tokens: Sequence[str], sentence_ends: Sequence[int], paragraph_ends: Sequence[int] = ()
) -> tuple[str, list[tuple[int, int]]]:
    """Readable text of a token list and each token's half-open character span in it."""
    paragraphs = set(paragraph_ends)
    sentences = set(sentence_ends)
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    glue = True  # no separator before the first token
    quotes = 0
    for i, tok in enumerate(tokens):
        if i in paragraphs:
            sep, quotes = "\n\n", 0
        elif glue or _NO_SPACE_BEFORE.match(tok) or (tok == '"' and quotes % 2 == 1 and i not in sentences):
            sep = ""
        else:
            sep = " "
        if i and i in sentences and sep == "":
            sep = " "
        parts.append(sep)
        pos += len(sep)
        parts.append(tok)
        spans.append((pos, pos + len(tok)))
        pos += len(tok)
        if tok == '"':
            quotes += 1
        glue = tok in _NO_SPACE_AFTER or (tok == '"' and quotes % 2 == 1)
    return "".join(parts), spans


def as_long(doc: CorefDocument) -> LongDoc:
    """A document unchanged, as one paragraph."""
    n = len(doc.tokens)
    return LongDoc(doc, (n,) if n else (), (), n, tuple(range(n)))


def valid_gaps(doc: CorefDocument) -> list[int]:
    """Sentence boundaries (token indices) strictly inside the document that no mention crosses."""
    crossed: set[int] = set()
    for cluster in doc.clusters:
        for s, e in cluster:
            crossed.update(range(s + 1, e + 1))
    n = len(doc.tokens)
    return [b for b in doc.sentence_ends if 0 < b < n and b not in crossed]


def _count(tokenizer: Tokenizer | None, text: str) -> int:
    return len(split_words(text)) if tokenizer is None else tokenizer.count(text)


def measure(long: LongDoc, tokenizer: Tokenizer | None) -> int:
    """Length of the rendered document in `tokenizer` tokens (words when None)."""
    if tokenizer is None:
        return len(long.doc.tokens)
    return tokenizer.count(render(long.doc.tokens, long.doc.sentence_ends, long.paragraph_ends)[0])


def stretch(
    doc: CorefDocument,
    target: int,
    source: HaystackSource,
    seed: int,
    tokenizer: Tokenizer | None = None,
) -> LongDoc:
    """`doc` with haystack paragraphs between its sentences, rendered to at most `target` tokens (close to it).

    Lengths are in `tokenizer` tokens of the rendered text, or words when it is None; DataError when the
    document alone is longer than `target`.
    """
    base = as_long(doc)
    native = measure(base, tokenizer)
    if native > target:
        raise DataError(f"document {doc.name!r} has {native} tokens, more than the target {target}")
    gaps = valid_gaps(doc)
    if native == target or not gaps:
        return base
    need = target - native
    tolerance = 0 if tokenizer is None else max(1, target // 200)
    for _ in range(_MAX_FIT_ROUNDS):  # joins change token counts slightly: adjust the haystack and refit
        long = _assemble(doc, gaps, _haystack_blocks(source.paragraphs(seed), need, tokenizer))
        gap = target - measure(long, tokenizer)
        if 0 <= gap <= tolerance:
            return long
        need = max(0, need + gap)
    if gap >= 0:
        return long
    raise DataError(f"document {doc.name!r}: could not fit the haystack to {target} tokens")


def _haystack_blocks(paragraphs: Iterator[str], need: int, tokenizer: Tokenizer | None) -> list[list[str]]:
    """Haystack paragraphs (as word lists) adding up to about `need` tokens; the last one cut to fit."""
    blocks: list[list[str]] = []
    have = 0
    while have < need:
        words = split_words(next(paragraphs))
        size = _count(tokenizer, render(words, ())[0]) + (tokenizer is not None)  # +1: the paragraph break
        if have + size > need:
            keep = max(1, len(words) * (need - have) // size)
            words = words[:keep]
            size = need - have
        blocks.append(words)
        have += size
    return [b for b in blocks if b]


def _assemble(doc: CorefDocument, gaps: list[int], blocks: list[list[str]]) -> LongDoc:
    """Spread the blocks over evenly spaced gaps and shift every token, sentence end and mention."""
    chosen = _spread(gaps, len(blocks))
    inserts: dict[int, list[list[str]]] = {}
    for block, gap in zip(blocks, chosen, strict=True):
        inserts.setdefault(gap, []).append(block)
    tokens: list[str] = []
    shift: list[int] = []
    sentence_ends: list[int] = []
    paragraph_ends: list[int] = []
    haystack: list[tuple[int, int]] = []
    ends = set(doc.sentence_ends)
    for i, tok in enumerate(doc.tokens):
        for block in inserts.get(i, ()):
            paragraph_ends.append(len(tokens))
            start = len(tokens)
            tokens.extend(block)
            haystack.append((start, len(tokens)))
            sentence_ends.append(len(tokens))
            paragraph_ends.append(len(tokens))
        shift.append(len(tokens))
        tokens.append(tok)
        if i + 1 in ends:
            sentence_ends.append(len(tokens))
    paragraph_ends.append(len(tokens))
    clusters = tuple(tuple((shift[s], shift[e]) for s, e in c) for c in doc.clusters)
    new = CorefDocument(
        name=doc.name,
        tokens=tuple(tokens),
        sentence_ends=tuple(sorted(set(sentence_ends))),
        clusters=clusters,
        path=doc.path,
        line=doc.line,
    )
    return LongDoc(
        new, tuple(sorted(set(p for p in paragraph_ends if p))), tuple(haystack), len(doc.tokens), tuple(shift)
    )


def _spread(gaps: list[int], n: int) -> list[int]:
    """`n` gap positions, evenly spaced over the available gaps, in document order (repeats allowed)."""
    if n == 0:
        return []
    return [gaps[min(len(gaps) - 1, (k * len(gaps)) // n + len(gaps) // (2 * n))] for k in range(n)]
