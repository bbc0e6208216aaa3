"""The runner: for each model, builds each task's samples, serves them in batches, appends predictions, scores.

A task that cannot run here is skipped with its reason, never fatal to the model's other tasks; a run
folder is locked for the run and belongs to one model identity.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_text, ensure_dir
from longctx_eval.capability import Capability
from longctx_eval.errors import (
    ConfigError,
    DataError,
    LongctxError,
    ModelFileError,
    OutputError,
    TaskUnavailable,
)
from longctx_eval.hashing import sha256_text
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.loader import load_model
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.progress import console, console_text, progress_bar, status
from longctx_eval.provenance import environment, suite_info
from longctx_eval.results import Skipped, failure_summary, task_failed
from longctx_eval.run.config import RunConfig, TaskPlan
from longctx_eval.run.cost import Budget, BudgetStop, calls
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.sampling import dataset_hash
from longctx_eval.run_folder.lock import RunFolderBusy, RunLock
from longctx_eval.run_folder.manifest import Manifest, ShardEntry, TaskEntry, now_iso, read_manifest, write_manifest
from longctx_eval.run_folder.naming import check_same_identity, check_same_model, run_dir_for
from longctx_eval.run_folder.paths import inside
from longctx_eval.run_folder.predictions import PredictionStore, prediction_key, prediction_to_record
from longctx_eval.sample import Prediction, Request, Sample, stratum_of
from longctx_eval.scoring.score import print_summary, score_run_dir
from longctx_eval.task import Task, TaskInfo


@dataclass
class ModelOutcome:
    """What one model's run produced: its run file (None if it failed), errors and skips."""

    spec: ModelSpec
    run_file: Path | None
    errors: list[str]
    skipped: list[Skipped]
    stopped: str | None = None
    """Why the run stopped early (the --max-cost budget); what was computed is kept."""
    failed: list[str] = field(default_factory=list)
    """'task: reason' of each task that crashed or whose every request failed (the run exits non-zero)."""
    bad_input: bool = False
    """The model was refused for its spec or its files, or a task for its arguments or data (a ConfigError,
    DataError, ModelFileError): the run exits 2."""


def run_models(plans: Sequence[tuple[ModelSpec, Sequence[TaskPlan]]], config: RunConfig) -> list[ModelOutcome]:
    """Run every model on its tasks; a failing model does not stop the others."""
    outcomes = []
    for spec, tasks in plans:
        try:
            outcomes.append(run_model(spec, tasks, config))
        except OutputError:
            raise  # a full or read-only disk: nothing more can be saved; one line, exit 2, what is written stays
        except LongctxError as exc:
            console.print(
                f"[red]error[/red] model {console_text(repr(spec.raw))}: {console_text(exc)}", highlight=False
            )
            bad = isinstance(exc, (ConfigError, ModelFileError))
            outcomes.append(ModelOutcome(spec, None, [str(exc)], [], bad_input=bad))
        if outcomes[-1].stopped:  # the budget is the invocation's: later models are not started
            break
    return outcomes


