"""A run folder's JSON-lines files (predictions, samples, scores) read line by line from raw bytes.

A line torn inside a multi-byte character or a value, a line of another format, or a NaN constant (never written
here: every writer uses `allow_nan=False`) is named with its reason, never a crash. `read_records` refuses a
whole file at its first bad line, in one line: the file, the line number, why, and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longctx_eval.errors import RunFileError

_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_line(raw: bytes) -> tuple[Any, str | None]:
    """(value, None) for one line's JSON, or (None, why it is not JSON: not UTF-8, torn, NaN)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 at byte {exc.start} (torn line)"
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except RecursionError:
        return None, "not valid JSON: nested too deeply"
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            msg = exc.msg.removesuffix(" starting at")
            return None, f"not valid JSON at column {exc.colno}: {msg[:1].lower()}{msg[1:]} (torn line?)"
        return None, f"not valid JSON: {exc}"


def short(x: Any) -> str:
    """A value as JSON, cut to 40 characters: for a one-line message quoting what a field held."""
    try:
        text = json.dumps(x, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):
        text = repr(type(x).__name__)
    text = text.translate(_LINE_BREAKS)  # JSON leaves these raw; one message must stay one line
    return text if len(text) <= 40 else text[:37] + "..."


def read_records(
    path: Path, data: bytes, problem: Callable[[dict[str, Any]], str | None], expected: str
) -> list[tuple[int, dict[str, Any]]]:
    """Every non-blank line of `data` (the bytes of `path`) as (line number, record). RunFileError at the first
    line that is not a JSON object `problem` accepts (it returns why not, or None): `path:N: why; expected ...`."""
    out: list[tuple[int, dict[str, Any]]] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        rec, why = json_line(raw)
        if why is None and not isinstance(rec, dict):
            why = f"not a JSON object but {type(rec).__name__}"
        if why is None:
            why = problem(rec)
        if why is not None:
            raise RunFileError(f"{path}:{lineno}: {why}; expected {expected}")
        out.append((lineno, rec))
    return out
