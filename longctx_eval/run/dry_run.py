"""`run --dry-run`: the requests a run would send, built and measured exactly as the runner does, never sent.

Per model and task: requests to send (after resume and the window check), prompt tokens (total, max), the
generation budget (max output tokens), an estimated cost from the price table and an estimated time from a
throughput (`--throughput-from`, else `--assume-throughput`, else the rates the model's run folder recorded in an
earlier run, else the default assumption; each model's source is printed). Per local model and length: the
memory its weights and KV cache will take (models/footprint.py) and whether that fits where it would run. A
config-only `hf:` folder (config.json and tokenizer, no weights) is measured through its tokenizer, loading nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError, LongctxError, TaskUnavailable
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.footprint import DTYPE_BYTES, Batching, Footprint, footprint, gigabytes, has_weights
from longctx_eval.models.loader import load_model
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import HFOptions, VLLMOptions
from longctx_eval.progress import duration_text, status
from longctx_eval.run.config import RunConfig, TaskPlan
from longctx_eval.run.cost import ModelPrice, PriceTable, calls, price_of
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.throughput import (  # noqa: F401  (measured_throughput, parse_assumed: also importable here)
    ThroughputModel,
    measured_throughput,
    parse_assumed,
    throughput_json,
)
from longctx_eval.run_folder.naming import run_dir_for
from longctx_eval.run_folder.predictions import PredictionStore, prediction_key
from longctx_eval.sample import Request

DEFAULT_PROMPT_TPS = 2000.0
DEFAULT_OUTPUT_TPS = 50.0


@dataclass(frozen=True)
class LengthLoad:
    """What one task sends at one length: requests, the longest sequence (prompt + its generation budget: what
    the KV cache holds at the end), prompt and output tokens."""

    requests: int = 0
    longest: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0

    def plus(self, other: LengthLoad) -> LengthLoad:
        """Two tasks' loads at one length together (requests add; `longest` is the longer)."""
        return LengthLoad(
            self.requests + other.requests,
            max(self.longest, other.longest),
            self.prompt_tokens + other.prompt_tokens,
            self.output_tokens + other.output_tokens,
        )


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
    by_length: Mapping[int, LengthLoad] = field(default_factory=dict)
    """Per length (the samples' target_tokens), what the task sends."""


@dataclass(frozen=True)
class DryRun:
    """A dry run's rows, and per model the memory estimate (None: not a local model, or no config here), the
    throughput its time was estimated with, and whether it was a config-only folder."""

    rows: list[DryRow]
    footprints: dict[str, Footprint | None]
    throughputs: dict[str, ThroughputModel]
    config_only: frozenset[str] = frozenset()


class ConfigOnlyModel(ModelAdapter):
    """A config-only `hf:` folder (config.json and tokenizer, no weights) in a dry run: prompts are rendered and
    counted by its tokenizer exactly as `hf:` renders them, the window comes from its config; nothing can be
    generated, and its identity is not the loaded model's (resume is not checked)."""

    capabilities = frozenset({Capability.GENERATE, Capability.ATTENTION, Capability.LOGLIKELIHOOD})

    def __init__(self, spec: ModelSpec) -> None:
        from longctx_eval.models.hf.adapter import uses_chat
        from longctx_eval.models.hf.config import plan_load
        from longctx_eval.models.model_source import hf_source, hf_tokenizer_pair

        o = cast("HFOptions", spec.options)
        self.hf_tok, tok = hf_tokenizer_pair(spec)
        source = hf_source(spec.target, o.revision)
        plan = plan_load(spec.raw, o, source, {"revision": o.revision} if o.revision else {})
        self.use_chat = uses_chat(spec, self.hf_tok)
        settings = {"decoding": "greedy", "chat": self.use_chat, "config_only": True}
        meta = model_meta(spec, tok, self.capabilities, context_window=plan.window.tokens, settings=settings)
        super().__init__(meta, tok)

    def prompt_tokens(self, request: Request) -> int:
        from longctx_eval.models.hf.adapter import render_ids

        if "input_ids" in request.extra:  # a probe request is sent as these exact ids, as `hf:` counts it
            return len(request.extra["input_ids"])
        return len(render_ids(self.hf_tok, self.use_chat, request))


