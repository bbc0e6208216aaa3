"""Prefix sharing counted in whole KV-cache blocks, on token ids alone: the block hashes vLLM chains, the rows to send
first so that one prefill covers what the others reuse (prime then fill), and the tokens a cache could serve in an
order. Pure functions, no vLLM: the `vllm` bench part's jobs (benchmarks/vllm_backends.py) and the prefix-cache
study (benchmarks/vllm_priming.py) both count with them."""

from __future__ import annotations

from collections.abc import Sequence


def block_chains(rows: Sequence[Sequence[int]], block: int) -> list[list[int]]:
    """Per row, the hash of each of its full-block prefixes (the j-th: the first j blocks), as vLLM chains them."""
    chains = []
    for ids in rows:
        chain, parent = [], 0
        for start in range(0, len(ids) - block + 1, block):
            parent = hash((parent, tuple(ids[start : start + block])))
            chain.append(parent)
        chains.append(chain)
    return chains


def primers(rows: Sequence[Sequence[int]], block: int) -> list[int]:
    """Indices (ascending) of the rows to send first: for every full-block prefix that two or more rows share, one
    row holding the deepest such prefix, so that row's prefill covers what the others can reuse. Empty when no two
    rows share a block."""
    if block <= 0:
        raise ValueError(f"block size must be positive, not {block}")
    chains = block_chains(rows, block)
    count: dict[int, int] = {}
    for chain in chains:
        for h in chain:
            count[h] = count.get(h, 0) + 1
    deepest = [max((j + 1 for j, h in enumerate(chain) if count[h] > 1), default=0) for chain in chains]
    covered: set[int] = set()
    chosen = []
    for i in sorted(range(len(rows)), key=lambda i: (-deepest[i], i)):
        if deepest[i] == 0:
            break
        if chains[i][deepest[i] - 1] not in covered:
            chosen.append(i)
            covered.update(chains[i])
    return sorted(chosen)


def ideal_cached(rows: Sequence[Sequence[int]], block: int) -> int:
    """Prompt tokens the cache could serve when the rows are sent in this order: per row, its longest common
    prefix with any earlier row, in whole blocks (and never the whole prompt: its last token is computed)."""
    total = 0
    for i, ids in enumerate(rows):
        best = 0
        for prev in rows[:i]:
            n = 0
            for a, b in zip(ids, prev, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        total += min(best, len(ids) - 1) // block * block
    return total


def prime_order(rows: Sequence[Sequence[int]], block: int) -> list[int]:
    """The order prime then fill sends the rows in: the primers, then the others."""
    first = primers(rows, block)
    return first + [i for i in range(len(rows)) if i not in set(first)]
