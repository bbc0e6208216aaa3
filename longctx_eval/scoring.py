"""Scoring: a pure function of RUN_DIR's saved predictions and gold; `longctx-eval score` reruns it alone."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from longctx_eval.errors import RunFileError
from longctx_eval.metrics.aggregate import Metric, rate
from longctx_eval.predictions import PredictionStore, combine_parts, record_to_prediction
from longctx_eval.registry import discover
from longctx_eval.results import MetricResult, RunResult, Skipped, TaskResult, Throughput, write_run
from longctx_eval.sample import Prediction, Sample, Score

STANDARD_METRICS = (rate("over_length"), rate("error"))


def score_run_dir(run_dir: Path, include_paths: Sequence[str] = ()) -> RunResult:
    """Recompute every metric of a run folder and write RUN_DIR/run.json atomically."""
    manifest = _read_json(run_dir / "manifest.json", "re-run `longctx-eval run` to finish the run")
    store = PredictionStore(run_dir / "predictions.jsonl")
    registry = discover(include_paths or manifest["config"].get("include_paths", []))
    results = []
    for entry in manifest["tasks"]:
        info = registry.get(entry["name"])
        if info is None:
            raise RunFileError(f"{run_dir}: task {entry['name']!r} is not discoverable; pass its --include-path")
        if info.version != entry["version"]:
            raise RunFileError(
                f"{run_dir}: task {info.name!r} ran as version {entry['version']} but version {info.version} is "
                "installed; its scores would not be comparable. Re-run the task."
            )
        task = info.build(lengths=entry["lengths"], seed=manifest["config"]["seed"], tokenizer=None)
        results.append(_score_task(run_dir, entry, task.scorer, list(task.metrics), store))
    run = RunResult(
        suite=manifest["suite"],
        model=manifest["model"],
        environment=manifest["environment"],
        config=manifest["config"],
        config_hash=manifest["config_hash"],
        started=manifest["started"],
        seconds=manifest["seconds"],
        tasks=results,
        skipped=[Skipped(**s) for s in manifest["skipped"]],
    )
    write_run(run, run_dir / "run.json")
    return run


def _read_json(path: Path, hint: str) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFileError(f"{path} is missing: the run did not finish; {hint}") from None
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def _load_samples(path: Path) -> list[tuple[Sample, list[str]]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
                out.append((Sample(rec["id"], "", rec["question"], rec["gold"], rec["metadata"]), rec["keys"]))
            except (json.JSONDecodeError, KeyError) as exc:
                raise RunFileError(f"{path}:{lineno}: malformed sample record ({exc})") from None
    return out


def score_one(scorer, sample: Sample, pred: Prediction) -> Score:  # noqa: ANN001
    """The task's score plus the standard over_length and error flags every task reports."""
    values = dict(scorer(sample, pred).values)
    values["over_length"] = float(pred.status == "over_length")
    values["error"] = float(pred.status == "error")
    return Score(values)


def _score_task(run_dir: Path, entry: dict, scorer, metrics: list[Metric], store: PredictionStore) -> TaskResult:  # noqa: ANN001
    pairs = _load_samples(run_dir / "samples" / f"{entry['name']}.jsonl")
    missing = [s.id for s, keys in pairs if any(k not in store for k in keys)]
    if missing:
        raise RunFileError(
            f"{run_dir}: task {entry['name']!r} lacks {len(missing)} prediction(s) (first: {missing[0]}); "
            "re-run the same command to resume"
        )
    scored, seconds, tokens = [], 0.0, 0
    for sample, keys in pairs:
        pred = combine_parts([record_to_prediction(store.records[k]) for k in keys])
        scored.append((sample, score_one(scorer, sample, pred)))
        seconds += pred.seconds
        tokens += pred.prompt_tokens or 0
    n_ok = sum(1 for _, sc in scored if not sc["over_length"] and not sc["error"])
    return TaskResult(
        name=entry["name"],
        version=entry["version"],
        capability=entry["capability"],
        dataset_hash=entry["dataset_hash"],
        n_samples=len(pairs),
        over_length=sum(int(sc["over_length"]) for _, sc in scored),
        errors=sum(int(sc["error"]) for _, sc in scored),
        results=grouped_results(scored, [*metrics, *STANDARD_METRICS]),
        throughput=Throughput(
            samples_per_s=n_ok / seconds if seconds else 0.0,
            prompt_tokens_per_s=tokens / seconds if seconds else 0.0,
            seconds=round(seconds, 3),
        ),
    )


def grouped_results(scored: list[tuple[Sample, Score]], metrics: list[Metric]) -> list[MetricResult]:
    """Each metric per (length, depth), per length pooled over depths, and pooled over everything."""
    groups: dict[tuple[int | None, float | None], list[Score]] = defaultdict(list)
    for sample, score in scored:
        length, depth = sample.metadata.get("target_tokens"), sample.metadata.get("depth")
        groups[(None, None)].append(score)
        groups[(length, None)].append(score)
        if depth is not None:
            groups[(length, float(depth))].append(score)
    rows = []
    for (length, depth), scores in sorted(groups.items(), key=_group_order):
        for m in metrics:
            vals = [[s.values[f] for f in m.fields] for s in scores if all(f in s.values for f in m.fields)]
            if not vals:
                continue  # a metric absent from every sample of a group is omitted, never filled with a sentinel
            value, ci = m.compute(vals)
            rows.append(
                MetricResult(
                    metric=m.name,
                    length=length,
                    depth=depth,
                    value=round(value, 6),
                    n=len(vals),
                    ci95=(round(ci[0], 6), round(ci[1], 6)),
                )
            )
    return rows


def _group_order(item: tuple[tuple[int | None, float | None], list[Score]]) -> tuple:
    (length, depth), _ = item
    return (length is not None, length or 0, depth is not None, depth or 0.0)
