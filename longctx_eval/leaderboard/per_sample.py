"""Per-sample scores published beside a leaderboard, so anyone can pair a run of theirs against ours.

`longctx-eval leaderboard RUNS --out BOARD --per-sample` copies each input run folder's `run.json` and, per
task it holds, `samples/<task>.jsonl` (ids, context sha256, question, gold, metadata; never the contexts) and
`scores/<task>.jsonl` (every score of every sample) gzip-compressed into `BOARD/per-sample/<run folder>/`.
That folder is a run folder `longctx-eval compare` reads (`paired_scores.py` opens `<file>.gz` where the plain
file is absent): `longctx-eval compare leaderboards/reference/per-sample/bm25 results/my-model`. The copies are
byte-stable (gzip header without a time stamp), written atomically, and never read through a link.

A copy accumulates as a run folder does: publishing a run of the same model identity that holds only some
tasks (one part of a suite run on another day or machine) keeps the copy's other tasks in its run.json, the new
run's header and tasks first; a run of another identity replaces the copy whole, its other tasks' files removed.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_bytes
from longctx_eval.errors import RunFileError
from longctx_eval.leaderboard.usable_names import name_problem
from longctx_eval.results import RunResult, read_run, run_text
from longctx_eval.run_folder.paths import inside

PER_SAMPLE_DIR = "per-sample"
KINDS = ("samples", "scores")


def run_folders(inputs: Sequence[Path]) -> list[Path]:
    """The run folders among `inputs`: each input that holds a run.json, else its sub-folders that do."""
    found: list[Path] = []
    for root in inputs:
        if not root.is_dir():
            continue
        if (root / "run.json").is_file():
            found.append(root)
            continue
        found.extend(
            sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (p / "run.json").is_file())
        )
    return found


def publish(inputs: Sequence[Path], board: Path) -> list[Path]:
    """Copy every input run folder's run file and per-sample files (compressed) under `board/per-sample`; the
    files written. An input that is itself the copy (the board's per-sample folder given as an input) is left as
    it is; a run file the board skipped (unreadable, or names it cannot use) is not published either."""
    written: list[Path] = []
    for folder in run_folders(inputs):
        run_json = inside(folder, "run.json")
        try:
            run = read_run(run_json)
        except RunFileError:  # the board's update lists it as skipped, with why
            continue
        if name_problem(run) is not None:
            continue
        dest = board / PER_SAMPLE_DIR / folder.name
        if dest.resolve() == folder.resolve():
            continue
        merged = _accumulated(run, dest)
        text = run_json.read_bytes() if merged is run else run_text(merged).encode()
        atomic_write_bytes(dest / "run.json", text)
        written.append(dest / "run.json")
        for task in sorted({t.name for t in run.tasks}):
            for kind in KINDS:
                source = inside(folder, kind, f"{task}.jsonl")
                if not source.is_file():
                    continue
                target = dest / kind / f"{task}.jsonl.gz"
                atomic_write_bytes(target, gzip.compress(source.read_bytes(), compresslevel=9, mtime=0))
                written.append(target)
    return written


def _accumulated(run: RunResult, dest: Path) -> RunResult:
    """`run` with the tasks an earlier copy of the same model identity holds and `run` lacks (by name and
    capability); `run` itself when there is no such copy. A copy of another identity loses its other tasks' files."""
    earlier_path = dest / "run.json"
    if not earlier_path.is_file() or earlier_path.is_symlink():
        return run
    try:
        earlier = read_run(earlier_path)
    except RunFileError:  # a torn or foreign copy: replaced by this run
        return run
    same = earlier.model.name == run.model.name and earlier.model.identity_sha256 == run.model.identity_sha256
    fresh = {(t.name, t.capability) for t in run.tasks}
    kept = [t for t in earlier.tasks if (t.name, t.capability) not in fresh]
    if not same:
        names = {t.name for t in run.tasks}
        for task in {t.name for t in kept} - names:
            for kind in KINDS:
                stale = dest / kind / f"{task}.jsonl.gz"
                if stale.is_file() and not stale.is_symlink():
                    stale.unlink()
        return run
    if not kept:
        return run
    return run.model_copy(update={"tasks": [*run.tasks, *kept]})
