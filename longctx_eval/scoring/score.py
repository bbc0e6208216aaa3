"""Scoring: a pure function of RUN_DIR's saved predictions and gold; `longctx-eval score` reruns it alone.

run.json accumulates: it holds every task generated in the folder, each scored from its own samples and
predictions; a task that cannot be scored now keeps its earlier result (with a warning) and loses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from longctx_eval.discovery import discover
from longctx_eval.errors import LongctxError, RunFileError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.metrics.aggregate import Metric, rate
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN
from longctx_eval.progress import console, console_text
from longctx_eval.results import (
    Coverage,
    EffectiveLength,
    MetricResult,
    RunResult,
    ServingStats,
    Skipped,
    TaskResult,
    Throughput,
    failure_summary,
    one_line,
    read_run,
    task_failed,
    write_run,
)
from longctx_eval.run_folder.json_lines import read_records, short
from longctx_eval.run_folder.manifest import Manifest, TaskEntry, read_manifest
from longctx_eval.run_folder.predictions import PredictionStore, combine_parts, record_to_prediction
from longctx_eval.run_folder.sample_lines import SAMPLE_LINE, SCORED_FIELDS, sample_line_problem, samples_path
from longctx_eval.run_folder.score_lines import score_record, scores_path, write_scores
from longctx_eval.sample import Prediction, Sample, Score, cluster_of, stratum_of
from longctx_eval.scoring.composite import CompositeConfig, with_composite
from longctx_eval.scoring.contrasts import contrast_results
from longctx_eval.scoring.curves import curve_results
from longctx_eval.scoring.effective_length import EffectiveLengthConfig, effective_lengths
from longctx_eval.scoring.labels import composite_sentence, contrast_sentence, effective_sentence, summary_value
from longctx_eval.scoring.latency import serving_section
from longctx_eval.scoring.prediction_origins import origin_fields
from longctx_eval.scoring.rows import metric_row
from longctx_eval.scoring.semantic import semantic_scores, served_order
from longctx_eval.scoring.slicing import evaluated, length_of, slice_rows
from longctx_eval.scoring.timing import timing_fields
from longctx_eval.task import Task, TaskInfo

STANDARD_METRICS = (rate("over_length"), rate("error"))
OVER_ALL = frozenset({"over_length"})
"""Score fields whose metrics are computed over every sample."""
OVER_FITTING = frozenset({"error"})
"""Score fields computed over every sample that fits the window, failed ones included (`error_rate`); every
other metric is over the samples that fit and did not fail: a failed request is never a wrong answer."""
MAX_FAILURE_REASONS = 20
"""Distinct failure messages kept per task (the most frequent); each cut to FAILURE_CHARS characters."""
FAILURE_CHARS = 300


@dataclass
class ScoreReport:
    """The run file written, and per-task problems ('task: message') that kept a task from being rescored."""

    run: RunResult
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def score_run_dir(
    run_dir: Path,
    include_paths: Sequence[str] = (),
    effective: EffectiveLengthConfig | None = None,
    composite: CompositeConfig | None = None,
    only: Sequence[str] | None = None,
    echo: bool = True,
) -> ScoreReport:
    """Recompute every task's metrics in a run folder and write RUN_DIR/run.json atomically.

    Also writes each task's per-sample RUN_DIR/scores/<task>.jsonl; `effective` sets the effective-length
    thresholds (defaults: 0.856 absolute, 0.85 relative). `only` rescores just those tasks and keeps the
    others' results from the existing run.json (the runner's after-each-task write); `echo=False` prints
    nothing.
    """
    effective = effective or EffectiveLengthConfig()
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise RunFileError(f"{run_dir / 'manifest.json'} is missing: nothing was run here; run `longctx-eval run`")
    store = PredictionStore(run_dir / "predictions.jsonl")
    report_warnings = list(store.warnings)
    previous = _previous(run_dir, report_warnings)
    paths = list(include_paths) or sorted({p for e in manifest.tasks.values() for p in e.include_paths})
    registry = discover(paths)
    results: list[TaskResult] = []
    errors: list[str] = []
    for entry in manifest.tasks.values():
        if only is not None and entry.name not in only:
            if entry.name in previous:
                results.append(previous[entry.name])
            continue
        if _recorded_failure(manifest, entry):  # the runner recorded why (crashed, an error): not a second error
            if entry.name in previous:  # an earlier complete result stays, beside the skip saying this run failed
                results.append(previous[entry.name])
            continue
        try:
            if entry.name not in registry:
                raise RunFileError(f"task {entry.name!r} is not discoverable; pass its --include-path")
            info = registry.get(entry.name)
            try:
                result = _score_task(run_dir, manifest, entry, info, store, effective, composite, echo)
            except ValidationError as exc:  # a value the manifest recorded that run.json's schema refuses
                raise RunFileError(
                    f"{run_dir / 'manifest.json'}: a recorded value does not fit run.json: {one_line(exc)}"
                ) from None
            held = previous.get(entry.name)
            if held is not None and held.scorer_sha256 not in (None, result.scorer_sha256):
                report_warnings.append(
                    f"{entry.name}: the scoring code changed since this task was last scored (version "
                    f"{entry.version} unchanged); scores are recomputed with the new code"
                )
            results.append(result)
        except LongctxError as exc:
            held = previous.get(entry.name)
            if held is not None:
                results.append(held)
            errors.append(f"{entry.name}: {exc}" + ("; its earlier result is kept" if held is not None else ""))
    scored = {t.name for t in results}
    # a failure of this run is listed even where an earlier result of the task is kept
    skipped = [
        s for name, s in sorted(manifest.skipped.items()) if name not in scored or s.kind in ("error", "crashed")
    ]
    skipped += [
        Skipped(task=e.split(":", 1)[0], reason=e.split(":", 1)[1].strip(), kind="error")
        for e in errors
        if e.split(":", 1)[0] not in scored and e.split(":", 1)[0] not in manifest.skipped
    ]
    run = _run_result(manifest, results, skipped)
    write_run(run, run_dir / "run.json")
    return ScoreReport(run, errors, report_warnings)


def _recorded_failure(manifest: Manifest, entry: TaskEntry) -> bool:
    """Whether the task's generation did not finish and the manifest already says why (its skip: an error, a
    crash, or a later run's refusal), so scoring adds no second "did not finish" error."""
    return entry.status == "running" and entry.name in manifest.skipped


