"""`longctx-eval validate-task NAME`: determinism, length fit, oracle at 100%, primary metric produced."""

from __future__ import annotations

import argparse

from longctx_eval.cli import add_include_path
from longctx_eval.progress import console, console_text
from longctx_eval.run.config import parse_lengths, parse_task_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `validate-task`."""
    p = sub.add_parser("validate-task", help="check a task: determinism, lengths, oracle at 100%%")
    p.add_argument("name")
    p.add_argument("--model", default="oracle", help="whose tokenizer measures the lengths (default: oracle)")
    p.add_argument("--lengths", default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--task-arg", action="append", default=[], metavar="TASK.KEY=VALUE", help="a task argument")
    add_include_path(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    """Print each check; 1 when any fails."""
    from longctx_eval.discovery import discover
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.validate_task import validate_task

    info = discover(args.include_path).get(args.name)
    task_args = info.check_args(parse_task_args(args.task_arg).get(info.name, {}), "--task-arg")
    report = validate_task(info, parse_spec(args.model), parse_lengths(args.lengths), args.seed, args.limit, task_args)
    for check in report.checks:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        console.print(f"{mark} {console_text(f'{check.name}: {check.detail}')}", highlight=False)
    return 0 if report.ok else 1