def run_model(spec: ModelSpec, tasks: Sequence[TaskPlan], config: RunConfig) -> ModelOutcome:
    """Generate (resuming) then score one model's tasks in its run folder; returns what happened."""
    run_dir = ensure_dir(run_dir_for(config.out, spec, config.shard))
    with RunLock(run_dir):
        manifest = read_manifest(run_dir)
        check_same_model(run_dir, manifest, spec)
        adapter = _load_recorded(run_dir, spec)
        try:
            note = check_same_identity(run_dir, manifest, adapter.meta, spec)
            if note is not None:  # a folder from before model files were hashed: same model, predictions redone
                console.print(f"[yellow]note[/yellow] {console_text(note)}", highlight=False)
            manifest = _fresh_manifest(manifest, adapter)
            write_manifest(run_dir, manifest)
            caps = ", ".join(sorted(adapter.capabilities))
            # the name is bold up to its colon: console_text keeps a value's trailing backslash off a tag after it
            who = console_text(f"{spec.name}:")
            console.print(f"[bold]{who}[/bold] {type(adapter).__name__}, serves {console_text(caps)}", highlight=False)
            store = PredictionStore(inside(run_dir, "predictions.jsonl"))
            for warning in store.warnings:
                console.print(f"[yellow]warning[/yellow] {console_text(warning)}", highlight=False)
            skipped: list[Skipped] = []
            task_errors: list[str] = []
            bad_input = False  # a task refused its arguments or its data files: the run exits 2
            crashed: list[str] = []
            stopped: str | None = None
            for plan in tasks:
                name = plan.info.name
                try:
                    skip = _run_task(plan, adapter, config, run_dir, store, manifest)
                except BudgetStop as stop:  # --max-cost: keep what was computed, score it, start nothing more
                    stopped = str(stop)
                    console.print(f"[yellow]stopped[/yellow] {console_text(f'{name}: {stopped}')}", highlight=False)
                    break
                except (OutputError, RunFolderBusy):
                    raise  # the folder itself cannot be written: nothing more can be saved
                except LongctxError as exc:  # one task's bug never costs the model's other tasks
                    console.print(f"[red]error[/red] {console_text(f'{name}: {exc}')}", highlight=False)
                    task_errors.append(f"{name}: {exc}")
                    bad_input = bad_input or isinstance(exc, (ConfigError, DataError, ModelFileError))
                    skip = Skipped(task=name, reason=str(exc), kind="error")
                except Exception as exc:  # a crash (a bug, a library's error) costs this task only, never the file
                    skip = _crashed(run_dir, name, exc)
                    text = console_text(f"{name}: {skip.reason}")
                    console.print(f"[red]crashed[/red] {text}", highlight=False, soft_wrap=True)
                    crashed.append(f"{name}: {skip.reason}")
                if skip is not None:
                    if skip.kind not in ("error", "crashed"):
                        console.print(
                            f"[yellow]skipped[/yellow] {console_text(f'{name}: {skip.reason}')}", highlight=False
                        )
                        skipped.append(skip)
                    manifest.skipped[name] = skip
                else:
                    manifest.skipped.pop(name, None)
                write_manifest(run_dir, manifest)
                _write_run_file(run_dir, config, name)
        finally:
            adapter.close()
        report = score_run_dir(
            run_dir, include_paths=config.include_paths, effective=config.effective, composite=config.composite
        )
    console.print(f"wrote {console_text(run_dir / 'run.json')}", highlight=False)
    ran = {p.info.name for p in tasks}
    print_summary(report, announced=ran)
    errors = task_errors + [e for e in report.errors if e.split(":", 1)[0] in ran]
    failed = crashed + [
        f"{t.name}: failed: {failure_summary(t.failures)}" for t in report.run.tasks if t.name in ran and task_failed(t)
    ]
    return ModelOutcome(spec, run_dir / "run.json", errors, skipped, stopped, failed, bad_input=bad_input)


CRASH_LOGS = "logs"
"""RUN_DIR/logs/<task>.log: the traceback of a task that crashed (the console and run file get one line)."""
LOAD_LOG = "load.log"
"""RUN_DIR/logs/load.log: why the model could not load (a server down, a refused architecture), kept until it loads;
the leaderboard shows it for a run folder that has no run.json, so a model that never ran is not silently absent."""


def _load_recorded(run_dir: Path, spec: ModelSpec) -> ModelAdapter:
    """Load the model; a refusal is written to RUN_DIR/logs/load.log before it propagates, removed once it loads."""
    log = inside(run_dir, CRASH_LOGS, LOAD_LOG)
    try:
        with status(f"loading {spec.raw}"):
            adapter = load_model(spec)
    except LongctxError as exc:
        atomic_write_text(log, f"{now_iso()} model {spec.name} could not load\n{exc}\n")
        raise
    log.unlink(missing_ok=True)
    return adapter


def _crashed(run_dir: Path, task: str, exc: Exception) -> Skipped:
    """Record a crashed task: its traceback to RUN_DIR/logs/<task>.log, one line of reason for the run file."""
    log = run_dir / CRASH_LOGS / f"{task}.log"
    text = "".join(traceback.format_exception(exc))
    try:
        atomic_write_text(log, f"{now_iso()} task {task} crashed\n{text}")
        where = f"traceback in {log}"
    except OutputError as write_error:
        where = f"its traceback could not be written: {write_error}"
    message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return Skipped(task=task, reason=f"{message} ({where})", kind="crashed")


def _write_run_file(run_dir: Path, config: RunConfig, task: str) -> None:
    """run.json after each task, so a later crash or kill never loses a finished task's results.

    Only `task` is rescored (the others keep their entries); the final scoring pass redoes and reports them all.
    """
    try:
        score_run_dir(
            run_dir,
            include_paths=config.include_paths,
            effective=config.effective,
            composite=config.composite,
            only=[task],
            echo=False,
        )
    except OutputError:
        raise
    except Exception as exc:  # the final scoring pass reports it; generation of the next task goes on
        console.print(
            f"[yellow]warning[/yellow] run.json not updated after {console_text(f'{task}: {exc}')}", highlight=False
        )


