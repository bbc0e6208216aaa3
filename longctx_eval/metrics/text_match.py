"""Answer matching for generated text: normalization and containment of the gold value."""

from __future__ import annotations

import re
import string
import unicodedata

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}\u2018\u2019\u201c\u201d\u2013\u2014]")
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Casefold, NFKC, punctuation to spaces, whitespace collapsed: '1,234-5' and '1 234 5' compare equal."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _PUNCT.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def contains_answer(prediction: str, gold: str) -> bool:
    """True when the normalized gold occurs in the normalized prediction on token boundaries."""
    p, g = f" {normalize(prediction)} ", f" {normalize(gold)} "
    return bool(g.strip()) and g in p


def is_empty(prediction: str | None) -> bool:
    """True when a prediction has no content after normalization."""
    return not prediction or not normalize(prediction)
