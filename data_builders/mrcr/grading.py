"""OpenAI MRCR's grade and the diagnostics beside it: pure functions of a reply and the gold texts (stdlib only)."""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

OTHER_INSTANCE_MIN_RATIO = 0.5
"""A reply counts as another look-alike's answer only when it matches that answer at least this well."""


def mrcr_grade(response: str, answer: str, prefix: str) -> float:
    """OpenAI MRCR's grade: 0 unless `response` starts with `prefix`; else difflib's SequenceMatcher ratio of the
    response and `answer` (the gold, which starts with the prefix), the prefix removed from both."""
    if not response.startswith(prefix):
        return 0.0
    return float(SequenceMatcher(None, response.removeprefix(prefix), answer.removeprefix(prefix)).ratio())


def content_ratio(response: str, text: str, prefix: str) -> float:
    """The sequence ratio of the reply (its prefix removed when present) and an answer text, prefix or not."""
    return float(SequenceMatcher(None, response.removeprefix(prefix), text).ratio())


def picked_instance(response: str, lookalikes: Sequence[str], prefix: str) -> int | None:
    """Which look-alike answer (1-based, in conversation order) the reply reproduces: the best-matching one, when
    it matches at least `OTHER_INSTANCE_MIN_RATIO`; None otherwise."""
    ratios = [content_ratio(response, text, prefix) for text in lookalikes]
    if not ratios or max(ratios) < OTHER_INSTANCE_MIN_RATIO:
        return None
    return ratios.index(max(ratios)) + 1