def _fresh_manifest(held: Manifest | None, adapter: ModelAdapter) -> Manifest:
    """The folder's manifest with this run's model, suite and environment (task entries kept)."""
    base: dict[str, Any] = {
        "suite": suite_info(),
        "model": adapter.meta,
        "environment": environment(),
        "identity": dict(adapter.identity),
    }
    if held is None:
        return Manifest(**base, started=now_iso())
    return held.model_copy(update=base)


def _run_task(
    plan: TaskPlan, adapter: ModelAdapter, config: RunConfig, run_dir: Path, store: PredictionStore, manifest: Manifest
) -> Skipped | None:
    """Generate one task's predictions; returns the reason when the task is skipped."""
    info = plan.info
    capability = info.requires.pick(adapter.capabilities)
    if capability is None:
        serves = ", ".join(sorted(adapter.capabilities))
        reason = f"model lacks capability {info.requires.describe()} (it serves {serves})"
        return Skipped(task=info.name, reason=reason, kind="capability")
    refusal = adapter.unsupported(capability)  # pre-flight: the architecture, from the config, before any sample
    if refusal is not None:
        return Skipped(task=info.name, reason=refusal, kind="capability")
    started = now_iso()
    t0 = time.perf_counter()  # the entry's seconds: building the samples and serving them (the task's wall time)
    try:
        with status(f"building {info.name} samples"):
            built = plan_samples(plan, config.seed, adapter.tokenizer, shard=config.shard)
    except TaskUnavailable as exc:
        return Skipped(task=info.name, reason=str(exc), kind="missing_data")
    for group in built.groups:
        if group.origin != "built":
            where = "this process's memory" if group.origin == "memory" else "the sample cache on disk"
            lengths = ", ".join(map(str, group.lengths))
            console.print(
                f"{info.name}: samples at {lengths} read from {where} ({group.seconds:.1f} s)",
                highlight=False,
                markup=False,
            )
    narrowed = built.task.requires  # the task's arguments may narrow what it runs on (coref's mode=)
    if narrowed is not None:
        capability = narrowed.pick(adapter.capabilities)
        if capability is None:
            serves = ", ".join(sorted(adapter.capabilities))
            reason = f"model lacks capability {narrowed.describe()} (it serves {serves})"
            return Skipped(task=info.name, reason=reason, kind="capability")
        refusal = adapter.unsupported(capability)
        if refusal is not None:
            return Skipped(task=info.name, reason=refusal, kind="capability")
    samples = built.samples
    requests = [g.task.requests(s, capability) for g in built.groups for s in g.samples]
    keys = [
        [prediction_key(info.name, info.version, f"{s.id}#{r.part}", r, adapter.identity) for r in reqs]
        for s, reqs in zip(samples, requests, strict=True)
    ]
    samples_sha = _write_samples(inside(run_dir, "samples", f"{info.name}.jsonl"), samples, requests, keys)
    entry = TaskEntry(
        name=info.name,
        version=info.version,
        capability=capability.value,
        status="running",
        dataset_hash=dataset_hash(samples),
        n_samples=len(samples),
        lengths=plan.resolved_lengths,
        limit=plan.limit,
        args=dict(plan.args),
        length_args={str(n): a for n, a in plan.applied_length_args.items()},
        seed=config.seed,
        started=started,
        samples_sha256=samples_sha,
        planned=[(length, depth, n) for (length, depth), n in sorted(built.planned.items(), key=_stratum_order)],
        include_paths=list(config.include_paths),
        shard=None if config.shard is None else ShardEntry.of(config.shard, built.total, built.positions),
    )
    manifest.tasks[info.name] = entry
    manifest.skipped.pop(info.name, None)  # an earlier run's skip no longer explains this task
    write_manifest(run_dir, manifest)
    warnings: list[str] = []
    start = 0
    for group in built.groups:  # each argument group is served with the task built for it
        end = start + len(group.samples)
        warnings += _generate(
            info,
            group.task,
            group.samples,
            requests[start:end],
            keys[start:end],
            adapter,
            capability,
            store,
            config.budget,
        )
        start = end
    manifest.tasks[info.name] = entry.model_copy(
        update={"status": "generated", "seconds": round(time.perf_counter() - t0, 3), "warnings": warnings}
    )
    return None


def _stratum_order(item: tuple[tuple[int, float | None], int]) -> tuple:
    (length, depth), _ = item
    return (length, depth is not None, depth or 0.0)


