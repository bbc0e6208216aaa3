"""LEADERBOARD.md from merged leaderboard entries, over the per-task grids of grid.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from longctx_eval.leaderboard.breakdowns import (
    DEFAULT_MIN_N,
    KINDS,
    contrast_section,
    effective_cells,
    effective_kinds,
    effective_note,
    effective_of,
    slice_sections,
)
from longctx_eval.leaderboard.details import detail_section
from longctx_eval.leaderboard.grid import (
    Cell,
    Ranking,
    cell,
    lengths,
    lengths_text,
    pooled_lengths_of,
    primary_metric,
    ranking,
    ranking_rule,
    task_names,
    task_of,
)
from longctx_eval.leaderboard.length_args import length_args_section
from longctx_eval.leaderboard.markdown_escape import md_code, md_text
from longctx_eval.leaderboard.noise import FLOOR_LEGEND, floor_cells, resolution_cells, unit_metric
from longctx_eval.leaderboard.semantic import semantic_sections
from longctx_eval.leaderboard.serving import serving_sections
from longctx_eval.leaderboard.significance import Samples, leader_lines
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL
from longctx_eval.results import (
    ModelMeta,
    RunResult,
    TaskResult,
    failure_summary,
    task_failed,
)
from longctx_eval.scoring.labels import DASH, format_cell, length_label

if TYPE_CHECKING:
    from longctx_eval.leaderboard.merge import MergeNote


def format_params(params: int | None) -> str:
    """134515008 -> '134.5M'."""
    if params is None:
        return DASH
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.1f}{suffix}"
    return str(params)


def context_window_text(model: ModelMeta) -> str:
    """'8,192 tokens, full attention (why, from runtime.window.source)', '32,768 tokens, sliding 512 in 15/18 layers
    (...)' from runtime.attention where recorded, or 'none' for a model without a window (retrievers)."""
    if model.context_window is None:
        return "none"
    runtime = model.runtime if isinstance(model.runtime, dict) else {}
    window, layout = runtime.get("window"), runtime.get("attention")
    source = window.get("source") if isinstance(window, dict) else None
    layout = layout if isinstance(layout, dict) else {}
    types = layout.get("types")
    slides = [
        f"sliding {t['window']} in {t.get('count')}/{layout.get('layers')} layers"
        for t in (types.values() if isinstance(types, dict) else ())
        if isinstance(t, dict) and t.get("window")
    ]
    attention = (", ".join(slides) or "full attention") if isinstance(types, dict) else None
    text = f"{model.context_window:,} tokens" + (f", {attention}" if attention else "")
    return text + (f" ({source})" if source else "")


def format_state(c: Cell) -> str:
    """A table cell: the value with interval and n ('n=2/5' when partial; 'n=100 over 4 haystacks, n_eff 31.2'
    when its samples share clusters), or the stratum's state."""
    if c.state == "over_window":
        return "n/a (over window)"
    if c.state == "failed":
        return f"{c.failed} failed" + (f" ({c.over_length} over window)" if c.over_length else "")
    if c.state == "not_evaluated":
        return "not evaluated"
    if c.row is None or c.planned is None:
        return format_cell(c.row, noun=c.noun) + (" (low n)" if c.low_n else "")
    partial = f"n={c.row.n}/{c.planned if c.expected is None else c.expected}" if c.partial else None
    text = format_cell(c.row, partial, c.noun)
    cut = c.expected is not None and c.planned is not None and c.expected < c.planned
    notes = ["low n"] * c.low_n + [f"limit: {c.expected} of {c.planned}"] * cut
    notes += [f"{c.over_length} over window"] * bool(c.over_length)
    notes += [f"{c.failed} failed"] * bool(c.failed)
    return text + (f" ({', '.join(notes)})" if notes else "")


def failed_cell(task: TaskResult) -> str:
    """The pooled cell of a task whose every request failed: 'failed: reason'."""
    return f"failed: {failure_summary(task.failures) or 'unknown error'}"


