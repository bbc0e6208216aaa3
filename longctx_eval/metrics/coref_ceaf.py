"""CEAF-m and CEAF-e (Luo 2005) with the optimal one-to-one entity alignment, as in scorer v8.01."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

Chain = Sequence[Hashable]


def _overlap(key: Chain, response_set: set) -> int:
    """The scorer's intersection: positions of the key chain whose mention is in the response chain."""
    return sum(1 for m in key if m in response_set)


def ceaf_counts(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """Numerators and denominators of CEAF-m (phi3 = |K & R|) and CEAF-e (phi4 = 2|K & R| / (|K| + |R|))."""
    rsets = [set(r) for r in responses]
    where: dict[Hashable, list[int]] = defaultdict(list)
    for j, r in enumerate(rsets):
        for m in r:
            where[m].append(j)
    edges: dict[tuple[int, int], int] = {}
    for i, k in enumerate(keys):
        for j in {j for m in set(k) for j in where.get(m, ())}:
            edges[(i, j)] = _overlap(k, rsets[j])
    phi3 = {e: float(v) for e, v in edges.items()}
    phi4 = {(i, j): 2.0 * v / (len(keys[i]) + len(responses[j])) for (i, j), v in edges.items()}
    return {
        "ceafm_num": _best_alignment(phi3),
        "ceafm_key": float(sum(len(k) for k in keys)),
        "ceafm_resp": float(sum(len(r) for r in responses)),
        "ceafe_num": _best_alignment(phi4),
        "ceafe_key": float(sum(1 for k in keys if len(k))),
        "ceafe_resp": float(sum(1 for r in responses if len(r))),
    }


def _best_alignment(weights: dict[tuple[int, int], float]) -> float:
    """Maximum total weight of a one-to-one key-to-response alignment.

    Pairs with no shared mention weigh 0, so the problem splits into the connected components of the
    bipartite sharing graph; solving each small component alone keeps book-length documents cheap.
    """
    total = 0.0
    for rows, cols, pairs in _components(weights):
        if len(rows) == 1 or len(cols) == 1:
            total += max(w for _, w in pairs)  # a star: the best single pair is the best alignment
            continue
        ri = {r: n for n, r in enumerate(rows)}
        ci = {c: n for n, c in enumerate(cols)}
        matrix = np.zeros((len(rows), len(cols)))
        for (i, j), w in pairs:
            matrix[ri[i], ci[j]] = w
        r, c = linear_sum_assignment(matrix, maximize=True)
        total += float(matrix[r, c].sum())
    return total


def _components(weights: dict[tuple[int, int], float]) -> list[tuple[list[int], list[int], list]]:
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for i, j in weights:
        a, b = find(("k", i)), find(("r", j))
        if a != b:
            parent[a] = b
    groups: dict[tuple[str, int], tuple[set[int], set[int], list]] = {}
    for (i, j), w in weights.items():
        rows, cols, pairs = groups.setdefault(find(("k", i)), (set(), set(), []))
        rows.add(i)
        cols.add(j)
        pairs.append(((i, j), w))
    return [(sorted(rows), sorted(cols), pairs) for rows, cols, pairs in groups.values()]
