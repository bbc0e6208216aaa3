"""A plan's samples: the task built once per argument group (per-length `args_at`), through the sample cache.

A plan whose lengths all take the same arguments is one group, built as before. With per-length overrides the
task is built once per distinct set of arguments, on that group's lengths, and the groups' samples are
concatenated in the plan's length order. A length's samples do not depend on the other lengths built with it
(tested for the needle family), so the samples, and prediction keys, of a length whose arguments are
unchanged stay what they were. Sample ids must stay unique across groups (a TaskDefinitionError otherwise).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.sample_cache import SampleCache, Status, sample_key, shared_sample_cache
from longctx_eval.run.sampling import choose_samples
from longctx_eval.sample import Sample, Stratum
from longctx_eval.task import Task
from longctx_eval.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class GroupSamples:
    """One argument group: its lengths and arguments, the task built for them, and its chosen samples."""

    lengths: list[int]
    args: dict[str, Any]
    task: Task
    samples: list[Sample]
    origin: Status
    """Where the full sample set came from: built now, this process's memory, or the disk cache."""
    seconds: float


@dataclass(frozen=True)
class PlanSamples:
    """Every group of a plan, and the whole plan's samples and planned cells."""

    groups: list[GroupSamples]
    planned: dict[Stratum, int]

    @property
    def samples(self) -> list[Sample]:
        """The groups' samples, concatenated in group order."""
        return [s for g in self.groups for s in g.samples]

    @property
    def task(self) -> Task:
        """The first group's task (its scorer and metrics score the plan; `score` builds it from `args`)."""
        return self.groups[0].task


def plan_samples(
    plan: TaskPlan, seed: int, tokenizer: Tokenizer | None, cache: SampleCache | None = None
) -> PlanSamples:
    """Build (or read back) each argument group's samples and apply the plan's limit per length."""
    info = plan.info
    store = cache if cache is not None else shared_sample_cache()
    groups: list[GroupSamples] = []
    planned: dict[Stratum, int] = {}
    for lengths, args in plan.groups():
        t0 = time.perf_counter()
        task = info.build(args, lengths=lengths, seed=seed, tokenizer=tokenizer)
        if info.cache_samples:
            key = sample_key(info, args, lengths, seed, tokenizer)
            everything, origin = store.get_or_build(key, task.samples)
        else:  # a task that may keep state per instance (coref keeps its documents): built by its own instance
            everything, origin = list(task.samples()), "built"
        built = choose_samples(info, everything, plan.limit)
        planned.update(built.planned)
        groups.append(GroupSamples(lengths, args, task, built.samples, origin, time.perf_counter() - t0))
    if len(groups) > 1:
        dupes = [i for i, n in Counter(s.id for g in groups for s in g.samples).items() if n > 1]
        if dupes:
            raise TaskDefinitionError(
                f"{info.source}: task {info.name!r} yields sample id {dupes[0]!r} in two argument groups "
                "(suite args_at); expected ids unique across lengths"
            )
    return PlanSamples(groups, planned)
