"""Sentence-aware sliding-window chunking with exact character and global-token offsets.

Two boundary rules (`ChunkConfig.resync`):

- **greedy** (the default): from the document start, each chunk takes the most whole sentences that fit the
  budget, the next starts with the trailing sentences within the overlap. A chunk's boundaries depend on every
  boundary before it, so an inserted sentence can shift the chunks after it (in practice they usually fall
  back into step within a few chunks, but nothing bounds how many).
- **resync**: *sync sentences*, chosen by their own text alone, cut the document into segments that are
  chunked greedily one by one; a segment's first chunk starts exactly at its sync sentence (no overlap across
  it). Sentence j (not the first) is a sync sentence when u(text of j) < tokens(j) / sync_tokens, where u is
  the first 8 bytes of the blake2b hash of its stripped text read as a fraction of 2**64: about one per
  `sync_tokens` tokens (default 8 budgets), whatever the sentence lengths. Inserting or changing sentences
  changes only the chunks of the segments that hold them: every chunk from the next sync sentence on is the
  same text as before (tested).
"""

from __future__ import annotations

import hashlib
import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from longctx_eval.errors import ConfigError, DataError, did_you_mean
from longctx_eval.text.pieces import sentence_spans, token_offsets
from longctx_eval.text.sentences import punkt_for
from longctx_eval.text.tokenizer import Tokenizer

Embed = Callable[[list[str]], Any]
"""Sentence embedder for semantic mode: texts in, an (n, dim) array-like out."""
SYNC_BUDGETS = 8
"""resync: sync sentences come about every `SYNC_BUDGETS * max_tokens` tokens unless `sync_tokens` says."""


@dataclass(frozen=True)
class Chunk:
    """A run of whole sentences (or a piece of one long sentence) with its exact spans in the document."""

    index: int
    text: str  # == document[char_start:char_end]
    char_start: int  # half-open character span in the whole document
    char_end: int
    token_start: int  # half-open span in the whole document's global tokenization
    token_end: int
    overlap_chars: int  # characters shared with the previous chunk (0 for the first)
    overlap_tokens: int  # tokens shared with the previous chunk (0 for the first)


@dataclass(frozen=True)
class ChunkConfig:
    """Chunking parameters: a token budget, a token overlap, and optional semantic breakpoints."""

    max_tokens: int = 512
    overlap: int = 64  # in tokens; realised at sentence granularity, token-level only inside long sentences
    semantic: bool = False  # end chunks at topic shifts between sentences (needs an `embed` callable)
    breakpoint_percentile: float = 95.0  # semantic: distances above this percentile are topic shifts
    language: str = "english"  # Punkt model used for sentence boundaries
    resync: bool = False  # segment at content-chosen sync sentences, so an insertion changes only nearby chunks
    sync_tokens: int | None = None  # resync: mean tokens between sync sentences (None: SYNC_BUDGETS * max_tokens)

    def __post_init__(self) -> None:
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise ConfigError(f"ChunkConfig.max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not _is_int(self.overlap) or not 0 <= self.overlap < self.max_tokens:
            raise ConfigError(
                f"ChunkConfig.overlap must be an integer with 0 <= overlap < max_tokens "
                f"(= {self.max_tokens}), got {self.overlap!r}"
            )
        if not isinstance(self.semantic, bool):
            raise ConfigError(f"ChunkConfig.semantic must be true or false, got {self.semantic!r}")
        p = self.breakpoint_percentile
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p < 100:
            raise ConfigError(f"ChunkConfig.breakpoint_percentile must be a number in (0, 100), got {p!r}")
        if not isinstance(self.language, str) or not self.language:
            raise ConfigError(f"ChunkConfig.language must be a language name such as 'english', got {self.language!r}")
        if not isinstance(self.resync, bool):
            raise ConfigError(f"ChunkConfig.resync must be true or false, got {self.resync!r}")
        if self.sync_tokens is not None and (not _is_int(self.sync_tokens) or self.sync_tokens < self.max_tokens):
            raise ConfigError(
                f"ChunkConfig.sync_tokens must be an integer >= max_tokens (= {self.max_tokens}) or unset, "
                f"got {self.sync_tokens!r}"
            )
        if self.resync and self.semantic:
            raise ConfigError(
                "ChunkConfig.resync and semantic cannot be combined: semantic breakpoints come from a percentile "
                "over the whole document, so they do not resynchronise after an insertion"
            )
        punkt_for(self.language)  # an unknown language fails here, with a suggestion

    @property
    def sync_every(self) -> int:
        """resync: the mean number of tokens between sync sentences."""
        return self.sync_tokens if self.sync_tokens is not None else SYNC_BUDGETS * self.max_tokens

    def key_fields(self) -> dict[str, Any]:
        """The fields that decide the chunks, for cache keys: the resync fields only when resync is on, so the
        greedy rule's keys are what they were before resync existed."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.resync:
            del out["resync"], out["sync_tokens"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChunkConfig:
        """Build from a mapping (YAML or CLI), rejecting unknown keys."""
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                raise ConfigError(f"unknown chunking option {key!r}." + did_you_mean(str(key), known))
        return cls(**data)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class _Layout:
    """Sentences mapped onto the global tokenization; arrays, not per-token objects, to stay fast at 1M tokens."""

    n_tokens: int
    sent_start: list[int]  # stripped sentence spans, in characters
    sent_end: list[int]
    sent_tok: list[int]  # sentence j owns tokens [sent_tok[j], sent_tok[j + 1]); len == n_sentences + 1
    start_min: np.ndarray  # start_min[k] = min char start of tokens k.. (a chunk from token k starts there)
    end_max: np.ndarray  # end_max[k] = max char end of tokens ..k (a chunk up to token k ends there)


def _layout(text: str, tokenizer: Tokenizer, language: str) -> _Layout | None:
    _reject_truncating(tokenizer)
    spans = sentence_spans(text, language)  # split_sentences, memoised by paragraph (text/pieces.py)
    if not spans:
        return None  # empty or whitespace-only: no chunks, and no need to tokenize
    starts, ends = _token_offsets(tokenizer, text)
    n = len(starts)
    if n and (int(min(starts.min(), ends.min())) < 0 or int(max(starts.max(), ends.max())) > len(text)):
        raise DataError(
            f"tokenizer {tokenizer.name!r} returned offsets outside the text (0..{len(text)}); "
            "expected character offsets into the encoded string"
        )
    # A token belongs to the sentence holding its last character: " He" (leading space) goes with "He",
    # ".\n\n" goes with the sentence it ends. The running max keeps the anchors sorted for searchsorted
    # even if a tokenizer reports offsets slightly out of order.
    anchor = np.maximum.accumulate(np.minimum(np.maximum(ends - 1, starts), len(text) - 1))
    sent_start = [s for s, _ in spans]
    sent_tok = np.searchsorted(anchor, np.asarray(sent_start, dtype=np.int64), side="left").tolist()
    sent_tok[0] = 0  # tokens before the first sentence (leading whitespace) join it
    sent_tok.append(n)
    return _Layout(
        n_tokens=n,
        sent_start=sent_start,
        sent_end=[e for _, e in spans],
        sent_tok=sent_tok,
        start_min=np.minimum.accumulate(starts[::-1])[::-1] if n else starts,
        end_max=np.maximum.accumulate(ends) if n else ends,
    )


def _token_offsets(tokenizer: Tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end character offsets of every token, as arrays (fast path for `Tokenizer` and its kin)."""
    if getattr(tokenizer, "offset_arrays", None) is not None:
        return token_offsets(tokenizer, text)  # memoised by paragraph where that is exact (text/pieces.py)
    offsets = tokenizer.encode(text).offsets  # any object with `encode` (tests pass minimal fakes)
    flat = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64, count=2 * len(offsets))
    return flat[0::2], flat[1::2]


