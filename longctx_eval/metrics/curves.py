"""Curves over per-sample score fields (Recall@K for K = 1..100, mean score at rank k): one mean and CI per x."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Curve:
    """A task's curve: point i is the mean of score field `fields[i]` at x = `x[i]`, over the samples carrying it.

    Reported per length and pooled, each point with its own 95% bootstrap interval, in the run file's `curves`.
    """

    name: str
    fields: tuple[str, ...]
    x: tuple[float, ...]
    x_label: str = "x"
    y_label: str = "mean"

    def __post_init__(self) -> None:
        if len(self.fields) != len(self.x) or not self.fields:
            raise ValueError(f"curve {self.name!r}: {len(self.fields)} fields for {len(self.x)} x values")


def curve(name: str, fields: Sequence[str], x: Sequence[float], x_label: str = "x", y_label: str = "mean") -> Curve:
    """Declare a curve (see `Curve`)."""
    return Curve(name, tuple(fields), tuple(float(v) for v in x), x_label, y_label)
