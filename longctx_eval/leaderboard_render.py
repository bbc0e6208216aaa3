"""Views of merged leaderboard entries: the per-task grids shared with the plots, and LEADERBOARD.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from longctx_eval.leaderboard_breakdowns import (
    KINDS,
    contrast_section,
    effective_cells,
    effective_kinds,
    effective_note,
    slice_sections,
)
from longctx_eval.leaderboard_details import detail_section
from longctx_eval.leaderboard_significance import Samples, leader_lines
from longctx_eval.result_text import DASH, format_cell, length_label
from longctx_eval.result_text import md_escape as _escape
from longctx_eval.results import (
    Coverage,
    MetricResult,
    RunResult,
    TaskResult,
    failure_summary,
    strata_coverage,
    task_failed,
)

if TYPE_CHECKING:
    from longctx_eval.leaderboard_merge import MergeNote


def task_names(entries: Sequence[RunResult]) -> list[str]:
    """One board per task, sorted; a task run through several capabilities gets one board per capability.

    A retriever's recall@k and a generator's answer score are different metrics; one table must not mix them.
    """
    caps: dict[str, set[str]] = {}
    for e in entries:
        for t in e.tasks:
            caps.setdefault(t.name, set()).add(t.capability)
    return sorted(
        name if len(found) == 1 else f"{name} ({cap})" for name, found in caps.items() for cap in sorted(found)
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
    return any(r.depth is not None for r in _rows(task, entries, metric)) or any(
        c.depth is not None for c in _coverage(task, entries)
    )


def lengths(task: str, entries: Sequence[RunResult], metric: str, *, with_depth: bool) -> list[int]:
    """Sorted context lengths reported (or covered) for the pooled-depth rows, or for the per-depth rows."""
    found = {
        r.length for r in _rows(task, entries, metric) if r.length is not None and (r.depth is not None) == with_depth
    }
    found |= {c.length for c in _coverage(task, entries) if not with_depth or c.depth is not None}
    return sorted(found)


def depths(task: str, entries: Sequence[RunResult], metric: str) -> list[float]:
    """Sorted needle depths reported or covered for `task`."""
    found = {r.depth for r in _rows(task, entries, metric) if r.depth is not None}
    found |= {c.depth for c in _coverage(task, entries) if c.depth is not None}
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

    @property
    def partial(self) -> bool:
        """Fewer samples evaluated than the task's full grid has for this stratum."""
        return self.state == "value" and self.planned is not None and (self.evaluated or 0) < self.planned


def cell(task: TaskResult, metric: str, length: int | None, depth: float | None) -> Cell:
    """The cell of one stratum (length None = pooled over lengths, depth None = pooled over depths)."""
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
    if evaluated == 0:
        state: CellState = "failed" if failed else "over_window" if over else "not_evaluated"
        return Cell(None, state, planned, evaluated, over, failed)
    return Cell(row, "missing" if row is None else "value", planned, evaluated, over, failed)


def pooled_lengths_of(task: TaskResult) -> list[int] | None:
    """The lengths the pooled ('all') rows pool; None for older run files that do not say."""
    if task.pooled_lengths is not None:
        return sorted(task.pooled_lengths)
    if task.coverage:
        return sorted({c.length for c in task.coverage if c.evaluated > 0})
    return None


def evaluated_lengths(task: TaskResult, metric: str) -> set[int]:
    """Lengths with a finite pooled-depth value of `metric` and (when covered) evaluated samples."""
    return {
        row.length
        for row in task.results
        if row.metric == metric
        and row.length is not None
        and row.depth is None
        and math.isfinite(row.value)
        and cell(task, metric, row.length, None).state == "value"
    }


def shared_lengths(task: str, entries: Sequence[RunResult], metric: str) -> list[int]:
    """Lengths every entry with any evaluated length in `task` was evaluated at (the ranking lengths)."""
    sets = [s for e in entries if (t := task_of(e, task)) is not None and (s := evaluated_lengths(t, metric))]
    return sorted(set.intersection(*sets)) if sets else []


