"""Contrasts: one metric on two slices of the samples and their difference, with a bootstrap interval."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Contrast:
    """`metric` on the samples whose metadata `key` equals `a`, minus the same on those where it equals `b`.

    E.g. Contrast("cross_paragraph_drop", "score", "placement", "same", "cross"): how much recall falls when the
    facts sit in different paragraphs. Reported per length and pooled, with a 95% interval from resampling
    both groups; the run file's `contrasts` also carry each side's value and n.
    """

    name: str
    metric: str
    key: str
    a: str | int | float | bool
    b: str | int | float | bool


def contrast(name: str, metric: str, key: str, a: str | int | float | bool, b: str | int | float | bool) -> Contrast:
    """Declare a contrast (see `Contrast`)."""
    return Contrast(name, metric, key, a, b)
