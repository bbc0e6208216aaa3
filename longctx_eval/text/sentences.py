"""Sentence segmentation with exact character spans: Punkt sentences, blank lines as hard boundaries."""

from __future__ import annotations

import functools
import re

import punkt

from longctx_eval.errors import ConfigError, did_you_mean

# A blank line (only spaces, tabs or \r between two newlines, so CRLF text counts too) or U+2029
# PARAGRAPH SEPARATOR ends a paragraph; Punkt alone would run a heading into the next sentence.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n|\u2029")


@functools.cache
def punkt_for(language: str) -> punkt.PunktSentenceTokenizer:
    """The cached Punkt splitter for `language`; ConfigError naming close matches if it has none."""
    # punkt silently falls back to an empty model for an unknown name, so check the name here.
    known = set(punkt.available_languages())
    if language not in known:
        try:
            punkt.rules_for_language(language)  # rules-only languages such as Chinese and Japanese
        except LookupError:
            raise ConfigError(
                f"sentence language {language!r} has no Punkt model or rule preset." + did_you_mean(language, known)
            ) from None
    # Hard line breaks are left to Punkt's punctuation rules: hard-wrapped prose has newlines mid-sentence.
    return punkt.tokenizer_for(language)


def split_sentences(text: str, language: str = "english") -> list[tuple[int, int]]:
    """Half-open sentence spans in order; together they cover every non-whitespace character of `text`."""
    if not text or text.isspace():
        return []
    # Only Punkt's sentence *starts* are used, as cut points: every character between two cuts belongs
    # to exactly one sentence, so nothing Punkt skips or realigns can fall out of the coverage.
    cuts = {0, len(text)}
    cuts.update(start for start, _ in punkt_for(language).span_tokenize(text))
    cuts.update(m.end() for m in _PARAGRAPH_BREAK.finditer(text))
    bounds = sorted(cuts)
    spans: list[tuple[int, int]] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        segment = text[lo:hi]
        left = segment.lstrip()
        if not left:
            continue  # whitespace between sentences belongs to no sentence
        start = hi - len(left)
        spans.append((start, start + len(left.rstrip())))
    return spans
