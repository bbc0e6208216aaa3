"""A book cut into windows that each fill a token budget: contiguous runs of whole sentences, gold restricted to them.

Windows follow one another from the book's start, each taking the most whole sentences that fit. What remains
at the end becomes a window anchored at the book's end and reaching back as far as the budget allows (so it fills
the budget too, overlapping its predecessor) when it holds at least half a budget; a shorter remainder is left
out. A book whose text fits the budget has no window (it is a whole-book sample instead). Sizes are estimated
from one tokenization of the whole book (`BookCutter`, once per book), then, with `exact`, measured by
rendering each window alone in `tokenizer` tokens (words when None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from data_builders.coref.conll import CorefDocument
from data_builders.coref.haystack import LongDoc, as_long, render
from longctx_eval.errors import DataError
from longctx_eval.text.tokenizer import Tokenizer

Span = tuple[int, int]


@dataclass(frozen=True)
class BookWindow:
    """One window of a book: its word range in the book, its sentences and the window as a document."""

    index: int  # position among the book's windows, from its start
    start: int  # first word (in the book)
    end: int  # one past the last word
    first_sentence: int
    sentences: int
    long: LongDoc  # the window's words, sentence ends and the clusters of the mentions inside it, rebased


class BookCutter:
    """One book's sentences and their cumulative tokens (one tokenization of the book), cut into runs on demand."""

    def __init__(self, doc: CorefDocument, tokenizer: Tokenizer | None = None) -> None:
        self.doc, self.tokenizer = doc, tokenizer
        ends = [e for e in doc.sentence_ends if 0 < e <= len(doc.tokens)]
        if not ends or ends[-1] != len(doc.tokens):
            ends.append(len(doc.tokens))
        starts = [0, *ends[:-1]]
        self.bounds = [(s, e) for s, e in zip(starts, ends, strict=True) if e > s]
        self.cum = self._cumulative()

    @property
    def sentences(self) -> int:
        """Sentences of the book."""
        return len(self.bounds)

    @property
    def tokens(self) -> int:
        """Tokens of the whole book (as one text)."""
        return int(self.cum[-1])

    def _cumulative(self) -> np.ndarray:
        """cum[k] = tokens of the book's text up to the end of sentence k-1 (cum[0] = 0)."""
        if self.tokenizer is None:
            return np.array([0] + [e for _, e in self.bounds])
        text, chars = render(self.doc.tokens, self.doc.sentence_ends)
        token_ends = np.array([e for _, e in self.tokenizer.encode(text).offsets])
        sentence_chars = [chars[e - 1][1] for _, e in self.bounds]
        return np.concatenate([[0], np.searchsorted(token_ends, sentence_chars, side="right")])

    def measure(self, i: int, j: int) -> int:
        """Tokens of sentences [i, j) rendered alone."""
        start, end = self.bounds[i][0], self.bounds[j - 1][1]
        if self.tokenizer is None:
            return end - start
        return self.tokenizer.count(render(self.doc.tokens[start:end], [e - start for _, e in self.bounds[i:j]])[0])

    def forward(self, i: int, budget: int, exact: bool = True) -> int:
        """The end j of the longest run of sentences from i that fits `budget` (estimated; measured with `exact`)."""
        j = min(int(np.searchsorted(self.cum, self.cum[i] + budget, side="right")) - 1, self.sentences)
        while exact and j > i and self.measure(i, j) > budget:
            j -= 1
        if j <= i:
            raise DataError(f"{self.doc.name}: sentence {i + 1} alone is longer than the window budget of {budget}")
        return j

    def backward(self, j: int, budget: int, exact: bool = True) -> int:
        """The start i of the longest run of sentences ending at j that fits `budget`."""
        i = max(0, int(np.searchsorted(self.cum, self.cum[j] - budget, side="left")))
        while exact and i < j and self.measure(i, j) > budget:
            i += 1
        if i >= j:
            raise DataError(f"{self.doc.name}: sentence {j} alone is longer than the window budget of {budget}")
        return i

    def remaining(self, i: int) -> int:
        """Tokens from sentence i to the book's end (estimated)."""
        return int(self.cum[-1] - self.cum[i])

    def window(self, index: int, i: int, j: int) -> BookWindow:
        """Sentences [i, j) as a window: words, sentence ends, and the clusters of the mentions inside, rebased."""
        doc = self.doc
        start, end = self.bounds[i][0], self.bounds[j - 1][1]
        clusters = []
        for cluster in doc.clusters:
            inside = tuple((s - start, e - start) for s, e in cluster if s >= start and e < end)
            if inside:
                clusters.append(inside)
        clusters.sort(key=lambda c: c[0])
        part = CorefDocument(
            name=doc.name,
            tokens=doc.tokens[start:end],
            sentence_ends=tuple(e - start for _, e in self.bounds[i:j]),
            clusters=tuple(clusters),
            path=doc.path,
            line=doc.line,
        )
        return BookWindow(index, start, end, i, j - i, as_long(part))


def book_windows(doc: CorefDocument, budget: int, tokenizer: Tokenizer | None = None) -> list[BookWindow]:
    """`doc` cut into windows of at most `budget` tokens, each filling it; [] when the whole book fits."""
    if budget < 1:
        raise DataError(f"window budget: expected at least 1 token, got {budget}")
    cut = BookCutter(doc, tokenizer)
    if cut.measure(0, cut.sentences) <= budget:
        return []
    runs: list[tuple[int, int]] = []
    i = 0
    while i < cut.sentences:
        if runs and 2 * cut.remaining(i) < budget:
            break  # a remainder under half a budget is left out
        if runs and cut.remaining(i) <= budget:
            runs.append((cut.backward(cut.sentences, budget), cut.sentences))
            break
        j = cut.forward(i, budget)
        runs.append((i, j))
        i = j
    return [cut.window(k, s, e) for k, (s, e) in enumerate(runs)]
