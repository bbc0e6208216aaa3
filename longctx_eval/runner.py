"""The runner: builds samples, asks the model, appends predictions as they finish, then scores."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from rich.markup import escape

from longctx_eval.errors import LongctxError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.io import atomic_write_text, ensure_dir
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.spec import load_model, parse_spec
from longctx_eval.predictions import PredictionStore, prediction_key, prediction_to_record
from longctx_eval.progress import console, progress_bar, status
from longctx_eval.provenance import environment, suite_info
from longctx_eval.results import ModelMeta, RunResult, Skipped
from longctx_eval.run_config import RunConfig, TaskPlan
from longctx_eval.sample import Prediction, Request, Sample
from longctx_eval.scoring import score_run_dir
from longctx_eval.task import Task, TaskInfo  # noqa: F401

WINDOWED = frozenset({"generate", "loglikelihood", "attention"})
"""Capabilities whose prompt must fit the model's context window."""


def slug(name: str) -> str:
    """A file-name-safe form of a model name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def run_models(plans: Mapping[str, Sequence[TaskPlan]], config: RunConfig) -> list[Path]:
    """Run every model on its tasks; returns the run files written. A failing model does not stop the rest."""
    for raw in plans:
        parse_spec(raw)  # every spec is checked before any model is loaded
    written, failures = [], []
    for raw, tasks in plans.items():
        try:
            written.append(run_model(raw, tasks, config))
        except LongctxError as exc:
            console.print(f"[red]error[/red] model {raw!r}: {exc}")
            failures.append(raw)
    if failures and not written:
        raise LongctxError(f"every model failed: {', '.join(failures)}")
    return written


def run_model(raw_spec: str, tasks: Sequence[TaskPlan], config: RunConfig) -> Path:
    """Generate (resuming), then score one model; returns RUN_DIR/run.json."""
    spec = parse_spec(raw_spec)
    run_dir = ensure_dir(config.out / slug(spec.name))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    with status(f"loading {raw_spec}"):
        adapter = load_model(raw_spec)
    console.print(f"[bold]{spec.name}[/bold]: {type(adapter).__name__}, serves {sorted(adapter.capabilities)}")
    store = PredictionStore(run_dir / "predictions.jsonl")
    if store.torn_lines:
        console.print(f"[yellow]{store.path}: {len(store.torn_lines)} torn line(s) from an interrupted run redone")
    done_tasks, skipped = [], []
    for plan in tasks:
        info = plan.info
        capability = info.requires.pick(adapter.capabilities)
        if capability is None:
            serves = ", ".join(sorted(adapter.capabilities))
            reason = f"model lacks capability {info.requires.describe()} (it serves {serves})"
            console.print(f"[yellow]skipped[/yellow] {info.name}: {reason}")
            skipped.append(Skipped(task=info.name, reason=reason))
            continue
        done_tasks.append(_run_task(plan, capability, adapter, config.seed, run_dir, store))
    cfg = {"tasks": [p.as_dict() for p in tasks], "seed": config.seed, "include_paths": list(config.include_paths)}
    _write_manifest(run_dir, adapter, cfg, started, time.perf_counter() - t0, done_tasks, skipped)
    adapter.close()
    run = score_run_dir(run_dir, include_paths=config.include_paths)
    console.print(f"wrote {run_dir / 'run.json'}")
    _print_summary(run)
    return run_dir / "run.json"


def build_samples(info: TaskInfo, task: Task, limit: int | None) -> list[Sample]:
    """Materialize a task's samples, keeping at most `limit` per length (never only the first length)."""
    dataset = task.dataset() if callable(task.dataset) else task.dataset
    samples, per_length = [], {}
    for s in dataset:
        length = s.metadata.get("target_tokens")
        if length is None:
            raise LongctxError(f"{info.source}: task {info.name!r} sample {s.id!r} lacks metadata 'target_tokens'")
        if limit is not None and per_length.get(length, 0) >= limit:
            continue
        per_length[length] = per_length.get(length, 0) + 1
        samples.append(s)
    ids = [s.id for s in samples]
    if len(set(ids)) != len(ids):
        raise LongctxError(f"{info.source}: task {info.name!r} yields duplicate sample ids")
    return samples


def sample_hash(s: Sample) -> str:
    """Hash of everything in a sample; the dataset hash is the hash of these in order."""
    return sha256_json([s.id, sha256_text(s.context), s.question, dict(s.gold), dict(s.metadata)])


def _requests_of(task: Task, sample: Sample) -> list[Request]:
    """A task's prompt may return one request or several (e.g. anaphors asked in batches)."""
    out = task.prompt(sample)
    return [out] if isinstance(out, Request) else list(out)