def ranked(task: str, entries: Sequence[RunResult], metric: str) -> list[RunResult]:
    """Entries that ran `task`, best first: by the mean over the shared lengths, else by the pooled value.

    Models are compared only on the lengths they all were evaluated at (see `shared_lengths`); when no
    length is shared, or the task has no per-length rows, by the pooled ('all') value. Missing last.
    """
    shared = shared_lengths(task, entries, metric)

    def key(entry: RunResult) -> tuple[bool, float, str]:
        result = task_of(entry, task)
        value = None
        if result is not None and shared:
            rows = [lookup(result, metric, n, None) for n in shared]
            if all(r is not None for r in rows):
                value = sum(r.value for r in rows if r is not None) / len(rows)
        elif result is not None:
            pooled = lookup(result, metric, None, None)
            value = pooled.value if pooled is not None else None
        missing = value is None or not math.isfinite(value)
        return (missing, 0.0 if missing or value is None else -value, entry.model.name)

    return sorted((e for e in entries if task_of(e, task) is not None), key=key)


def ranking_rule(task: str, entries: Sequence[RunResult], metric: str) -> str:
    """One sentence saying how the task's table is sorted; empty for a single model."""
    if len([e for e in entries if task_of(e, task) is not None]) < 2:
        return ""
    shared = shared_lengths(task, entries, metric)
    if shared:
        where = ", ".join(length_label(n) for n in shared)
        return (
            f"Sorted by the mean `{metric}` over {where} (the lengths every model here was evaluated at), best first."
        )
    return f"Sorted by the pooled `{metric}` (**all**), best first: no length is shared by every model."


def format_params(params: int | None) -> str:
    """134515008 -> '134.5M'."""
    if params is None:
        return DASH
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.1f}{suffix}"
    return str(params)


def format_state(c: Cell) -> str:
    """A table cell: the value with interval and n ('n=2/5' when partial), or the stratum's state."""
    if c.state == "over_window":
        return "n/a (over window)"
    if c.state == "failed":
        return f"{c.failed} failed" + (f" ({c.over_length} over window)" if c.over_length else "")
    if c.state == "not_evaluated":
        return "not evaluated"
    text = format_cell(c.row)
    if c.row is None or c.planned is None:
        return text
    if c.partial:
        text = text.rsplit(" n=", 1)[0] + f" n={c.row.n}/{c.planned}"
    notes = [f"{c.over_length} over window"] * bool(c.over_length) + [f"{c.failed} failed"] * bool(c.failed)
    return text + (f" ({', '.join(notes)})" if notes else "")


def failed_cell(task: TaskResult) -> str:
    """The pooled cell of a task whose every request failed: 'failed: reason'."""
    return f"failed: {failure_summary(task.failures) or 'unknown error'}"


CELL_LEGEND = (
    "Each cell is the task's primary metric at that context length (tokens), pooled over depths, with its 95% "
    "bootstrap interval and sample count; `n=2/5` marks a partial cell (2 of the 5 samples of the task's grid "
    "evaluated). **n/a (over window)**: every sample at that length was longer than the model's context "
    "window; **N failed**: N requests failed (a server error, out of memory, a refused model): they are not "
    "scored, their reasons are listed under the table, and a rerun retries them; **failed: reason**: every "
    "request of the task failed; **not evaluated**: that length's samples were not run (`--limit`). "
    "**all** pools the lengths it names (never over-window ones; older run files: every length). "
    "Models are compared only on the lengths they share: each table says its sort rule."
)
"""What a leaderboard cell says, shown above the tables (LEADERBOARD.md and the site)."""

MERGE_RULE = (
    "Per model, task and capability the latest result is shown (by the task's start time). A newer result of "
    "the same task version and arguments that covers less (fewer evaluated samples, no length or depth the "
    "shown one lacks) never replaces a fuller one: it is listed under **Not shown**. A newer task version or "
    "other task arguments always win; **Replaced** says when that dropped lengths or samples."
)


