"""Deterministic answer parsing and matching for generated text: no judge model, the same verdict every run.

A reply is read by the kind of value asked for (`parse_answer`), then compared with the gold value by
normalized containment, by exact match of the parsed answer, and, for several gold values, by the share
found (partial credit). An empty reply is a wrong answer and is flagged as such.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from longctx_eval.metrics.text_match import contains_answer, is_empty, normalize

VALUE_KINDS = ("number", "word", "uuid", "name")
"""What a needle's value can be: digits, word(s), a UUID, or a character's name (read as words)."""

_NUMBER = re.compile(r"\d+(?:,\d{3})*")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def parse_number(text: str) -> str:
    """The first run of digits ("1,234,567" with thousands commas reads as "1234567"); "" when none."""
    m = _NUMBER.search(text)
    return m.group(0).replace(",", "") if m else ""


def parse_uuid(text: str) -> str:
    """The first 8-4-4-4-12 hexadecimal UUID, lowercased; "" when none."""
    m = _UUID.search(text)
    return m.group(0).lower() if m else ""


def parse_words(text: str) -> str:
    """The first non-empty line, normalized (casefolded, punctuation to spaces, whitespace collapsed)."""
    for line in text.splitlines():
        if normalize(line):
            return normalize(line)
    return ""


def parse_answer(text: str, kind: str) -> str:
    """The answer as read for a value of `kind` (see VALUE_KINDS); ValueError for another kind."""
    if kind == "number":
        return parse_number(text)
    if kind == "uuid":
        return parse_uuid(text)
    if kind in ("word", "name"):
        return parse_words(text)
    raise ValueError(f"value kind: expected one of {VALUE_KINDS}, got {kind!r}")


def canonical(value: str, kind: str) -> str:
    """A gold value in the form `parse_answer` gives, so the two compare with ==."""
    return parse_answer(value, kind)


def exact_match(text: str, gold: str, kind: str) -> bool:
    """True when the parsed answer equals the parsed gold value (and is not empty)."""
    parsed = parse_answer(text, kind)
    return bool(parsed) and parsed == canonical(gold, kind)


def found_values(text: str, golds: Sequence[str]) -> list[bool]:
    """One flag per gold value: normalized containment on token boundaries (`contains_answer`)."""
    return [contains_answer(text, g) for g in golds]


def share_found(text: str, golds: Sequence[str]) -> float:
    """Partial credit: the share of the gold values contained in the answer (0 for no gold values)."""
    return sum(found_values(text, golds)) / len(golds) if golds else 0.0


_LIST_MARKER = re.compile(r"^[ \t]*(?:\d+[.)]|[-*\u2022])[ \t]+", re.MULTILINE)


def parse_all(text: str, kind: str) -> list[str]:
    """Every value of `kind` in the answer, in order (numbers, UUIDs), or its normalized lines (words).

    List markers at the start of a line ("1.", "2)", "-", "*") are not values: "1. 5143149" reads 5143149.
    """
    text = _LIST_MARKER.sub("", text)
    if kind == "number":
        return [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]
    if kind == "uuid":
        return [m.group(0).lower() for m in _UUID.finditer(text)]
    if kind in ("word", "name"):
        return [n for n in (normalize(line) for line in text.splitlines()) if n]
    raise ValueError(f"value kind: expected one of {VALUE_KINDS}, got {kind!r}")


@dataclass(frozen=True)
class AnswerMatch:
    """One reply checked against one gold value: what was read and the three verdicts."""

    parsed: str
    contains: bool  # normalized containment of the gold value anywhere in the reply
    exact: bool  # the parsed answer equals the gold value
    empty: bool  # nothing left after normalization


def match_answer(text: str | None, gold: str, kind: str) -> AnswerMatch:
    """Parse `text` as a `kind` value and compare it with `gold`; None (no reply) counts as empty."""
    reply = text or ""
    return AnswerMatch(
        parsed=parse_answer(reply, kind),
        contains=contains_answer(reply, gold),
        exact=exact_match(reply, gold, kind),
        empty=is_empty(reply),
    )