def cell_legend(min_n: int = DEFAULT_MIN_N) -> str:
    """What a leaderboard cell says, shown above the tables (LEADERBOARD.md and the site)."""
    return (
        "Each cell is the task's primary metric at that context length (tokens), pooled over depths, with its 95% "
        "bootstrap interval (the haystacks or documents the samples were built from resampled, then the samples "
        "within each) and sample count; `n=100 over 4 haystacks, n_eff 31.2`: the samples come from 4 haystacks "
        "and, correlated within each, are worth about 31 independent samples (n / (1 + (mean cluster size - 1) "
        "ICC)); `n=2/5` marks a partial cell (2 of the 5 samples of the task's grid, "
        "or of those its `limit` took, evaluated); **limit: 100 of 306**: the run's `limit` took 100 of the grid's "
        "306 samples there (at most `limit` per length, spread over its strata). **n/a (over window)**: every sample "
        "at that length was longer than the model's context window; **N failed**: N requests failed (a server "
        "error, out of memory, a refused model): they are not scored, their reasons are listed under the table, "
        "and a rerun retries them; **failed: reason**: every "
        "request of the task failed; **not evaluated**: that length's samples were not run (`--limit`). "
        "**all** pools the lengths it names (never over-window ones; older run files: every length). "
        f"**low n**: fewer than {min_n} samples (the minimum n, `leaderboard --min-n`): the value is shown but "
        "never ranked or sorted on, and no effective length or contrast is shown from it; a cell of fewer than "
        f"{MIN_N_FOR_INTERVAL} samples, or from a single haystack or document, shows no interval. Models are "
        "ranked only on the lengths they share, each with n at or above the "
        "minimum: each table says its rule; a model sharing none (or with every cell low n) is listed under "
        "**Not ranked**, not ranked. Under each table: the task's **noise floor** and the **resolvable "
        "difference** at its cells' n (defined below)."
    )


CELL_LEGEND = cell_legend()
"""The legend at the default minimum n."""

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
    min_n: int = DEFAULT_MIN_N,
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
        f"Updated {updated} · {len(entries)} model(s) · {len(tasks)} task(s). {cell_legend(min_n)}",
        "",
        FLOOR_LEGEND,
        "",
        MERGE_RULE,
    ]
    placed: set[MergeNote] = set()
    for task in tasks:
        mine = [n for n in notes if n.task is not None and board_of(n, tasks) == task]
        placed.update(mine)
        lines += ["", *_task_section(task, entries, plots.get(task), mine, min_n, samples)]
    rest = [n for n in notes if n not in placed]
    if rest:
        lines += ["", "## Not shown", "", "| model | task | run | why |", "|---|---|---|---|"]
        lines += [
            f"| {md_text(n.model)} | {md_text(n.task or DASH)} | {md_text(n.run)} | {md_text(n.reason)} |" for n in rest
        ]
    if unread:
        lines += ["", "## Not read", "", "| input | why |", "|---|---|"]
        lines += [f"| {md_text(path)} | {md_text(why)} |" for path, why in unread]
    lines += ["", *_skipped_section(entries), "", *_models_section(entries, run_links or {})]
    return "\n".join(lines) + "\n"


def board_of(note: MergeNote, boards: Sequence[str]) -> str | None:
    """The board (task table) a merge note belongs to, None for a note about the whole model."""
    for board in (f"{note.task} ({note.capability})", note.task):
        if board in boards:
            return board
    return None


