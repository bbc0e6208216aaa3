"""One line of RUN_DIR/predictions.jsonl: its key, its record form, and the checks that tell a usable line.

A record carries a `check` (a hash of the rest of the record), so a line altered after it was written (a
flipped digit) is told from a good one. A line without one is usable only in a file that predates the field
(no line of it carries a check); in any other file a missing check is an alteration like a wrong one.
`parse_line` and `scan` read raw bytes, so a line torn inside a multi-byte character is named, never a crash.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, get_args

from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.run_folder.json_lines import json_line, short
from longctx_eval.sample import Hit, Prediction, Request, Status

KEY_PATTERN = re.compile(r"[0-9a-f]{64}")
STATUSES: tuple[str, ...] = get_args(Status)
CHECK_FIELD = "check"
REQUIRED_FIELDS = (
    "key",
    "task",
    "sample_id",
    "text",
    "hits",
    "status",
    "prompt_tokens",
    "completion_tokens",
    "seconds",
    "error",
    "data",
)


def prediction_key(task: str, version: str, sample_id: str, request: Request, identity: Mapping[str, Any]) -> str:
    """Hash of (task, version, sample id, exact prompt and context, model identity, settings)."""
    return sha256_json(
        {
            "task": task,
            "version": version,
            "sample": sample_id,
            "prompt": sha256_text(request.prompt),
            "context": sha256_text(request.context),
            "query": request.query,
            "max_new_tokens": request.max_new_tokens,
            "retrieval": asdict(request.retrieval),
            "extra": sha256_json(dict(request.extra)),
            "model": dict(identity),
        }
    )


def prediction_to_record(key: str, task: str, sample_id: str, pred: Prediction, extra: Mapping[str, Any]) -> dict:
    """The JSON line written for one prediction."""
    rec = {"key": key, "task": task, "sample_id": sample_id, **asdict(pred), **extra}
    rec["hits"] = [[h.char_start, h.char_end, h.score] for h in pred.hits]
    rec.pop("parts")  # each part is a record of its own
    return rec


def record_to_prediction(rec: Mapping[str, Any]) -> Prediction:
    """Inverse of `prediction_to_record` for the prediction fields."""
    return Prediction(
        text=rec.get("text"),
        hits=tuple(Hit(int(s), int(e), float(sc)) for s, e, sc in rec.get("hits", [])),
        status=rec.get("status", "ok"),
        prompt_tokens=rec.get("prompt_tokens"),
        completion_tokens=rec.get("completion_tokens"),
        seconds=float(rec.get("seconds", 0.0)),
        error=rec.get("error"),
        data=rec.get("data"),
    )


def combine_parts(parts: list[Prediction]) -> Prediction:
    """One prediction for a sample answered through several requests; its status is the worst part's."""
    if len(parts) == 1:
        return parts[0]
    status: Status = next((p.status for p in parts if p.status != "ok"), "ok")
    return Prediction(
        status=status,
        prompt_tokens=sum(p.prompt_tokens or 0 for p in parts),
        completion_tokens=sum(p.completion_tokens or 0 for p in parts),
        seconds=sum(p.seconds for p in parts),
        error=next((p.error for p in parts if p.error), None),
        parts=tuple(parts),
    )


def quarantine_path_of(path: Path) -> Path:
    """Where bad lines of `path` are moved: predictions.jsonl -> predictions.quarantine.jsonl."""
    return path.with_name(f"{path.stem}.quarantine{path.suffix}")


def record_check(rec: Mapping[str, Any]) -> str:
    """The `check` of a record: 16 hex digits of the sha256 of its canonical JSON without the check itself."""
    return sha256_json({k: v for k, v in rec.items() if k != CHECK_FIELD})[:16]


