"""Per distinct chunk text, its BM25 terms as `bm25s.tokenize` makes them, kept so a chunk is tokenized once.

A chunk's terms (bm25s's defaults with `stopwords="en"`): lowercase the text, take every match of
`TOKEN_PATTERN`, drop the English stopwords; no stemming. Kept per distinct text: the ids of its distinct
terms in a process-wide vocabulary (the id values are arbitrary), in the order they first occur in the chunk
(as `collections.Counter` and bm25s's vocabulary order them), their counts, and the chunk's length in terms.
Documents that share chunks (one haystack with a needle at many depths) tokenize only the chunks they do not
share; `bm25_arrays.assemble` builds the index from these counts. Memory only: an LRU bounded in bytes, and a
vocabulary that starts again (with the counts) past `VOCABULARY_KEPT` terms.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s.tokenize's default token pattern (two or more word characters)."""
MEMORY_BYTES = 256 << 20
"""About 10 MB per 1M-token haystack (10,000 chunks), so a run's haystacks all fit."""
VOCABULARY_KEPT = 4_000_000
_ENTRY_OVERHEAD = 250  # the entry object, its two arrays' headers and the LRU's slot, roughly


@dataclass(frozen=True)
class ChunkTerms:
    """One chunk's terms: distinct term ids (first occurrence order), their counts, its length in terms."""

    ids: np.ndarray
    counts: np.ndarray
    length: int


class TermCounts:
    """Chunk text -> `ChunkTerms`, tokenized on first sight; `tokenized` and `reused` count chunks served."""

    def __init__(self, stopwords: Sequence[str], memory_bytes: int = MEMORY_BYTES) -> None:
        self._split = re.compile(TOKEN_PATTERN).findall
        self._stopwords = frozenset(stopwords)
        self.memory_bytes = memory_bytes
        self._vocabulary: dict[str, int] = {}
        self.terms: list[str] = []
        """Term of each id (the vocabulary in id order)."""
        self._memory: OrderedDict[str, ChunkTerms] = OrderedDict()
        self._held = 0
        self.tokenized = 0
        self.reused = 0

    def of(self, texts: Sequence[str]) -> list[ChunkTerms]:
        """The terms of every text, in order (the same ids for the whole call)."""
        if len(self._vocabulary) > VOCABULARY_KEPT:
            self.clear()
        out = []
        memory = self._memory
        for text in texts:
            held = memory.get(text)
            if held is None:
                held = self._tokenize(text)
                self._remember(text, held)
                self.tokenized += 1
            else:
                memory.move_to_end(text)
                self.reused += 1
            out.append(held)
        if len(self.terms) < len(self._vocabulary):  # ids are insertion order: the new terms are the last ones
            self.terms.extend(islice(self._vocabulary, len(self.terms), None))
        return out

    def clear(self) -> None:
        """Forget every chunk and the vocabulary."""
        self._memory.clear()
        self._held = 0
        self._vocabulary.clear()
        self.terms.clear()

    def _tokenize(self, text: str) -> ChunkTerms:
        stop = self._stopwords
        tokens = [t for t in self._split(text.lower()) if t not in stop]
        counted = Counter(tokens)  # keys in first-occurrence order, which the index's vocabulary follows
        vocabulary = self._vocabulary
        new = [t for t in counted if t not in vocabulary]
        if new:
            vocabulary.update(zip(new, range(len(vocabulary), len(vocabulary) + len(new)), strict=True))
        n = len(counted)
        ids = np.fromiter(map(vocabulary.__getitem__, counted), dtype=np.int64, count=n)
        return ChunkTerms(ids, np.fromiter(counted.values(), dtype=np.int64, count=n), len(tokens))

    def _remember(self, text: str, terms: ChunkTerms) -> None:
        size = sys.getsizeof(text) + terms.ids.nbytes + terms.counts.nbytes + _ENTRY_OVERHEAD
        self._memory[text] = terms
        self._held += size
        while self._held > self.memory_bytes and len(self._memory) > 1:
            old_text, old = self._memory.popitem(last=False)
            self._held -= sys.getsizeof(old_text) + old.ids.nbytes + old.counts.nbytes + _ENTRY_OVERHEAD


_SHARED: dict[tuple[str, ...], TermCounts] = {}


def shared_term_counts(stopwords: Sequence[str]) -> TermCounts:
    """The process-wide counts for this stopword list: every BM25 index of a run (bm25, hybrid) shares them."""
    key = tuple(stopwords)
    held = _SHARED.get(key)
    if held is None:
        held = _SHARED[key] = TermCounts(key)
    return held
