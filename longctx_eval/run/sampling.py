"""Materializing a task's samples: unique ids, declared lengths, and a stratified, deterministic `--limit`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.sample import Sample, Stratum, stratum_of
from longctx_eval.task import Task, TaskInfo

"""(target_tokens, depth or None): the cells a leaderboard shows."""


@dataclass(frozen=True)
class SampleSet:
    """The samples a run evaluates, and how many the task's full grid has per stratum (for coverage)."""

    samples: list[Sample]
    planned: dict[Stratum, int]


def _key(sample: Sample) -> Hashable:
    """Within one length, what a limit spreads over: an explicit `stratum`, else the depth, else nothing."""
    meta = sample.metadata
    return meta.get("stratum", meta.get("depth"))


def build_samples(info: TaskInfo, task: Task, limit: int | None) -> SampleSet:
    """Every sample of the task, checked, then at most `limit` per length spread evenly over its strata."""
    return choose_samples(info, list(task.samples()), limit)


def choose_samples(info: TaskInfo, everything: Sequence[Sample], limit: int | None) -> SampleSet:
    """A task's full sample set (built, or read back from the sample cache) checked, then limited per length."""
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
    return SampleSet(chosen, dict(planned))


def _stratified(samples: Sequence[Sample], limit: int) -> list[Sample]:
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
    return sha256_json([s.id, sha256_text(s.context), s.question, dict(s.gold), dict(s.metadata)])


def dataset_hash(samples: Sequence[Sample]) -> str:
    """Hash of the samples, in order."""
    return sha256_json([sample_hash(s) for s in samples])
