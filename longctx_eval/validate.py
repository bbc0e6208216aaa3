"""`validate-task`: a task is deterministic, its samples fit their declared lengths, the oracle scores 100%."""

from __future__ import annotations

from dataclasses import dataclass

from longctx_eval.hashing import sha256_json
from longctx_eval.models.spec import load_model
from longctx_eval.runner import build_samples, sample_hash
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
    info: TaskInfo, model_spec: str, lengths: tuple[int, ...] | None, seed: int, limit: int | None
) -> ValidationReport:
    """Run the three checks with the tokenizer of `model_spec` (the oracle's MiniLM tokenizer by default)."""
    adapter = load_model(model_spec)
    tok = adapter.tokenizer
    kwargs = {"lengths": list(lengths or info.default_lengths), "seed": seed, "tokenizer": tok}
    first_task = info.build(**kwargs)
    first = build_samples(info, first_task, limit)
    second = build_samples(info, info.build(**kwargs), limit)
    h1, h2 = sha256_json([sample_hash(s) for s in first]), sha256_json([sample_hash(s) for s in second])
    checks = [
        Check(
            "deterministic",
            h1 == h2,
            f"{len(first)} samples built twice with seed {seed}: {h1[:12]} vs {h2[:12]}",
        )
    ]

    over, exact = [], 0
    for s in first:
        n = tok.count(s.context)
        target = s.metadata["target_tokens"]
        exact += n == target
        if n > target:
            over.append(f"{s.id}: {n} > {target}")
    checks.append(
        Check(
            f"fits declared length ({tok.name} tokenizer)",
            not over,
            f"{len(first) - len(over)}/{len(first)} fit, {exact} exactly" + (f"; {over[:3]}" if over else ""),
        )
    )

    primary = first_task.metrics[0]
    scores = [score_one(first_task.scorer, s, first_task.oracle(s)) for s in first]
    rows = [[sc.values[f] for f in primary.fields] for sc in scores if all(f in sc.values for f in primary.fields)]
    value = primary.compute(rows)[0] if rows else None
    ok = bool(first) and len(rows) == len(first) and value is not None and abs(value - 1.0) < 1e-9
    detail = f"{primary.name} = {value} over {len(rows)}/{len(first)} oracle predictions (expected 1.0 over all)"
    checks.append(Check("oracle scores 100%", ok, detail))
    return ValidationReport(checks)
