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
from dataclasses import dataclass, field
from typing import Any

from longctx_eval.errors import ConfigError, LongctxError, TaskDefinitionError
from longctx_eval.hashing import sha256_json
from longctx_eval.progress import work_progress
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.sample_cache import SampleCache, Status, sample_key, shared_sample_cache
from longctx_eval.run.sampling import choose, choose_samples
from longctx_eval.run_folder.shard import Shard
from longctx_eval.sample import Sample, Stratum, cluster_of
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
    positions: list[int] = field(default_factory=list)
    """Each sample's place in the plan's unsharded order (0, 1, 2, ... unless a shard left some out)."""


@dataclass(frozen=True)
class PlanSamples:
    """Every group of a plan, and the whole plan's samples and planned cells."""

    groups: list[GroupSamples]
    planned: dict[Stratum, int]
    total: int = 0
    """How many samples the plan selects before sharding (the shards' samples together)."""

    @property
    def samples(self) -> list[Sample]:
        """The groups' samples, concatenated in group order."""
        return [s for g in self.groups for s in g.samples]

    @property
    def positions(self) -> list[int]:
        """The samples' places in the unsharded order, concatenated in group order."""
        return [p for g in self.groups for p in g.positions]

    @property
    def task(self) -> Task:
        """The first group's task (its scorer and metrics score the plan; `score` builds it from `args`)."""
        return self.groups[0].task


@dataclass(frozen=True)
class _Chosen:
    """One group between choosing and building: its chosen plan entries (a planned dataset not yet built) or
    samples (a dataset built whole, or a planned one whose whole grid the cache held)."""

    lengths: list[int]
    args: dict[str, Any]
    task: Task
    what: str
    key: str | None
    chosen: Sequence[Planned | Sample]
    cells: dict[Stratum, int]
    origin: Status
    seconds: float
    planned: int
    """Entries of the group's whole plan (a subset of them is cached under its ids)."""


def plan_samples(
    plan: TaskPlan, seed: int, tokenizer: Tokenizer | None, cache: SampleCache | None = None, shard: Shard | None = None
) -> PlanSamples:
    """Build (or read back) each argument group's samples and apply the plan's limit per length, then the shard:
    a planned dataset is limited and sharded on its plan and builds only what is left."""
    info = plan.info
    store = cache if cache is not None else shared_sample_cache()
    picked = [_choose_group(plan, lengths, args, seed, tokenizer, store) for lengths, args in plan.groups()]
    everything = [e for g in picked for e in g.chosen]
    kept = set(shard.positions([cluster_of(e) for e in everything]) if shard is not None else range(len(everything)))
    groups: list[GroupSamples] = []
    offset = 0
    for g in picked:
        t0 = time.perf_counter()
        positions = [offset + i for i in range(len(g.chosen)) if offset + i in kept]
        samples, origin = _build_group(g, [g.chosen[p - offset] for p in positions], store)
        offset += len(g.chosen)
        seconds = g.seconds + time.perf_counter() - t0
        groups.append(GroupSamples(g.lengths, g.args, g.task, samples, origin, seconds, positions))
    if len(groups) > 1:
        dupes = [i for i, n in Counter(s.id for g in groups for s in g.samples).items() if n > 1]
        if dupes:
            raise TaskDefinitionError(
                f"{info.source}: task {info.name!r} yields sample id {dupes[0]!r} in two argument groups "
                "(suite args_at); expected ids unique across lengths"
            )
    planned = {cell: n for g in picked for cell, n in g.cells.items()}
    return PlanSamples(groups, planned, len(everything))


def _choose_group(
    plan: TaskPlan, lengths: list[int], args: dict[str, Any], seed: int, tokenizer: Tokenizer | None, store: SampleCache
) -> _Chosen:
    """One argument group's task and what its limit chooses: plan entries where the dataset is planned (nothing
    built; from the whole grid where the cache holds it), else the samples, built whole (or read back)."""
    t0 = time.perf_counter()
    info = plan.info
    task = info.build(args, lengths=lengths, seed=seed, tokenizer=tokenizer)
    what = f"{info.name} samples at {_lengths_text(lengths)}"
    key = sample_key(info, args, lengths, seed, tokenizer) if info.cache_samples else None
    dataset = task.dataset
    if isinstance(dataset, PlannedDataset):
        entries = _read_plan(info, dataset, what)
        chosen, cells = choose(info, entries, plan.limit)
        _check_built(info, len(chosen), what, limited=plan.limit is not None)
        whole = store.get(key)
        if whole is not None:
            picked = choose_samples(info, whole[0], plan.limit).samples
            return _Chosen(lengths, args, task, what, key, picked, cells, whole[1], _since(t0), len(entries))
        return _Chosen(lengths, args, task, what, key, chosen, cells, "built", _since(t0), len(entries))
    everything, origin = store.get_or_build(key, lambda: _with_progress(task.samples(), what, None))
    limited = choose_samples(info, everything, plan.limit)
    return _Chosen(lengths, args, task, what, key, limited.samples, limited.planned, origin, _since(t0), 0)


def _build_group(g: _Chosen, mine: Sequence[Planned | Sample], store: SampleCache) -> tuple[list[Sample], Status]:
    """The group's samples of `mine`: as they are where built already, else built now from their plan entries
    (cached under the group's key, and their ids where they are a part of its plan)."""
    entries = [e for e in mine if isinstance(e, Planned)]
    dataset = g.task.dataset
    if not entries or not isinstance(dataset, PlannedDataset):
        return [e for e in mine if isinstance(e, Sample)], g.origin
    key = g.key
    if key is not None and len(entries) < g.planned:
        key = sha256_json([key, [p.id for p in entries]])
    return store.get_or_build(key, lambda: _with_progress(dataset.build_checked(entries), g.what, len(entries)))


def _since(t0: float) -> float:
    return time.perf_counter() - t0


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
            continue
        if not isinstance(dataset, PlannedDataset):
            continue
        what = f"{info.name} samples at {_lengths_text(lengths)}"
        try:
            chosen, _ = choose(info, _read_plan(info, dataset, what), plan.limit)
        except GridTooLarge:
            raise
        except LongctxError:  # bad arguments, a task bug: reported in the task's place, as without this check
            continue
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
