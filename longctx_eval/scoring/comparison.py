"""Two run folders compared task by task (`longctx-eval compare`): paired differences, tests, Holm's correction.

Per task both runs ran, on its primary metric (or `metric`, any per-sample metric the task reports): the samples
are joined by id and design (`paired_scores.join`: another context or another question/gold under the same id is
refused and counted), and per length and pooled the mean difference A - B gets a paired 95% bootstrap interval
and a paired test (`scoring/paired_tests.py`), both at the cluster level where pairs share a haystack or
document; each row names the test it used.
Holm's correction runs across every row tested (each task's lengths, and its pooled row when it pools two
lengths or more; a one-length task's pooled row is that length's cell, not tested twice).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longctx_eval.errors import ConfigError, OutputError, RunFileError
from longctx_eval.metrics.bootstrap import MIN_CLUSTERS_FOR_INTERVAL, MIN_N_FOR_INTERVAL, N_RESAMPLES
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN, count_text
from longctx_eval.results import RunResult, TaskResult, read_run
from longctx_eval.run_folder.score_lines import scores_path
from longctx_eval.scoring.labels import length_label
from longctx_eval.scoring.paired_aggregate import paired_join, paired_rows, per_sample
from longctx_eval.scoring.paired_scores import (
    Join,
    PairedDifference,
    PairKey,
    SampleScore,
    read_sample_scores,
)
from longctx_eval.scoring.paired_tests import N_FLIPS, TESTS, holm

Scored = Mapping[PairKey, SampleScore]
ALPHA = 0.05
"""Significant: Holm-adjusted p below this."""
STANDARD_RATES = frozenset({"over_length_rate", "error_rate"})
"""Rates every task reports of its requests, not of its answers: never compared."""


@dataclass
class TaskComparison:
    """One task compared: its metric, the join, the rows (per length, then pooled) and their Holm p-values."""

    task: str
    capability: str
    metric: str
    versions: tuple[str, str]
    args_equal: bool
    joined: Join
    rows: list[PairedDifference]
    tested: list[bool] = field(default_factory=list)
    """Per row: whether it is in Holm's family (a one-length task's pooled row repeats its cell)."""
    holm: list[float] = field(default_factory=list)

    @staticmethod
    def holm_cell(p: float | None, own: Sequence[float | None]) -> float:
        """A row's Holm p; an untested (one-length pooled) row takes its only cell's."""
        return p if p is not None else float(own[0] or 0.0)

    noun: str = DEFAULT_NOUN
    """What the task's clusters are ('haystacks', 'documents'), from run A's task result."""

    @property
    def tests(self) -> list[str]:
        """The paired tests the rows used, in row order (a length may use another test than the pooled row)."""
        return list(dict.fromkeys(r.test for r in self.rows))


@dataclass
class RunComparison:
    """The whole comparison: both runs, the tasks compared and those that could not be, and why."""

    run_a: Path
    run_b: Path
    model_a: str
    model_b: str
    seed: int
    tasks: list[TaskComparison]
    skipped: list[tuple[str, str]]
    damaged: list[str] = field(default_factory=list)
    """Why a task was not compared because a file of a run folder is damaged (also in `skipped`): exit 2."""
    metric: str | None = None
    """The metric compared (`--metric`); None: each task's primary metric."""

    @property
    def family(self) -> int:
        """How many tests Holm's correction covers."""
        return sum(sum(t.tested) for t in self.tasks)


def load_run_folder(path: Path) -> RunResult:
    """A run folder's run.json; a ConfigError (one line, exit 2) when `path` is no run folder."""
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run folder (expected a folder holding run.json, e.g. results/bm25)")
    if not (path / "run.json").is_file():
        raise ConfigError(f"{path}: not a run folder: it holds no run.json (run `longctx-eval run` or `score` first)")
    return read_run(path / "run.json")