def failure_reasons(failed: Iterable[Prediction]) -> dict[str, int]:
    """Each distinct error message of failed predictions with its count (the most frequent MAX_FAILURE_REASONS)."""
    counts = Counter(" ".join((p.error or "unknown error").split())[:FAILURE_CHARS] for p in failed)
    return dict(sorted(counts.most_common(MAX_FAILURE_REASONS), key=lambda kv: (-kv[1], kv[0])))


def _previous(run_dir: Path, warnings: list[str]) -> dict[str, TaskResult]:
    path = run_dir / "run.json"
    if not path.exists():
        return {}
    try:
        return {t.name: t for t in read_run(path).tasks}
    except RunFileError as exc:
        warnings.append(f"earlier {exc}; it is rewritten from the predictions")
        return {}


def _run_result(manifest: Manifest, results: list[TaskResult], skipped: list[Skipped]) -> RunResult:
    configs = [
        r.model_dump(include={"name", "version", "capability", "lengths", "limit", "args", "seed"}) for r in results
    ]
    config = {
        "tasks": configs,
        "seed": results[-1].seed if results and results[-1].seed is not None else 0,
        "include_paths": sorted({p for e in manifest.tasks.values() for p in e.include_paths}),
        "model_identity": manifest.identity,
    }
    started = max([r.started for r in results if r.started] or [manifest.started])
    return RunResult(
        suite=manifest.suite,
        model=manifest.model,
        environment=manifest.environment,
        config=config,
        config_hash=sha256_json(config),
        started=started,
        seconds=round(sum(r.throughput.seconds for r in results), 3),
        tasks=results,
        skipped=skipped,
    )


