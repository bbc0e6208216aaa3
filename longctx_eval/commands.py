"""The CLI subcommands, each a thin layer over the library."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.table import Table

from longctx_eval.errors import LongctxError
from longctx_eval.io import ensure_dir
from longctx_eval.progress import console
from longctx_eval.registry import IN_TREE, discover, select
from longctx_eval.run_config import RunConfig, TaskPlan, check_limit, parse_lengths, parse_tasks


def _chosen_tasks(registry: dict, names: tuple[str, ...]) -> list:
    if names == ("default",):
        in_tree = [i for i in registry.values() if Path(i.source).is_relative_to(IN_TREE)]
        return sorted(in_tree, key=lambda i: i.name)
    return select(registry, names)


def _plans(args: argparse.Namespace, registry: dict) -> dict[str, list[TaskPlan]]:
    """Model spec -> task plans: a suite (the default one when neither --model nor --tasks is given)."""
    from longctx_eval.models.spec import expand_models
    from longctx_eval.suite import load_suite

    lengths, limit = parse_lengths(args.lengths), check_limit(args.limit, "--limit")
    suite = args.suite or ("default" if args.model == "default" and args.tasks == "default" else None)
    if suite is not None:
        if args.model != "default" or args.tasks != "default":
            raise LongctxError("--suite names the models and tasks; drop --model/--tasks or drop --suite")
        plans = load_suite(suite, registry)
        # --lengths and --limit given with a suite apply to every task in it
        return {
            spec: [TaskPlan(p.info, lengths or p.lengths, limit or p.limit) for p in ps] for spec, ps in plans.items()
        }
    tasks = _chosen_tasks(registry, parse_tasks(args.tasks))
    return {spec: [TaskPlan(info, lengths, limit) for info in tasks] for spec in expand_models(args.model)}


def cmd_run(args: argparse.Namespace) -> int:
    """Evaluate every model on its tasks, resuming what an earlier identical run already did."""
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.runner import run_models, slug

    include = tuple(str(Path(p).resolve()) for p in args.include_path)
    config = RunConfig(seed=args.seed, out=ensure_dir(args.out), include_paths=include)
    plans = _plans(args, discover(include))
    if args.no_resume:
        for raw in plans:
            old = config.out / slug(parse_spec(raw).name) / "predictions.jsonl"
            if old.exists():  # kept aside, never deleted: a result already computed is not lost
                old.rename(old.with_name(f"predictions.{int(time.time())}.jsonl.bak"))
    t0 = time.perf_counter()
    written = run_models(plans, config)
    console.print(f"{len(written)} run file(s) in {time.perf_counter() - t0:.1f} s")
    return 0 if len(written) == len(plans) else 1


def cmd_tasks(args: argparse.Namespace) -> int:
    """List every discovered task with version, description, requirements and default lengths."""
    registry = discover(args.include_path)
    table = Table(title="longctx-eval tasks")
    for col in ("name", "version", "requires", "default lengths", "description", "source"):
        table.add_column(col)
    for info in sorted(registry.values(), key=lambda i: i.name):
        table.add_row(
            info.name,
            info.version,
            info.requires.describe(),
            ",".join(map(str, info.default_lengths)),
            info.description,
            info.source,
        )
    Console = type(console)
    Console(width=200).print(table)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    """Recompute every metric of a run folder without the model."""
    from longctx_eval.runner import _print_summary
    from longctx_eval.scoring import score_run_dir

    run = score_run_dir(args.run_dir, include_paths=[str(Path(p).resolve()) for p in args.include_path])
    console.print(f"wrote {args.run_dir / 'run.json'}")
    _print_summary(run)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Merge run files into leaderboard.json and render the markdown and heatmaps."""
    from longctx_eval.leaderboard import update_leaderboard

    report = update_leaderboard(list(args.inputs), args.out)
    for path, reason in report.skipped:
        console.print(f"[red]skipped[/red] {path}: {reason}", highlight=False, soft_wrap=True)
    console.print(f"leaderboard: {report.entries} model(s) in {args.out / 'leaderboard.json'}")
    return 1 if report.skipped else 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Determinism, length fit and oracle checks of one task."""
    from longctx_eval.validate import validate_task

    registry = discover(args.include_path)
    info = select(registry, [args.name])[0]
    report = validate_task(info, args.model, parse_lengths(args.lengths), args.seed, args.limit)
    for check in report.checks:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        console.print(f"{mark} {check.name}: {check.detail}", highlight=False)
    return 0 if report.ok else 1


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the JSON Schema of run files."""
    from longctx_eval.io import atomic_write_text
    from longctx_eval.results import json_schema

    atomic_write_text(args.out, json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
    console.print(f"wrote {args.out}")
    return 0
