"""Views of merged leaderboard entries: the per-task grids shared with the plots, and LEADERBOARD.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from longctx_eval.results import MetricResult, RunResult, TaskResult

DASH = "—"


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
    """The task's headline metric: the first metric listed by the first entry (by name) that ran it."""
    # One metric per table: taking it from a single entry keeps columns comparable across models.
    for entry in sorted(entries, key=lambda e: e.model.name):
        result = task_of(entry, task)
        if result is not None and result.results:
            return result.results[0].metric
    return None


def lookup(task: TaskResult, metric: str, length: int | None, depth: float | None) -> MetricResult | None:
    """The result row for one stratum (None = pooled), or None when the run did not report it."""
    return next(
        (r for r in task.results if r.metric == metric and r.length == length and r.depth == depth),
        None,
    )


def has_depth(task: str, entries: Sequence[RunResult], metric: str) -> bool:
    """Whether any entry reports `metric` for `task` per depth (a length x depth grid)."""
    return any(r.depth is not None for r in _rows(task, entries, metric))


def lengths(task: str, entries: Sequence[RunResult], metric: str, *, with_depth: bool) -> list[int]:
    """Sorted context lengths reported for the pooled-depth rows, or for the per-depth rows."""
    return sorted(
        {r.length for r in _rows(task, entries, metric) if r.length is not None and (r.depth is not None) == with_depth}
    )


def depths(task: str, entries: Sequence[RunResult], metric: str) -> list[float]:
    """Sorted needle depths reported for `task`."""
    return sorted({r.depth for r in _rows(task, entries, metric) if r.depth is not None})


def ranked(task: str, entries: Sequence[RunResult], metric: str) -> list[RunResult]:
    """Entries that ran `task`, best pooled ('all') value first; missing values last, ties by name."""

    def key(entry: RunResult) -> tuple[bool, float, str]:
        result = task_of(entry, task)
        pooled = lookup(result, metric, None, None) if result else None
        missing = pooled is None or math.isnan(pooled.value)
        return (missing, 0.0 if missing else -pooled.value, entry.model.name)

    return sorted((e for e in entries if task_of(e, task) is not None), key=key)


def length_label(length: int | None) -> str:
    """'4K' for multiples of 1024 tokens, else the plain number; None is 'all'."""
    if length is None:
        return "all"
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def format_number(value: float, unit_interval: bool) -> str:
    """Two decimals for 0-1 metrics; otherwise whole numbers from 100 up, three significant digits below."""
    if unit_interval:
        return f"{value:.2f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_cell(row: MetricResult | None) -> str:
    """'0.80 [0.60, 0.95] n=20', or a dash when the stratum was not reported."""
    if row is None:
        return DASH
    unit = all(0.0 <= v <= 1.0 for v in (row.value, *row.ci95))
    lo, hi = (format_number(v, unit) for v in row.ci95)
    return f"{format_number(row.value, unit)} [{lo}, {hi}] n={row.n}"


def format_params(params: int | None) -> str:
    """134515008 -> '134.5M'."""
    if params is None:
        return DASH
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.1f}{suffix}"
    return str(params)


def render_markdown(
    entries: Sequence[RunResult],
    updated: str,
    plots: Mapping[str, str],
    run_links: Mapping[str, str] | None = None,
) -> str:
    """LEADERBOARD.md: per task a model x length table, then skipped tasks and model metadata.

    `plots` maps task -> relative PNG path; `run_links` maps model name -> relative run-file path.
    """
    tasks = task_names(entries)
    lines = [
        "# longctx-eval leaderboard",
        "",
        f"Updated {updated} · {len(entries)} model(s) · {len(tasks)} task(s). Each cell is the task's "
        "primary metric at that context length (tokens), pooled over depths, with its 95% bootstrap "
        "interval and sample count; **all** pools every length. Rows are sorted by **all**, best first.",
    ]
    for task in tasks:
        lines += ["", *_task_section(task, entries, plots.get(task))]
    lines += ["", *_skipped_section(entries), "", *_models_section(entries, run_links or {})]
    return "\n".join(lines) + "\n"


def _rows(task: str, entries: Sequence[RunResult], metric: str) -> list[MetricResult]:
    return [r for e in entries if (t := task_of(e, task)) is not None for r in t.results if r.metric == metric]


def _escape(text: str) -> str:
    # Pipes and newlines would break a table row.
    return " ".join(text.split()).replace("|", "\\|")


def _task_section(task: str, entries: Sequence[RunResult], plot: str | None) -> list[str]:
    metric = primary_metric(task, entries)
    if metric is None:
        return [f"## {_escape(task)}", "", "No results reported."]
    versions = sorted({t.version for e in entries if (t := task_of(e, task)) is not None})
    version = f" (v{versions[0]})" if len(versions) == 1 else ""
    cols: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    lines = [
        f"## {_escape(task)}{version}",
        "",
        f"Primary metric: `{metric}`.",
        "",
    ]
    head = ["model", *([] if version else ["version"]), *(length_label(c) for c in cols)]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    notes = []
    for entry in ranked(task, entries, metric):
        result = task_of(entry, task)
        assert result is not None  # ranked() only yields entries that ran the task
        cells = [f"**{_escape(entry.model.name)}**", *([] if version else [_escape(result.version)])]
        cells += [format_cell(lookup(result, metric, c, None)) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
        if result.over_length or result.errors:
            notes.append(
                f"{_escape(entry.model.name)} {result.over_length} over-length, {result.errors} failed "
                f"of {result.n_samples}"
            )
    if notes:
        lines += ["", "Over-length and failed samples: " + "; ".join(notes) + "."]
    if plot:
        lines += ["", f"![{_escape(task)} heatmap]({plot})"]
    return lines


def _skipped_section(entries: Sequence[RunResult]) -> list[str]:
    rows = sorted((e.model.name, s.task, s.reason) for e in entries for s in e.skipped)
    if not rows:
        return ["## Skipped", "", "No task was skipped."]
    lines = ["## Skipped", "", "| model | task | reason |", "|---|---|---|"]
    lines += [f"| {_escape(m)} | {_escape(t)} | {_escape(r)} |" for m, t, r in rows]
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