def render_markdown(
    entries: Sequence[RunResult],
    updated: str,
    plots: Mapping[str, str | Sequence[str]],
    run_links: Mapping[str, str] | None = None,
    notes: Sequence[MergeNote] = (),
    unread: Sequence[tuple[str, str]] = (),
    samples: Samples | None = None,
) -> str:
    """LEADERBOARD.md: per task a model x length table, then notes, skipped tasks and model metadata.

    `plots` maps task -> relative PNG path(s), the heatmap first; `run_links` maps model name -> relative
    run-file path; `notes` are the merge's not-shown and replaced results; `unread` the inputs (run files,
    run folders) that were not merged, with why; `samples` the per-sample scores of input run folders (per
    model and board), for the leader vs runner-up test (`leaderboard_significance.py`).
    """
    tasks = task_names(entries)
    lines = [
        "# longctx-eval leaderboard",
        "",
        f"Updated {updated} · {len(entries)} model(s) · {len(tasks)} task(s). {CELL_LEGEND}",
        "",
        MERGE_RULE,
    ]
    placed: set[MergeNote] = set()
    for task in tasks:
        mine = [n for n in notes if n.task is not None and board_of(n, tasks) == task]
        placed.update(mine)
        lines += ["", *_task_section(task, entries, plots.get(task), mine, samples)]
    rest = [n for n in notes if n not in placed]
    if rest:
        lines += ["", "## Not shown", "", "| model | task | run | why |", "|---|---|---|---|"]
        lines += [
            f"| {_escape(n.model)} | {_escape(n.task or DASH)} | {_escape(n.run)} | {_escape(n.reason)} |" for n in rest
        ]
    if unread:
        lines += ["", "## Not read", "", "| input | why |", "|---|---|"]
        lines += [f"| {_escape(path)} | {_escape(why)} |" for path, why in unread]
    lines += ["", *_skipped_section(entries), "", *_models_section(entries, run_links or {})]
    return "\n".join(lines) + "\n"


def board_of(note: MergeNote, boards: Sequence[str]) -> str | None:
    """The board (task table) a merge note belongs to, None for a note about the whole model."""
    for board in (f"{note.task} ({note.capability})", note.task):
        if board in boards:
            return board
    return None


def _coverage(task: str, entries: Sequence[RunResult]) -> list[Coverage]:
    return [c for e in entries if (t := task_of(e, task)) is not None for c in t.coverage]


def _rows(task: str, entries: Sequence[RunResult], metric: str) -> list[MetricResult]:
    return [r for e in entries if (t := task_of(e, task)) is not None for r in t.results if r.metric == metric]


def _lengths_text(values: Sequence[int]) -> str:
    return ", ".join(length_label(n) for n in values) if values else "no length"


def _task_section(
    task: str,
    entries: Sequence[RunResult],
    plots: str | Sequence[str] | None,
    notes: Sequence[MergeNote],
    samples: Samples | None = None,
) -> list[str]:
    metric = primary_metric(task, entries)
    if metric is None:
        lines = [f"## {_escape(task)}", ""]
        failed = [(e.model.name, t) for e in entries if (t := task_of(e, task)) is not None and task_failed(t)]
        if failed:
            lines += ["Every request failed; nothing was scored.", "", "| model | state |", "|---|---|"]
            lines += [f"| **{_escape(m)}** | {_escape(failed_cell(t))} |" for m, t in sorted(failed)]
            lines += _failure_lines(failed)
        else:
            lines.append("No results reported.")
        return lines + _warnings(task, entries) + _note_lines(notes)
    versions = sorted({t.version for e in entries if (t := task_of(e, task)) is not None})
    version = f" (v{versions[0]})" if len(versions) == 1 else ""
    cols: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    models = ranked(task, entries, metric)
    board = [(e.model.name, t) for e in models if (t := task_of(e, task)) is not None]
    kinds = effective_kinds(board, metric)
    pooled = [pooled_lengths_of(t) for e in models if (t := task_of(e, task)) is not None]
    common = pooled[0] if pooled and all(p is not None and p == pooled[0] for p in pooled) else None
    all_label = f"all ({_lengths_text(common)})" if common is not None else "all"
    lines = [
        f"## {_escape(task)}{version}",
        "",
        f"Primary metric: `{metric}`. {ranking_rule(task, entries, metric)}".rstrip(),
        "",
    ]
    head = ["model", *([] if version else ["version"]), *(length_label(c) for c in cols[:-1]), all_label]
    head += [KINDS[k] for k in kinds]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    counts = []
    for entry in models:
        result = task_of(entry, task)
        assert result is not None  # ranked() only yields entries that ran the task
        cells = [f"**{_escape(entry.model.name)}**", *([] if version else [_escape(result.version)])]
        cells += [format_state(cell(result, metric, c, None)) for c in cols[:-1]]
        all_cell = failed_cell(result) if task_failed(result) else format_state(cell(result, metric, None, None))
        own = pooled_lengths_of(result)
        if common is None and own is not None and cell(result, metric, None, None).state == "value":
            all_cell += f" over {_lengths_text(own)}"
        cells.append(all_cell)
        cells += effective_cells(result, board, metric, kinds)
        lines.append("| " + " | ".join(cells) + " |")
        if result.over_length or result.errors:
            counts.append(
                f"{_escape(entry.model.name)} {result.over_length} over-length, {result.errors} failed "
                f"of {result.n_samples}"
            )
    lines += leader_lines(task, models, metric, samples, shared_lengths(task, entries, metric))
    if counts:
        lines += ["", "Over-length and failed samples: " + "; ".join(counts) + "."]
    lines += _failure_lines([(e.model.name, t) for e in models if (t := task_of(e, task)) is not None])
    lines += effective_note(board, metric, kinds) + slice_sections(board, metric) + contrast_section(board)
    lines += detail_section(board)
    lines += _warnings(task, entries) + _note_lines(notes)
    for path in [plots] if isinstance(plots, str) else plots or []:
        lines += ["", f"![{_escape(task)} {_plot_kind(path)}]({path})"]
    return lines


