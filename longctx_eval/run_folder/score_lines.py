"""RUN_DIR/scores/<task>.jsonl: one line per sample (id, status, metadata, raw and parsed answer, scores).

Written atomically at each scoring, so results can be sliced offline by any metadata (e.g. lexical overlap)
without rerunning the task's scorer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.run_folder.paths import inside
from longctx_eval.sample import Prediction, Sample, Score

SCORES_DIR = "scores"


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
