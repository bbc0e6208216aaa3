"""Materializing a task's samples: unique ids, declared lengths, and a stratified, deterministic `--limit`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.sample import Sample, Stratum, recorded_sample_hash, stratum_of
from longctx_eval.sample_plan import Planned, PlannedDataset
from longctx_eval.task import Task, TaskInfo

Entry = TypeVar("Entry", Sample, Planned)
"""A built sample or a planned one: both carry the id and the metadata a limit reads."""

"""(target_tokens, depth or None): the cells a leaderboard shows."""


@dataclass(frozen=True)
class SampleSet:
    """The samples a run evaluates, and how many the task's full grid has per stratum (for coverage)."""

    samples: list[Sample]
    planned: dict[Stratum, int]


def _key(sample: Sample | Planned) -> Hashable:
    """Within one length, what a limit spreads over: an explicit `stratum`, else the depth, else nothing."""
    meta = sample.metadata
    return meta.get("stratum", meta.get("depth"))


def build_samples(info: TaskInfo, task: Task, limit: int | None) -> SampleSet:
    """At most `limit` samples per length spread evenly over its strata, checked; a planned dataset builds only
    those (uncached: the runner's `plan_samples` goes through the sample cache and its bounds)."""
    if isinstance(task.dataset, PlannedDataset):
        chosen, planned = choose(info, list(task.dataset.plan()), limit)
        return SampleSet(list(task.dataset.build_checked(chosen)), planned)
    return choose_samples(info, list(task.samples()), limit)


def choose_samples(info: TaskInfo, everything: Sequence[Sample], limit: int | None) -> SampleSet:
    """A task's full sample set (built, or read back from the sample cache) checked, then limited per length."""
    chosen, planned = choose(info, everything, limit)
    return SampleSet(chosen, planned)


def choose(info: TaskInfo, everything: Sequence[Entry], limit: int | None) -> tuple[list[Entry], dict[Stratum, int]]:
    """Samples or plan entries checked (a length each, unique ids), at most `limit` per length; and how many
    the whole grid holds per cell (for coverage)."""
    for s in everything:
        if s.metadata.get("target_tokens") is None:
            raise TaskDefinitionError(
                f"{info.source}: task {info.name!r} sample {s.id!r} lacks metadata 'target_tokens'"
            )
    dupes = [i for i, n in Counter(s.id for s in everything).items() if n > 1]
    if dupes:
        raise TaskDefinitionError(
            f"{info.source}: task {info.name!r} yields duplicate sample id {dupes[0]!r}"
            + (f" (and {len(dupes) - 1} more)" if len(dupes) > 1 else "")
            + "; expected a unique id per sample"
        )
    planned = Counter(stratum_of(s) for s in everything)
    chosen = list(everything) if limit is None else _stratified(everything, limit)
    return chosen, dict(planned)


def _stratified(samples: Sequence[Entry], limit: int) -> list[Entry]:
    """Per length: every stratum once before any repeats; with fewer picks than strata, strata evenly spaced."""
    by_length: dict[int, dict[Hashable, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, s in enumerate(samples):
        by_length[int(s.metadata["target_tokens"])][_key(s)].append(i)
    keep: set[int] = set()
    for strata in by_length.values():
        groups = [strata[k] for k in sorted(strata, key=_order)]
        if limit < len(groups):
            n = len(groups)
            picks = [n // 2] if limit == 1 else [round(i * (n - 1) / (limit - 1)) for i in range(limit)]
            keep.update(groups[p][0] for p in picks)
            continue
        taken, depth = 0, 0
        while taken < limit and any(depth < len(g) for g in groups):
            for g in groups:
                if depth < len(g) and taken < limit:
                    keep.add(g[depth])
                    taken += 1
            depth += 1
    return [s for i, s in enumerate(samples) if i in keep]


def _order(key: Hashable) -> tuple:
    return (key is None, key if isinstance(key, int | float) else 0, str(key))


def sample_hash(s: Sample) -> str:
    """Hash of everything in a sample; the dataset hash is the hash of these in order."""
    return recorded_sample_hash(s.id, sha256_text(s.context), s.question, s.gold, s.metadata)


def dataset_hash(samples: Sequence[Sample]) -> str:
    """Hash of the samples, in order."""
    return sha256_json([sample_hash(s) for s in samples])
