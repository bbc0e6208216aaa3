"""The `longctx-eval` command line: one module per command family, each adding its parsers.

Core commands live in this package; commands of later layers (`build`, `coref-score` from data_builders)
arrive through the `longctx_eval.commands` entry-point group, never through an import from the core.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from longctx_eval.errors import LongctxError
from longctx_eval.progress import console, console_text
from longctx_eval.registry import Registry

COMMANDS: Registry = Registry("command", entry_point_group="longctx_eval.commands")
"""Command families by name: a module (or object) with `add_parser(subparsers)` whose parsers set `func`."""
for _name in ("run", "tasks", "score", "merge", "compare", "leaderboard", "validate", "schema", "chunk", "posprobe"):
    COMMANDS.register(_name, f"longctx_eval.cli.{_name}", source="longctx_eval.cli")
COMMANDS.register("serve", "longctx_eval.cli.serve", source="longctx_eval.cli")
COMMANDS.register("fault-proxy", "longctx_eval.cli.fault_proxy", source="longctx_eval.cli")
COMMANDS.register("load", "longctx_eval.cli.load_test", source="longctx_eval.cli")
COMMANDS.register("export", "longctx_eval.cli.export", source="longctx_eval.cli")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every registered command."""
    parser = argparse.ArgumentParser(prog="longctx-eval", description="Exact, reproducible long-context evaluation.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for _, module in COMMANDS.items():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; a LongctxError is printed as one line without a traceback, exit status 2."""
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except LongctxError as exc:  # plain text: `[models."x"]` or `[vllm]` print as written
        console.print(f"[red]error:[/red] {console_text(exc)}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted: predictions so far are saved; run the same command again to resume")
        return 130


def add_include_path(p: argparse.ArgumentParser) -> None:
    """The --include-path option shared by commands that discover tasks."""
    p.add_argument(
        "--include-path",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of your own task modules (repeatable)",
    )
