"""A plan's samples: the task built once per argument group (per-length `args_at`), through the sample cache.

A plan whose lengths all take the same arguments is one group, built as before. With per-length overrides the
task is built once per distinct set of arguments, on that group's lengths, and the groups' samples are
concatenated in the plan's length order. A length's samples do not depend on the other lengths built with it
(tested for the needle family), so the samples, and prediction keys, of a length whose arguments are
unchanged stay what they were. Sample ids must stay unique across groups (a TaskDefinitionError otherwise).

A planned dataset (`sample_plan.PlannedDataset`) is limited before it is built: the plan (ids and cells) is
read first, at most `MAX_PLANNED` entries of it, and only the chosen samples are built, at most `MAX_BUILT`
per group; a grid past either bound is refused with one line before any sample is built. A dataset given as
samples is built whole and limited after. Either way a build that takes long prints its progress.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from longctx_eval.errors import ConfigError, LongctxError, TaskDefinitionError
from longctx_eval.hashing import sha256_json
from longctx_eval.progress import work_progress
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.sample_cache import SampleCache, Status, sample_key, shared_sample_cache
from longctx_eval.run.sampling import choose, choose_samples
from longctx_eval.sample import Sample, Stratum
from longctx_eval.sample_plan import Planned, PlannedDataset
from longctx_eval.task import Task, TaskInfo
from longctx_eval.text.tokenizer import Tokenizer


class GridTooLarge(ConfigError):
    """A plan or selection past `MAX_PLANNED` or `MAX_BUILT`: refused before anything is built."""


MAX_PLANNED = 500_000
"""Entries of one argument group's plan read to apply a limit (about 1 s and 230 MB here): a larger grid is
refused before any build."""
MAX_BUILT = 100_000
"""Samples one argument group may build for a run (after the limit): a larger selection is refused."""


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
        what = f"{info.name} samples at {_lengths_text(lengths)}"
        key = sample_key(info, args, lengths, seed, tokenizer) if info.cache_samples else None
        if isinstance(task.dataset, PlannedDataset):
            samples, cells, origin = _planned_group(plan, task.dataset, key, store, what)
        else:
            samples, cells, origin = _whole_group(plan, task, key, store, what)
        planned.update(cells)
        groups.append(GroupSamples(lengths, args, task, samples, origin, time.perf_counter() - t0))
    if len(groups) > 1:
        dupes = [i for i, n in Counter(s.id for g in groups for s in g.samples).items() if n > 1]
        if dupes:
            raise TaskDefinitionError(
                f"{info.source}: task {info.name!r} yields sample id {dupes[0]!r} in two argument groups "
                "(suite args_at); expected ids unique across lengths"
            )
    return PlanSamples(groups, planned)


def _planned_group(
    plan: TaskPlan, dataset: PlannedDataset, key: str | None, store: SampleCache, what: str
) -> tuple[list[Sample], dict[Stratum, int], Status]:
    """A planned dataset limited on its plan, then only the chosen samples built; from the whole grid instead
    where the cache holds it (an unlimited run built it), and cached under the chosen ids (`key` + selection)."""
    info = plan.info
    entries = _read_plan(info, dataset, what)
    chosen, cells = choose(info, entries, plan.limit)
    _check_built(info, len(chosen), what, limited=plan.limit is not None)
    whole = store.get(key)
    if whole is not None:
        return choose_samples(info, whole[0], plan.limit).samples, cells, whole[1]
    if key is not None and len(chosen) < len(entries):
        key = sha256_json([key, [p.id for p in chosen]])
    samples, origin = store.get_or_build(key, lambda: _with_progress(dataset.build_checked(chosen), what, len(chosen)))
    return samples, cells, origin


def _whole_group(
    plan: TaskPlan, task: Task, key: str | None, store: SampleCache, what: str
) -> tuple[list[Sample], dict[Stratum, int], Status]:
    """A dataset given as samples: built whole (or read back from the cache), then limited."""
    everything, origin = store.get_or_build(key, lambda: _with_progress(task.samples(), what, None))
    limited = choose_samples(plan.info, everything, plan.limit)
    return limited.samples, limited.planned, origin


def _read_plan(info: TaskInfo, dataset: PlannedDataset, what: str) -> list[Planned]:
    """The plan's entries, refused with one line past `MAX_PLANNED` (read no further than that)."""
    entries = list(itertools.islice(dataset.plan(), MAX_PLANNED + 1))
    if len(entries) > MAX_PLANNED:
        raise GridTooLarge(
            f"task {info.name!r}: the grid of {what} holds more than {MAX_PLANNED:,} samples; expected fewer "
            "lengths or smaller grid arguments (e.g. depths, per_cell)"
        )
    return entries


def check_plan_size(plan: TaskPlan, seed: int) -> None:
    """Refuse, before any model loads, a planned task whose grid or selection passes `MAX_PLANNED`/`MAX_BUILT`
    (a plan needs no tokenizer); anything else wrong with the task is reported where it runs, in its place."""
    info = plan.info
    for lengths, args in plan.groups():
        try:
            dataset = info.build(args, lengths=lengths, seed=seed, tokenizer=None).dataset
        except LongctxError:
            return
        if not isinstance(dataset, PlannedDataset):
            continue
        what = f"{info.name} samples at {_lengths_text(lengths)}"
        try:
            chosen, _ = choose(info, _read_plan(info, dataset, what), plan.limit)
        except GridTooLarge:
            raise
        except LongctxError:  # bad arguments, a task bug: reported in the task's place, as without this check
            return
        _check_built(info, len(chosen), what, limited=plan.limit is not None)


def _check_built(info: TaskInfo, n: int, what: str, limited: bool) -> None:
    """Refuse, before building, a selection past `MAX_BUILT` samples."""
    if n > MAX_BUILT:
        hint = "a smaller --limit" if limited else "--limit (samples per length)"
        raise GridTooLarge(
            f"task {info.name!r}: {n:,} {what} would be built; at most {MAX_BUILT:,} per run of a task; "
            f"expected {hint}, fewer lengths or smaller grid arguments"
        )


def _with_progress(samples: Iterable[Sample], what: str, total: int | None) -> list[Sample]:
    """The samples as a list, a progress line printed while a long build goes on (`work_progress`)."""
    out: list[Sample] = []
    with work_progress(f"building {what}", total, unit="samples", quiet_if_short=True) as advance:
        for sample in samples:
            out.append(sample)
            advance(1, 0)
    return out


def _lengths_text(lengths: Sequence[int]) -> str:
    """'1024, 2048' or, for many lengths, '1024 ... 65536 (40 lengths)'."""
    if len(lengths) <= 4:
        return ", ".join(map(str, lengths))
    return f"{lengths[0]} ... {lengths[-1]} ({len(lengths)} lengths)"
