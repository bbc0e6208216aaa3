"""Paired differences of two models on the samples both scored: per-sample scores from run folders.

A pair is the same sample id with the same design: the same context (the sha256 of the context in
`samples/<task>.jsonl`) and the same question and gold. The same id built in another tokenizer is another
haystack, and the same id under another task version or arguments may ask something else: such ids are
refused, never paired, and counted by reason (`join`). A pair's cluster is its sample's (metadata `cluster`:
the haystack or document it was built from; else the sample alone). The difference A - B of a score field is
averaged per length and pooled, with a seeded 95% percentile bootstrap over the clusters and the pairs within
them (`metrics/bootstrap.py`) and a paired test (`scoring/paired_tests.py`: the sign-flip test of per-cluster
sums where pairs share clusters; else McNemar's exact test for 0/1 scores, else a sign-flip permutation test);
`significant` when the interval excludes 0.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

from longctx_eval.errors import RunFileError
from longctx_eval.metrics.aggregate import column_mean
from longctx_eval.metrics.bootstrap import (
    bootstrap_ci,
    has_interval,
    no_interval_text,
    unanimous_binary,
    unanimous_bounds,
)
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN
from longctx_eval.progress import console, console_text
from longctx_eval.run_folder.json_lines import read_records
from longctx_eval.run_folder.sample_lines import SAMPLE_LINE, sample_line_problem, samples_path
from longctx_eval.run_folder.score_lines import SCORE_LINE, score_line_problem, scores_path
from longctx_eval.scoring.paired_tests import paired_test

PairKey = tuple[str, str]
"""(sample id, sha256 of its context)."""

REFUSED_CONTEXT = "same id, another context (another haystack: another tokenizer, source or build)"
REFUSED_DESIGN = "same id and context, another question or gold (another task version or arguments)"


@dataclass(frozen=True)
class SampleScore:
    """One scored sample: its context length, its score values (non-finite ones left out) and the sha256 of
    its question and gold (empty when unknown: then only the context is compared)."""

    length: int | None
    scores: Mapping[str, float]
    design_sha256: str = ""
    null: frozenset[str] = frozenset()
    """Score fields the line holds as null (a non-finite value, left out of `scores`)."""
    cluster: str = ""
    """What the sample is not independent of (metadata `cluster`); empty: the sample alone."""


@dataclass(frozen=True)
class Join:
    """Two runs' scored samples joined by id: the pairs (sorted), and what was not paired and why."""

    pairs: list[PairKey]
    refused: dict[str, int] = field(default_factory=dict)
    """Ids both runs scored whose design differs, by reason (REFUSED_CONTEXT, REFUSED_DESIGN)."""
    only_a: int = 0
    """Ids scored (with the field) by A only: not evaluated, over the window or failed in B."""
    only_b: int = 0

    @property
    def n_refused(self) -> int:
        """How many shared ids were refused."""
        return sum(self.refused.values())


@dataclass(frozen=True)
class PairedDifference:
    """A - B over the pairs of one length (None = pooled): n pairs from `clusters` clusters, both means, the
    difference and its interval, and the paired test this row used (its name and two-sided p-value)."""

    length: int | None
    n: int
    mean_a: float
    mean_b: float
    difference: float
    ci95: tuple[float, float] | None
    """None with fewer than MIN_N_FOR_INTERVAL pairs or from one cluster: too few to show an interval."""
    a_better: int
    b_better: int
    test: str = ""
    p_value: float = 1.0
    clusters: int | None = None
    """Distinct clusters of the pairs (None: not known; each pair its own)."""

    def interval_text(self, noun: str = DEFAULT_NOUN) -> str:
        """'[+0.010, +0.200]', or 'n=2, no interval (n < 5)' when too few pairs (or clusters) to show one."""
        if self.ci95 is None:
            return no_interval_text(self.n, self.clusters, noun)
        return f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"

    @property
    def significant(self) -> bool:
        """The 95% interval excludes 0."""
        return self.ci95 is not None and (self.ci95[0] > 0 or self.ci95[1] < 0)


def read_sample_scores(run_dir: Path, task: str) -> dict[PairKey, SampleScore]:
    """A run folder's scored samples of `task` keyed by (id, context sha256); {} when it kept no such files.

    Only samples with status ok count (failed and over-length ones have no score). A damaged file (a torn,
    foreign or mistyped line, an unreadable gzip copy) is a RunFileError naming the file and line."""
    samples_file, scores_file = samples_path(run_dir, task), scores_path(run_dir, task)
    samples, scores = _bytes(samples_file), _bytes(scores_file)
    if samples is None or scores is None:
        return {}
    context: dict[str, tuple[str | None, str]] = {}
    for lineno, rec in read_records(samples_file, samples, sample_line_problem, SAMPLE_LINE):
        try:
            context[rec["id"]] = (rec.get("context_sha256"), _design_sha256(rec))
        except RecursionError:
            raise RunFileError(f"{samples_file}:{lineno}: nested too deeply; expected {SAMPLE_LINE}") from None
    out: dict[PairKey, SampleScore] = {}
    rewrite = f"; `longctx-eval score {run_dir}` rewrites it" if scores_file.is_file() else ""
    for _, rec in read_records(scores_file, scores, score_line_problem, SCORE_LINE + rewrite):
        sha, design = context.get(rec["id"], (None, ""))
        if rec["status"] != "ok" or sha is None:
            continue
        given = rec.get("scores") or {}
        values = {k: float(v) for k, v in given.items() if v is not None and math.isfinite(v)}
        length = (rec.get("metadata") or {}).get("target_tokens")
        null = frozenset(given.keys() - values.keys())
        cluster = (rec.get("metadata") or {}).get("cluster")
        out[(rec["id"], sha)] = SampleScore(length, values, design, null, "" if cluster is None else str(cluster))
    return out


