"""`longctx-eval merge SHARD_DIR...`: join the run folders of `run --shard I/N` into one run folder and score it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from longctx_eval.cli import add_include_path
from longctx_eval.cli.composite_flags import add_composite_flags, composite_config
from longctx_eval.cli.effective_flags import add_effective_flags, effective_config
from longctx_eval.progress import console

SHARD_SUFFIX = re.compile(r"\.shard-\d+-of-\d+$")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `merge`."""
    p = sub.add_parser(
        "merge",
        help="join the run folders of `run --shard I/N` into one run folder (the same numbers as one unsharded run)",
        description=(
            "Refuses, with one line and exit 2, shards of other models, seeds, task versions, lengths, limits or "
            "arguments, a shard missing or given twice, an unfinished task or a torn prediction line."
        ),
    )
    p.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR", help="every shard's run folder")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="the merged run folder (new or empty; default: the first shard's folder name without .shard-I-of-N)",
    )
    add_include_path(p)
    add_effective_flags(p)
    add_composite_flags(p)
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge, then score the merged folder as `score` does (its exit status)."""
    from longctx_eval.run_folder.lock import RunLock
    from longctx_eval.run_folder.merge_shards import merge_shards
    from longctx_eval.scoring.score import print_summary, score_run_dir

    first = args.shards[0]
    out = args.out if args.out is not None else first.parent / SHARD_SUFFIX.sub("", first.name)
    merge_shards(args.shards, out)
    with RunLock(out):
        include = [str(Path(p).resolve()) for p in args.include_path]
        report = score_run_dir(
            out, include_paths=include, effective=effective_config(args), composite=composite_config(args)
        )
    console.print(
        f"merged {len(args.shards)} shards into {out}; wrote {out / 'run.json'}", highlight=False, markup=False
    )
    print_summary(report)
    return 2 if report.errors else 0