def scorer_sha256(info: TaskInfo, task: Task) -> str:
    """Hash of the scoring code: the task's module and the file defining its scorer."""
    files = {info.source}
    with contextlib.suppress(TypeError):
        files.add(inspect.getsourcefile(task.scorer) or "")
    h = hashlib.sha256()
    for f in sorted(p for p in files if p and Path(p).is_file()):
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def _load_samples(path: Path) -> list[tuple[Sample, list[str]]]:
    """The samples file's (sample, its prediction keys); RunFileError naming the file and line of a damaged one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"{path} is missing; re-run the task") from None
    except OSError as exc:
        raise RunFileError(f"{path} cannot be read: {exc.strerror or exc}; re-run the task") from None
    records = read_records(path, data, lambda r: sample_line_problem(r, SCORED_FIELDS), SAMPLE_LINE)
    return [(Sample(r["id"], "", r["question"], r["gold"], r["metadata"]), list(r["keys"])) for _, r in records]


def score_one(scorer: Callable[[Sample, Prediction], Score], sample: Sample, pred: Prediction) -> Score:
    """The task's score plus the standard over_length and error flags every task reports.

    A failed request (status error) is not given to the task's scorer: it has only the two flags, so no task
    metric counts it."""
    if pred.status == "error":
        return Score({"over_length": 0.0, "error": 1.0})
    try:
        score = scorer(sample, pred)
        values = dict(score.values)
    except Exception as exc:  # a plugin's bug is named with its sample, never a raw traceback
        raise RunFileError(f"scorer failed on sample {sample.id!r}: {type(exc).__name__}: {exc}") from exc
    values["over_length"] = float(pred.status == "over_length")
    values["error"] = float(pred.status == "error")
    return Score(values, parsed=score.parsed)


def _score_task(
    run_dir: Path,
    manifest: Manifest,
    entry: TaskEntry,
    info: TaskInfo,
    store: PredictionStore,
    effective: EffectiveLengthConfig,
    composite: CompositeConfig | None = None,
    echo: bool = True,
) -> TaskResult:
    """One task's TaskResult from its samples file and predictions, checked to belong to its manifest entry."""
    if entry.status != "generated":
        raise RunFileError(f"generation did not finish (started {entry.started}); re-run the same command to resume")
    if info.version != entry.version:
        raise RunFileError(
            f"ran as version {entry.version} but version {info.version} is installed; "
            "its scores would not be comparable. Re-run the task"
        )
    path = samples_path(run_dir, entry.name)
    pairs = _load_samples(path)  # a damaged line is named first: its hash would differ too
    if entry.samples_sha256 is not None and sha256_text(path.read_text("utf-8", "replace")) != entry.samples_sha256:
        raise RunFileError(
            f"{path} does not belong to this folder's {entry.name} run of {entry.started} (another run rewrote "
            "it, or it was edited); re-run the task"
        )
    missing = [s.id for s, keys in pairs if any(k not in store for k in keys)]
    if missing:
        raise RunFileError(
            f"lacks {len(missing)} prediction(s) (first: {missing[0]}); re-run the same command to resume"
        )
    try:
        task = info.build(entry.args, lengths=entry.lengths, seed=entry.seed, tokenizer=None)
    except (TypeError, ValueError) as exc:  # the manifest's arguments, edited or from another task version
        reason = (str(exc).splitlines() or [""])[0]
        raise RunFileError(
            f"{run_dir / 'manifest.json'}: the task cannot be built from its recorded arguments "
            f"{short(entry.args)} ({type(exc).__name__}: {reason}); re-run the task"
        ) from None
    scored, records, preds, seconds, tokens, completions = [], [], [], 0.0, 0, None
    for sample, keys in pairs:
        pred = combine_parts([record_to_prediction(store.records[k]) for k in keys])
        preds.append(pred)
        score = score_one(task.scorer, sample, pred)
        scored.append((sample, score))
        seconds += pred.seconds
        tokens += pred.prompt_tokens or 0
        if pred.completion_tokens is not None:
            completions = (completions or 0) + pred.completion_tokens
    served = served_order(store.records, [keys for _, keys in pairs])
    scored, semantic = semantic_scores(task.metrics, scored, preds, served)  # tasks declaring semantic metrics
    records = [score_record(sample, pred, score) for (sample, score), pred in zip(scored, preds, strict=True)]
    primary = task.primary_metric(entry.capability)
    metrics = [primary, *(m for m in task.metrics if m is not primary)]  # the headline metric leads the rows
    warnings = list(entry.warnings)
    if not scored:
        warnings.append("the task built no samples, so nothing was scored; check its arguments")
    failures = failure_reasons(pred for pred in preds if pred.status == "error")
    n_failed = sum(int(sc["error"]) for _, sc in scored)
    fitting = evaluated(scored)
    # a task with nothing to score (every request failed or was over the window) has its own state, not this
    if fitting and not any(all(f in sc.values for f in primary.fields) for _, sc in fitting):
        text = f"the scorer never produced the primary metric {primary.name!r} (fields {list(primary.fields)})"
        if echo:
            console.print(f"[yellow]warning[/yellow] {console_text(f'{entry.name}: {text}')}", highlight=False)
        warnings.append(text)
    n_ok = len(fitting)
    covered = coverage(scored, entry.planned)
    sliced, slice_warnings = slice_rows(scored, metrics, task.slices)
    warnings += slice_warnings
    result = TaskResult(
        name=entry.name,
        version=entry.version,
        capability=entry.capability,
        dataset_hash=entry.dataset_hash,
        n_samples=len(pairs),
        over_length=sum(int(sc["over_length"]) for _, sc in scored),
        errors=n_failed,
        failures=failures,
        results=grouped_results(scored, [*metrics, *STANDARD_METRICS]),
        cluster_noun=None if task.cluster_noun == DEFAULT_NOUN else task.cluster_noun,
        throughput=Throughput(
            samples_per_s=n_ok / seconds if seconds else 0.0,
            prompt_tokens_per_s=tokens / seconds if seconds else 0.0,
            seconds=round(seconds, 3),
            output_tokens_per_s=completions / seconds if completions is not None and seconds else None,
            **timing_fields(store.records[k] for _, keys in pairs for k in keys),  # hf: prefill/decode, TTFT, memory
            **origin_fields((store.records[k] for _, keys in pairs for k in keys), entry.started),
        ),
        args=entry.args,
        length_args=entry.length_args or None,
        lengths=entry.lengths,
        limit=entry.limit,
        seed=entry.seed,
        config_hash=entry.config_hash(manifest.identity),
        started=entry.started,
        shard=None if entry.shard is None else f"{entry.shard.index}/{entry.shard.count}",
        scorer_sha256=scorer_sha256(info, task),
        coverage=covered,
        pooled_lengths=sorted({length_of(s) for s, _ in fitting}),
        warnings=warnings,
        slices=sliced,
        curves=curve_results(scored, task.curves),
        contrasts=contrast_results(scored, task.contrasts, {m.name: m for m in task.metrics}),
        effective_length=_effective(scored, primary, effective, covered),
        serving=_serving(store.records[k] for _, keys in pairs for k in keys),  # served models only
        semantic=semantic,
    )
    result = with_composite(result, primary.name, [s for s, _ in scored], records, composite)  # served runs only
    write_scores(scores_path(run_dir, entry.name), records)
    return result


