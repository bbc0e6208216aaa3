"""`longctx-eval score RUN_DIR`: recompute every metric of a run folder from its saved predictions."""

from __future__ import annotations

import argparse
from pathlib import Path

from longctx_eval.cli import add_include_path
from longctx_eval.cli.composite_flags import add_composite_flags, composite_config
from longctx_eval.cli.effective_flags import add_effective_flags, effective_config
from longctx_eval.cli.run import EXIT_TASK_FAILED
from longctx_eval.progress import console, console_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `score`."""
    p = sub.add_parser("score", help="recompute all metrics of RUN_DIR from its saved predictions")
    p.add_argument("run_dir", type=Path)
    add_include_path(p)
    add_effective_flags(p)
    add_composite_flags(p)
    p.set_defaults(func=cmd_score)


def cmd_score(args: argparse.Namespace) -> int:
    """Rescore under the folder's lock; 2 when a task could not be rescored (its earlier result, if any, is kept),
    4 when a task's every request failed (as `run` exits), naming it."""
    from longctx_eval.results import failure_summary, task_failed
    from longctx_eval.run_folder.lock import RunLock
    from longctx_eval.scoring.score import print_summary, score_run_dir

    effective = effective_config(args)
    with RunLock(args.run_dir):
        include = [str(Path(p).resolve()) for p in args.include_path]
        report = score_run_dir(
            args.run_dir, include_paths=include, effective=effective, composite=composite_config(args)
        )
    console.print(f"wrote {console_text(args.run_dir / 'run.json')}", highlight=False)
    print_summary(report)
    if report.errors:
        return 2
    failed = [t for t in report.run.tasks if task_failed(t)]
    for task in failed:
        text = console_text(failure_summary(task.failures))
        console.print(f"[red]{console_text(task.name)}: failed[/red]: {text}", highlight=False)
    return EXIT_TASK_FAILED if failed else 0
