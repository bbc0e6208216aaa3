"""The `longctx-eval` command line: run, tasks, score, leaderboard, validate-task, schema."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from longctx_eval.errors import ConfigError, LongctxError
from longctx_eval.progress import console


def _common_tasks(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-path",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of your own task modules (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="longctx-eval", description="Exact, reproducible long-context evaluation.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate models on tasks; resumes an interrupted run")
    run.add_argument(
        "--model", default="default", help="spec(s), comma-separated; 'default' = minilm,bm25,smollm2-135m"
    )
    run.add_argument("--tasks", default="default", help="task names, comma-separated; 'default' = every in-tree task")
    run.add_argument("--lengths", default="default", help="context lengths in tokens, e.g. 1024,4k; default: per task")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--limit", type=int, default=None, help="at most N samples per task and length")
    run.add_argument("--out", type=Path, default=Path("results"), help="output folder; one RUN_DIR per model")
    run.add_argument("--no-resume", action="store_true", help="set aside predictions of an earlier run in RUN_DIR")
    run.add_argument("--suite", default=None, help="a suite name or .toml file; default when no --model/--tasks")
    _common_tasks(run)

    tasks = sub.add_parser("tasks", help="list every discovered task")
    _common_tasks(tasks)

    score = sub.add_parser("score", help="recompute all metrics of RUN_DIR from its saved predictions")
    score.add_argument("run_dir", type=Path)
    _common_tasks(score)

    board = sub.add_parser("leaderboard", help="merge run files into leaderboard.json and render it")
    board.add_argument("inputs", nargs="*", type=Path, default=[Path("results")], help="run files or folders")
    board.add_argument("--out", type=Path, default=Path("leaderboards"))

    val = sub.add_parser("validate-task", help="check a task: determinism, lengths, oracle at 100%%")
    val.add_argument("name")
    val.add_argument("--model", default="oracle", help="whose tokenizer measures the lengths (default: oracle)")
    val.add_argument("--lengths", default="default")
    val.add_argument("--seed", type=int, default=0)
    val.add_argument("--limit", type=int, default=None)
    _common_tasks(val)

    schema = sub.add_parser("schema", help="write the run-file JSON Schema")
    schema.add_argument("--out", type=Path, default=Path("leaderboards/schema.json"))
    for module in EXTRA_COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; a LongctxError is printed as one line without a traceback, exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except LongctxError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted: predictions so far are saved; run the same command again to resume")
        return 130


CORE_COMMANDS = {
    "run": "cmd_run",
    "tasks": "cmd_tasks",
    "score": "cmd_score",
    "leaderboard": "cmd_leaderboard",
    "validate-task": "cmd_validate",
    "schema": "cmd_schema",
}
EXTRA_COMMAND_MODULES = ("longctx_eval.data_cli", "longctx_eval.coref_cli")
"""Modules adding subcommands: each has `add_parser(subparsers)` whose parsers set `func=handler`."""


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "func", None) is not None:
        return args.func(args)
    from longctx_eval import commands

    name = CORE_COMMANDS.get(args.command)
    if name is None:
        raise ConfigError(f"unknown command {args.command!r}")
    return getattr(commands, name)(args)


if __name__ == "__main__":
    sys.exit(main())