def record_problem(rec: Any) -> str | None:
    """Why a parsed line is not a usable prediction record, or None when it is."""
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    if missing:
        return f"record lacks field(s) {', '.join(missing)}"
    key = rec["key"]
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        return f"field 'key': expected 64 lowercase hex digits (sha256), got {short(key)}"
    for name in ("task", "sample_id"):
        if not isinstance(rec[name], str) or not rec[name]:
            return f"field {name!r}: expected a non-empty string, got {short(rec[name])}"
    for name in ("text", "error"):
        if rec[name] is not None and not isinstance(rec[name], str):
            return f"field {name!r}: expected a string or null, got {short(rec[name])}"
    if rec["status"] not in STATUSES:
        return f"field 'status': expected one of {', '.join(STATUSES)}, got {short(rec['status'])}"
    for name in ("prompt_tokens", "completion_tokens"):
        if rec[name] is not None and not _is_count(rec[name]):
            return f"field {name!r}: expected a non-negative integer or null, got {short(rec[name])}"
    if not _is_number(rec["seconds"]) or rec["seconds"] < 0:
        return f"field 'seconds': expected a non-negative number, got {short(rec['seconds'])}"
    if rec["data"] is not None and not isinstance(rec["data"], dict):
        return f"field 'data': expected an object or null, got {short(rec['data'])}"
    if "part" in rec and not _is_count(rec["part"]):
        return f"field 'part': expected a non-negative integer, got {short(rec['part'])}"
    hits = rec["hits"]
    if not isinstance(hits, list):
        return f"field 'hits': expected a list of [start, end, score], got {short(hits)}"
    for n, hit in enumerate(hits):
        ok = (
            isinstance(hit, list)
            and len(hit) == 3
            and _is_count(hit[0])
            and _is_count(hit[1])
            and hit[0] <= hit[1]
            and _is_number(hit[2])
        )
        if not ok:
            return f"field 'hits'[{n}]: expected [start, end, score] with 0 <= start <= end, got {short(hit)}"
    if CHECK_FIELD in rec and rec[CHECK_FIELD] != record_check(rec):
        return "check does not match the record (it was altered after it was written)"
    return None


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """One line of predictions.jsonl as (record, None), or (None, why it is unusable)."""
    rec, why = json_line(raw)
    if why is not None:
        return None, why
    problem = record_problem(rec)
    return (None, problem) if problem else (rec, None)


@dataclass(frozen=True)
class BadLine:
    """A line of predictions.jsonl that cannot be used: its 1-based number, exact bytes and the reason."""

    lineno: int
    raw: bytes
    reason: str
    sample_id: str | None = None


MISSING_CHECK = (
    f"lacks its {CHECK_FIELD!r} field while the file's other lines carry one (removed after it was written?)"
)


def scan(data: bytes) -> tuple[list[tuple[bytes, dict]], list[BadLine]]:
    """Split the bytes of a predictions file into usable (raw line, record) pairs and bad lines.

    A record without a `check` is bad unless no record of the file has one (see `predates_checks`).
    """
    parsed: list[tuple[int, bytes, dict]] = []
    bad: list[BadLine] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        rec, reason = parse_line(raw)
        if rec is not None:
            parsed.append((lineno, raw, rec))
        else:
            bad.append(BadLine(lineno, raw, reason or "unusable", _sample_id_of(raw)))
    checked = any(CHECK_FIELD in rec for _, _, rec in parsed)
    good: list[tuple[bytes, dict]] = []
    for lineno, raw, rec in parsed:
        if checked and CHECK_FIELD not in rec:
            bad.append(BadLine(lineno, raw, MISSING_CHECK, rec["sample_id"]))
        else:
            good.append((raw, rec))
    bad.sort(key=lambda b: b.lineno)
    return good, bad


def predates_checks(good: list[tuple[bytes, dict]]) -> bool:
    """Whether the usable records of a file were all written before records carried a `check`."""
    return bool(good) and all(CHECK_FIELD not in rec for _, rec in good)


_SAMPLE_ID = re.compile(rb'"sample_id":\s*("(?:[^"\\]|\\.)*")')


def _sample_id_of(raw: bytes) -> str | None:
    """The sample id of a bad line where it can still be read (it comes early in every record)."""
    match = _SAMPLE_ID.search(raw)
    if match is None:
        return None
    try:
        sid = json.loads(match.group(1).decode("utf-8"))
    except ValueError:
        return None
    return sid if isinstance(sid, str) and sid else None
