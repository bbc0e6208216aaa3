"""RUN_DIR/predictions.jsonl: append-only, one flushed line per finished sample, keyed for resumption.

The file is read as bytes. A line torn by a kill (even inside a multi-byte character), garbage, or a record
that parses but breaks the record form is quarantined once: moved with its exact bytes, line number and reason
to predictions.quarantine.jsonl, and the sample is redone. Each line carries a `check` (a hash of the rest of
the record), so a record altered after it was written (a flipped digit) is caught too.
"""

from __future__ import annotations

import base64
import fcntl
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from longctx_eval.errors import OutputError, RunFileError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.io import atomic_write_bytes, write_failure
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
    status = next((p.status for p in parts if p.status != "ok"), "ok")
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
        return f"field 'key': expected 64 lowercase hex digits (sha256), got {_short(key)}"
    for name in ("task", "sample_id"):
        if not isinstance(rec[name], str) or not rec[name]:
            return f"field {name!r}: expected a non-empty string, got {_short(rec[name])}"
    for name in ("text", "error"):
        if rec[name] is not None and not isinstance(rec[name], str):
            return f"field {name!r}: expected a string or null, got {_short(rec[name])}"
    if rec["status"] not in STATUSES:
        return f"field 'status': expected one of {', '.join(STATUSES)}, got {_short(rec['status'])}"
    for name in ("prompt_tokens", "completion_tokens"):
        if rec[name] is not None and not _is_count(rec[name]):
            return f"field {name!r}: expected a non-negative integer or null, got {_short(rec[name])}"
    if not _is_number(rec["seconds"]) or rec["seconds"] < 0:
        return f"field 'seconds': expected a non-negative number, got {_short(rec['seconds'])}"
    if rec["data"] is not None and not isinstance(rec["data"], dict):
        return f"field 'data': expected an object or null, got {_short(rec['data'])}"
    if "part" in rec and not _is_count(rec["part"]):
        return f"field 'part': expected a non-negative integer, got {_short(rec['part'])}"
    hits = rec["hits"]
    if not isinstance(hits, list):
        return f"field 'hits': expected a list of [start, end, score], got {_short(hits)}"
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
            return f"field 'hits'[{n}]: expected [start, end, score] with 0 <= start <= end, got {_short(hit)}"
    if CHECK_FIELD in rec and rec[CHECK_FIELD] != record_check(rec):
        return "check does not match the record (it was altered after it was written)"
    return None


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _short(x: Any) -> str:
    text = json.dumps(x, ensure_ascii=False, default=repr)
    return text if len(text) <= 40 else text[:37] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """One line of predictions.jsonl as (record, None), or (None, why it is unusable)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 at byte {exc.start} (torn line)"
    try:
        rec = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            msg = exc.msg.removesuffix(" starting at")
            return None, f"not valid JSON at column {exc.colno}: {msg[:1].lower()}{msg[1:]} (torn line?)"
        return None, f"not valid JSON: {exc}"
    problem = record_problem(rec)
    return (None, problem) if problem else (rec, None)


@dataclass(frozen=True)
class BadLine:
    """A line of predictions.jsonl that cannot be used: its 1-based number, exact bytes and the reason."""

    lineno: int
    raw: bytes
    reason: str
    sample_id: str | None = None


def scan(data: bytes) -> tuple[list[tuple[bytes, dict]], list[BadLine]]:
    """Split the bytes of a predictions file into usable (raw line, record) pairs and bad lines."""
    good: list[tuple[bytes, dict]] = []
    bad: list[BadLine] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        rec, reason = parse_line(raw)
        if rec is not None:
            good.append((raw, rec))
        else:
            bad.append(BadLine(lineno, raw, reason or "unusable", _sample_id_of(raw)))
    return good, bad


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


@contextmanager
def _locked(path: Path, flags: int, lock: int) -> Iterator[int]:
    """`path` opened with `flags` under flock `lock`, re-opened if it was replaced while we waited."""
    while True:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, lock)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced (quarantine rewrite) while we waited: lock the new file instead
    try:
        yield fd
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class PredictionStore:
    """Reads what is done, then appends new lines with fsync so a kill loses at most the line in flight.

    Opening quarantines unusable lines once (see the module doc) and lists them in `warnings`; with
    `repair=False` (a reader that must not write) they are skipped and left in place.
    """

    def __init__(self, path: Path, *, repair: bool = True) -> None:
        self.path = path
        self.quarantine_path = quarantine_path_of(path)
        self.records: dict[str, dict] = {}
        self.warnings: list[str] = []
        """One line per unusable line found on opening (empty when the file was clean)."""
        self.torn_lines: list[int] = []
        """Line numbers of the unusable lines (moved to the quarantine unless `repair=False`)."""
        if path.exists():
            self._load(repair)

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def _load(self, repair: bool) -> None:
        try:
            with _locked(self.path, os.O_RDONLY, fcntl.LOCK_EX if repair else fcntl.LOCK_SH) as fd:
                good, bad = scan(_read_all(fd))
                move_error = None
                if bad and repair:
                    move_error = self._quarantine(good, bad)
        except OSError as exc:
            raise RunFileError(f"{self.path}: cannot be read: {exc.strerror}") from exc
        for _, rec in good:
            self.records[rec["key"]] = rec
        for line in bad:
            self.torn_lines.append(line.lineno)
            redo = f"sample {line.sample_id!r}" if line.sample_id else "that sample"
            where = f"{self.path}:{line.lineno}: {line.reason}"
            if not repair:
                self.warnings.append(f"{where}; skipped and left in place (read-only open), {redo} counts as missing")
            elif move_error is not None:
                self.warnings.append(
                    f"{where}; skipped and left in place (cannot write {self.quarantine_path.name}: {move_error})"
                )
            else:
                self.warnings.append(f"{where}, moved to {self.quarantine_path.name}; {redo} will be redone")

    def _quarantine(self, good: list[tuple[bytes, dict]], bad: list[BadLine]) -> str | None:
        """Append the bad lines to the quarantine, then rewrite the file without them; the reason if it failed."""
        when = datetime.now(UTC).isoformat(timespec="seconds")
        side = b"".join(
            json.dumps(
                {
                    "source": self.path.name,
                    "line": line.lineno,
                    "reason": line.reason,
                    "quarantined": when,
                    "bytes_b64": base64.b64encode(line.raw).decode("ascii"),
                    "text": line.raw.decode("utf-8", errors="replace"),
                },
                ensure_ascii=False,
            ).encode("utf-8")
            + b"\n"
            for line in bad
        )
        try:
            _append_durably(self.quarantine_path, side)
            atomic_write_bytes(self.path, b"".join(raw + b"\n" for raw, _ in good))
        except OutputError as exc:
            cause = exc.__cause__
            return cause.strerror if isinstance(cause, OSError) and cause.strerror else str(exc)
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    def append(self, record: dict) -> None:
        """Append one record durably (write + fsync); a failed write is an OutputError and leaves no torn line."""
        rec = encode_record(record)
        data = json.dumps(rec, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        _append_durably(self.path, data)
        self.records[rec["key"]] = rec


def encode_record(record: Mapping[str, Any]) -> dict:
    """The record as it will read back (JSON round trip) with its `check`; a record that would not read back
    (a missing field, a wrong type, NaN) is a RunFileError naming the field."""
    try:
        rec = json.loads(json.dumps({k: v for k, v in record.items() if k != CHECK_FIELD}, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise RunFileError(f"prediction record {record.get('key')!r} cannot be written as JSON: {exc}") from exc
    problem = record_problem(rec)
    if problem:
        raise RunFileError(f"prediction record {record.get('key')!r} would not read back: {problem}")
    rec[CHECK_FIELD] = record_check(rec)
    return rec


def _append_durably(path: Path, data: bytes) -> None:
    """Append `data` under an exclusive flock, adding a missing newline first; on an OSError the file is cut
    back to its old size (no torn line) and an OutputError names the file."""
    try:
        with _locked(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, fcntl.LOCK_EX) as fd:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # the last line lost its newline: start on a line of our own
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                except OSError:
                    pass  # the next open quarantines the torn line
                raise
    except OSError as exc:
        kept = "the lines already there are kept; free space and run the same command again to resume"
        raise write_failure(path, exc, action="append to", kept=kept) from exc