def _failure_lines(board: Sequence[tuple[str, TaskResult]]) -> list[str]:
    """'Failed requests: model: reason (count); ...' for the models with failed requests."""
    found = [
        f"{_escape(name)}: " + "; ".join(f"{_escape(reason)} ({n})" for reason, n in t.failures.items())
        for name, t in board
        if t.failures
    ]
    return ["", "Why requests failed (not scored; a rerun retries them): " + " · ".join(found) + "."] if found else []


def _plot_kind(path: str) -> str:
    """'heatmap' for a task's main plot 'task.png', else what follows the task in 'task.KIND.png'."""
    name = path.rsplit("/", 1)[-1].removesuffix(".png")
    return name.split(".", 1)[1].replace("-", " ").replace("_", " ") if "." in name else "heatmap"


def _warnings(task: str, entries: Sequence[RunResult]) -> list[str]:
    found = [
        f"{_escape(e.model.name)}: {_escape(w)}"
        for e in sorted(entries, key=lambda e: e.model.name)
        if (t := task_of(e, task)) is not None
        for w in t.warnings
    ]
    return ["", "Warnings: " + "; ".join(found) + "."] if found else []


def _note_lines(notes: Sequence[MergeNote]) -> list[str]:
    if not notes:
        return []
    title = {"not_shown": "Not shown", "replaced": "Replaced", "other_model": "Not shown"}
    return ["", *(f"- {title[n.kind]}: {_escape(n.model)} {_escape(n.run)}: {_escape(n.reason)}." for n in notes)]


def _skipped_section(entries: Sequence[RunResult]) -> list[str]:
    rows = sorted((e.model.name, s.task, s.kind or DASH, s.reason) for e in entries for s in e.skipped)
    if not rows:
        return ["## Skipped", "", "No task was skipped."]
    lines = ["## Skipped", "", "| model | task | kind | reason |", "|---|---|---|---|"]
    lines += [f"| {_escape(m)} | {_escape(t)} | {_escape(k)} | {_escape(r)} |" for m, t, k, r in rows]
    return lines


def _models_section(entries: Sequence[RunResult], run_links: Mapping[str, str]) -> list[str]:
    lines = [
        "## Models",
        "",
        "| model | spec | kind | params | dtype | tokenizer | suite | started | run file |",
        "|---|---|---|---:|---|---|---|---|---|",
    ]
    for e in sorted(entries, key=lambda e: e.model.name):
        m = e.model
        suite = e.suite.version + (f" @ {e.suite.git[:12]}" if e.suite.git else "")
        cells = [
            f"**{m.name}**",
            f"`{m.spec}`",
            m.kind,
            format_params(m.params),
            m.dtype or DASH,
            m.tokenizer,
            suite,
            e.started,
        ]
        link = run_links.get(m.name)
        cells.append(f"[json]({link})" if link else DASH)
        lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return lines