def _task_section(
    task: str,
    entries: Sequence[RunResult],
    plots: str | Sequence[str] | None,
    notes: Sequence[MergeNote],
    min_n: int = DEFAULT_MIN_N,
    samples: Samples | None = None,
) -> list[str]:
    metric = primary_metric(task, entries)
    if metric is None:
        lines = [f"## {md_text(task)}", ""]
        failed = [(e.model.name, t) for e in entries if (t := task_of(e, task)) is not None and task_failed(t)]
        if failed:
            lines += ["Every request failed; nothing was scored.", "", "| model | state |", "|---|---|"]
            lines += [f"| **{md_text(m)}** | {md_text(failed_cell(t))} |" for m, t in sorted(failed)]
            lines += _failure_lines(failed)
        else:
            lines.append("No results reported.")
        return lines + _warnings(task, entries) + _note_lines(notes)
    view = board_view(task, entries, metric, min_n)
    lines = [
        f"## {md_text(task)}" + (f" {md_text(view.version_text)}" if view.version_text else ""),
        "",
        f"Primary metric: {md_code(metric)}. {ranking_rule(task, entries, metric, min_n)}".rstrip(),
        "",
    ]
    separator = "|" + "|".join(["---"] + ["---:"] * (len(view.head) - 1)) + "|"
    if view.ranked:
        lines += ["| " + " | ".join(view.head) + " |", separator]
        lines += ["| " + " | ".join(_md_row(r)) + " |" for r in view.ranked]
        lines += ["| " + " | ".join(_md_row(r)) + " |" for r in view.foot]
    if view.unranked:
        if view.ranked:
            lines.append("")
        why = "; ".join(f"**{md_text(r.name)}**: {r.why}" for r in view.unranked)  # `why`: grid.ranking's own words
        lines += [f"Not ranked (listed, not compared): {why}.", ""]
        lines += ["| " + " | ".join(view.head) + " |", separator]
        lines += ["| " + " | ".join(_md_row(r)) + " |" for r in view.unranked]
        if not view.ranked:
            lines += ["| " + " | ".join(_md_row(r)) + " |" for r in view.foot]
    board = [(r.name, r.result) for r in [*view.ranked, *view.unranked] if r.result is not None]
    counts = [
        f"{md_text(name)} {result.over_length} over-length, {result.errors} failed of {result.n_samples}"
        for name, result in board
        if result.over_length or result.errors
    ]
    rk = view.ranking
    lines += leader_lines(task, rk.ranked, metric, samples, [] if rk.pooled else rk.lengths)
    if counts:
        lines += ["", "Over-length and failed samples: " + "; ".join(counts) + "."]
    lines += _failure_lines(board) + length_args_section(board)
    lines += effective_note(board, metric, view.kinds, min_n) + slice_sections(board, metric, min_n)
    lines += contrast_section(board, min_n) + serving_sections(board) + semantic_sections(board)
    lines += detail_section(board, min_n)
    lines += _warnings(task, entries) + _note_lines(notes)
    for path in [plots] if isinstance(plots, str) else plots or []:
        lines += ["", f"![{md_text(task)} {_plot_kind(path)}]({path})"]
    return lines


@dataclass(frozen=True)
class BoardCell:
    """One cell of a task table: its plain text, its sort key (None: kept out of sorting) and its state mark.

    `md`: the cell as Markdown when it is the renderer's own text (numbers, intervals, states); None for a cell
    holding a value from a run file, which LEADERBOARD.md escapes (`md_text`)."""

    text: str
    key: object = None
    mark: str = ""
    md: str | None = None


@dataclass(frozen=True)
class BoardRow:
    """One row of a task table: a model (or a foot row: noise floor, resolvable difference) and its cells after
    the name, as plain text (each renderer escapes the name and the cells holding values); `why` a model is not
    ranked, in `grid.ranking`'s own words (no value in them)."""

    name: str
    cells: list[BoardCell]
    result: TaskResult | None = None
    why: str = ""
    foot: bool = False


@dataclass(frozen=True)
class BoardView:
    """A task's table as both renderers lay it out: the header, ranked rows, unranked rows, foot rows."""

    head: list[str]
    columns: list[int | None]
    ranked: list[BoardRow]
    unranked: list[BoardRow]
    foot: list[BoardRow]
    kinds: list[str]
    version_text: str
    ranking: Ranking