def _effective(
    scored: list[tuple[Sample, Score]], primary: Metric, config: EffectiveLengthConfig, covered: list[Coverage]
) -> list[EffectiveLength]:
    """Effective lengths of the primary metric over the samples that fit the window, per length (each length's
    interval resamples its clusters, then the samples within them)."""
    per_length: dict[int, list[list[float]]] = defaultdict(list)
    clusters: dict[int, list[str]] = defaultdict(list)
    for sample, score in evaluated(scored):
        if all(f in score.values for f in primary.fields):
            per_length[length_of(sample)].append([score.values[f] for f in primary.fields])
            clusters[length_of(sample)].append(cluster_of(sample))
    arrays = {n: np.asarray(rows, dtype=np.float64) for n, rows in per_length.items()}
    return effective_lengths(arrays, primary, config, covered, clusters=clusters)


def coverage(scored: list[tuple[Sample, Score]], planned: list[tuple[int, float | None, int]]) -> list[Coverage]:
    """Per (length, depth) and per length: samples in the full grid, evaluated, over the window and failed."""
    plan: Counter = Counter()
    for length, depth, n in planned:
        plan[(length, depth)] += n
        if depth is not None:
            plan[(length, None)] += n
    seen: Counter = Counter()
    over: Counter = Counter()
    failed: Counter = Counter()
    for sample, score in scored:
        length, depth = stratum_of(sample)
        for cell in {(length, depth), (length, None)}:
            (over if score["over_length"] else failed if score["error"] else seen)[cell] += 1
    cells = set(plan) | set(seen) | set(over) | set(failed)
    return [
        Coverage(
            length=length,
            depth=depth,
            planned=max(plan[(length, depth)], seen[(length, depth)] + over[(length, depth)] + failed[(length, depth)]),
            evaluated=seen[(length, depth)],
            over_length=over[(length, depth)],
            failed=failed[(length, depth)],
        )
        for length, depth in sorted(cells, key=lambda c: (c[0], c[1] is not None, c[1] or 0.0))
    ]


