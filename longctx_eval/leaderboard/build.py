"""`longctx-eval leaderboard`: merge run files into leaderboard.json, LEADERBOARD.md, heatmaps and line plots."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text
from longctx_eval.errors import ConfigError, RunFileError
from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.drift_plot import write_drift_plots
from longctx_eval.leaderboard.heatmaps import remove_stale_plots, write_task_plots
from longctx_eval.leaderboard.line_plots import write_line_plots
from longctx_eval.leaderboard.markdown import render_markdown
from longctx_eval.leaderboard.merge import MergeNote, check_times, merge_board, parse_time
from longctx_eval.leaderboard.merge import merge_runs as merge_runs  # re-exported
from longctx_eval.leaderboard.usable_names import name_problem
from longctx_eval.results import RunResult, json_schema, non_finite_path, one_line, read_run

LEADERBOARD_FILE = "leaderboard.json"
MARKDOWN_FILE = "LEADERBOARD.md"
RUNS_DIR = "runs"
PLOTS_DIR = "plots"


class Leaderboard(BaseModel):
    """leaderboard.json: per model name the merged latest results, sorted by name, and what they leave out."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    schema_version: Literal[1] = 1
    updated: str
    entries: list[RunResult]
    notes: list[MergeNote] = Field(default_factory=list, description="results not shown, and why")


@dataclass
class LeaderboardReport:
    """What an update did: merged entry count, runs read, skipped (invalid) inputs, files written and removed.

    `skipped` non-empty means some run file was corrupt, schema-invalid or named what the board cannot name its
    files after (`usable_names`): the CLI exits 2 after rendering.
    """

    entries: int
    runs_read: int
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    notes: list[MergeNote] = field(default_factory=list)
    unfinished: list[tuple[Path, str]] = field(default_factory=list)
    """Run folders among the inputs that hold no run.json (nothing to merge), with why; shown, not an error."""

    @property
    def exit_code(self) -> int:
        """0 when every input was valid, 2 when any run file was skipped as corrupt or invalid."""
        return 2 if self.skipped else 0


