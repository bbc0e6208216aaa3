"""Whether the leaderboard can name its files after a run file's names; a run file whose names it cannot use is
skipped and listed under "Not read" with why, as a corrupt one is, so one hostile file never stops the board.

The board names files after the model (runs/MODEL__STARTED.json, the site's model-MODEL.html and
compare-MODEL--OTHER.html) and after each task board (plots/TASK-CAPABILITY.png, plots/TASK.CURVE.png,
plots/TASK.by-SLICE_KEY.png, task-TASK.html), and reads RUN_FOLDER/scores/TASK.jsonl. A file name holds at most
255 bytes (the atomic writer's temp name adds 14), so each name gets a share of that.
"""

from __future__ import annotations

from longctx_eval.results import RunResult

MODEL_NAME_BYTES = 100
"""The longest model name (UTF-8 bytes): a comparison page's file name holds two."""
PART_NAME_BYTES = 64
"""The longest task name, capability, curve name or slice key (UTF-8 bytes): a plot's file name holds three."""
NOT_IN_FILE_NAMES = ("/", "\\", "\0")
"""Characters a task name cannot hold: it names a file inside a run folder (`run_folder.paths.inside`)."""


def name_problem(run: RunResult) -> str | None:
    """Why the board cannot name its files after `run`'s names (one line), None when it can."""
    model = run.model.name
    if len(model.encode()) > MODEL_NAME_BYTES:
        return (
            f"model name {_short(model)} is {len(model.encode()):,} bytes long; the board names files after it, "
            f"so it takes at most {MODEL_NAME_BYTES}"
        )
    for task in run.tasks:
        if any(c in task.name for c in NOT_IN_FILE_NAMES):
            return f"task name {_short(task.name)} holds '/', '\\' or NUL: it cannot name a file in a run folder"
        parts = [("task name", task.name), ("capability", task.capability)]
        parts += [("curve name", c.name) for c in task.curves]
        parts += [("slice key", k) for row in task.slices if row.slice for k in row.slice]
        for what, name in parts:
            if len(name.encode()) > PART_NAME_BYTES:
                return (
                    f"{what} {_short(name)} is {len(name.encode()):,} bytes long; the board names files after it, "
                    f"so it takes at most {PART_NAME_BYTES}"
                )
    return None


def _short(name: str, keep: int = 40) -> str:
    """The name quoted, cut to its first `keep` characters (a 5,000-character name stays one short line)."""
    return repr(name if len(name) <= keep else name[:keep] + "…")