def run_rates(path: Path, label: str) -> ThroughputModel | None:
    """The rates an earlier run recorded in its run.json: prefill and decode tokens/s where its tasks split their
    time (`hf:`), else one combined rate (tokens over model seconds); None when no task measured any."""
    from longctx_eval.results import parse_run

    timed = [t for t in parse_run(path.read_bytes(), str(path)).tasks if t.throughput.seconds > 0]
    prompt = [t.throughput.prompt_tokens_per_s * t.throughput.seconds for t in timed]
    output = [(t.throughput.output_tokens_per_s or 0.0) * t.throughput.seconds for t in timed]
    if sum(prompt) + sum(output) <= 0:
        return None
    lengths = sorted({n for t in timed for n in t.lengths or []})
    at = f" at {lengths[0]:,}-{lengths[-1]:,} tokens" if lengths else ""
    by = f"measured by its earlier run of {', '.join(t.name for t in timed)}{at}, applied at every length ({path})"
    pre = [i for i, t in enumerate(timed) if (t.throughput.prefill_seconds or 0) > 0 and prompt[i] > 0]
    dec = [i for i, t in enumerate(timed) if (t.throughput.decode_seconds or 0) > 0 and output[i] > 0]
    if pre and dec:
        prefill = sum(prompt[i] for i in pre) / sum(timed[i].throughput.prefill_seconds or 0.0 for i in pre)
        decode = sum(output[i] for i in dec) / sum(timed[i].throughput.decode_seconds or 0.0 for i in dec)
        return ThroughputModel(prefill, decode, f"{label}: {prefill:,.0f} prefill + {decode:,.1f} decode tokens/s {by}")
    tps = (sum(prompt) + sum(output)) / sum(t.throughput.seconds for t in timed)
    one = "prompt and output at one rate (no prefill/decode split recorded)"
    return ThroughputModel(tps, tps, f"{label}: {tps:,.0f} tokens/s, {one}, {by}")


def choose_throughput(
    config: RunConfig, assume: str | None, measured: Path | None
) -> Callable[[ModelSpec], ThroughputModel]:
    """Each model's throughput for the time estimate: `--throughput-from` (a load JSON, or an earlier run's
    run.json), else `--assume-throughput`, else the model's own run folder's earlier rates, else the default
    assumption; the source is in each model's `source`."""
    if measured is not None:
        where, data = throughput_json(measured)
        if isinstance(data, dict) and data.get("kind") == "load_test":
            loaded = measured_throughput(measured)
            fixed = ThroughputModel(loaded.prompt_tps, loaded.output_tps, f"load JSON: {loaded.source}")
        else:
            found = run_rates(where, "--throughput-from run.json")
            if found is None:
                raise ConfigError(f"--throughput-from {where}: no task with measured seconds and tokens")
            fixed = found
        return lambda spec: fixed
    if assume is not None:
        stated = parse_assumed(assume)
        given = ThroughputModel(stated.prompt_tps, stated.output_tps, f"{stated.source} (--assume-throughput)")
        return lambda spec: given

    def own(spec: ModelSpec) -> ThroughputModel:
        path = run_dir_for(config.out, spec, config.shard) / "run.json"
        found = run_rates(path, "this run folder") if path.is_file() else None
        if found is not None:
            return found
        return ThroughputModel(
            DEFAULT_PROMPT_TPS,
            DEFAULT_OUTPUT_TPS,
            f"assumed {DEFAULT_PROMPT_TPS:g} prompt + {DEFAULT_OUTPUT_TPS:g} output tokens/s, the default (no "
            "--throughput-from, no --assume-throughput, no measured run in this run folder)",
        )

    return own


def config_only(spec: ModelSpec) -> bool:
    """Whether `spec` is an `hf:` model whose local folder has a config.json but no weight files."""
    if spec.kind != "hf" or not isinstance(spec.options, HFOptions) or spec.options.gguf_file:
        return False
    folder = Path(spec.target).expanduser()
    return folder.is_dir() and (folder / "config.json").is_file() and not has_weights(folder)


