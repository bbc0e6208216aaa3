"""The assistant's answers: excerpts of whole sentences of a haystack source, each at most `max_tokens` tokens.

The source's paragraphs are walked in order (from the seed's start); each paragraph is cut into consecutive
excerpts of whole sentences, so every sentence of the stream is used once. A finite source (austen, files:)
that runs out starts over from another seed: only then can a text repeat, and the conversation builder keeps
look-alike answers distinct from every other answer.
"""

from __future__ import annotations

from collections.abc import Iterator

from data_builders.haystack.assembly import HaystackSource
from longctx_eval.text.sentences import split_sentences
from longctx_eval.text.tokenizer import Tokenizer

MIN_ANSWER_TOKENS = 12
"""An excerpt shorter than this (a one-line reply in a dialogue) is skipped: an answer is a piece of writing."""
_MAX_RESTARTS = 64


class Excerpts:
    """A stream of distinct prose excerpts of at most `max_tokens` tokens (each whole sentences of one paragraph)."""

    def __init__(self, source: HaystackSource, tokenizer: Tokenizer, seed: int, max_tokens: int) -> None:
        self.source, self.tokenizer, self.seed, self.max_tokens = source, tokenizer, seed, max_tokens
        self.restarts = 0
        self._sentences = self._stream()
        self._pending: str | None = None

    def _stream(self) -> Iterator[str]:
        """Every sentence of the source, whitespace collapsed, with "" between paragraphs; restarts when it ends."""
        while self.restarts < _MAX_RESTARTS:
            for paragraph in self.source.paragraphs(self.seed + self.restarts):
                text = " ".join(paragraph.split())
                for start, end in split_sentences(text):
                    yield text[start:end]
                yield ""
            self.restarts += 1
        raise RuntimeError(f"haystack source {self.source.name!r} yields no usable sentences")

    def take(self, max_tokens: int | None = None, tries: int | None = None) -> tuple[str, int] | None:
        """The next excerpt of at most `max_tokens` (default: the stream's) tokens, with its token count; None when
        the limit is under `MIN_ANSWER_TOKENS` or no excerpt fits within `tries` sentences (default: no bound)."""
        limit = self.max_tokens if max_tokens is None else max_tokens
        if limit < MIN_ANSWER_TOKENS:
            return None
        text, n, seen = "", 0, 0
        while tries is None or seen < tries:
            sentence = self._pending if self._pending is not None else next(self._sentences)
            self._pending = None
            seen += 1
            if not sentence:  # a paragraph ends: close the excerpt if it is long enough, else start over
                if n >= MIN_ANSWER_TOKENS:
                    return text, n
                text, n = "", 0
                continue
            longer = f"{text} {sentence}" if text else sentence
            m = self.tokenizer.count(longer)
            if m <= limit:
                text, n = longer, m
                continue
            if n >= MIN_ANSWER_TOKENS:
                self._pending = sentence  # it opens the next excerpt
                return text, n
            alone = self.tokenizer.count(sentence)  # too little before it: the excerpt starts again with it
            text, n = (sentence, alone) if alone <= limit else ("", 0)  # a sentence over the limit is skipped
        return None
