"""RUN_DIR/scores/<task>.jsonl: one line per sample (id, status, metadata, raw and parsed answer, scores).

Written atomically at each scoring, so results can be sliced offline by any metadata (e.g. lexical overlap)
without rerunning the task's scorer. `score_line_problem` is the readers' check of one line (`compare`, the
leaderboard): a damaged line is named, never a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.run_folder.json_lines import short
from longctx_eval.run_folder.paths import inside
from longctx_eval.run_folder.prediction_lines import STATUSES
from longctx_eval.sample import Prediction, Sample, Score

SCORES_DIR = "scores"
SCORE_LINE = "one JSON object per line with id, status, metadata and scores (numbers or null), as `score` writes"
"""What a line of a scores file is, for the messages that refuse one."""


def scores_path(run_dir: Path, task: str) -> Path:
    """Where a task's per-sample scores live in its run folder."""
    return inside(run_dir, SCORES_DIR, f"{task}.jsonl")


def score_record(sample: Sample, prediction: Prediction, score: Score) -> dict[str, Any]:
    """One line's record. `answer` is the generated text (null for retrievers and structured outputs), a list
    of the parts' texts for multi-part samples; a non-finite score value is written as null."""
    answer: Any = [p.text for p in prediction.parts] if prediction.parts else prediction.text
    return {
        "id": sample.id,
        "status": prediction.status,
        "metadata": dict(sample.metadata),
        "answer": answer,
        "parsed": score.parsed,
        "scores": {k: (float(v) if math.isfinite(v) else None) for k, v in score.values.items()},
    }


def write_scores(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Write the records as JSON lines, atomically (readers see the old file or the new one)."""
    lines = [json.dumps(r, ensure_ascii=False, allow_nan=False, default=str) for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def score_line_problem(rec: dict[str, Any]) -> str | None:
    """Why a parsed scores-file line is not one `score_record` could have written, or None when it is."""
    sid = rec.get("id")
    if not isinstance(sid, str) or not sid:
        return f"field 'id': expected a non-empty string, got {short(sid)}"
    if rec.get("status") not in STATUSES:
        return f"field 'status': expected one of {', '.join(STATUSES)}, got {short(rec.get('status'))}"
    for name in ("metadata", "scores"):
        if rec.get(name) is not None and not isinstance(rec[name], dict):
            return f"field {name!r}: expected an object, got {short(rec[name])}"
    for key, value in (rec.get("scores") or {}).items():
        if value is not None and not _is_float(value):
            return f"field 'scores'.{key!r}: expected a number or null, got {short(value)}"
    tokens = (rec.get("metadata") or {}).get("target_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
        return f"field 'metadata'.'target_tokens': expected an integer, got {short(tokens)}"
    return None


def _is_float(x: Any) -> bool:
    """A JSON number that converts to a float (an integer of 400 digits does not)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        float(x)
    except OverflowError:
        return False
    return True
