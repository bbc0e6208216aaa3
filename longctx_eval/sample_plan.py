"""A dataset planned before it is built: every sample's id and cell first, then only the chosen samples.

A task whose samples are costly to build (exact-length haystacks) and whose grid is regular can give its
`Task.dataset` as a `PlannedDataset`: `plan()` lists every sample of the grid cheaply (id and the metadata a
limit spreads over: `target_tokens`, and `depth` or `stratum`; and `cluster`, the haystack it shares),
`build(chosen)` builds just those. The runner applies `--limit` (and `--shard`) to the plan, so a run or a dry
run costs what it selects, not what the grid holds. Called with no argument it builds the whole plan, so
everything that reads `task.samples()` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.sample import Sample

PLAN_KEYS = ("target_tokens", "depth", "stratum", "cluster")
"""The metadata a plan states and its built sample must repeat: what `--limit`, the coverage and shards read."""


@dataclass(frozen=True)
class Planned:
    """One sample of a grid before it is built: its id and the metadata of its cell (`PLAN_KEYS`)."""

    id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedDataset:
    """A task's dataset as a cheap plan and a builder of the chosen part of it, in plan order."""

    plan: Callable[[], Iterable[Planned]]
    build: Callable[[Sequence[Planned]], Iterable[Sample]]

    def __call__(self) -> Iterator[Sample]:
        """Every sample of the plan (the dataset builders and `score` read the whole grid this way)."""
        return self.build_checked(list(self.plan()))

    def build_checked(self, chosen: Sequence[Planned]) -> Iterator[Sample]:
        """The chosen samples, each checked against its plan entry (a plan that disagrees is a task bug)."""
        built = iter(self.build(chosen))
        for want in chosen:
            got = next(built, None)
            if got is None:
                raise TaskDefinitionError(f"planned sample {want.id!r} was not built; expected one sample per entry")
            problem = disagreement(want, got)
            if problem:
                raise TaskDefinitionError(f"planned sample {want.id!r}: {problem}; expected the plan to match")
            yield got
        extra = next(built, None)
        if extra is not None:
            raise TaskDefinitionError(f"sample {extra.id!r} was built but not planned; expected only planned ones")


def disagreement(want: Planned, got: Sample) -> str | None:
    """How a built sample differs from its plan entry (id, or a `PLAN_KEYS` value), or None."""
    if got.id != want.id:
        return f"built as {got.id!r}"
    for key in PLAN_KEYS:
        if want.metadata.get(key) != got.metadata.get(key):
            return f"{key} planned {want.metadata.get(key)!r}, built {got.metadata.get(key)!r}"
    return None
