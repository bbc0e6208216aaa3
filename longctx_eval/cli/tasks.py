"""`longctx-eval tasks`: every discovered task with version, requirements, lengths and task arguments."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from rich.text import Text

from longctx_eval.cli import add_include_path
from longctx_eval.discovery import discover


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `tasks`."""
    p = sub.add_parser("tasks", help="list every discovered task and its arguments")
    add_include_path(p)
    p.set_defaults(func=cmd_tasks)


def cmd_tasks(args: argparse.Namespace) -> int:
    """Print the task table."""
    registry = discover(args.include_path)
    table = Table(title="longctx-eval tasks")
    for col in ("name", "version", "requires", "default lengths", "arguments (--task-arg)", "description", "source"):
        table.add_column(col)
    for _, info in registry.items():
        arguments = ", ".join(
            f"{k}={v!r}" + (f" ({info.bounds[k].describe()})" if k in info.bounds else "")
            for k, v in info.arguments.items()
        )
        cells = (
            info.name,
            info.version,
            info.requires.describe(),
            ",".join(map(str, info.default_lengths)),
            arguments or "-",
            info.description,
            info.source,
        )
        table.add_row(*(Text(cell) for cell in cells))  # a plugin's text (`[x]`, `[/]`) shows as written
    Console(width=220).print(table)
    return 0
