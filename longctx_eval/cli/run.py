"""`longctx-eval run`: evaluate models on tasks (a suite, or --model x --tasks), resuming what is done."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from longctx_eval.atomic_io import ensure_dir
from longctx_eval.cli import add_include_path
from longctx_eval.cli.composite_flags import add_composite_flags, composite_config
from longctx_eval.cli.effective_flags import add_effective_flags, effective_config
from longctx_eval.discovery import discover, in_tree_tasks, select
from longctx_eval.errors import ConfigError, NotInstalled
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.spec import check_distinct_names, expand_models, parse_spec
from longctx_eval.progress import console, console_text
from longctx_eval.registry import Registry
from longctx_eval.run.config import RunConfig, TaskPlan, check_limit, parse_lengths, parse_task_args, parse_tasks
from longctx_eval.run.cost import Budget, PriceTable, load_prices
from longctx_eval.run.dry_run import DEFAULT_OUTPUT_TPS, DEFAULT_PROMPT_TPS
from longctx_eval.run_folder.naming import run_dir_for
from longctx_eval.run_folder.shard import Shard
from longctx_eval.task import TaskInfo

Plans = list[tuple[ModelSpec, list[TaskPlan]]]
EXIT_TASK_FAILED = 4
"""Exit status when a task crashed or every one of its requests failed (0 ok, 1 errors, 2 bad input, 3 the
--max-cost budget stopped the run); the other tasks' results are in run.json."""


class CommaJoined(argparse.Action):
    """A flag given again adds to its list (`--model a --model b` = `--model a,b`), never silently replaces it."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option: str | None = None
    ) -> None:
        seen = getattr(namespace, f"_given_{self.dest}", False)
        setattr(namespace, self.dest, f"{getattr(namespace, self.dest)},{values}" if seen else values)
        setattr(namespace, f"_given_{self.dest}", True)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `run`."""
    run = sub.add_parser("run", help="evaluate models on tasks; resumes an interrupted run")
    joined = {"default": "default", "action": CommaJoined}
    run.add_argument("--model", **joined, help="spec(s), comma-separated or repeated; 'default' = the default suite")
    run.add_argument("--tasks", **joined, help="task names, comma-separated or repeated; 'default' = every task")
    run.add_argument(
        "--lengths",
        **joined,
        help="lengths in tokens, e.g. 1024,4k (a generating task's whole prompt budget); default: per task",
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--limit", type=int, default=None, help="at most N samples per task and length, spread over its depths"
    )
    run.add_argument(
        "--task-arg",
        action="append",
        default=[],
        metavar="TASK.KEY=VALUE",
        help="a task argument, e.g. needle.source=synthetic (repeatable; see `longctx-eval tasks`)",
    )
    run.add_argument("--out", type=Path, default=Path("results"), help="output folder; one RUN_DIR per model")
    run.add_argument("--no-resume", action="store_true", help="set aside predictions of an earlier run in RUN_DIR")
    run.add_argument("--strict", action="store_true", help="a skipped task is an error (exit status 1)")
    run.add_argument("--suite", default=None, help="a suite name or .toml file; default when no --model/--tasks")
    run.add_argument(
        "--part",
        default=None,
        metavar="NAME[,NAME]",
        help="with --suite: only these parts of it, each a model name, a task or MODEL:TASK (suite_parts.py)",
    )
    run.add_argument(
        "--shard",
        type=Shard.parse,
        default=None,
        metavar="I/N",
        help="run shard I of N of every task's samples (whole haystacks and documents together) into "
        "OUT/<model>.shard-I-of-N; `longctx-eval merge` joins the N folders into one run, exactly",
    )
    add_include_path(run)
    add_effective_flags(run)
    add_cost_flags(run)
    add_composite_flags(run)
    run.set_defaults(func=cmd_run)