def _run_task(
    plan: TaskPlan, capability: str, adapter: ModelAdapter, seed: int, run_dir: Path, store: PredictionStore
) -> dict:
    info, lengths = plan.info, plan.resolved_lengths
    task = info.build(lengths=lengths, seed=seed, tokenizer=adapter.tokenizer)
    with status(f"building {info.name} samples"):
        samples = build_samples(info, task, plan.limit)
    requests = [_requests_of(task, s) for s in samples]
    keys = [
        [prediction_key(info.name, info.version, f"{s.id}#{j}", r, adapter.identity) for j, r in enumerate(reqs)]
        for s, reqs in zip(samples, requests, strict=True)
    ]
    _write_samples(run_dir / "samples" / f"{info.name}.jsonl", samples, requests, keys)
    todo = [(i, j) for i, ks in enumerate(keys) for j, k in enumerate(ks) if k not in store]
    total = sum(len(ks) for ks in keys)
    if len(todo) < total:
        console.print(f"{info.name}: {total - len(todo)} of {total} predictions already done (resumed)")
    with progress_bar() as bar:
        job = bar.add_task(escape(f"{info.name} [{adapter.info.name}]"), total=total, completed=total - len(todo))
        for i, j in todo:
            sample, request = samples[i], requests[i][j]
            pred = _predict_one(adapter, capability, task, sample, request, j)
            extra = {
                "task_version": info.version,
                "target_tokens": sample.metadata["target_tokens"],
                "max_new_tokens": request.max_new_tokens,
                "capability": capability,
                "part": j,
            }
            store.append(prediction_to_record(keys[i][j], info.name, sample.id, pred, extra))
            bar.advance(job)
    return {
        "name": info.name,
        "version": info.version,
        "capability": capability,
        "dataset_hash": sha256_json([sample_hash(s) for s in samples]),
        "n_samples": len(samples),
        "lengths": lengths,
    }


def _predict_one(
    adapter: ModelAdapter, capability: str, task: Task, sample: Sample, request: Request, part: int
) -> Prediction:
    """One prediction; an over-long prompt is recorded as such and never sent, a model error is recorded."""
    n_prompt = adapter.prompt_tokens(request)
    if getattr(adapter, "answers_from_gold", False):
        gold = task.oracle(sample)
        return _with(gold.parts[part] if gold.parts else gold, prompt_tokens=n_prompt)
    if capability in WINDOWED and not adapter.fits(request, n_prompt):
        window = adapter.info.context_window
        msg = f"prompt {n_prompt} + generation {request.max_new_tokens} tokens > context window {window}"
        return Prediction(status="over_length", prompt_tokens=n_prompt, error=msg)
    try:
        pred = adapter.serve(capability, [request])[0]
    except (RuntimeError, ValueError) as exc:
        return Prediction(status="error", prompt_tokens=n_prompt, error=f"{type(exc).__name__}: {exc}"[:500])
    return _with(pred, prompt_tokens=n_prompt)


def _with(pred: Prediction, **changes: object) -> Prediction:
    return Prediction(**{**asdict(pred), "hits": pred.hits, **changes})


def _write_samples(
    path: Path, samples: Sequence[Sample], requests: Sequence[list[Request]], keys: Sequence[list[str]]
) -> None:
    """The gold side of scoring, so `score RUN_DIR` needs neither the model nor the builders."""
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
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True))
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def _write_manifest(
    run_dir: Path,
    adapter: ModelAdapter,
    config: dict,
    started: str,
    seconds: float,
    tasks: list[dict],
    skipped: list[Skipped],
) -> None:
    i = adapter.info
    model = ModelMeta(
        spec=i.spec,
        name=i.name,
        kind=i.kind,
        revision=i.revision,
        sha256=i.sha256,
        params=i.params,
        dtype=i.dtype,
        tokenizer=i.tokenizer,
        tokenizer_sha256=i.tokenizer_sha256,
        chat_template_sha256=i.chat_template_sha256,
        context_window=i.context_window,
        capabilities=sorted(adapter.capabilities),
    )
    cfg = {**config, "model_identity": adapter.identity}
    manifest = {
        "suite": suite_info().model_dump(),
        "model": model.model_dump(),
        "environment": environment().model_dump(),
        "config": cfg,
        "config_hash": sha256_json(cfg),
        "started": started,
        "seconds": round(seconds, 3),
        "tasks": tasks,
        "skipped": [s.model_dump() for s in skipped],
    }
    atomic_write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _print_summary(run: RunResult) -> None:
    for t in run.tasks:
        pooled = [r for r in t.results if r.length is None and r.depth is None]
        text = ", ".join(f"{r.metric}={r.value:.3f} [{r.ci95[0]:.2f}, {r.ci95[1]:.2f}]" for r in pooled)
        console.print(f"  {t.name} (n={t.n_samples}, over_length={t.over_length}): {text}")
    for s in run.skipped:
        console.print(f"  skipped {s.task}: {s.reason}")
