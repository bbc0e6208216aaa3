"""The per-task grids of merged leaderboard entries (tasks, metrics, cells, rankings), shared by LEADERBOARD.md, the
plots and the site."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.markdown_escape import md_code
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN
from longctx_eval.results import (
    Coverage,
    MetricResult,
    RunResult,
    TaskResult,
    strata_coverage,
    task_failed,
)
from longctx_eval.scoring.labels import length_label


def task_names(entries: Sequence[RunResult]) -> list[str]:
    """One board per task, sorted; a task run through several capabilities gets one board per capability, unless
    every capability reports the same primary metric and no model ran it through two (coreference: a coreference
    system and a language model's likelihood choices both score CoNLL F1 on the same documents, so they share a
    board and are compared there).

    A retriever's recall@k and a generator's answer score are different metrics; one table must not mix them.
    """
    caps: dict[str, set[str]] = {}
    firsts: dict[str, dict[str, set[str]]] = {}  # task -> capability -> primary metrics its results report
    twice: set[str] = set()
    for e in entries:
        seen: set[str] = set()
        for t in e.tasks:
            caps.setdefault(t.name, set()).add(t.capability)
            if t.results and not task_failed(t):
                firsts.setdefault(t.name, {}).setdefault(t.capability, set()).add(t.results[0].metric)
            if t.name in seen:
                twice.add(t.name)
            seen.add(t.name)
    shared = {
        n
        for n, found in caps.items()
        if n not in twice and set(firsts.get(n, {})) == found and len(set().union(*firsts[n].values())) == 1
    }
    return sorted(
        name if len(found) == 1 or name in shared else f"{name} ({cap})"
        for name, found in caps.items()
        for cap in (sorted(found) if len(found) == 1 or name not in shared else [min(found)])
    )


def task_of(entry: RunResult, task: str) -> TaskResult | None:
    """The entry's result for board `task` ('name' or 'name (capability)'), or None when it did not run it."""
    return next((t for t in entry.tasks if task in (t.name, f"{t.name} ({t.capability})")), None)


def primary_metric(task: str, entries: Sequence[RunResult]) -> str | None:
    """The task's headline metric: the first metric listed by the first entry (by name) that ran it.

    An entry whose every request failed lists only the standard rates, so it never names the metric."""
    # One metric per table: taking it from a single entry keeps columns comparable across models.
    for entry in sorted(entries, key=lambda e: e.model.name):
        result = task_of(entry, task)
        if result is not None and result.results and not task_failed(result):
            return result.results[0].metric
    return None


def lookup(task: TaskResult, metric: str, length: int | None, depth: float | None) -> MetricResult | None:
    """The result row for one stratum (None = pooled), or None when the run did not report it."""
    return next(
        (r for r in task.results if r.metric == metric and r.length == length and r.depth == depth),
        None,
    )


def has_depth(task: str, entries: Sequence[RunResult], metric: str) -> bool:
    """Whether any entry reports `metric` for `task` per depth, or covers depths (a length x depth grid)."""
    return any(r.depth is not None for r in rows_of(task, entries, metric)) or any(
        c.depth is not None for c in coverage_of(task, entries)
    )


def lengths(task: str, entries: Sequence[RunResult], metric: str, *, with_depth: bool) -> list[int]:
    """Sorted context lengths reported (or covered) for the pooled-depth rows, or for the per-depth rows."""
    found = {
        r.length for r in rows_of(task, entries, metric) if r.length is not None and (r.depth is not None) == with_depth
    }
    found |= {c.length for c in coverage_of(task, entries) if not with_depth or c.depth is not None}
    return sorted(found)


def depths(task: str, entries: Sequence[RunResult], metric: str) -> list[float]:
    """Sorted needle depths reported or covered for `task`."""
    found = {r.depth for r in rows_of(task, entries, metric) if r.depth is not None}
    found |= {c.depth for c in coverage_of(task, entries) if c.depth is not None}
    return sorted(found)


