"""A task's per-length arguments (a suite's `args_at`) as the board and the site show them: 'at 1M: per_cell=2'.

A result without per-length arguments adds nothing, so a board none of whose results has any is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from longctx_eval.leaderboard.page_model import Block, own, para, text
from longctx_eval.results import TaskResult
from longctx_eval.scoring.labels import length_label

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows, best first: (model name, its result)."""


def args_text(args: Mapping[str, Any]) -> str:
    """'depths=25, per_cell=4': the arguments sorted by name, strings bare, other values as JSON."""
    return ", ".join(f"{k}={_value(v)}" for k, v in sorted(args.items()))


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def length_args_text(result: TaskResult) -> str:
    """'at 1M: per_cell=2' ('; ' between lengths, shortest first), '' for a result without per-length arguments."""
    found = result.length_args or {}

    def order(key: str) -> tuple[int, int | str]:
        return (0, int(key)) if key.isdigit() else (1, key)

    def label(key: str) -> str:
        return length_label(int(key)) if key.isdigit() else key

    return "; ".join(f"at {label(k)}: {args_text(found[k])}" for k in sorted(found, key=order) if found[k])


def length_args_section(board: Board) -> list[Block]:
    """The task page's sentence: per shown result with per-length arguments its args, then those (models with
    the same ones together); nothing when no result has any."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, result in board:
        found = length_args_text(result)
        if found:
            groups.setdefault((found, args_text(result.args)), []).append(name)
    if not groups:
        return []
    pieces: list = [
        "Arguments by length (the suite's ",
        own("args_at", "code"),
        " over the task's ",
        own("args", "code"),
        "): ",
    ]
    for i, ((found, base), names) in enumerate(groups.items()):
        pieces += [" · "] * bool(i)
        for j, n in enumerate(names):
            pieces += [", "] * bool(j) + [text(n, "strong")]
        pieces += [": ", text(base or "task defaults"), "; ", text(found)]
    return [para(*pieces, ".")]
