"""Parts of a suite: `run --suite S --part NAME` runs one model's tasks, one task on every model, or one pair.

A part is a model's run-folder name (`bm25`, `minilm-maxsim`, `rag-bm25-smollm2-135m`), a task name
(`retrieval`), or `MODEL:TASK`; several are comma-separated. Each part runs as the whole suite would run it
(the same lengths, limits and arguments, so the same prediction keys), so parts run on different days add up
to the whole suite in one output folder, and a part already done is resumed, not run again.
"""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.errors import ConfigError, did_you_mean
from longctx_eval.models.spec import ModelSpec
from longctx_eval.run.config import TaskPlan

Plans = list[tuple[ModelSpec, list[TaskPlan]]]


def part_names(plans: Plans) -> list[str]:
    """Every name a part may take in these plans: the models' names, then the task names, in suite order."""
    models = [spec.name for spec, _ in plans]
    tasks = list(dict.fromkeys(p.info.name for _, ps in plans for p in ps))
    return [*models, *(t for t in tasks if t not in models)]


def _matches(part: str, model: str, task: str) -> bool:
    if ":" in part:
        want_model, _, want_task = part.partition(":")
        return model == want_model and task == want_task
    return part in (model, task)


def select_parts(plans: Plans, parts: Sequence[str]) -> Plans:
    """The plans of the named parts only; an unknown part is a ConfigError that lists the parts there are."""
    known = part_names(plans)
    pairs = {f"{spec.name}:{p.info.name}" for spec, ps in plans for p in ps}
    for part in parts:
        if part not in known and part not in pairs:
            raise ConfigError(
                f"--part {part!r}: not a model, task or MODEL:TASK of this suite.{did_you_mean(part, known)}"
            )
    out: Plans = []
    for spec, ps in plans:
        kept = [p for p in ps if any(_matches(part, spec.name, p.info.name) for part in parts)]
        if kept:
            out.append((spec, kept))
    return out