CellState = Literal["value", "over_window", "failed", "not_evaluated", "missing"]


@dataclass(frozen=True)
class Cell:
    """One table or heatmap cell: its row (if any) and what the task's coverage says about the stratum.

    `planned`, `evaluated` and `over_length` are None when the run file has no coverage (older files);
    `failed` counts the stratum's samples whose request failed (0 in files older than that count).
    """

    row: MetricResult | None
    state: CellState
    planned: int | None = None
    evaluated: int | None = None
    over_length: int | None = None
    failed: int = 0
    low_n: bool = False
    """A value from fewer samples than the board's minimum n: shown, marked, never ranked on."""
    expected: int | None = None
    """The samples the run set out to evaluate: `planned`, or fewer under its `limit` (None without coverage)."""
    noun: str = DEFAULT_NOUN
    """What the task's clusters are ('haystacks', 'documents'): the cell says 'n=100 over 4 haystacks'."""

    @property
    def partial(self) -> bool:
        """Fewer samples evaluated than the run set out to: the task's full grid, or what its `limit` took."""
        wanted = self.planned if self.expected is None else self.expected
        return self.state == "value" and wanted is not None and (self.evaluated or 0) < wanted


def expected_samples(task: TaskResult, covered: Sequence[Coverage]) -> int:
    """How many of `covered`'s planned samples the run set out to evaluate: all of them, or under the task's
    `limit` (at most that many per length, spread over the length's strata) the limit per length.

    A stratum of a length the limit cut is expected to be what was run there when its length got all the
    limit allowed (the runner's spread decides the per-depth share), else its whole plan."""
    if task.limit is None:
        return sum(c.planned for c in covered)
    strata = strata_coverage(task.coverage)
    total = 0
    for length in sorted({c.length for c in covered}):
        here = [c for c in covered if c.length == length]
        whole = [c for c in strata if c.length == length]
        allowed = min(sum(c.planned for c in whole), task.limit)
        ran = sum(c.evaluated + c.over_length + c.failed for c in whole)
        if len(here) == len(whole):  # `covered` holds the whole length (it is a subset of its strata)
            total += allowed
        else:
            total += sum(c.evaluated + c.over_length + c.failed if ran >= allowed else c.planned for c in here)
    return total


def cell(task: TaskResult, metric: str, length: int | None, depth: float | None, min_n: int = DEFAULT_MIN_N) -> Cell:
    """The cell of one stratum (length None = pooled over lengths, depth None = pooled over depths); a value
    from fewer than `min_n` samples is `low_n`."""
    found = _cell(task, metric, length, depth)
    if task.cluster_noun:
        found = replace(found, noun=task.cluster_noun)
    if found.state == "value" and found.row is not None and found.row.n < min_n:
        return replace(found, low_n=True)
    return found


def _cell(task: TaskResult, metric: str, length: int | None, depth: float | None) -> Cell:
    row = lookup(task, metric, length, depth)
    strata = strata_coverage(task.coverage)
    if length is None:
        covered = strata if depth is None else [c for c in task.coverage if c.depth == depth]
        covered = [c for c in covered if c.length in set(pooled_lengths_of(task) or [])] or covered
    elif depth is None:
        covered = [c for c in strata if c.length == length]
    else:
        covered = [c for c in task.coverage if c.length == length and c.depth == depth]
    if not covered:
        return Cell(row, "missing" if row is None else "value")
    planned = sum(c.planned for c in covered)
    evaluated = sum(c.evaluated for c in covered)
    over = sum(c.over_length for c in covered)
    failed = sum(c.failed for c in covered)
    expected = expected_samples(task, covered)
    if evaluated == 0:
        state: CellState = "failed" if failed else "over_window" if over else "not_evaluated"
        return Cell(None, state, planned, evaluated, over, failed, expected=expected)
    return Cell(row, "missing" if row is None else "value", planned, evaluated, over, failed, expected=expected)


