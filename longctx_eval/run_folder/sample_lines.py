"""RUN_DIR/samples/<task>.jsonl: the gold side of scoring, one line per sample (the runner writes it).

`sample_line_problem` is the readers' check of one line (`score`, `compare`, the leaderboard's significance
test), so a damaged line is named with its file and line number, never a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.run_folder.json_lines import short
from longctx_eval.run_folder.paths import inside
from longctx_eval.run_folder.prediction_lines import KEY_PATTERN

SAMPLES_DIR = "samples"
SCORED_FIELDS = ("id", "keys", "question", "gold", "metadata")
"""The fields `score` needs of each line (a published copy read by `compare` may lack `keys`)."""
SAMPLE_LINE = "one JSON object per line with id, keys, question, gold, metadata and context_sha256, as `run` writes"
"""What a line of a samples file is, for the messages that refuse one."""


def samples_path(run_dir: Path, task: str) -> Path:
    """Where a task's samples file lives in its run folder (never through a link, never outside it)."""
    return inside(run_dir, SAMPLES_DIR, f"{task}.jsonl")


def sample_line_problem(rec: dict[str, Any], required: Sequence[str] = ("id",)) -> str | None:
    """Why a parsed samples-file line is unusable (a `required` field missing, a field of the wrong type), or None."""
    missing = [name for name in required if name not in rec]
    if missing:
        return f"record lacks field(s) {', '.join(missing)}"
    sid = rec.get("id")
    if not isinstance(sid, str) or not sid:
        return f"field 'id': expected a non-empty string, got {short(sid)}"
    keys = rec.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and KEY_PATTERN.fullmatch(k) for k in keys):
        return f"field 'keys': expected a list of prediction keys (64 hex digits), got {short(keys)}"
    if not isinstance(rec.get("metadata", {}), dict):
        return f"field 'metadata': expected an object, got {short(rec['metadata'])}"
    sha = rec.get("context_sha256")
    if sha is not None and not isinstance(sha, str):
        return f"field 'context_sha256': expected a string, got {short(sha)}"
    return None
