"""Parsing an HTTP request body as JSON for `serve` and `fault-proxy`: every malformed body, whatever its shape
(invalid UTF-8, bad syntax, NaN, a 5,000-digit number, nesting 100,000 deep, an unpaired surrogate), is one
`BodyError` naming what was expected, never a RecursionError or another exception that would read as a server fault.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100
"""Arrays and objects may nest at most this deep; OpenAI request bodies nest about 5 deep."""
EXPECTED = 'expected a JSON object such as {"model": ..., "prompt": ...} in UTF-8'

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyError(ValueError):
    """A request body that is not acceptable JSON; the message says why and what was expected."""


def _no_constant(name: str) -> Any:
    raise BodyError(f"the request body is not valid JSON: {name} is not a JSON value; {EXPECTED}")


def parse_json_body(raw: bytes) -> Any:
    """The JSON value of a request body, or BodyError: not UTF-8, not JSON, nested over MAX_DEPTH, lone surrogates."""
    if not raw.strip():
        raise BodyError(f"the request body is empty; {EXPECTED}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the request body is not valid UTF-8 (byte {exc.start}); {EXPECTED}") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BodyError(_too_deep(None)) from None
    except BodyError:
        raise
    except ValueError as exc:  # JSONDecodeError, and int() refusing a number of over 4,300 digits
        raise BodyError(f"the request body is not valid JSON: {exc}; {EXPECTED}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(raw):
        _check_shape(value)  # only bodies that could break a rule are walked
    return value


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """`parse_json_body` for a body that must be a JSON object (every OpenAI request is one)."""
    value = parse_json_body(raw)
    if not isinstance(value, dict):
        raise BodyError(f"the request body must be a JSON object, got a JSON {_kind(value)}; {EXPECTED}")
    return value


def _check_shape(value: Any) -> None:
    """Walk `value` without recursion: no nesting deeper than MAX_DEPTH, no string holding a lone surrogate."""
    stack: list[tuple[Any, int, str | None]] = [(value, 1, None)]
    while stack:
        node, depth, field = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                raise BodyError(_too_deep(field))
            items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
            for key, child in items:
                if isinstance(key, str) and _SURROGATE.search(key):
                    raise BodyError(_surrogate(field or key))
                stack.append((child, depth + 1, field if field is not None or depth > 1 else key))
        elif isinstance(node, str) and _SURROGATE.search(node):
            raise BodyError(_surrogate(field))


def _too_deep(field: str | None) -> str:
    where = f" (in '{field}')" if field else ""
    return (
        f"the request body nests JSON arrays or objects more than {MAX_DEPTH} levels deep{where}; {EXPECTED}, "
        f"nested at most {MAX_DEPTH} deep"
    )


def _surrogate(field: str | None) -> str:
    where = f"'{field}'" if field else "a string"
    return f"{where} holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff), which is not text; {EXPECTED}"


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "number"
