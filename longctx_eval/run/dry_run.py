"""`run --dry-run`: the requests a run would send, built and measured exactly as the runner does, never sent.

Per model and task: requests to send (after resume and the window check), prompt tokens (total, max), the
generation budget (max output tokens), an estimated cost from the price table and an estimated time from a
stated throughput (assumed, or measured by an earlier run or load test).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from longctx_eval.errors import LongctxError, TaskUnavailable
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.loader import load_model
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.progress import status
from longctx_eval.run.config import RunConfig, TaskPlan
from longctx_eval.run.cost import ModelPrice, PriceTable, output_budget, price_of
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.throughput import (  # noqa: F401  (measured_throughput, parse_assumed: also importable here)
    ThroughputModel,
    measured_throughput,
    parse_assumed,
)
from longctx_eval.run_folder.naming import run_dir_for
from longctx_eval.run_folder.predictions import PredictionStore, prediction_key

DEFAULT_PROMPT_TPS = 2000.0
DEFAULT_OUTPUT_TPS = 50.0


@dataclass(frozen=True)
class DryRow:
    """One model x task of a dry run."""

    model: str
    task: str
    requests: int = 0
    """Requests the run would send: not yet done (resume), fitting the window."""
    done: int = 0
    over_window: int = 0
    prompt_tokens: int = 0
    max_prompt_tokens: int = 0
    max_output_tokens: int = 0
    """The sum of the requests' generation budgets: an upper bound on output tokens."""
    cost_usd: float | None = 0.0
    seconds: float = 0.0
    skipped: str | None = None


def dry_run(
    plans: Sequence[tuple[ModelSpec, Sequence[TaskPlan]]],
    config: RunConfig,
    table: PriceTable,
    throughput: ThroughputModel,
    resume: bool = True,
) -> list[DryRow]:
    """Every model's tasks measured as a run would measure them (`resume` False: as with --no-resume, nothing
    counts as done); no generation request is sent and nothing is written."""
    rows: list[DryRow] = []
    for spec, tasks in plans:
        priced = price_of(spec, table)
        with status(f"loading {spec.raw}"):
            adapter = load_model(spec)
        try:
            path = run_dir_for(config.out, spec) / "predictions.jsonl"
            done_keys = PredictionStore(path, repair=False).records if resume and path.exists() else {}
            for plan in tasks:
                try:
                    rows.append(_task_row(spec, plan, adapter, config, done_keys, priced, throughput))
                except TaskUnavailable as exc:
                    rows.append(DryRow(spec.name, plan.info.name, skipped=str(exc)))
                except LongctxError as exc:
                    rows.append(DryRow(spec.name, plan.info.name, skipped=f"error: {exc}"))
        finally:
            adapter.close()
    return rows


def _task_row(
    spec: ModelSpec,
    plan: TaskPlan,
    adapter: ModelAdapter,
    config: RunConfig,
    done_keys: Mapping[str, object],
    priced: ModelPrice,
    throughput: ThroughputModel,
) -> DryRow:
    """One task measured as runner._run_task and runner._generate do, up to (not including) serving."""
    info = plan.info
    capability = info.requires.pick(adapter.capabilities)
    if capability is None:
        return DryRow(spec.name, info.name, skipped=f"model lacks capability {info.requires.describe()}")
    with status(f"building {info.name} samples"):
        built = plan_samples(plan, config.seed, adapter.tokenizer)
    todo, done = [], 0
    for group in built.groups:  # as the runner: each argument group through the task built for it
        bound = adapter.bind(group.task, group.samples)
        for s in group.samples:
            for r in group.task.requests(s):
                key = prediction_key(info.name, info.version, f"{s.id}#{r.part}", r, adapter.identity)
                held = done_keys.get(key)
                if isinstance(held, Mapping) and held.get("status") != "error":  # failed ones are redone
                    done += 1
                else:
                    todo.append((bound, r))
    measured = [(b, r, b.prompt_tokens(r)) for b, r in todo]
    fits = [(b, r, n) for b, r, n in measured if not (capability.windowed and not b.fits(r, n))]
    prompt = sum(n for _, _, n in fits)
    output = sum(output_budget(b, r) for b, r, _ in fits)
    return DryRow(
        model=spec.name,
        task=info.name,
        requests=len(fits),
        done=done,
        over_window=len(measured) - len(fits),
        prompt_tokens=prompt,
        max_prompt_tokens=max((n for _, _, n in fits), default=0),
        max_output_tokens=output,
        cost_usd=priced.cost(prompt, output),
        seconds=throughput.seconds(prompt, output),
    )


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(
    rows: Sequence[DryRow],
    table: PriceTable,
    throughput: ThroughputModel,
    specs: Sequence[ModelSpec],
    max_cost: float | None = None,
) -> str:
    """The dry run as a plain-text table, with totals and the assumptions stated."""
    head = (
        "model",
        "task",
        "requests",
        "done",
        "over window",
        "prompt tok",
        "max prompt",
        "max output",
        "cost",
        "time",
    )
    body = []
    for r in rows:
        if r.skipped is not None:
            body.append((r.model, r.task, "-", "-", "-", "-", "-", "-", "-", f"skipped: {r.skipped}"))
            continue
        body.append(
            (
                r.model,
                r.task,
                f"{r.requests:,}",
                f"{r.done:,}",
                f"{r.over_window:,}",
                f"{r.prompt_tokens:,}",
                f"{r.max_prompt_tokens:,}",
                f"{r.max_output_tokens:,}",
                _usd(r.cost_usd),
                _duration(r.seconds),
            )
        )
    live = [r for r in rows if r.skipped is None]
    costs = [r.cost_usd for r in live]
    total_cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    body.append(
        (
            "total",
            "",
            f"{sum(r.requests for r in live):,}",
            f"{sum(r.done for r in live):,}",
            f"{sum(r.over_window for r in live):,}",
            f"{sum(r.prompt_tokens for r in live):,}",
            f"{max((r.max_prompt_tokens for r in live), default=0):,}",
            f"{sum(r.max_output_tokens for r in live):,}",
            _usd(total_cost),
            _duration(sum(r.seconds for r in live)),
        )
    )
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head) - 1)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in [head, *body]
    ]
    notes = ["dry run: no generation request was sent and nothing was written."]
    notes.append(
        "cost: prompt tokens x input price + max output tokens x output price (an upper bound on output), "
        f"prices from {table.path}" + (f" (as of {table.as_of})" if table.as_of else "") + "; local models cost 0."
    )
    for spec in specs:
        priced = price_of(spec, table)
        if not priced.local and priced.price is None:
            notes.append(
                f"cost of {spec.name} is unknown: served model {priced.served!r} is not in the price table; add it "
                "there or pass --prices FILE."
            )
    notes.append(f"time: {throughput.source}; for local models too (see --assume-throughput, --throughput-from).")
    if max_cost is not None and total_cost is not None and total_cost > max_cost:
        notes.append(
            f"--max-cost ${max_cost:,.4f} is below the upper bound ${total_cost:,.4f}: the run may stop before the "
            "end (what it computed is kept; a rerun with a larger budget continues)."
        )
    return "\n".join(lines + [""] + notes)