def _generate(
    info: TaskInfo,
    task: Task,
    samples: Sequence[Sample],
    requests: Sequence[list[Request]],
    keys: Sequence[list[str]],
    adapter: ModelAdapter,
    capability: Capability,
    store: PredictionStore,
    budget: Budget | None = None,
) -> list[str]:
    """Measure every pending prompt, record over-window ones (never sent), serve the rest in length-sorted batches
    (an adapter that `measures_lazily` has each batch measured just before it is served)."""
    name = info.name
    bound = adapter.bind(task, samples)
    todo = [(i, r) for i, reqs in enumerate(requests) for r in reqs if not _done(store, keys[i][r.part])]
    total = sum(len(ks) for ks in keys)
    if len(todo) < total:
        console.print(f"{name}: {total - len(todo)} of {total} predictions already done (resumed)", markup=False)
    batch_size = max(1, int(getattr(bound, "batch_size", 1) or 1))
    lazy = bool(getattr(bound, "measures_lazily", False))
    if lazy:
        pending = serving_order([(i, r, 0) for i, r in todo], samples)
        chunks = [pending[s : s + batch_size] for s in range(0, len(pending), batch_size)]
        over: list[tuple[int, Request, int]] = []
    else:
        fits, over = _measure(bound, capability, todo)  # a coref system's one request has no prompt
        fits = serving_order(fits, samples)
        chunks = [fits[s : s + batch_size] for s in range(0, len(fits), batch_size)]
    warnings = _over_window_warning(name, adapter, samples, requests, over)  # before serving, where measured
    late_over: list[tuple[int, Request, int]] = []
    with progress_bar() as bar:
        job = bar.add_task(console_text(f"{name} [{adapter.meta.name}]"), total=total, completed=total - len(todo))

        def record_over(items: list[tuple[int, Request, int]]) -> None:
            for i, r, n in items:
                window = adapter.meta.context_window
                after = f"longest choice {bound.output_tokens(r)}" if r.choices else f"generation {r.max_new_tokens}"
                msg = f"prompt {n} + {after} tokens > context window {window}"
                pred = Prediction(status="over_length", prompt_tokens=n, error=msg)
                _save(store, keys[i][r.part], info, samples[i], r, capability, pred)
                bar.advance(job)

        record_over(over)
        first = next_batch(store, name)  # batches are numbered on across resumed runs (drift per batch)
        for index, chunk in enumerate(chunks):
            batch = chunk
            if lazy:
                batch, late = _measure(bound, capability, [(i, r) for i, r, _ in chunk])
                record_over(late)
                late_over.extend(late)
                if not batch:
                    continue
            number = first + index
            if budget is not None:  # --max-cost: spent + this batch's upper bound must stay within the budget
                bounds = [calls(bound, r, n) for _, r, n in batch]
                budget.before(adapter.meta.spec, [c for cs in bounds for c in cs])
            early: set[int] = set()  # requests saved as their reply arrived (served models), by id()

            def arrived(
                r: Request, pred: Prediction, batch: list = batch, early: set[int] = early, number: int = number
            ) -> None:
                i, n = next((i, n) for i, x, n in batch if x is r)
                pred = replace(pred, prompt_tokens=n or pred.prompt_tokens)
                _save(store, keys[i][r.part], info, samples[i], r, capability, pred, number)
                early.add(id(r))

            bound.on_prediction = arrived
            try:
                preds = _serve(bound, capability, [r for _, r, _ in batch])
            finally:
                bound.on_prediction = None
            if budget is not None:
                budget.after(adapter.meta.spec, bounds, preds)
            for (i, r, n), pred in zip(batch, preds, strict=True):
                if id(r) not in early:
                    pred = replace(pred, prompt_tokens=n or pred.prompt_tokens)
                    _save(store, keys[i][r.part], info, samples[i], r, capability, pred, number)
            bar.advance(job, len(batch))
    return warnings + _over_window_warning(name, adapter, samples, requests, late_over)


def _measure(
    bound: ModelAdapter, capability: Capability, items: Sequence[tuple[int, Request]]
) -> tuple[list[tuple[int, Request, int]], list[tuple[int, Request, int]]]:
    """Each request's prompt tokens, split into those that fit the window and those over it (never sent)."""
    fits: list[tuple[int, Request, int]] = []
    over: list[tuple[int, Request, int]] = []
    for i, r in items:
        n = bound.prompt_tokens(r)
        (over if capability.windowed and not bound.fits(r, n) else fits).append((i, r, n))
    return fits, over


