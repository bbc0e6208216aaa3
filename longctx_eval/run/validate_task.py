"""`validate-task`: a task is deterministic, its samples fit their declared lengths, and through every
capability it serves the scorer produces that capability's primary metric, the oracle scores 100% and a
deliberately wrong answer scores less.

Each capability gets its answers in the form a model serving it gives: a generator's text without hits, a
retriever's hits without text (scorers tell them apart by `text is None`), the payload for the others. The
wrong answer is the empty one of each capability (an empty reply, no hits, no payload): it must score below
1.0 or not at all, and never crash the scorer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from longctx_eval.capability import Capability
from longctx_eval.errors import LongctxError
from longctx_eval.models.loader import load_tokenizer_of
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.run.sampling import build_samples, dataset_hash
from longctx_eval.sample import Prediction, Sample
from longctx_eval.scoring.score import score_one
from longctx_eval.task import Task, TaskInfo


@dataclass(frozen=True)
class Check:
    """One named check with its outcome and a line of evidence."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class ValidationReport:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def validate_task(
    info: TaskInfo,
    spec: ModelSpec,
    lengths: tuple[int, ...] | None,
    seed: int,
    limit: int | None,
    args: Mapping[str, Any] | None = None,
) -> ValidationReport:
    """Run the checks with the tokenizer of `spec` (only its tokenizer is loaded; the oracle's MiniLM by default)."""
    tok = load_tokenizer_of(spec)
    run = {"lengths": list(lengths or info.default_lengths), "seed": seed, "tokenizer": tok}
    first_task = info.build(args, **run)
    first = build_samples(info, first_task, limit).samples
    second = build_samples(info, info.build(args, **run), limit).samples
    h1, h2 = dataset_hash(first), dataset_hash(second)
    checks = [
        Check("deterministic", h1 == h2, f"{len(first)} samples built twice with seed {seed}: {h1[:12]} vs {h2[:12]}")
    ]

    over, exact = [], 0
    for s in first:
        n = tok.count(s.context)
        target = s.metadata["target_tokens"]
        exact += n == target
        if n > target:
            over.append(f"{s.id}: {n} > {target}")
    detail = f"{len(first) - len(over)}/{len(first)} fit, {exact} exactly" + (f"; {over[:3]}" if over else "")
    checks.append(Check(f"fits declared length ({tok.name} tokenizer)", not over, detail))

    for capability in info.requires.options:
        checks += _capability_checks(first_task, first, capability)
    return ValidationReport(checks)


def as_served(pred: Prediction, capability: Capability) -> Prediction:
    """`pred` in the form a model serving `capability` answers: generators give no hits, retrievers no text."""
    if pred.parts:
        return replace(pred, parts=tuple(as_served(p, capability) for p in pred.parts))
    if capability is Capability.GENERATE:
        return replace(pred, hits=(), text=pred.text if pred.text is not None else "")
    if capability is Capability.RETRIEVE:
        return replace(pred, text=None)
    return pred


def wrong_answers(oracle: Sequence[Prediction], capability: Capability) -> list[Prediction]:
    """A deliberately wrong answer per sample: the empty answer of `capability` (an empty reply for generate,
    no hits for retrieve, no payload for attention and coref), with as many parts as the oracle's."""
    empty = Prediction(text="" if capability is Capability.GENERATE else None, hits=(), data=None)
    return [replace(empty, parts=tuple(empty for _ in p.parts)) if p.parts else empty for p in oracle]


def _capability_checks(task: Task, samples: list[Sample], capability: Capability) -> list[Check]:
    """The primary metric, the oracle at 100% and a wrong answer below it, through one capability."""
    cap = capability.value
    primary = task.primary_metric(cap)
    try:
        oracle = [as_served(task.oracle(s), capability) for s in samples]
        rows = _primary_rows(task, samples, oracle, primary.fields)
    except LongctxError as exc:
        return [Check(f"oracle scores 100% through {cap}", False, str(exc))]
    checks = [
        Check(
            f"scorer produces the primary metric {primary.name!r} through {cap}",
            bool(rows),
            f"fields {list(primary.fields)} present in {len(rows)}/{len(samples)} oracle scores",
        )
    ]
    value = primary.compute(rows)[0] if rows else None
    ok = bool(samples) and len(rows) == len(samples) and value is not None and abs(value - 1.0) < 1e-9
    detail = f"{primary.name} = {value} over {len(rows)}/{len(samples)} oracle predictions (expected 1.0 over all)"
    checks.append(Check(f"oracle scores 100% through {cap}", ok, detail))
    name = f"a wrong (empty) answer scores below 100% through {cap}"
    try:
        wrong_rows = _primary_rows(task, samples, wrong_answers(oracle, capability), primary.fields)
    except LongctxError as exc:
        return [*checks, Check(name, False, f"the scorer fails on an empty answer: {exc}")]
    low = primary.compute(wrong_rows)[0] if wrong_rows else None
    passed = low is None or low < 1.0 - 1e-9
    shown = f"{primary.name} = {low}" if low is not None else f"no {primary.name} (not scored)"
    detail = f"{shown} for an empty answer (expected below 1.0: a scorer that cannot fail checks nothing)"
    checks.append(Check(name, passed, detail))
    return checks


def _primary_rows(
    task: Task, samples: Sequence[Sample], preds: Sequence[Prediction], fields: Sequence[str]
) -> list[list[float]]:
    scores = [score_one(task.scorer, s, p) for s, p in zip(samples, preds, strict=True)]
    return [[sc.values[f] for f in fields] for sc in scores if all(f in sc.values for f in fields)]
