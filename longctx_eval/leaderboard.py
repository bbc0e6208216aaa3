"""`longctx-eval leaderboard`: merge run files into leaderboard.json, LEADERBOARD.md and heatmaps."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from longctx_eval.errors import ConfigError, RunFileError
from longctx_eval.io import atomic_write_bytes, atomic_write_text
from longctx_eval.leaderboard_render import render_markdown
from longctx_eval.plots import write_task_plots
from longctx_eval.results import RunResult, json_schema, read_run

LEADERBOARD_FILE = "leaderboard.json"
MARKDOWN_FILE = "LEADERBOARD.md"
RUNS_DIR = "runs"
PLOTS_DIR = "plots"


class Leaderboard(BaseModel):
    """leaderboard.json: the latest run of each model, sorted by model name."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: Literal[1] = 1
    updated: str
    entries: list[RunResult]


@dataclass
class LeaderboardReport:
    """What an update did: merged entry count, input runs read, skipped inputs, files written."""

    entries: int
    runs_read: int
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


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


def started_time(run: RunResult) -> datetime:
    """The run's `started` as an aware datetime (naive times are taken as UTC)."""
    try:
        when = datetime.fromisoformat(run.started)
    except ValueError as exc:
        raise RunFileError(f"field 'started': {run.started!r} is not an ISO-8601 time") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def merge_runs(runs: Iterable[RunResult]) -> list[RunResult]:
    """One run per model name, the latest by `started` (a later run in `runs` wins a tie); sorted by name."""
    latest: dict[str, RunResult] = {}
    for run in runs:
        held = latest.get(run.model.name)
        # A tie is the same run re-scored (`longctx-eval score`): the newer copy replaces the held one.
        if held is None or started_time(run) >= started_time(held):
            latest[run.model.name] = run
    return [latest[name] for name in sorted(latest)]


def run_copy_name(run: RunResult) -> str:
    """File name of a run's copy in the leaderboard's runs/ folder: '<model>__<started>.json'."""
    return f"{_slug(run.model.name)}__{_slug(run.started)}.json"


def load_leaderboard(path: Path) -> Leaderboard | None:
    """The existing leaderboard.json, None when absent; corrupt or invalid raises RunFileError naming it."""
    if not path.exists():
        return None
    try:
        board = Leaderboard.model_validate_json(path.read_bytes())
        for entry in board.entries:
            started_time(entry)
    except (OSError, ValidationError, RunFileError) as exc:
        raise RunFileError(
            f"{path}: existing leaderboard is unreadable ({_one_line(exc)}); it was left untouched. "
            "Fix or move it away, then rerun: its entries would otherwise be lost."
        ) from exc
    return board


def dump_leaderboard(board: Leaderboard) -> str:
    """leaderboard.json text: sorted keys and a trailing newline, so the same board gives the same bytes."""
    return json.dumps(board.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def update_leaderboard(inputs: Sequence[Path], out_dir: Path, *, now: datetime | None = None) -> LeaderboardReport:
    """Merge valid run files into `out_dir` (leaderboard.json, runs/, plots/, LEADERBOARD.md)."""
    out_dir = Path(out_dir)
    board_path = out_dir / LEADERBOARD_FILE
    # Checked before anything is written: a corrupt board must stop the update, not be replaced.
    existing = load_leaderboard(board_path)
    report = LeaderboardReport(entries=0, runs_read=0)
    runs: list[tuple[Path, RunResult]] = []
    for path in find_run_files(inputs):
        try:
            run = read_run(path)
            started_time(run)
        except RunFileError as exc:
            report.skipped.append((path, _reason(path, exc)))
            continue
        runs.append((path, run))
    report.runs_read = len(runs)

    for path, run in runs:
        copy = out_dir / RUNS_DIR / run_copy_name(run)
        if copy.resolve() != path.resolve():
            atomic_write_bytes(copy, path.read_bytes())
            report.written.append(copy)

    old_entries = list(existing.entries) if existing else []
    entries = merge_runs([*old_entries, *(run for _, run in runs)])
    unchanged = existing is not None and entries == merge_runs(old_entries)
    # Keeping the old time when nothing changed makes a rerun on the same inputs byte-identical.
    updated = existing.updated if unchanged and existing else _iso(now or datetime.now(UTC))
    board = Leaderboard(updated=updated, entries=entries)
    atomic_write_text(board_path, dump_leaderboard(board))
    report.written.append(board_path)
    report.entries = len(entries)

    plots = write_task_plots(entries, out_dir / PLOTS_DIR)
    report.written += plots.values()
    links = {task: path.relative_to(out_dir).as_posix() for task, path in plots.items()}
    markdown_path = out_dir / MARKDOWN_FILE
    run_links = {
        e.model.name: f"{RUNS_DIR}/{run_copy_name(e)}"
        for e in entries
        if (out_dir / RUNS_DIR / run_copy_name(e)).is_file()
    }
    atomic_write_text(markdown_path, render_markdown(entries, updated, links, run_links))
    report.written.append(markdown_path)
    return report


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
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        return f"field {where!r}: {first['msg']} ({exc.error_count()} error(s))"
    return " ".join(str(exc).split())


def _reason(path: Path, exc: RunFileError) -> str:
    """The error without the leading path, which the report already carries."""
    text = _one_line(exc)
    prefix = str(path)
    if text.startswith(prefix + ":"):
        text = text[len(prefix) + 1 :].lstrip()
        text = re.sub(r"^(\d+): ", r"line \1: ", text)
    return text