def next_batch(store: PredictionStore, task: str) -> int:
    """The number of this run's first batch of `task`: one past the highest its predictions record (0 if none)."""
    seen = [b for r in store.records.values() if r.get("task") == task and isinstance(b := r.get("batch"), int)]
    return max(seen) + 1 if seen else 0


def _done(store: PredictionStore, key: str) -> bool:
    """Whether `key` holds a prediction that needs no redo: a failed one (status error) is re-run on resume."""
    rec = store.records.get(key)
    return rec is not None and rec.get("status") != "error"


def serving_order(
    measured: list[tuple[int, Request, int]], samples: Sequence[Sample]
) -> list[tuple[int, Request, int]]:
    """The order requests are served in, so an adapter can reuse the KV cache of a prefix shared with the last one.

    Requests on one context (several questions on one document) run back to back; contexts run by target length,
    then in the lexicographic order of their text, then by prompt length, sample and part. Sorted text puts the
    contexts of one haystack together (they differ only where a needle or fact sits), and for such a group it
    is the order that maximises the prefix shared with the previous context summed over the group: the contexts
    of one haystack, ordered by where they first depart from it, go ascending, then descending, so each shares
    with its neighbour the haystack up to its own needle except the deepest one (the depth order it replaces did
    that only with one haystack per length; with several, each request followed another haystack's).
    """
    length = [stratum_of(s)[0] for s in samples]
    return sorted(measured, key=lambda m: (length[m[0]], m[1].context, m[2], m[0], m[1].part))


def _serve(adapter: ModelAdapter, capability: Capability, batch: list[Request]) -> list[Prediction]:
    """One batch; a model failure is recorded per request (status error), never lost or fatal."""
    try:
        preds = adapter.serve(capability, batch)
    except (RuntimeError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        return [Prediction(status="error", error=error) for _ in batch]
    if len(preds) != len(batch):
        error = f"adapter returned {len(preds)} predictions for {len(batch)} requests"
        return [Prediction(status="error", error=error) for _ in batch]
    return preds


def _save(
    store: PredictionStore,
    key: str,
    info: TaskInfo,
    sample: Sample,
    request: Request,
    cap: Capability,
    pred: Prediction,
    batch: int | None = None,
) -> None:
    extra = {
        "task_version": info.version,
        "target_tokens": sample.metadata["target_tokens"],
        "max_new_tokens": request.max_new_tokens,
        "capability": cap.value,
        "part": request.part,
        "saved": now_iso(),  # a prediction saved before its task's run started was resumed (scoring/prediction_origins)
    }
    if batch is not None:  # the runner batch it was served in (never sent: none)
        extra["batch"] = batch
    store.append(prediction_to_record(key, info.name, sample.id, pred, extra))


def _over_window_warning(
    name: str,
    adapter: ModelAdapter,
    samples: Sequence[Sample],
    requests: Sequence[list[Request]],
    over: list[tuple[int, Request, int]],
) -> list[str]:
    """Say, before generating, which lengths do not fit the model's window and how to extend it."""
    if not over:
        return []
    lengths = sorted({stratum_of(samples[i])[0] for i, _, _ in over})
    n_req = sum(len(r) for r in requests)
    meta = adapter.meta
    text = (
        f"{name}: {len(over)} of {n_req} prompts at length(s) {', '.join(map(str, lengths))} exceed "
        f"{meta.name}'s context window ({meta.context_window} tokens, prompt + generation); they are recorded as "
        "over-length and shown as 'n/a (over window)', not scored. To extend the window: "
        "?max_length=N, or RoPE scaling such as ?rope=yarn&rope_factor=F (hf models)"
    )
    console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)
    return [text]


def _write_samples(
    path: Path, samples: Sequence[Sample], requests: Sequence[list[Request]], keys: Sequence[list[str]]
) -> str:
    """The gold side of scoring, so `score RUN_DIR` needs neither the model nor the builders; returns its sha256."""
    lines = []
    for s, r, k in zip(samples, requests, keys, strict=True):
        rec = {
            "id": s.id,
            "keys": k,
            "question": s.question,
            "gold": s.gold,
            "metadata": s.metadata,
            "context_sha256": sha256_text(s.context),
            "context_chars": len(s.context),
            "max_new_tokens": [x.max_new_tokens for x in r],
        }
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True, allow_nan=False))
    text = "\n".join(lines) + ("\n" if lines else "")
    atomic_write_text(path, text)
    return sha256_text(text)
