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
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_bytes, write_failure
from longctx_eval.errors import OutputError, RunFileError
from longctx_eval.run_folder.paths import NOFOLLOW, is_link_error, link_refusal
from longctx_eval.run_folder.prediction_lines import (  # noqa: F401  (the line format's public names, re-exported)
    CHECK_FIELD,
    BadLine,
    combine_parts,
    parse_line,
    predates_checks,
    prediction_key,
    prediction_to_record,
    quarantine_path_of,
    record_check,
    record_problem,
    record_to_prediction,
    scan,
)


@contextmanager
def _locked(path: Path, flags: int, lock: int) -> Iterator[int]:
    """`path` opened with `flags` under flock `lock`, re-opened if it was replaced while we waited."""
    while True:
        try:
            fd = os.open(path, flags | os.O_CLOEXEC | NOFOLLOW, 0o666)
        except OSError as exc:
            if is_link_error(exc):
                raise link_refusal(path) from exc
            raise
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
        if os.path.lexists(path):
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
        if predates_checks(good):
            self.warnings.append(
                f"{self.path}: written before prediction lines carried a {CHECK_FIELD!r} (an older version), so its "
                f"{len(good)} line(s) cannot be checked for later edits and are used as they are"
            )
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
            if isinstance(cause, OSError) and cause.strerror and not is_link_error(cause):
                return cause.strerror
            return str(exc)
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
