"""Per-sample scores published beside a leaderboard, so anyone can pair a run of theirs against ours.

`longctx-eval leaderboard RUNS --out BOARD --per-sample` copies each input run folder's `run.json` and, per
task it holds, `samples/<task>.jsonl` (ids, context sha256, question, gold, metadata; never the contexts) and
`scores/<task>.jsonl` (every score of every sample) gzip-compressed into `BOARD/per-sample/<run folder>/`.
That folder is a run folder `longctx-eval compare` reads (`paired_scores.py` opens `<file>.gz` where the plain
file is absent): `longctx-eval compare leaderboards/reference/per-sample/bm25 results/my-model`. The copies are
byte-stable (gzip header without a time stamp), written atomically, and never read through a link.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_bytes
from longctx_eval.results import read_run
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
    files written."""
    written: list[Path] = []
    for folder in run_folders(inputs):
        run_json = inside(folder, "run.json")
        run = read_run(run_json)
        dest = board / PER_SAMPLE_DIR / folder.name
        atomic_write_bytes(dest / "run.json", run_json.read_bytes())
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