def pooled_lengths_of(task: TaskResult) -> list[int] | None:
    """The lengths the pooled ('all') rows pool; None for older run files that do not say."""
    if task.pooled_lengths is not None:
        return sorted(task.pooled_lengths)
    if task.coverage:
        return sorted({c.length for c in task.coverage if c.evaluated > 0})
    return None


def evaluated_lengths(task: TaskResult, metric: str, min_n: int = 1) -> set[int]:
    """Lengths with a finite pooled-depth value of `metric`, (when covered) evaluated samples and n >= `min_n`."""
    return {
        row.length
        for row in task.results
        if row.metric == metric
        and row.length is not None
        and row.depth is None
        and math.isfinite(row.value)
        and row.n >= min_n
        and _cell(task, metric, row.length, None).state == "value"
    }


@dataclass(frozen=True)
class Ranking:
    """How a task's models are ranked: `ranked` best first by the mean of `metric` over `lengths` (or by the
    pooled value when `pooled`), and the models that are listed but not ranked, each with why."""

    metric: str
    min_n: int
    ranked: list[RunResult]
    unranked: list[tuple[RunResult, str]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    pooled: bool = False

    @property
    def order(self) -> list[RunResult]:
        """Every model that ran the task: the ranked ones best first, then the unranked ones by name."""
        return [*self.ranked, *(e for e, _ in self.unranked)]

    def score(self, entry: RunResult, task: str) -> float | None:
        """The value `entry` is ranked by: its mean over the ranking lengths (or its pooled value)."""
        result = task_of(entry, task)
        if result is None:
            return None
        rows = (
            [lookup(result, self.metric, None, None)]
            if self.pooled
            else [lookup(result, self.metric, n, None) for n in self.lengths]
        )
        if not rows or any(r is None or not math.isfinite(r.value) for r in rows):
            return None
        return sum(r.value for r in rows if r is not None) / len(rows)


def ranking(task: str, entries: Sequence[RunResult], metric: str, min_n: int = DEFAULT_MIN_N) -> Ranking:
    """Rank `task`'s models only on lengths they share, each cell with n >= `min_n`.

    Per model its usable lengths are those with a value from at least `min_n` samples. The ranked group is the
    models that have the length most models have (ties: the group sharing more lengths, then the shorter
    length); they are ranked by their mean over every length the whole group has. A model without a usable
    length (every cell low n), or sharing none with the group, is listed, not ranked; when no two models share a
    usable length, none is ranked (a lone model with usable lengths is ranked when every other one is low n).
    Tasks without per-length rows rank by the pooled value, again only cells with n >= `min_n`.
    """
    ran = sorted((e for e in entries if task_of(e, task) is not None), key=lambda e: e.model.name)
    per_length = any(r.length is not None for e in ran for r in _results(e, task) if r.metric == metric)
    if not per_length:
        usable = {e.model.name: _pooled_usable(e, task, metric, min_n) for e in ran}
        group = [e for e in ran if usable[e.model.name]]
        rank = Ranking(metric, min_n, [], pooled=True)
        low = f"low n: the pooled cell has n < {min_n}"
        ordered = sorted(group, key=lambda e: (-(rank.score(e, task) or 0.0), e.model.name))
        return replace(rank, ranked=ordered, unranked=[(e, low) for e in ran if e not in group])
    usable_of = {e.model.name: evaluated_lengths(t, metric, min_n) for e in ran if (t := task_of(e, task))}
    candidates = [e for e in ran if usable_of[e.model.name]]
    group, shared = _group(candidates, usable_of)
    rank = Ranking(metric, min_n, [], lengths=shared)
    ordered = sorted(group, key=lambda e: (-(rank.score(e, task) or 0.0), e.model.name))
    unranked = []
    for e in ran:
        if e in group:
            continue
        own = usable_of[e.model.name]
        if not own:
            why = f"low n: no length with n >= {min_n}"
        elif not group:
            why = f"shares no length with n >= {min_n} with another model (has {lengths_text(sorted(own))})"
        else:
            why = f"shares no ranking length (has {lengths_text(sorted(own))} with n >= {min_n})"
        unranked.append((e, why))
    return replace(rank, ranked=ordered, unranked=unranked)


def _group(candidates: list[RunResult], usable_of: Mapping[str, set[int]]) -> tuple[list[RunResult], list[int]]:
    """The ranked group and the lengths all of it shares (see `ranking`)."""
    if len(candidates) == 1:
        return candidates, sorted(usable_of[candidates[0].model.name])
    counts: dict[int, int] = {}
    for e in candidates:
        for n in usable_of[e.model.name]:
            counts[n] = counts.get(n, 0) + 1
    if not counts or max(counts.values()) < 2:
        return [], []
    best: tuple[int, int, int] | None = None
    chosen: tuple[list[RunResult], list[int]] = ([], [])
    for length, count in sorted(counts.items()):
        members = [e for e in candidates if length in usable_of[e.model.name]]
        shared = sorted(set.intersection(*(usable_of[e.model.name] for e in members)))
        key = (count, len(shared), -length)
        if best is None or key > best:
            best, chosen = key, (members, shared)
    return chosen


def _results(entry: RunResult, task: str) -> list[MetricResult]:
    result = task_of(entry, task)
    return list(result.results) if result is not None else []


def _pooled_usable(entry: RunResult, task: str, metric: str, min_n: int) -> bool:
    result = task_of(entry, task)
    row = lookup(result, metric, None, None) if result is not None else None
    return row is not None and math.isfinite(row.value) and row.n >= min_n


def shared_lengths(task: str, entries: Sequence[RunResult], metric: str, min_n: int = DEFAULT_MIN_N) -> list[int]:
    """The lengths the task's ranked models are ranked on (every one of them has each with n >= `min_n`)."""
    return ranking(task, entries, metric, min_n).lengths


def ranked(task: str, entries: Sequence[RunResult], metric: str, min_n: int = DEFAULT_MIN_N) -> list[RunResult]:
    """Entries that ran `task` in table order: the ranked ones best first, then the unranked ones by name
    (`ranking(...).ranked` holds only the ranked ones)."""
    return ranking(task, entries, metric, min_n).order


def ranking_rule(
    task: str,
    entries: Sequence[RunResult],
    metric: str,
    min_n: int = DEFAULT_MIN_N,
    code: Callable[[str], str] = md_code,
) -> str:
    """One sentence (Markdown, the metric through `code`) saying how the task's table is ranked (and that unranked
    models are listed under it)."""
    rank = ranking(task, entries, metric, min_n)
    if len(rank.order) < 2 and not rank.unranked:
        return ""
    if not rank.ranked and len(rank.order) == 1:
        return f"Not ranked: low n (no cell with n >= {min_n})."
    if not rank.ranked:
        return (
            f"Not ranked: no two models share a length where both have n >= {min_n}; every model is listed "
            "under **Not ranked**."
        )
    rest = " Models not ranked are listed under the table." if rank.unranked else ""
    if rank.pooled:
        return f"Ranked by the pooled {code(metric)} (**all**, cells with n >= {min_n}), best first.{rest}"
    where = lengths_text(rank.lengths)
    return (
        f"Ranked by the mean {code(metric)} over {where} (the lengths every ranked model has with n >= {min_n}), "
        f"best first.{rest}"
    )


def coverage_of(task: str, entries: Sequence[RunResult]) -> list[Coverage]:
    """The coverage strata of `task` over all entries."""
    return [c for e in entries if (t := task_of(e, task)) is not None for c in t.coverage]


def rows_of(task: str, entries: Sequence[RunResult], metric: str) -> list[MetricResult]:
    """The rows of `metric` for `task` over all entries."""
    return [r for e in entries if (t := task_of(e, task)) is not None for r in t.results if r.metric == metric]


def lengths_text(values: Sequence[int]) -> str:
    """'1K, 4K' (or 'no length')."""
    return ", ".join(length_label(n) for n in values) if values else "no length"