def dry_run(
    plans: Sequence[tuple[ModelSpec, Sequence[TaskPlan]]],
    config: RunConfig,
    table: PriceTable,
    throughput: Callable[[ModelSpec], ThroughputModel],
    resume: bool = True,
    gpus: Sequence[tuple[str, int]] | None = None,
) -> DryRun:
    """Every model's tasks measured as a run would measure them (`resume` False: as with --no-resume, nothing
    counts as done), each model's memory estimated (`gpus`: the CUDA devices as (name, bytes), None: those torch
    sees) and its time at `throughput(spec)`; no generation request is sent and nothing is written."""
    rows: list[DryRow] = []
    footprints: dict[str, Footprint | None] = {}
    rates: dict[str, ThroughputModel] = {}
    bare: set[str] = set()
    for spec, tasks in plans:
        priced = price_of(spec, table)
        rate = rates[spec.name] = throughput(spec)
        sized = None
        if config_only(spec):  # its config is all there is: read it first, so a bad field is named as such
            sized = footprint(spec, gpus)
            bare.add(spec.name)
        with status(f"loading {spec.raw}"):
            adapter = ConfigOnlyModel(spec) if spec.name in bare else load_model(spec)
        try:
            footprints[spec.name] = sized if spec.name in bare else footprint(spec, gpus)
            path = run_dir_for(config.out, spec, config.shard) / "predictions.jsonl"
            held = resume and path.exists() and spec.name not in bare
            done_keys = PredictionStore(path, repair=False).records if held else {}
            for plan in tasks:
                try:
                    rows.append(_task_row(spec, plan, adapter, config, done_keys, priced, rate))
                except TaskUnavailable as exc:
                    rows.append(DryRow(spec.name, plan.info.name, skipped=str(exc)))
                except LongctxError as exc:
                    rows.append(DryRow(spec.name, plan.info.name, skipped=f"error: {exc}"))
        finally:
            adapter.close()
    return DryRun(rows, footprints, rates, frozenset(bare))


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
        built = plan_samples(plan, config.seed, adapter.tokenizer, shard=config.shard)
    narrowed = built.task.requires  # as the runner: the task's arguments may narrow what it runs on
    if narrowed is not None:
        capability = narrowed.pick(adapter.capabilities)
        if capability is None:
            return DryRow(spec.name, info.name, skipped=f"model lacks capability {narrowed.describe()}")
    todo, done = [], 0
    for group in built.groups:  # as the runner: each argument group through the task built for it
        bound = adapter.bind(group.task, group.samples)
        for s in group.samples:
            for r in group.task.requests(s, capability):
                key = prediction_key(info.name, info.version, f"{s.id}#{r.part}", r, adapter.identity)
                held = done_keys.get(key)
                if isinstance(held, Mapping) and held.get("status") != "error":  # failed ones are redone
                    done += 1
                else:
                    todo.append((bound, r, int(s.metadata.get("target_tokens", 0))))
    measured = [(b, r, b.prompt_tokens(r), length) for b, r, length in todo]
    fits = [(b, r, n, length) for b, r, n, length in measured if not (capability.windowed and not b.fits(r, n))]
    billed = [(length, calls(b, r, n)) for b, r, n, length in fits]  # a served choice request: a call per choice
    prompt = sum(p for _, cs in billed for p, _ in cs)
    output = sum(o for _, cs in billed for _, o in cs)
    by_length: dict[int, LengthLoad] = {}
    for length, cs in billed:
        p, o = sum(c[0] for c in cs), sum(c[1] for c in cs)
        by_length[length] = by_length.get(length, LengthLoad()).plus(LengthLoad(1, p + o, p, o))
    return DryRow(
        model=spec.name,
        task=info.name,
        requests=len(fits),
        done=done,
        over_window=len(measured) - len(fits),
        prompt_tokens=prompt,
        max_prompt_tokens=max((n for _, _, n, _ in fits), default=0),
        max_output_tokens=output,
        cost_usd=priced.cost(prompt, output),
        seconds=throughput.seconds(prompt, output),
        by_length=by_length,
    )


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def batching(spec: ModelSpec, fp: Footprint) -> Batching:
    """How the runner and the adapter batch a local model's requests where it would run (the KV cache's batch)."""
    from longctx_eval.models.hf.batching import AUTO_BUDGET_CAP, AUTO_MAX_REQUESTS

    if isinstance(spec.options, VLLMOptions):
        return Batching("vllm: one sequence shown; continuous batching fills the rest of its KV pool")
    o = cast("HFOptions", spec.options)
    if o.batch_size != "auto":
        return Batching(f"batch_size={o.batch_size}", int(o.batch_size))
    if not fp.placement.cuda:
        return Batching("batch_size=auto on the CPU: 1")
    budget = o.max_batch_tokens or AUTO_BUDGET_CAP
    source = "max_batch_tokens" if o.max_batch_tokens else "the automatic budget's cap"
    rule = f"batch_size=auto on CUDA: packed, at most {AUTO_MAX_REQUESTS} sequences and {budget:,} tokens ({source})"
    return Batching(rule, AUTO_MAX_REQUESTS, budget)


