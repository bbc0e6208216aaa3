"""The needle family's grids as plans (ids and cells, nothing built): what a limit is applied to before the
cells generators build the chosen samples (`longctx_eval.sample_plan`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from data_builders.haystack.cluster import haystack_cluster
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.haystack.sharing import spread_haystack
from data_builders.needle.family import grid_points, per_length_id
from data_builders.needle.grid import VALUE_KIND_CYCLE, haystack_seed, sample_id
from longctx_eval.sample_plan import Planned

GridPlan = Callable[..., Iterator[Planned]]
"""A plan taking the same grid arguments as its cells generator (after source and tokenizer)."""


def depth_grid_plan(
    lengths: Sequence[int], depths: int, per_cell: int, seed: int, reserve: int = PROMPT_RESERVE, haystacks: int = 0
) -> Iterator[Planned]:
    """The length x repetition x depth grid of `needle_cells`, `lowlex_cells` and `multikey_cells`, in order; every
    depth of one (length, repetition) shares its haystack, or with `haystacks` = h > 0 the length's samples spread
    over h haystacks (`sharing.spread_haystack`). The reserve changes a sample, not its place."""
    for length, rep, i, depth in grid_points(lengths, depths, per_cell):
        cluster = haystack_cluster(haystack_seed(seed, length, spread_haystack(i, rep, depths, per_cell, haystacks)))
        yield Planned(sample_id(length, depth, rep), {"target_tokens": length, "depth": depth, "cluster": cluster})


def per_length_plan(tag: str) -> GridPlan:
    """The plan of a grid of `per_length` samples a length, value kinds cycling (multiquery "q", multivalue "v");
    sample i reads the haystack of rep i, or with `haystacks` = h > 0 that of rep i % h."""

    def plan(lengths: Sequence[int], per_length: int, seed: int, reserve: int, haystacks: int = 0) -> Iterator[Planned]:
        for length in lengths:
            for i in range(per_length):
                kind = VALUE_KIND_CYCLE[i % len(VALUE_KIND_CYCLE)]
                cluster = haystack_cluster(haystack_seed(seed, length, i % haystacks if haystacks > 0 else i))
                meta = {"target_tokens": length, "stratum": kind, "cluster": cluster}
                yield Planned(per_length_id(length, tag, i), meta)

    return plan