def add_cost_flags(run: argparse.ArgumentParser) -> None:
    """--dry-run, --max-cost and the price and throughput tables they use."""
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="build and measure every request as the run would, send nothing, and print per model and task the "
        "requests, prompt and output tokens, estimated cost and time, and per local model and length the estimated "
        "memory of its weights and KV cache and whether it fits the GPUs torch sees (else this machine's RAM)",
    )
    run.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop before a request would take the cost spent on served models plus the cost committed to the "
        "batch about to be sent over USD (results so far are kept; rerun to continue)",
    )
    run.add_argument(
        "--prices",
        type=Path,
        default=None,
        metavar="FILE",
        help="your price table (TOML, USD per 1M tokens; form of longctx_eval/run/prices.toml), used instead of it",
    )
    run.add_argument(
        "--gpu-hour-price",
        type=float,
        default=None,
        metavar="USD",
        help="price a served model the table lacks (a self-hosted server) from what an hour of its server costs "
        "(all its GPUs) over the tokens/s measured by --throughput-from (for --max-cost and --dry-run)",
    )
    run.add_argument(
        "--assume-throughput",
        default=None,
        metavar="PROMPT_TPS,OUTPUT_TPS",
        help="--dry-run time estimate: prompt and output tokens/s (default: the rates the model's run folder "
        f"measured in an earlier run, else {DEFAULT_PROMPT_TPS:g},{DEFAULT_OUTPUT_TPS:g})",
    )
    run.add_argument(
        "--throughput-from",
        type=Path,
        default=None,
        metavar="RUN_DIR|run.json|load.json",
        help="--dry-run time estimate (and the --gpu-hour-price estimate) from a measured run or `longctx-eval "
        "load` result of the same model instead of the assumption",
    )


def _chosen_tasks(registry: Registry[TaskInfo], names: tuple[str, ...]) -> list[TaskInfo]:
    if names == ("default",):
        return in_tree_tasks(registry)
    return select(registry, names)


def plans_of(args: argparse.Namespace, registry: Registry[TaskInfo]) -> Plans:
    """Model spec -> task plans: a suite (the default one when neither --model nor --tasks is given)."""
    from longctx_eval.run.plan_samples import check_plan_size
    from longctx_eval.run.suite import load_suite

    lengths, limit = parse_lengths(args.lengths), check_limit(args.limit, "--limit")
    cli_args = parse_task_args(args.task_arg)
    suite = args.suite or ("default" if args.model == "default" and args.tasks == "default" else None)
    if suite is not None:
        if args.model != "default" or args.tasks != "default":
            raise ConfigError("--suite names the models and tasks; drop --model/--tasks or drop --suite")
        raw_plans = [(raw, ps) for raw, ps in load_suite(suite, registry).items()]
    else:
        tasks = _chosen_tasks(registry, parse_tasks(args.tasks))
        raw_plans = [(raw, [TaskPlan(info) for info in tasks]) for raw in expand_models(args.model)]
    named = {p.info.name for _, ps in raw_plans for p in ps}
    for task in cli_args:
        if task not in named:
            raise ConfigError(
                f"--task-arg names task {task!r}, which this run does not include; it runs {sorted(named)}"
            )
    plans: Plans = []
    for raw, ps in raw_plans:
        try:
            spec = parse_spec(raw)  # every spec and option is checked here, before anything loads or moves
        except NotInstalled as exc:  # an opt-in model in a suite: skipped, said, unless the run names it
            if suite is None or _names_model(args.part, exc.name or raw):
                raise
            console.print(f"skipped (opt-in, not installed): {console_text(exc)}", highlight=False)
            continue
        out = []
        for p in ps:
            given = p.info.check_args(cli_args.get(p.info.name, {}), "--task-arg")
            # --lengths and --limit given with a suite apply to every task in it
            out.append(TaskPlan(p.info, lengths or p.lengths, limit or p.limit, **p.with_args(given)))
        plans.append((spec, out))
    for plan in {repr(p.as_dict()): p for _, ps in plans for p in ps}.values():  # before any model loads
        check_plan_size(plan, args.seed)
    check_distinct_names([spec for spec, _ in plans])
    if args.part is not None:
        if suite is None:
            raise ConfigError("--part picks parts of a suite; give --suite too")
        from longctx_eval.run.suite_parts import select_parts

        plans = select_parts(plans, [p.strip() for p in args.part.split(",") if p.strip()])
    return plans


def _names_model(part: str | None, name: str) -> bool:
    """Whether `--part` names the suite model `name` itself (its name, or one of its MODEL:TASK pairs)."""
    parts = [p.strip() for p in (part or "").split(",")]
    return any(p == name or p.startswith(f"{name}:") for p in parts)


