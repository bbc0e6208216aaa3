"""`longctx-eval compare RUN_A RUN_B [--metric NAME]`: paired differences of two run folders per task and length,
with cluster-aware intervals and tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longctx_eval.progress import console, console_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `compare`."""
    p = sub.add_parser(
        "compare",
        help="paired A - B of two run folders per task and length: bootstrap interval, McNemar/sign-flip p, Holm",
        description=(
            "Per task both runs ran (or --task), on its primary metric (or --metric), over the samples joined by "
            "id whose context, question and gold are the same (others are refused and counted): A - B per length "
            "and pooled, a paired 95%% bootstrap interval over the clusters (haystacks, documents) and the pairs "
            "within them, a sign-flip test of per-cluster sums where pairs share clusters (else McNemar's exact p "
            "for 0/1 scores, else a sign-flip permutation test), Holm-adjusted across the rows tested. Exit 2 on "
            "bad input."
        ),
    )
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="a run folder (holding run.json, samples/, scores/)")
    p.add_argument("run_b", type=Path, metavar="RUN_B")
    p.add_argument("--task", action="append", default=[], metavar="T", help="compare only this task (repeatable)")
    p.add_argument(
        "--metric",
        metavar="NAME",
        help="compare on this metric of the task (e.g. mrr, ndcg@10, recall@5; default: its primary metric); "
        "an unknown name lists the metrics both runs report",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON to FILE")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the bootstrap and permutation resamples, >= 0 (default 0)"
    )
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """Print the tables (stdout), write --json; a LongctxError (bad input) exits 2 through `main`. A task left
    out for a damaged file, the others compared, is one error line (stderr) and exit 2 after the tables."""
    from longctx_eval.scoring.comparison import compare_runs, to_text, write_json

    comparison = compare_runs(args.run_a, args.run_b, args.task, seed=args.seed, metric=args.metric)
    sys.stdout.write(to_text(comparison))
    if args.json is not None:
        write_json(comparison, args.json)
        console.print(f"wrote {args.json}", highlight=False, markup=False)
    if comparison.damaged:
        text = "; ".join(comparison.damaged) + " (the other tasks are compared above)"
        console.print(f"[red]error:[/red] {console_text(text)}", highlight=False, soft_wrap=True)
        return 2
    return 0