def _reject_truncating(tokenizer: Tokenizer) -> None:
    # `Tokenizer` turns both off on its private backend, but a caller can turn them back on; then the
    # rest of the document would be silently dropped or (0, 0) pad tokens added.
    backend = getattr(tokenizer, "backend", None)
    if backend is not None and (getattr(backend, "truncation", None) or getattr(backend, "padding", None)):
        raise ConfigError(
            f"tokenizer {tokenizer.name!r} has truncation or padding enabled; chunking needs the whole "
            "document tokenized: call backend.no_truncation() and backend.no_padding() first"
        )


def _semantic_breaks(text: str, layout: _Layout, config: ChunkConfig, embed: Embed | None) -> list[bool]:
    """breaks[j] is True when a topic shift follows sentence j (cosine distance above the percentile)."""
    m = len(layout.sent_start)
    if embed is None:
        raise ConfigError(
            "ChunkConfig.semantic=True needs an embed callable: chunk_document(..., embed=f) with "
            "f(list[str]) -> array of shape (n_texts, dim), e.g. a retriever's sentence encoder"
        )
    sentences = [text[s:e] for s, e in zip(layout.sent_start, layout.sent_end, strict=True)]
    vectors = np.asarray(embed(sentences), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != m:
        raise DataError(f"embed returned shape {vectors.shape}; expected ({m}, dim), one row per sentence")
    if m < 2:
        return [False] * m
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    distance = 1.0 - np.einsum("ij,ij->i", unit[:-1], unit[1:])
    threshold = np.percentile(distance, config.breakpoint_percentile)
    # Strictly above, so a document with uniform distances has no breakpoints at all.
    return (distance > threshold).tolist() + [False]


def sync_sentences(text: str, layout: _Layout, sync_every: int) -> list[int]:
    """resync: the first sentence of each segment (0, then every sync sentence; see the module docstring)."""
    T = layout.sent_tok
    starts = [0]
    scale = float(1 << 64) / sync_every
    for j in range(1, len(layout.sent_start)):
        n = T[j + 1] - T[j]
        if n <= 0:
            continue
        piece = text[layout.sent_start[j] : layout.sent_end[j]].encode("utf-8", "surrogatepass")
        u = int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "big")
        if u < n * scale:
            starts.append(j)
    return starts


