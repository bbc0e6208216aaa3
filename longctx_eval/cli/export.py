"""`longctx-eval export lm-eval|inspect TASK --dataset BUILT --out ...`: a task for another harness."""

from __future__ import annotations

import argparse
from pathlib import Path

from longctx_eval.cli import add_include_path
from longctx_eval.progress import console


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `export` with its targets `lm-eval` and `inspect`."""
    p = sub.add_parser(
        "export",
        help="export a task (over a built dataset) to lm-evaluation-harness or inspect_ai",
        description="Write a task for another harness that reads a dataset built by `longctx-eval build TASK` "
        "and scores generated text with the task's own scorer (docs/interop.md).",
    )
    targets = p.add_subparsers(dest="target", required=True, metavar="TARGET")
    lm = targets.add_parser("lm-eval", help="an lm-evaluation-harness task folder (YAML per length, utils.py)")
    lm.add_argument("task", metavar="TASK", help="task name, e.g. needle or cross_paragraph")
    lm.add_argument("--dataset", type=Path, required=True, help="the folder `longctx-eval build TASK` wrote")
    lm.add_argument("--out", type=Path, required=True, help="the task folder to write (pass it as --include_path)")
    add_include_path(lm)
    lm.set_defaults(func=cmd_export)
    ins = targets.add_parser("inspect", help="an inspect_ai task file (@task with our dataset and scorer)")
    ins.add_argument("task", metavar="TASK", help="task name, e.g. needle or cross_paragraph")
    ins.add_argument("--dataset", type=Path, required=True, help="the folder `longctx-eval build TASK` wrote")
    ins.add_argument("--out", type=Path, required=True, help="the .py file to write (run it with `inspect eval`)")
    add_include_path(ins)
    ins.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """Check the task and dataset, then write the target's files."""
    from longctx_eval.errors import ConfigError
    from longctx_eval.export.built_dataset import read_built
    from longctx_eval.export.targets import check_dataset, export_target

    info, target = export_target(args.task, tuple(args.include_path))
    built = read_built(args.dataset)
    check_dataset(target, built)
    if args.target == "lm-eval":
        from longctx_eval.export.lm_eval_task import group_name, write_lm_eval

        written = write_lm_eval(target, built, info.version, args.out)
        run = f"lm_eval --include_path {args.out} --tasks {group_name(target.task)} --apply_chat_template ..."
    else:
        from longctx_eval.export.inspect_task import write_inspect

        if args.out.suffix != ".py":
            raise ConfigError(f"--out {args.out}: expected a .py file for inspect_ai")
        written = write_inspect(target, built, info.version, args.out)
        run = f"inspect eval {args.out} --model ..."
    console.print(
        f"wrote {', '.join(str(p) for p in written)}; run: {run}", highlight=False, soft_wrap=True, markup=False
    )
    return 0