def compare_runs(
    run_a: Path, run_b: Path, tasks: Sequence[str] = (), *, seed: int = 0, metric: str | None = None
) -> RunComparison:
    """Compare two run folders on `tasks` (default: every task both ran), on each task's primary metric or on
    `metric`. Named tasks that cannot be compared, a `metric` no compared task reports, and a comparison with
    no pair at all, raise ConfigError (RunFileError where a file is damaged); a damaged task among others is
    listed in `damaged`, the others compared."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"--seed: expected a non-negative integer (the resamples' seed), got {seed!r}")
    a, b = load_run_folder(run_a), load_run_folder(run_b)
    by_a, by_b = {t.name: t for t in a.tasks}, {t.name: t for t in b.tasks}
    for name in tasks:
        for run, found in ((run_a, by_a), (run_b, by_b)):
            if name not in found:
                ran = ", ".join(sorted(found)) or "none"
                raise ConfigError(f"task {name!r} is not in {run} (its tasks: {ran})")
    names = list(dict.fromkeys(tasks)) or sorted(by_a.keys() & by_b.keys())
    skipped = [(n, f"only in {run_a}") for n in sorted(by_a.keys() - by_b.keys()) if not tasks]
    skipped += [(n, f"only in {run_b}") for n in sorted(by_b.keys() - by_a.keys()) if not tasks]
    if not names:
        raise ConfigError(f"{run_a} and {run_b} share no task")
    if metric is not None:
        known = {n: reported_metrics(by_a[n], by_b[n]) for n in names}
        if not any(metric in found for found in known.values()):
            listed = "; ".join(f"{n}: {', '.join(found) or 'none'}" for n, found in known.items())
            raise ConfigError(f"--metric {metric!r}: no compared task reports it; metrics both runs report: {listed}")
    compared: list[TaskComparison] = []
    damaged: list[str] = []
    for name in names:
        try:
            compared.append(_compare_task(run_a, run_b, by_a[name], by_b[name], seed, metric))
        except (ConfigError, RunFileError, OutputError) as exc:
            if tasks:
                raise
            skipped.append((name, str(exc)))
            if not isinstance(exc, ConfigError):
                damaged.append(str(exc))
    if not compared:
        if len(damaged) == len(skipped) == 1:
            raise RunFileError(damaged[0])
        why = "; ".join(f"{n}: {r}" for n, r in skipped)
        raise (RunFileError if damaged else ConfigError)(f"nothing to compare between {run_a} and {run_b}: {why}")
    _apply_holm(compared)
    return RunComparison(run_a, run_b, a.model.name, b.model.name, seed, compared, skipped, damaged, metric)


def reported_metrics(ta: TaskResult, tb: TaskResult) -> list[str]:
    """The metrics both runs report for a task (run A's order), the standard over_length/error rates left out."""
    theirs = {r.metric for r in tb.results}
    return [m for m in dict.fromkeys(r.metric for r in ta.results) if m in theirs and m not in STANDARD_RATES]


def _compare_task(
    run_a: Path, run_b: Path, ta: TaskResult, tb: TaskResult, seed: int, metric: str | None = None
) -> TaskComparison:
    ma: str | None
    mb: str | None
    if metric is not None:
        available = reported_metrics(ta, tb)
        if metric not in available:
            raise ConfigError(
                f"task {ta.name!r}: --metric {metric!r} is not reported by both runs; metrics both report: "
                f"{', '.join(available) or 'none'}"
            )
        ma = mb = metric
    else:
        ma, mb = _primary(ta), _primary(tb)
    if ma is None or mb is None:
        raise ConfigError(f"task {ta.name!r}: {run_a if ma is None else run_b} reports no metric for it")
    if ma != mb:
        raise ConfigError(
            f"task {ta.name!r}: the primary metrics differ ({ma} through {ta.capability} in {run_a}, "
            f"{mb} through {tb.capability} in {run_b})"
        )
    sa, sb = read_sample_scores(run_a, ta.name), read_sample_scores(run_b, tb.name)
    for run, found in ((run_a, sa), (run_b, sb)):
        if not found:
            raise ConfigError(
                f"task {ta.name!r}: {run} has no per-sample scores ({scores_path(run, ta.name)} and "
                f"samples/{ta.name}.jsonl; `longctx-eval score {run}` writes them)"
            )
    joined, aggregate = paired_join(sa, sb, ma, ta)
    key = aggregate.fields[-1] if aggregate is not None else ma
    for run, found in ((run_a, sa), (run_b, sb)):
        if not per_sample(found, key):
            which = "metric" if metric is not None else "primary metric"
            raise ConfigError(
                f"task {ta.name!r}: its {which} {ma} is not a per-sample score in {run} (a ratio or renamed)"
            )
    if not joined.pairs:
        raise ConfigError(f"task {ta.name!r}: no shared samples ({_unpaired(run_a, run_b, sa, sb, key, joined)})")
    rows = paired_rows(sa, sb, ma, aggregate, joined.pairs, seed=seed)
    return TaskComparison(
        task=ta.name,
        capability=ta.capability,
        metric=ma,
        versions=(ta.version, tb.version),
        args_equal=ta.args == tb.args,
        joined=joined,
        rows=rows,
        noun=ta.cluster_noun or DEFAULT_NOUN,
    )


def _unpaired(run_a: Path, run_b: Path, sa: Scored, sb: Scored, metric: str, joined: Join) -> str:
    """Why no pair was made: ids refused for another design, no id in common, or no finite score in both."""
    if joined.refused:
        return "; ".join(f"{n} refused: {why}" for why, n in joined.refused.items())
    shared = {k[0] for k in sa} & {k[0] for k in sb}
    if not shared:
        return "no sample id in common"
    n_a, n_b = (sum(k[0] in shared and metric in s.scores for k, s in run.items()) for run in (sa, sb))
    return (
        f"{len(shared)} sample id(s) in common, but none has a finite {metric} in both runs ({run_a}: {n_a} of "
        f"them, {run_b}: {n_b}; the rest hold null, i.e. not finite, or lack it)"
    )


def _primary(task: TaskResult) -> str | None:
    """The task's primary metric: its first metric row (the runner writes the primary one first)."""
    return task.results[0].metric if task.results else None


def tested_rows(rows: Sequence[PairedDifference]) -> list[bool]:
    """Per row (per length, then pooled): in Holm's family, unless it is a one-length group's pooled row."""
    return [row.length is not None or len(rows) > 2 for row in rows]


def holm_rows(groups: Sequence[Sequence[PairedDifference]]) -> list[list[float]]:
    """Holm-adjusted p per row of each group, the family being every tested row of every group; an untested
    row (a one-length pooled row) takes its only cell's."""
    tested = [tested_rows(rows) for rows in groups]
    family = [
        row.p_value for rows, on in zip(groups, tested, strict=True) for row, t in zip(rows, on, strict=True) if t
    ]
    adjusted = iter(holm(family).tolist())
    out = []
    for on in tested:
        own = [next(adjusted) if t else None for t in on]
        out.append([TaskComparison.holm_cell(p, own) for p in own])
    return out


def _apply_holm(tasks: Sequence[TaskComparison]) -> None:
    """Holm across every tested row of every task (`holm_rows`)."""
    for t, adjusted in zip(tasks, holm_rows([t.rows for t in tasks]), strict=True):
        t.tested = tested_rows(t.rows)
        t.holm = adjusted


def is_significant(holm_p: float) -> bool:
    """Holm-adjusted p below ALPHA."""
    return holm_p < ALPHA


def to_json(c: RunComparison) -> dict[str, Any]:
    """The comparison as a JSON-ready dict (`compare --json`)."""
    return {
        "a": {"run": str(c.run_a), "model": c.model_a},
        "b": {"run": str(c.run_b), "model": c.model_b},
        "seed": c.seed,
        "metric": c.metric,
        "alpha": ALPHA,
        "interval": f"95% percentile bootstrap over the clusters, then the pairs within them ({N_RESAMPLES} "
        f"resamples, seed {c.seed}); null under {MIN_N_FOR_INTERVAL} pairs or {MIN_CLUSTERS_FOR_INTERVAL} clusters",
        "tests": TESTS,
        "sign_flip_resamples": N_FLIPS,
        "holm_family": c.family,
        "tasks": [
            {
                "task": t.task,
                "capability": t.capability,
                "metric": t.metric,
                "tests": t.tests,
                "cluster_noun": t.noun,
                "versions": {"a": t.versions[0], "b": t.versions[1]},
                "args_equal": t.args_equal,
                "pairs": len(t.joined.pairs),
                "refused": dict(t.joined.refused),
                "only_a": t.joined.only_a,
                "only_b": t.joined.only_b,
                "rows": [
                    {
                        "length": r.length,
                        "n": r.n,
                        "clusters": r.clusters,
                        "test": r.test,
                        "mean_a": r.mean_a,
                        "mean_b": r.mean_b,
                        "difference": r.difference,
                        "ci95": None if r.ci95 is None else list(r.ci95),
                        "a_better": r.a_better,
                        "b_better": r.b_better,
                        "p_value": r.p_value,
                        "p_holm": p,
                        "in_holm_family": on,
                        "significant": is_significant(p),
                    }
                    for r, p, on in zip(t.rows, t.holm, t.tested, strict=True)
                ],
            }
            for t in c.tasks
        ],
        "skipped": [{"task": n, "reason": r} for n, r in c.skipped],
    }


def to_text(c: RunComparison) -> str:
    """The comparison as text: a header saying what was computed, then one table per task."""
    lines = [
        f"{c.model_a} ({c.run_a}) vs {c.model_b} ({c.run_b}): A - B of each task's "
        + (f"{c.metric}" if c.metric is not None else "primary metric")
        + ", paired by sample id and design (same context, question and gold)",
        f"interval: 95% paired bootstrap over the clusters (haystacks, documents), then the pairs within them "
        f"({N_RESAMPLES} resamples, seed {c.seed}; none under {MIN_N_FOR_INTERVAL} pairs or "
        f"{MIN_CLUSTERS_FOR_INTERVAL} clusters); p: "
        + "; ".join(f"{name} = {text}" for name, text in TESTS.items() if any(name in t.tests for t in c.tasks))
        + f"; Holm-adjusted over {c.family} test(s); significant: Holm p < {ALPHA}",
    ]
    for t in c.tasks:
        head = ["length", "n", t.noun, "A", "B", "A-B", "95% CI", "test", "p", "Holm p", "significant"]
        j = t.joined
        refused = ", ".join(f"{n} refused: {why}" for why, n in j.refused.items()) or "0 refused"
        extra = [] if t.args_equal else ["task arguments differ"]
        if t.versions[0] != t.versions[1]:
            extra.append(f"versions differ (A v{t.versions[0]}, B v{t.versions[1]})")
        lines += [
            "",
            f"{t.task} ({t.capability}) · {t.metric} · {', '.join(t.tests)} · {len(j.pairs)} pairs over "
            f"{count_text(_pooled_clusters(t), t.noun)}; {refused}; "
            f"unpaired: {j.only_a} only in A, {j.only_b} only in B" + "".join(f"; {e}" for e in extra),
        ]
        body = [
            [
                length_label(r.length),
                str(r.n),
                "" if r.clusters is None else str(r.clusters),
                f"{r.mean_a:.3f}",
                f"{r.mean_b:.3f}",
                f"{r.difference:+.3f}",
                r.interval_text(t.noun),
                r.test,
                p_text(r.p_value),
                p_text(p) + ("" if on else "*"),
                "yes" if is_significant(p) else "no",
            ]
            for r, p, on in zip(t.rows, t.holm, t.tested, strict=True)
        ]
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        for row in [head, *body]:
            lines.append(
                "  ".join(
                    cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                )
            )
        if not all(t.tested):
            lines.append("* one length: the pooled row is that cell, tested once")
    if c.skipped:
        lines += ["", "not compared: " + "; ".join(f"{n}: {r}" for n, r in c.skipped)]
    return "\n".join(lines) + "\n"


def _pooled_clusters(t: TaskComparison) -> int:
    """The clusters of every pair of a task (its pooled row's count)."""
    last = t.rows[-1] if t.rows else None
    return len(t.joined.pairs) if last is None or last.clusters is None else last.clusters


def p_text(p: float) -> str:
    """A p-value as printed: 4 decimals, or scientific below 1e-4."""
    return f"{p:.2e}" if p < 1e-4 else f"{p:.4f}"


def write_json(c: RunComparison, path: Path) -> None:
    """Write `to_json` atomically."""
    from longctx_eval.atomic_io import atomic_write_text

    atomic_write_text(path, json.dumps(to_json(c), indent=2, allow_nan=False) + "\n")
