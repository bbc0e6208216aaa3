"""`validate-task`: a task is deterministic, its samples fit their declared lengths, the oracle scores 100%,
and its scorer produces the primary metric."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from longctx_eval.errors import LongctxError
from longctx_eval.models.loader import load_tokenizer_of
from longctx_eval.models.spec import ModelSpec
from longctx_eval.sampling import build_samples, dataset_hash
from longctx_eval.scoring import score_one
from longctx_eval.task import TaskInfo


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

    primary = first_task.primary_metric()
    try:
        scores = [score_one(first_task.scorer, s, first_task.oracle(s)) for s in first]
    except LongctxError as exc:
        return ValidationReport([*checks, Check("oracle scores 100%", False, str(exc))])
    rows = [[sc.values[f] for f in primary.fields] for sc in scores if all(f in sc.values for f in primary.fields)]
    checks.append(
        Check(
            f"scorer produces the primary metric {primary.name!r}",
            bool(rows),
            f"fields {list(primary.fields)} present in {len(rows)}/{len(first)} oracle scores",
        )
    )
    value = primary.compute(rows)[0] if rows else None
    ok = bool(first) and len(rows) == len(first) and value is not None and abs(value - 1.0) < 1e-9
    detail = f"{primary.name} = {value} over {len(rows)}/{len(first)} oracle predictions (expected 1.0 over all)"
    checks.append(Check("oracle scores 100%", ok, detail))
    return ValidationReport(checks)