def _token_windows(
    text: str, layout: _Layout, config: ChunkConfig, breaks: list[bool] | None
) -> Iterator[tuple[int, int, int, int]]:
    """Yield (token_start, token_end, first_sentence, last_sentence) per chunk; always makes progress."""
    m = len(layout.sent_tok) - 1
    if not config.resync:
        yield from _greedy_windows(layout.sent_tok, 0, m, config.max_tokens, config.overlap, breaks)
        return
    starts = sync_sentences(text, layout, config.sync_every)
    for first, end in zip(starts, [*starts[1:], m], strict=True):
        yield from _greedy_windows(layout.sent_tok, first, end, config.max_tokens, config.overlap, None)


def _greedy_windows(
    T: list[int], first: int, m: int, budget: int, overlap: int, breaks: list[bool] | None
) -> Iterator[tuple[int, int, int, int]]:
    """The greedy windows over sentences first..m-1 (T: sentence token boundaries), from token T[first]."""
    j, a = first, T[first]  # the next chunk starts at token a, inside (or at the start of) sentence j
    done = first - 1  # last sentence already fully emitted; a later chunk must end past it
    while True:
        if T[j + 1] - a > budget:
            # Sentence j is too long for one chunk: cut at token boundaries, overlap `overlap` tokens.
            b = a + budget
            yield a, b, j, j
            a = b - overlap
            continue
        last = min(bisect_right(T, a + budget) - 2, m - 1)  # the most whole sentences that fit
        if breaks is not None:
            cut = next((k for k in range(last, max(j, done + 1) - 1, -1) if breaks[k]), None)
            last = last if cut is None else cut
        b = T[last + 1]
        yield a, b, j, last
        if last == m - 1:
            return
        done = last
        j = _overlap_start(T, j, last, overlap, budget)
        a = T[j]


def _overlap_start(T: list[int], first: int, last: int, overlap: int, budget: int) -> int:
    """First sentence of the next chunk: the trailing whole sentences of (first..last) within `overlap`."""
    b = T[last + 1]
    start = bisect_left(T, b - overlap, first + 1, last + 1)
    next_end = T[last + 2]
    if next_end - T[start] > budget:
        if next_end - T[last + 1] <= budget:
            # Shrink the overlap so the next sentence still fits whole beside it.
            start = bisect_left(T, next_end - budget, start, last + 2)
        else:
            # The next sentence must be split anyway; its pieces overlap each other at token level.
            start = last + 1
    # Sentences without tokens are no overlap worth repeating.
    return last + 1 if T[start] == b else start


def iter_chunks(
    text: str, tokenizer: Tokenizer, config: ChunkConfig | None = None, *, embed: Embed | None = None
) -> Iterator[Chunk]:
    """Yield the chunks of `text` in order (the same ones `chunk_document` returns), one at a time."""
    config = config or ChunkConfig()
    layout = _layout(text, tokenizer, config.language)
    if layout is None:
        return
    breaks = _semantic_breaks(text, layout, config, embed) if config.semantic else None
    previous: tuple[int, int, int, int] | None = None  # (char_start, char_end, token_start, token_end)
    prev_overlap = (0, 0)
    index = 0
    for a, b, first, last in _token_windows(text, layout, config, breaks):
        start, end = _char_span(layout, a, b, first, last)
        if previous is not None:
            pc_start, pc_end, pt_start, pt_end = previous
            # Stretch the previous chunk over the untokenized gap (whitespace, dropped control
            # characters) up to this one, so the chunks cover the document with no hole.
            pc_end = max(pc_end, start)
            yield _make(text, index, pc_start, pc_end, pt_start, pt_end, prev_overlap)
            index += 1
            prev_overlap = (pc_end - start, max(0, pt_end - a))
        previous = (start, end, a, b)
    assert previous is not None
    yield _make(text, index, *previous, prev_overlap)


def _char_span(layout: _Layout, a: int, b: int, first: int, last: int) -> tuple[int, int]:
    """Smallest character span holding tokens [a, b) and the whole sentences among first..last."""
    starts = [int(layout.start_min[a])] if a < layout.n_tokens else []
    if a == layout.sent_tok[first]:
        starts.append(layout.sent_start[first])  # from the sentence start: untokenized characters count too
    start = min(starts)  # never empty: a == n_tokens only at a sentence start
    end = layout.sent_end[last] if b == layout.sent_tok[last + 1] else start
    if b > a:
        end = max(end, int(layout.end_max[b - 1]))
    return start, max(end, start)


def _make(text: str, index: int, cs: int, ce: int, ts: int, te: int, overlap: tuple[int, int]) -> Chunk:
    return Chunk(index, text[cs:ce], cs, ce, ts, te, overlap[0], overlap[1])


def chunk_document(
    text: str, tokenizer: Tokenizer, config: ChunkConfig | None = None, *, embed: Embed | None = None
) -> list[Chunk]:
    """Split `text` into overlapping windows of whole sentences, each at most `config.max_tokens` tokens."""
    return list(iter_chunks(text, tokenizer, config, embed=embed))