def schema_text() -> str:
    """The committed leaderboards/schema.json content, generated from the typed run records."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path) -> None:
    """Write the run-file JSON Schema to `path` atomically."""
    atomic_write_text(path, schema_text())


def find_run_files(inputs: Iterable[Path]) -> list[Path]:
    """Run files among `inputs`: files as given; folders searched for run.json and runs/*.json."""
    found: list[Path] = []
    for item in map(Path, inputs):
        if item.is_file():
            found.append(item)
        elif item.is_dir():
            found += _search(item)
        else:
            raise ConfigError(f"leaderboard input {item} does not exist; expected a run file or a folder")
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return sorted(unique.values())


def unfinished_run_folders(inputs: Iterable[Path]) -> list[tuple[Path, str]]:
    """Run folders among `inputs` without a run.json, each with why: the model's load failure (logs/load.log) or
    what its manifest says."""
    found = []
    for item in map(Path, inputs):
        if not item.is_dir():
            continue
        for root, dirs, files in os.walk(item):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != RUNS_DIR)
            if "run.json" in files:
                continue
            load_log = Path(root) / "logs" / "load.log"
            if load_log.is_file():
                found.append((Path(root), _load_failure_reason(load_log)))
            elif "manifest.json" in files:
                found.append((Path(root), _unfinished_reason(Path(root) / "manifest.json")))
    return sorted(found)


def _load_failure_reason(log: Path) -> str:
    """What RUN_DIR/logs/load.log (written by the runner when a model cannot load) says, on one line."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    reason = " ".join(" ".join(lines[1:]).split())[:300] or "no reason recorded"
    return f"the model could not load, nothing ran: {reason}"


def _unfinished_reason(manifest: Path) -> str:
    try:
        tasks = json.loads(manifest.read_bytes()).get("tasks", {})
        states = ", ".join(f"{name} ({entry.get('status', '?')})" for name, entry in sorted(tasks.items()))
    except (OSError, ValueError, AttributeError):
        states = "its manifest.json is unreadable"
    return (
        f"run folder without run.json (tasks: {states or 'none'}); nothing to merge: "
        f"run `longctx-eval score {manifest.parent}` or rerun its `run` command"
    )


def started_time(run: RunResult) -> datetime:
    """The run's `started` as an aware datetime (naive times are taken as UTC)."""
    return parse_time(run.started)


def run_copy_name(run: RunResult) -> str:
    """File name of a run's copy in the leaderboard's runs/ folder: '<model>__<started>.json'."""
    return f"{_slug(run.model.name)}__{_slug(run.started)}.json"


def load_leaderboard(path: Path) -> Leaderboard | None:
    """The existing leaderboard.json, None when absent; corrupt or invalid raises RunFileError naming it."""
    if not path.exists():
        return None
    try:
        text = path.read_bytes()
        bad = non_finite_path(json.loads(text))
        if bad is not None:
            raise RunFileError(f"field {bad!r}: NaN or Infinity")
        board = Leaderboard.model_validate_json(text, strict=True)
        for entry in board.entries:
            check_times(entry)
    except (OSError, ValueError, RunFileError) as exc:  # ValueError covers JSON and pydantic errors
        raise RunFileError(
            f"{path}: existing leaderboard is unreadable ({_one_line(exc)}); it was left untouched. "
            "Fix or move it away, then rerun: its entries would otherwise be lost."
        ) from exc
    return board


def dump_leaderboard(board: Leaderboard) -> str:
    """leaderboard.json text: sorted keys, a trailing newline, never NaN; the same board gives the same bytes."""
    try:
        return json.dumps(board.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as exc:
        raise RunFileError(f"leaderboard holds a non-finite number (NaN or Infinity); not written: {exc}") from exc


def update_leaderboard(
    inputs: Sequence[Path],
    out_dir: Path,
    *,
    now: datetime | None = None,
    site: Path | None = None,
    min_n: int = DEFAULT_MIN_N,
) -> LeaderboardReport:
    """Merge valid run files into `out_dir` (leaderboard.json, runs/, plots/, LEADERBOARD.md); with `site`,
    also write the static website there (`leaderboard/site.py`). Cells with fewer than `min_n` samples are
    marked low n and never ranked on.

    The merge reads the existing board's entries, every run copy already in `out_dir`/runs and the inputs,
    so results hidden by the partial-run rule keep their note on later updates.
    """
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise ConfigError(f"--min-n {min_n!r}: expected a whole number of samples >= 1, e.g. 30")
    out_dir = Path(out_dir)
    board_path = out_dir / LEADERBOARD_FILE
    # Checked before anything is written: a corrupt board must stop the update, not be replaced.
    existing = load_leaderboard(board_path)
    input_files = find_run_files(inputs)
    report = LeaderboardReport(entries=0, runs_read=0)
    runs = _read_valid(input_files, report)
    report.runs_read = len(runs)
    report.unfinished += unfinished_run_folders(inputs)

    for path, run in runs:
        copy = out_dir / RUNS_DIR / run_copy_name(run)
        if copy.resolve() != path.resolve():
            atomic_write_bytes(copy, path.read_bytes())
            report.written.append(copy)

    seen = {p.resolve() for p in input_files}
    history = [
        p
        for p in sorted((out_dir / RUNS_DIR).glob("*.json"))
        if not p.name.startswith(".") and p.is_file() and p.resolve() not in seen
    ]
    copies = _read_valid(history, report)
    old_entries = list(existing.entries) if existing else []
    pool = [*old_entries, *(run for _, run in copies), *(run for _, run in runs)]
    labels = [
        *(LEADERBOARD_FILE for _ in old_entries),
        *(f"{RUNS_DIR}/{run_copy_name(run)}" for _, run in [*copies, *runs]),
    ]
    merged = merge_board(pool, labels)
    entries, notes = merged.entries, merged.notes
    unchanged = existing is not None and entries == list(existing.entries) and notes == list(existing.notes)
    # Keeping the old time when nothing changed makes a rerun on the same inputs byte-identical.
    updated = existing.updated if unchanged and existing else _iso(now or datetime.now(UTC))
    board = Leaderboard(updated=updated, entries=entries, notes=notes)
    atomic_write_text(board_path, dump_leaderboard(board))
    report.written.append(board_path)
    report.entries = len(entries)
    report.notes = notes

    plots = write_task_plots(entries, out_dir / PLOTS_DIR, min_n)
    lines = write_line_plots(entries, out_dir / PLOTS_DIR, min_n)
    for task, drift in write_drift_plots(entries, out_dir / PLOTS_DIR).items():  # semantic drift per batch
        lines.setdefault(task, []).extend(drift)
    report.written += [*plots.values(), *(p for paths in lines.values() for p in paths)]
    links = {
        task: [
            p.relative_to(out_dir).as_posix() for p in [*([plots[task]] if task in plots else []), *lines.get(task, [])]
        ]
        for task in sorted({*plots, *lines})
    }
    markdown_path = out_dir / MARKDOWN_FILE
    run_links = {
        e.model.name: f"{RUNS_DIR}/{run_copy_name(e)}"
        for e in entries
        if (out_dir / RUNS_DIR / run_copy_name(e)).is_file()
    }
    unread = [(str(p), why) for p, why in [*report.skipped, *report.unfinished]]
    samples = _samples_of(entries, runs)
    atomic_write_text(markdown_path, render_markdown(entries, updated, links, run_links, notes, unread, min_n, samples))
    report.written.append(markdown_path)
    if site is not None:
        from longctx_eval.leaderboard.site import SiteInput, write_site

        shown = SiteInput(
            samples=samples,
            entries=entries,
            updated=updated,
            plots={task: [out_dir / rel for rel in paths] for task, paths in links.items()},
            run_files={name: out_dir / rel for name, rel in run_links.items()},
            notes=notes,
            unread=unread,
            min_n=min_n,
        )
        report.written += write_site(shown, site)
    # Only after the new plots and the page that links them are in place.
    keep = {*plots.values(), *(p for paths in lines.values() for p in paths)}
    report.removed = remove_stale_plots(out_dir / PLOTS_DIR, keep, _task_keys(pool))
    return report


def _samples_of(entries: Sequence[RunResult], runs: Sequence[tuple[Path, RunResult]]) -> dict[str, dict[str, dict]]:
    """Per model and board the per-sample scores of the shown result, from an input run folder (RUN/run.json
    beside scores/) whose run holds that very result; nothing for results only in run copies."""
    from longctx_eval.leaderboard.grid import task_names, task_of
    from longctx_eval.scoring.paired_scores import sample_scores

    out: dict[str, dict[str, dict]] = {}
    boards = task_names(entries)
    for entry in entries:
        for path, run in runs:
            if path.name != "run.json" or run.model.name != entry.model.name:
                continue
            for board in boards:
                shown = task_of(entry, board)
                if shown is not None and any(
                    t.model_dump(exclude={"started"}) == shown.model_dump(exclude={"started"}) for t in run.tasks
                ):
                    found = sample_scores(path.parent, shown.name)
                    if found:
                        out.setdefault(entry.model.name, {})[board] = found
    return out


def _read_valid(paths: Iterable[Path], report: LeaderboardReport) -> list[tuple[Path, RunResult]]:
    """The run files that read, validate and have names the board can use; the others go to `report.skipped`."""
    runs = []
    for path in paths:
        try:
            run = read_run(path)
            check_times(run)
        except RunFileError as exc:
            report.skipped.append((path, _reason(path, exc)))
            continue
        problem = name_problem(run)
        if problem is not None:
            report.skipped.append((path, problem))
            continue
        shards = sorted({t.shard for t in run.tasks if t.shard is not None})
        if shards:  # a part of a run (`run --shard`): listed, never ranked as the model's results
            report.unfinished.append(
                (path, f"shard {shards[0]} of a run: a part, not ranked; join its shards with longctx-eval merge")
            )
            continue
        runs.append((path, run))
    return runs


def _task_keys(runs: Iterable[RunResult]) -> set[tuple[str, str]]:
    return {(t.name, t.capability) for run in runs for t in run.tasks}


def _search(folder: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(folder):
        # Hidden folders (.git, .venv, caches) never hold run files worth merging.
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        in_runs = Path(root).name == RUNS_DIR
        for name in sorted(files):
            if name == "run.json" or (in_runs and name.endswith(".json") and not name.startswith(".")):
                found.append(Path(root) / name)
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "unnamed"


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return one_line(exc)
    return " ".join(str(exc).split())


def _reason(path: Path, exc: RunFileError) -> str:
    """The error without the leading path, which the report already carries."""
    text = _one_line(exc)
    prefix = str(path)
    if text.startswith(prefix + ":"):
        text = text[len(prefix) + 1 :].lstrip()
        text = re.sub(r"^(\d+): ", r"line \1: ", text)
    return text