def sample_scores(run_dir: Path, task: str) -> dict[PairKey, SampleScore]:
    """`read_sample_scores`, or {} with a warning naming the damage when a file cannot be used: for the
    leaderboard, whose significance test is then left out while every other result is kept."""
    try:
        return read_sample_scores(run_dir, task)
    except RunFileError as exc:
        console.print(f"[yellow]warning[/yellow] {console_text(exc)}; no paired test for it", highlight=False)
        return {}


def _bytes(path: Path) -> bytes | None:
    """The file at `path`, or its gzip-compressed copy `path.gz` (a published leaderboard's, `per_sample.py`);
    None when neither is there."""
    packed = path.with_name(path.name + ".gz")
    try:
        if path.exists():
            return path.read_bytes()
        if not packed.is_file() or packed.is_symlink():
            return None
        try:
            return gzip.decompress(packed.read_bytes())
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise RunFileError(f"{packed}: not a readable gzip file ({exc})") from None
    except OSError as exc:
        raise RunFileError(f"{path} cannot be read: {exc.strerror or exc}") from None


def join(a: Mapping[PairKey, SampleScore], b: Mapping[PairKey, SampleScore], field: str) -> Join:
    """Pair the samples both runs scored `field` for by id; refuse (and count) ids whose design differs."""
    ids_a = {k[0]: k for k, s in a.items() if field in s.scores}
    ids_b = {k[0]: k for k, s in b.items() if field in s.scores}
    pairs: list[PairKey] = []
    refused: dict[str, int] = {}
    for sid in sorted(ids_a.keys() & ids_b.keys()):
        ka, kb = ids_a[sid], ids_b[sid]
        da, db = a[ka].design_sha256, b[kb].design_sha256
        if ka != kb:
            refused[REFUSED_CONTEXT] = refused.get(REFUSED_CONTEXT, 0) + 1
        elif da and db and da != db:
            refused[REFUSED_DESIGN] = refused.get(REFUSED_DESIGN, 0) + 1
        else:
            pairs.append(ka)
    ordered = {why: refused[why] for why in (REFUSED_CONTEXT, REFUSED_DESIGN) if why in refused}
    return Join(pairs, ordered, len(ids_a.keys() - ids_b.keys()), len(ids_b.keys() - ids_a.keys()))


def paired_differences(
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    field: str,
    *,
    seed: int = 0,
    pairs: Sequence[PairKey] | None = None,
) -> list[PairedDifference]:
    """Per length (sorted) then pooled: A - B of `field` over the joined pairs (`join`, or `pairs` given)."""
    keys = list(join(a, b, field).pairs if pairs is None else pairs)
    return [_difference(length, ks, a, b, field, seed) for length, ks in length_groups(keys, a)]


def length_groups(keys: Sequence[PairKey], a: Mapping[PairKey, SampleScore]) -> list[tuple[int | None, list[PairKey]]]:
    """The rows of a paired comparison: the pairs of each length (sorted), then all of them pooled (None); none
    without pairs."""
    if not keys:
        return []
    lengths = sorted(cast(set[int], {a[k].length for k in keys if a[k].length is not None}))
    return [*((n, [k for k in keys if a[k].length == n]) for n in lengths), (None, list(keys))]


def _difference(
    length: int | None,
    keys: Sequence[PairKey],
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    field: str,
    seed: int,
) -> PairedDifference:
    va = np.array([a[k].scores[field] for k in keys])
    vb = np.array([b[k].scores[field] for k in keys])
    diff = va - vb
    clusters = [a[k].cluster or b[k].cluster or k[0] for k in keys]
    count = len(set(clusters))
    ci95 = bootstrap_ci(diff, column_mean, seed=seed, clusters=clusters) if has_interval(len(keys), count) else None
    if ci95 is not None and unanimous_binary(va) and unanimous_binary(vb) and not diff.any():
        # every pair agrees on one 0/1 outcome: |difference| <= the discordant-pair rate, whose exact upper bound over
        # the clusters bounds the difference on both sides (a rate's one-sided bound would exclude B ahead)
        edge = unanimous_bounds(0.0, count)[1]
        ci95 = (-edge, edge)
    test, p = paired_test(va, vb, seed=seed, clusters=clusters)
    return PairedDifference(
        length=length,
        n=len(keys),
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        difference=float(diff.mean()),
        ci95=ci95,
        a_better=int((diff > 0).sum()),
        b_better=int((diff < 0).sum()),
        test=test,
        p_value=p,
        clusters=count,
    )


def _design_sha256(record: Mapping[str, object]) -> str:
    """sha256 of a samples-file record's question and gold: what a sample asks, beside its context."""
    text = json.dumps([record.get("question"), record.get("gold")], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