def _memory_lines(result: DryRun, specs: Sequence[ModelSpec]) -> list[str]:
    """Per local model and length: weights, KV cache, total, whether it fits and the time, then each figure's
    inputs (all of them estimates)."""
    head = ("model", "length", "requests", "longest", "batch", "dtype", "weights", "KV cache", "total", "fits", "time")
    body: list[tuple[str, ...]] = []
    notes: list[str] = []
    for spec in specs:
        fp = result.footprints.get(spec.name)
        if fp is None:
            if spec.kind not in ("hf", "vllm"):
                why = "only hf: and vllm: models are"
            else:
                why = "a GGUF checkpoint" if getattr(spec.options, "gguf_file", None) else "no config.json here"
            notes.append(f"memory of {spec.name}: not estimated ({why}).")
            continue
        loads: dict[int, LengthLoad] = {}
        most: dict[int, int] = {}  # the most requests one task sends at a length: what a batch can hold
        for row in result.rows:
            if row.model == spec.name and row.skipped is None:
                for length, load in row.by_length.items():
                    loads[length] = loads.get(length, LengthLoad()).plus(load)
                    most[length] = max(most.get(length, 0), load.requests)
        rate = result.throughputs[spec.name]
        batched = batching(spec, fp)
        for length in sorted(loads):
            load = loads[length]
            mem = fp.row(length, most[length], load.longest, batched)
            body.append(
                (
                    spec.name,
                    f"{length:,}",
                    f"{load.requests:,}",
                    f"{load.longest:,}",
                    f"{mem.batch:,}",
                    fp.dtype,
                    gigabytes(mem.weights_bytes),
                    gigabytes(mem.kv_bytes),
                    gigabytes(mem.total_bytes),
                    fp.fits(mem),
                    duration_text(rate.seconds(load.prompt_tokens, load.output_tokens)),
                )
            )
        per_token = fp.attention.kv_bytes(1, DTYPE_BYTES[fp.dtype])
        short = f"; it cannot run there: {fp.placement.shortfall}" if fp.placement.shortfall else ""
        notes += [
            f"{spec.name} (estimates, before the run):",
            f"  weights: {fp.weights_source}; parameters from {fp.params.source}; dtype: {fp.dtype_source}",
            f"  KV cache: {per_token:,} bytes per token = {fp.attention.describe(fp.dtype)}; x the longest sequence "
            f"(its prompt + generation budget) x the batch ({batched.rule})",
            f"  fits: weights + KV cache against {fp.placement.label}{short}; activations, the CUDA context and "
            "fragmentation come on top",
        ]
        if spec.name in result.config_only:
            notes.append(
                "  a config-only folder: prompts counted with its tokenizer and window, no weights loaded (there are "
                "none); earlier predictions were not looked up"
            )
    if not body:
        return notes
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    return ["memory and time per model and length (GB = 10^9 bytes):", *lines, "", *notes]


def render(
    result: DryRun,
    table: PriceTable,
    specs: Sequence[ModelSpec],
    max_cost: float | None = None,
) -> str:
    """The dry run as plain-text tables (per model and task; per local model and length), with totals and every
    estimate's inputs stated."""
    rows = result.rows
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
                duration_text(r.seconds),
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
            duration_text(sum(r.seconds for r in live)),
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
    for spec in specs:
        notes.append(f"time of {spec.name}: {result.throughputs[spec.name].source}.")
    if max_cost is not None and total_cost is not None and total_cost > max_cost:
        notes.append(
            f"--max-cost ${max_cost:,.4f} is below the upper bound ${total_cost:,.4f}: the run may stop before the "
            "end (what it computed is kept; a rerun with a larger budget continues)."
        )
    memory = _memory_lines(result, specs)
    return "\n".join(lines + [""] + notes + ([""] + memory if memory else []))
