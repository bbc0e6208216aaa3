"""Merging run files into leaderboard entries: the latest result per (model, task, capability), with notes.

The rule (also stated on LEADERBOARD.md): per model name, task and capability the latest result is shown
(by the task's `started`, else its run's). A newer result of the same task version and arguments that covers
strictly less than the one shown (no stratum the shown one lacks, fewer samples in total) does not replace it:
the fuller one stays and a "not shown" note names the newer run. A newer result of another version or other
arguments always wins. Whenever a replaced result covered strata or samples the shown one lacks, a "replaced"
note says so. Runs whose model identity differs from the latest run of that name are not merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from longctx_eval.errors import RunFileError
from longctx_eval.results import RunResult, Skipped, TaskResult, strata_coverage
from longctx_eval.scoring.labels import length_label

TaskKey = tuple[str, str]  # (task name, capability)
Stratum = tuple[int | None, float | None]  # (length, depth); None = pooled / unknown


class MergeNote(BaseModel):
    """A result that is not shown, or that a newer one replaced, and why (stored in leaderboard.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    model: str
    task: str | None = None
    capability: str | None = None
    kind: Literal["not_shown", "replaced", "other_model"]
    run: str
    reason: str


@dataclass(frozen=True)
class Merged:
    """Merged entries (one per model name, sorted) and the notes about what they leave out."""

    entries: list[RunResult]
    notes: list[MergeNote]


@dataclass(frozen=True)
class _Candidate:
    run: RunResult
    task: TaskResult  # `started` filled in from the run when the task lacks it
    when: datetime
    order: int
    label: str


def parse_time(text: str, field: str = "started") -> datetime:
    """An ISO-8601 time as an aware datetime (naive times are taken as UTC); malformed raises RunFileError."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise RunFileError(f"field {field!r}: {text!r} is not an ISO-8601 time") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def check_times(run: RunResult) -> None:
    """Raise RunFileError when the run's or a task's `started` is not an ISO-8601 time."""
    parse_time(run.started)
    for i, task in enumerate(run.tasks):
        if task.started is not None:
            parse_time(task.started, f"tasks.{i}.started")


def strata(task: TaskResult, *, by_depth: bool = True) -> dict[Stratum, int]:
    """Samples evaluated per stratum: from coverage, else (older run files) from the pooled-depth rows' n.

    Over-window samples carry no score, so they cover nothing: a rerun that only adds over-window lengths
    is still a partial rerun.
    """
    counts: dict[Stratum, int] = {}
    if task.coverage:
        for c in strata_coverage(task.coverage):
            key = (c.length, c.depth if by_depth else None)
            counts[key] = counts.get(key, 0) + c.evaluated
        return {k: v for k, v in counts.items() if v > 0}
    for row in task.results:
        if row.length is not None and row.depth is None:
            counts[(row.length, None)] = max(counts.get((row.length, None), 0), row.n)
    return counts or ({(None, None): task.n_samples} if task.n_samples else {})


def covers(a: TaskResult, b: TaskResult) -> bool:
    """Whether `a` evaluated at least as many samples as `b` in every stratum `b` evaluated."""
    by_depth = bool(a.coverage) and bool(b.coverage)
    have, need = strata(a, by_depth=by_depth), strata(b, by_depth=by_depth)
    return all(have.get(k, 0) >= v for k, v in need.items())


def strictly_less(newer: TaskResult, held: TaskResult) -> bool:
    """`newer` covers nothing `held` lacks and fewer samples in total: a partial rerun of `held`."""
    by_depth = bool(newer.coverage) and bool(held.coverage)
    return covers(held, newer) and sum(strata(newer, by_depth=by_depth).values()) < sum(
        strata(held, by_depth=by_depth).values()
    )


def same_setup(a: TaskResult, b: TaskResult) -> bool:
    """Same task version and arguments (per-length ones too): results that only differ in how much of the grid
    they cover."""
    return a.version == b.version and a.args == b.args and (a.length_args or {}) == (b.length_args or {})


def describe(task: TaskResult) -> str:
    """'v3, n=15 at 1K, 8K, 1M': what a result covers, lengths labelled as the tables label them."""
    counts = strata(task, by_depth=False)
    total = sum(counts.values())
    lens = sorted({k[0] for k in counts if k[0] is not None})
    where = f" at {', '.join(length_label(n) for n in lens)}" if lens else ""
    return f"v{task.version}, n={total}{where}"


def merge_board(runs: Iterable[RunResult], labels: Sequence[str] | None = None) -> Merged:
    """Merge runs (board entries, run copies, inputs: later ones win ties) into one entry per model name.

    `labels[i]` names run i in notes (its run-copy file name); raises RunFileError on a malformed time.
    """
    runs = list(runs)
    labels = list(labels) if labels is not None else [r.started for r in runs]
    by_name: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        by_name.setdefault(run.model.name, []).append(i)
    entries, notes = [], []
    for name in sorted(by_name):
        idx = by_name[name]
        latest = max(idx, key=lambda i: (parse_time(runs[i].started), i))
        identity = runs[latest].model.identity_sha256
        kept = []
        for i in idx:
            other = runs[i].model.identity_sha256
            if identity is not None and other is not None and other != identity:
                notes.append(
                    MergeNote(
                        model=name,
                        kind="other_model",
                        run=labels[i],
                        reason=f"model identity {other[:12]} differs from the latest run's {identity[:12]}: the "
                        "name now names another model (give one of them another ?name=)",
                    )
                )
            else:
                kept.append(i)
        tasks, task_notes = _merge_tasks(name, [_candidates(runs[i], i, labels[i]) for i in kept])
        notes += task_notes
        shown = {t.name for t in tasks}
        skipped = _merge_skips([runs[i] for i in sorted(kept, key=lambda i: (parse_time(runs[i].started), i))], shown)
        entries.append(runs[latest].model_copy(update={"tasks": tasks, "skipped": skipped}))
    unique = list(dict.fromkeys(notes))
    unique.sort(key=lambda n: (n.model, n.task or "", n.capability or "", n.kind, n.run))
    return Merged(entries=entries, notes=unique)


def merge_runs(runs: Iterable[RunResult]) -> list[RunResult]:
    """One entry per model name (sorted): the latest run's metadata with the merged per-task results."""
    return merge_board(runs).entries


def _candidates(run: RunResult, order: int, label: str) -> list[_Candidate]:
    out = []
    for task in run.tasks:
        filled = task if task.started is not None else task.model_copy(update={"started": run.started})
        assert filled.started is not None
        out.append(_Candidate(run, filled, parse_time(filled.started), order, label))
    return out


def _merge_tasks(model: str, per_run: list[list[_Candidate]]) -> tuple[list[TaskResult], list[MergeNote]]:
    by_key: dict[TaskKey, list[_Candidate]] = {}
    for cands in per_run:
        for c in cands:
            by_key.setdefault((c.task.name, c.task.capability), []).append(c)
    tasks, notes = [], []
    for key in sorted(by_key):
        ordered = _distinct(sorted(by_key[key], key=lambda c: (c.when, c.order)))
        held = ordered[0]
        for c in ordered[1:]:
            if c.task == held.task:
                held = c  # the same result again (a run copy, the board entry): nothing changes
            elif not (same_setup(c.task, held.task) and strictly_less(c.task, held.task)):
                held = c
        tasks.append(held.task)
        notes += _task_notes(model, key, ordered, held)
    return tasks, notes


def _distinct(ordered: list[_Candidate]) -> list[_Candidate]:
    """Drop repeats of one result (board entry, run copy, input), keeping the latest-read copy's place."""
    out: list[_Candidate] = []
    for c in ordered:
        out = [o for o in out if o.task != c.task]
        out.append(c)
    return sorted(out, key=lambda c: (c.when, c.order))


def _task_notes(model: str, key: TaskKey, ordered: list[_Candidate], shown: _Candidate) -> list[MergeNote]:
    notes = []
    pos = ordered.index(shown)
    for i, c in enumerate(ordered):
        if c.task == shown.task:
            continue
        if i > pos:
            reason = (
                f"newer but covers less ({describe(c.task)}) than the shown result ({describe(shown.task)}, "
                f"{shown.label}) of the same task version and arguments; the fuller one is shown"
            )
            notes.append(
                MergeNote(model=model, task=key[0], capability=key[1], kind="not_shown", run=c.label, reason=reason)
            )
        elif not covers(shown.task, c.task) and not any(covers(later.task, c.task) for later in ordered[i + 1 :]):
            why = "" if same_setup(c.task, shown.task) else " (another task version or arguments)"
            reason = (
                f"replaced by the newer {shown.label}{why} ({describe(shown.task)}); this run had "
                f"{describe(c.task)}: what only it covered is not shown"
            )
            notes.append(
                MergeNote(model=model, task=key[0], capability=key[1], kind="replaced", run=c.label, reason=reason)
            )
    return notes


def _merge_skips(runs_oldest_first: list[RunResult], shown_tasks: set[str]) -> list[Skipped]:
    """The latest skip of each task that has no shown result (a later score clears an earlier skip), and a
    failure (crash, error) the newest run records even where an earlier result is shown."""
    latest: dict[str, Skipped] = {}
    for run in runs_oldest_first:
        for skip in run.skipped:
            latest[skip.task] = skip
    newest = runs_oldest_first[-1].skipped if runs_oldest_first else []
    failed_now = {s.task for s in newest if s.kind in ("error", "crashed")}
    return [latest[t] for t in sorted(latest) if t not in shown_tasks or t in failed_now]