def cmd_run(args: argparse.Namespace) -> int:
    """Evaluate every model on its tasks; 0 when every task ran or was skipped for a stated reason, 1 on
    errors, 2 when a model was refused for its spec or files, 3 when stopped at --max-cost, 4 when a task crashed
    or every request of it failed."""
    from longctx_eval.run.runner import run_models

    include = tuple(str(Path(p).resolve()) for p in args.include_path)
    effective = effective_config(args)
    table = load_prices(args.prices)
    budget = Budget(args.max_cost, table) if args.max_cost is not None else None
    composite = composite_config(args)  # checked for a dry run too: it refuses what the run would refuse
    if args.dry_run:  # nothing is written: not even the output folder
        config = RunConfig(
            seed=args.seed, out=Path(args.out), include_paths=include, effective=effective, shard=args.shard
        )
        plans = plans_of(args, discover(include))
        table = _with_estimates(table, plans, args)
        budget = Budget(args.max_cost, table) if args.max_cost is not None else None
        if budget is not None:
            budget.check_specs(spec for spec, _ in plans)
        return _dry_run(plans, config, table, args)
    plans = plans_of(args, discover(include))
    table = _with_estimates(table, plans, args)
    budget = Budget(args.max_cost, table) if args.max_cost is not None else None
    config = RunConfig(
        seed=args.seed,
        out=ensure_dir(args.out),
        include_paths=include,
        strict=args.strict,
        effective=effective,
        budget=budget,
        composite=composite,
        shard=args.shard,
    )
    if budget is not None:
        budget.check_specs(spec for spec, _ in plans)
    if args.no_resume:
        for spec, _ in plans:
            old = run_dir_for(config.out, spec, config.shard) / "predictions.jsonl"
            if old.exists():  # kept aside, never deleted: a result already computed is not lost
                old.rename(old.with_name(f"predictions.{int(time.time())}.jsonl.bak"))
    t0 = time.perf_counter()
    outcomes = run_models(plans, config)
    written = [o for o in outcomes if o.run_file is not None]
    skipped = [(o.spec.name, s) for o in outcomes for s in o.skipped]
    errors = [(o.spec.name, e) for o in outcomes for e in o.errors]
    failed = [(o.spec.name, f) for o in outcomes for f in o.failed]
    console.print(f"{len(written)} run file(s) in {time.perf_counter() - t0:.1f} s", highlight=False)
    if budget is not None:
        console.print(
            f"served-model cost: ${budget.spent_usd:.4f} of --max-cost ${budget.max_usd:.4f}", highlight=False
        )
    stopped = next((o.stopped for o in outcomes if o.stopped), None)
    if stopped:
        console.print(f"[yellow]stopped at the cost budget[/yellow]: {console_text(stopped)}", highlight=False)
        return 3
    if skipped:
        console.print(f"{len(skipped)} task(s) skipped, each for the reason stated above", highlight=False)
    if errors:
        console.print(f"[red]{len(errors)} error(s)[/red], each stated above; results computed so far are saved")
        return 2 if any(o.bad_input for o in outcomes) else 1
    if failed:
        console.print(
            f"[red]{len(failed)} task(s) failed[/red] (crashed, or every request failed); the other tasks' results "
            "are saved. Re-run the same command to retry them:",
            highlight=False,
        )
        for model, text in failed:
            console.print(f"  {model} {text}", highlight=False, soft_wrap=True, markup=False)
        return EXIT_TASK_FAILED
    if config.strict and skipped:
        console.print("[red]--strict[/red]: a skipped task is an error", highlight=False)
        return 1
    return 0


def _with_estimates(table: PriceTable, plans: Plans, args: argparse.Namespace) -> PriceTable:
    """`table` plus a --gpu-hour-price estimate for each served model it lacks (each printed with its basis)."""
    if args.gpu_hour_price is None:
        return table
    from longctx_eval.run.cost import served_model
    from longctx_eval.run.cost_estimate import gpu_hour_estimate

    unpriced = sorted({m for spec, _ in plans if (m := served_model(spec)) is not None and table.get(m) is None})
    if not unpriced:
        where = console_text(table.path)
        console.print(f"--gpu-hour-price: not used, every served model has a price in {where}", highlight=False)
    for model in unpriced:
        est = gpu_hour_estimate(args.gpu_hour_price, args.throughput_from, model)
        table = table.with_estimate(model, est.price, est.how)
        console.print(f"cost of served model {model!r}: {est.how}", highlight=False, markup=False)
    return table


def _dry_run(plans: Plans, config: RunConfig, table: PriceTable, args: argparse.Namespace) -> int:
    """Print what the run would send, cost and take; nothing is sent or written."""
    from longctx_eval.run.dry_run import choose_throughput, dry_run, render

    throughput = choose_throughput(config, args.assume_throughput, args.throughput_from)
    result = dry_run(plans, config, table, throughput, resume=not args.no_resume)
    print(render(result, table, [spec for spec, _ in plans], args.max_cost))
    return 0
