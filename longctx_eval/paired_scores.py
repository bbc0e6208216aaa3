"""Paired differences of two models on the samples both scored: per-sample scores from run folders.

A pair is the same sample id with the same context (the sha256 of the context in `samples/<task>.jsonl`):
the same id built in another tokenizer is another haystack and is never paired. The difference A - B of a
task's primary score field is averaged per length and pooled, with a seeded 95% percentile bootstrap over
the pairs (`metrics/bootstrap.py`); significant when the interval excludes 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from longctx_eval.metrics.aggregate import column_mean
from longctx_eval.metrics.bootstrap import bootstrap_ci
from longctx_eval.run_paths import inside
from longctx_eval.score_records import scores_path

PairKey = tuple[str, str]
"""(sample id, sha256 of its context)."""


@dataclass(frozen=True)
class SampleScore:
    """One scored sample: its context length and its score values (non-finite ones left out)."""

    length: int | None
    scores: Mapping[str, float]


@dataclass(frozen=True)
class PairedDifference:
    """A - B over the pairs of one length (None = pooled): n pairs, both means, the difference and its interval."""

    length: int | None
    n: int
    mean_a: float
    mean_b: float
    difference: float
    ci95: tuple[float, float]
    a_better: int
    b_better: int

    @property
    def significant(self) -> bool:
        """The 95% interval excludes 0."""
        return self.ci95[0] > 0 or self.ci95[1] < 0


def sample_scores(run_dir: Path, task: str) -> dict[PairKey, SampleScore]:
    """A run folder's scored samples of `task` keyed by (id, context sha256); {} when it kept no such files.

    Only samples with status ok count (failed and over-length ones have no score)."""
    try:
        samples = inside(run_dir, "samples", f"{task}.jsonl").read_text(encoding="utf-8")
        scores = scores_path(run_dir, task).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return {}
    context = {}
    for line in samples.splitlines():
        if line.strip():
            rec = json.loads(line)
            context[rec["id"]] = rec.get("context_sha256")
    out: dict[PairKey, SampleScore] = {}
    for line in scores.splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        sha = context.get(rec["id"])
        if rec.get("status") != "ok" or sha is None:
            continue
        values = {k: float(v) for k, v in (rec.get("scores") or {}).items() if v is not None and math.isfinite(v)}
        length = (rec.get("metadata") or {}).get("target_tokens")
        out[(rec["id"], sha)] = SampleScore(int(length) if isinstance(length, int) else None, values)
    return out


def paired_differences(
    a: Mapping[PairKey, SampleScore], b: Mapping[PairKey, SampleScore], field: str
) -> list[PairedDifference]:
    """Per length (sorted) then pooled: A - B of `field` over the samples both carry it for, same context."""
    keys = sorted(k for k in a.keys() & b.keys() if field in a[k].scores and field in b[k].scores)
    if not keys:
        return []
    lengths = sorted({a[k].length for k in keys if a[k].length is not None})
    groups: list[tuple[int | None, list[PairKey]]] = [(n, [k for k in keys if a[k].length == n]) for n in lengths]
    return [_difference(length, ks, a, b, field) for length, ks in [*groups, (None, keys)]]


def _difference(
    length: int | None,
    keys: Sequence[PairKey],
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    field: str,
) -> PairedDifference:
    va = np.array([a[k].scores[field] for k in keys])
    vb = np.array([b[k].scores[field] for k in keys])
    diff = va - vb
    lo, hi = bootstrap_ci(diff, column_mean)
    return PairedDifference(
        length=length,
        n=len(keys),
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        difference=float(diff.mean()),
        ci95=(lo, hi),
        a_better=int((diff > 0).sum()),
        b_better=int((diff < 0).sum()),
    )
