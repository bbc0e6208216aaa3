"""`longctx-eval load`: sweep concurrency against a served model over the suite's prompts (docs/served.md#load-test)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from longctx_eval.atomic_io import ensure_dir
from longctx_eval.cli import add_include_path
from longctx_eval.errors import ConfigError
from longctx_eval.progress import console

if TYPE_CHECKING:
    from longctx_eval.load_test.sweep import SweepConfig
    from longctx_eval.models.base import ModelAdapter
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.models.openai.client import ServedClient, ServedRequest
    from longctx_eval.models.openai.pool import ServerPool

DEFAULT_TASKS = "needle"


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(
            f"--concurrency {text!r}: expected comma-separated positive integers, e.g. 1,8,32,128"
        ) from None
    return levels


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `load`."""
    p = sub.add_parser(
        "load",
        help="throughput and latency of a served model (openai:<model>@<url>) against requests in flight",
    )
    p.add_argument("--model", required=True, help="a served model spec, openai:<model>@<base_url>[?options]")
    p.add_argument(
        "--tasks", default=DEFAULT_TASKS, help=f"generation tasks whose prompts are sent (default {DEFAULT_TASKS})"
    )
    p.add_argument(
        "--lengths", default="1024", help="lengths in tokens, e.g. 1024,4k: the whole prompt budget (default 1024)"
    )
    p.add_argument("--limit", type=int, default=None, help="at most N samples per task and length")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-arg", action="append", default=[], metavar="TASK.KEY=VALUE", help="a task argument")
    p.add_argument("--concurrency", default="1,8,32,128", help="requests in flight at each level (default %(default)s)")
    p.add_argument(
        "--max-requests",
        type=int,
        default=None,
        metavar="N",
        help="requests sent per level (default: 4 x its concurrency, at least 8)",
    )
    p.add_argument(
        "--duration", type=float, default=None, metavar="S", help="seconds a level may dispatch for (default: no limit)"
    )
    p.add_argument("--warmup", type=int, default=1, help="short requests sent before the first level, not counted")
    p.add_argument(
        "--cache",
        choices=("cold", "suite", "hit"),
        default="cold",
        help="cold: every request a distinct prompt, led by its own line (default); suite: the suite's prompts "
        "exactly as a run sends them, each once; hit: a cache-hit scenario, --hit-prompts prompts sent once "
        "beforehand and then reused",
    )
    p.add_argument(
        "--hit-prompts", type=int, default=1, metavar="K", help="--cache hit: how many prompts are reused (default 1)"
    )
    p.add_argument("--rpm", type=float, default=None, help="requests per minute never exceeded (attempts included)")
    p.add_argument("--tpm", type=float, default=None, help="tokens per minute never exceeded (prompt + max tokens)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="per-attempt timeout (default: the spec's)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE.json",
        help="where the JSON goes (default load/<model>.json); the PNG is written next to it",
    )
    add_include_path(p)
    p.set_defaults(func=cmd_load)


def cmd_load(args: argparse.Namespace) -> int:
    """Build the prompts, sweep the levels, write JSON and PNG after each level; 1 when a level had failures."""
    from longctx_eval.discovery import discover, select
    from longctx_eval.load_test.prompts import build_pool
    from longctx_eval.load_test.report import KIND, table, write_json, write_plot
    from longctx_eval.load_test.sweep import SweepConfig
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.openai.pool import ServerPool
    from longctx_eval.models.spec import parse_spec, slug
    from longctx_eval.provenance import environment, suite_info
    from longctx_eval.run.config import TaskPlan, check_limit, parse_lengths, parse_task_args, parse_tasks

    spec = parse_spec(args.model)
    if spec.kind != "openai":
        raise ConfigError(
            f"load measures a served model; {args.model!r} is kind {spec.kind!r}, expected openai:<model>@<url>"
        )
    sweep = SweepConfig(
        levels=_levels(args.concurrency), max_requests=args.max_requests, duration_s=args.duration, warmup=args.warmup
    )
    include = tuple(str(Path(p).resolve()) for p in args.include_path)
    registry = discover(include)
    lengths, limit = parse_lengths(args.lengths), check_limit(args.limit, "--limit")
    task_args = parse_task_args(args.task_arg)
    infos = select(registry, parse_tasks(args.tasks))
    unknown = sorted(set(task_args) - {i.name for i in infos})
    if unknown:
        raise ConfigError(f"--task-arg names task {unknown[0]!r}, which this load test does not include")
    plans = [TaskPlan(i, lengths, limit, i.check_args(task_args.get(i.name, {}), "--task-arg")) for i in infos]
    out = args.out or Path("load") / f"{slug(spec.name)}.json"
    png = out.with_suffix(".png")
    ensure_dir(out.parent)
    if args.hit_prompts < 1:
        raise ConfigError(f"--hit-prompts {args.hit_prompts}: expected at least 1 prompt")
    adapter = load_model(spec)
    try:
        pool = build_pool(adapter, plans, args.seed, args.cache, sweep.requests_needed(), args.hit_prompts)
        client = _client(adapter, spec, sweep, args)
    finally:
        adapter.close()
    record: dict[str, Any] = {
        "kind": KIND,
        "version": 1,
        "model": spec.name,
        "spec": spec.raw,
        "served_model": client.model,
        "base_url": client.base_url,
        **({"base_urls": client.base_urls} if isinstance(client, ServerPool) else {}),
        "suite": suite_info().model_dump(),
        "environment": environment().model_dump(),
        "config": {
            "levels": list(sweep.levels),
            "max_requests": sweep.max_requests,
            "duration_s": sweep.duration_s,
            "warmup": sweep.warmup,
            "rpm": client.limits.rpm,
            "tpm": client.limits.tpm,
            "timeout_s": client.limits.timeout_s,
            "max_attempts": client.limits.max_attempts,
            "seed": args.seed,
            "cache": args.cache,
            **({"hit_prompts": args.hit_prompts} if args.cache == "hit" else {}),
        },
        "prompts": pool.describe(),
        "levels": [],
    }
    where = f"{record['prompts']['description']} -> {spec.name} at {client.base_url}"
    console.print(f"load: {where}", highlight=False, markup=False)

    def on_level(level: dict[str, Any]) -> None:
        record["levels"].append(level)
        write_json(record, out)  # after every level: an interrupted sweep keeps the levels it finished
        write_plot(record, png)
        cache = level.get("prefix_cache") or {}
        hits = "unknown" if cache.get("hit_rate") is None else f"{100 * cache['hit_rate']:.1f}%"
        console.print(
            f"  {level['concurrency']:>4} in flight: {level['output_tokens_per_s']:,.1f} output tok/s, "
            f"{level['requests_per_s']:.2f} req/s, {level['ok']} ok, {level['failed']} failed, prefix-cache hits "
            f"{hits} ({level['stopped_by']})",
            highlight=False,
        )

    asyncio.run(_sweep(client, pool.requests, sweep, on_level, prewarm=args.cache == "hit"))
    print(table(record["levels"]))
    console.print(f"wrote {out} and {png}", highlight=False, markup=False)
    return 1 if any(lv["failed"] for lv in record["levels"]) else 0


def _client(
    adapter: ModelAdapter, spec: ModelSpec, sweep: SweepConfig, args: argparse.Namespace
) -> ServedClient | ServerPool:
    """One client for the whole sweep: the adapter's endpoint(s), key variable and limits, with the CLI's
    overrides (several servers: a ServerPool, each server taking up to the level's requests in flight)."""
    from longctx_eval.models.openai.client import ClientLimits, ServedClient
    from longctx_eval.models.openai.pool import ServerPool
    from longctx_eval.models.openai.target import parse_target

    target = parse_target(spec.target, spec.raw)
    limits = getattr(adapter, "limits", None) or ClientLimits()
    changes: dict[str, Any] = {"max_in_flight": max(sweep.levels)}
    for name, value in (("rpm", args.rpm), ("tpm", args.tpm), ("timeout_s", args.timeout)):
        if value is not None:
            changes[name] = value
    try:
        limits = replace(limits, **changes)
    except ValueError as exc:
        raise ConfigError(f"load: {exc}") from None
    key_env = getattr(adapter, "api_key_env", None) or getattr(spec.options, "api_key_env", None) or "OPENAI_API_KEY"
    if len(target.base_urls) > 1:
        return ServerPool(target.base_urls, target.model, key_env, limits)
    return ServedClient(target.base_url, target.model, key_env, limits)


async def _sweep(
    client: ServedClient | ServerPool,
    requests: list[ServedRequest],
    sweep: SweepConfig,
    on_level: Callable[[dict[str, Any]], None],
    prewarm: bool = False,
) -> None:
    """Run the sweep on one event loop (reading the server's prefix-cache counters around each level) and close
    the client."""
    import os

    from longctx_eval.load_test.server_metrics import scrape
    from longctx_eval.load_test.sweep import run_sweep
    from longctx_eval.models.openai.client import server_root

    roots = [server_root(u) for u in getattr(client, "base_urls", [client.base_url])]
    key = os.environ.get(client.api_key_env) or None

    async def metrics() -> dict[str, Any] | None:
        return await scrape(roots, key)

    try:
        await run_sweep(client, requests, sweep, on_level, prewarm=prewarm, metrics=metrics)
    finally:
        await client.aclose()