def grouped_results(scored: list[tuple[Sample, Score]], metrics: list[Metric]) -> list[MetricResult]:
    """Each metric per (length, depth), per length pooled over depths, and pooled over everything.

    Over-window samples count only in `over_length`, failed ones only in `error` (over the samples that fit);
    every other metric is over the samples that fit and did not fail. Each row's interval resamples the
    samples' clusters (`sample.cluster_of`), then the samples within them.
    """
    groups: dict[tuple[int | None, float | None], list[tuple[Score, str]]] = defaultdict(list)
    length: int | None  # a sample's length, then a group's (None: pooled)
    for sample, score in scored:
        length, depth = stratum_of(sample)
        item = (score, cluster_of(sample))
        groups[(None, None)].append(item)
        groups[(length, None)].append(item)
        if depth is not None:
            groups[(length, depth)].append(item)
    rows = []
    for (length, depth), items in sorted(groups.items(), key=_group_order):
        for m in metrics:
            pool = _pool(m, items)
            row = metric_row(m, [s for s, _ in pool], length, depth, clusters=[c for _, c in pool])
            if row is not None:
                rows.append(row)
    return rows


def _pool(metric: Metric, items: list[tuple[Score, str]]) -> list[tuple[Score, str]]:
    """The (score, cluster) items `metric` is computed over (see OVER_ALL and OVER_FITTING)."""
    if OVER_ALL.issuperset(metric.fields):
        return items
    fitting = [(s, c) for s, c in items if not s.values.get("over_length")]
    if OVER_FITTING.issuperset(metric.fields):
        return fitting
    return [(s, c) for s, c in fitting if not s.values.get("error")]


def _group_order(item: tuple[tuple[int | None, float | None], list[tuple[Score, str]]]) -> tuple:
    (length, depth), _ = item
    return (length is not None, length or 0, depth is not None, depth or 0.0)


def print_summary(report: ScoreReport, announced: Iterable[str] = ()) -> None:
    """The pooled metrics of each task, its effective lengths and pooled contrasts, then skips, warnings and
    errors, one line each; skips of the tasks in `announced` were printed when they happened and are not
    repeated."""
    announced = set(announced)
    # Names, reasons and metric names come from the run folder and tasks: a line of data alone prints with
    # markup=False, a value beside the line's own markup goes through console_text (issue 39).
    for t in report.run.tasks:
        pooled = [r for r in t.results if r.length is None and r.depth is None]
        noun = t.cluster_noun or DEFAULT_NOUN
        text = ", ".join(summary_value(r, noun, counted=i == 0) for i, r in enumerate(pooled))
        if task_failed(t):
            text = f"failed: {failure_summary(t.failures)}; nothing was scored (re-run the same command to retry)"
        elif t.over_length and t.over_length == t.n_samples:
            text = "n/a (over window): no sample fits the model's context window, nothing was scored"
        elif t.over_length:
            text += f" (over the lengths that fit: {', '.join(map(str, t.pooled_lengths or []))})"
        counts = f"n={t.n_samples}, over_length={t.over_length}" + (f", failed={t.errors}" if t.errors else "")
        console.print(f"  {t.name} ({counts}): {text}", highlight=False, markup=False)
        if t.errors and not task_failed(t):
            console.print(
                f"  {t.name}: {t.errors} failed, not scored (re-run the same command to retry them): "
                f"{failure_summary(t.failures)}",
                highlight=False,
                markup=False,
            )
        if t.composite is not None:
            console.print(f"  {t.name} {composite_sentence(t.composite)}", highlight=False, markup=False)
        for e in t.effective_length:
            console.print(f"  {t.name} {effective_sentence(e, noun)}", highlight=False, markup=False)
        for c in t.contrasts:
            if c.length is None:
                console.print(f"  {t.name} contrast {contrast_sentence(c, noun)}", highlight=False, markup=False)
    for s in report.run.skipped:
        if s.task not in announced:
            console.print(f"  skipped {s.task}: {s.reason}", highlight=False, markup=False)
    for w in report.warnings:
        console.print(f"  [yellow]warning[/yellow] {console_text(w)}", highlight=False)
    for err in report.errors:
        console.print(f"  [red]error[/red] {console_text(err)}", highlight=False)


def _serving(records: Iterable[Mapping[str, Any]]) -> ServingStats | None:
    """The run file's serving section of a served model's task, validated here; None for in-process models."""
    section = serving_section(records)
    return None if section is None else ServingStats.model_validate(section)