def board_view(task: str, entries: Sequence[RunResult], metric: str, min_n: int = DEFAULT_MIN_N) -> BoardView:
    """The task's table: per model its cells (value, interval, n, state, low n), ranked ones first, then the
    unranked ones, then the noise-floor and resolvable-difference rows."""
    versions = sorted({t.version for e in entries if (t := task_of(e, task)) is not None})
    version = f"(v{versions[0]})" if len(versions) == 1 else ""
    cols: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    rank = ranking(task, entries, metric, min_n)
    results = [(e.model.name, t) for e in rank.order if (t := task_of(e, task)) is not None]
    kinds = effective_kinds(results, metric)
    pooled = [pooled_lengths_of(t) for _, t in results]
    common = pooled[0] if pooled and all(p is not None and p == pooled[0] for p in pooled) else None
    all_label = f"all ({lengths_text(common)})" if common is not None else "all"
    head = ["model", *([] if version else ["version"]), *(length_label(c) for c in cols[:-1]), all_label]
    head += [KINDS[k] for k in kinds]

    def row(name: str, result: TaskResult, why: str = "") -> BoardRow:
        cells = []
        if not version:
            cells.append(BoardCell(result.version, result.version))
        for c in cols:
            state = cell(result, metric, c, None, min_n)
            text = failed_cell(result) if c is None and task_failed(result) else format_state(state)
            own = pooled_lengths_of(result)
            if c is None and common is None and own is not None and state.state == "value":
                text += f" over {lengths_text(own)}"
            usable = state.state == "value" and state.row is not None and not state.low_n
            mark = (
                "low-n"
                if state.low_n
                else "partial"
                if state.partial
                else ""
                if state.state == "value"
                else state.state
            )
            own_text = None if c is None and task_failed(result) else text  # a failed cell holds failure reasons
            cells.append(BoardCell(text, state.row.value if usable and state.row else None, mark, own_text))
        for kind, text in zip(kinds, effective_cells(result, results, metric, kinds, min_n), strict=True):
            e = effective_of(result, metric, kind)
            shown = e is not None and not text.startswith("low n")
            cells.append(BoardCell(text, e.value if shown and e is not None else None, md=text))
        return BoardRow(name, cells, result, why)

    ranked_rows = [row(e.model.name, t) for e in rank.ranked if (t := task_of(e, task)) is not None]
    unranked_rows = [row(e.model.name, t, why) for e, why in rank.unranked if (t := task_of(e, task)) is not None]
    board = [t for _, t in results]
    lead = [] if version else [BoardCell("")]
    foot = []
    floors = floor_cells(board, metric, cols)
    if floors is not None:
        cells = [*lead, *(BoardCell(f, md=f) for f in floors)]
        foot.append(BoardRow("noise floor", cells + [BoardCell("")] * len(kinds), foot=True))
    if unit_metric(board, metric):
        ns = [
            [c.row.n for t in board if (c := cell(t, metric, n, None, min_n)).state == "value" and c.row is not None]
            for n in cols
        ]
        cells = [*lead, *(BoardCell(t, md=t) for t in resolution_cells(ns))]
        foot.append(BoardRow("resolvable difference", cells + [BoardCell("")] * len(kinds), foot=True))
    return BoardView(head, cols, ranked_rows, unranked_rows, foot, kinds, version, rank)


def _md_row(row: BoardRow) -> list[str]:
    first = f"*{md_text(row.name)}*" if row.foot else f"**{md_text(row.name)}**"
    return [first, *(md_text(c.text) if c.md is None else c.md for c in row.cells)]


def _failure_lines(board: Sequence[tuple[str, TaskResult]]) -> list[str]:
    """'Failed requests: model: reason (count); ...' for the models with failed requests."""
    found = [
        f"{md_text(name)}: " + "; ".join(f"{md_text(reason)} ({n})" for reason, n in t.failures.items())
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
        f"{md_text(e.model.name)}: {md_text(w)}"
        for e in sorted(entries, key=lambda e: e.model.name)
        if (t := task_of(e, task)) is not None
        for w in t.warnings
    ]
    return ["", "Warnings: " + "; ".join(found) + "."] if found else []


def _note_lines(notes: Sequence[MergeNote]) -> list[str]:
    if not notes:
        return []
    title = {"not_shown": "Not shown", "replaced": "Replaced", "other_model": "Not shown"}
    return ["", *(f"- {title[n.kind]}: {md_text(n.model)} {md_text(n.run)}: {md_text(n.reason)}." for n in notes)]


def _skipped_section(entries: Sequence[RunResult]) -> list[str]:
    rows = sorted((e.model.name, s.task, s.kind or DASH, s.reason) for e in entries for s in e.skipped)
    if not rows:
        return ["## Skipped", "", "No task was skipped."]
    lines = ["## Skipped", "", "| model | task | kind | reason |", "|---|---|---|---|"]
    lines += [f"| {md_text(m)} | {md_text(t)} | {md_text(k)} | {md_text(r)} |" for m, t, k, r in rows]
    return lines


def _models_section(entries: Sequence[RunResult], run_links: Mapping[str, str]) -> list[str]:
    lines = [
        "## Models",
        "",
        "| model | spec | kind | params | dtype | tokenizer | context window | suite | started | run file |",
        "|---|---|---|---:|---|---|---:|---|---|---|",
    ]
    for e in sorted(entries, key=lambda e: e.model.name):
        m = e.model
        suite = e.suite.version + (f" @ {e.suite.git[:12]}" if e.suite.git else "")
        link = run_links.get(m.name)
        cells = [
            f"**{md_text(m.name)}**",
            md_code(m.spec),
            *(md_text(v) for v in (m.kind, format_params(m.params), m.dtype or DASH, m.tokenizer)),
            *(md_text(v) for v in (context_window_text(m), suite, e.started)),
            f"[json]({link})" if link else DASH,  # a path under runs/ made of file-safe characters (run_copy_name)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
