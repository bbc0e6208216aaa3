"""Which mentions a language model is asked about (stratified, seeded) and the candidates each one chooses from.

A mention can be asked once some earlier mention does not overlap it. Its stratum is its gold link's distance
bucket and window side (`<128/intra`, `2K-8K/cross`, ...), or `new` for the first mention of an entity (whose
right answer is "new"). `asked=K` takes K of them, the strata in turn (each shuffled with the document's seed),
so rare long-range and cross-window links get as many questions as common short ones; `asked=0` takes all.
The candidates of an asked mention are the C nearest earlier gold entities, each as its closest earlier mention
that does not overlap the asked one, the asked mention's own entity always among them (it replaces the farthest
one), in document order, then 0 (new entity).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from longctx_eval.metrics.span_em import GoldLink, bucket_of

Span = tuple[int, int]
NEW = "new"


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def entity_of(clusters: Sequence[Sequence[Sequence[int]]]) -> dict[Span, int]:
    """Mention span -> index of the first gold cluster holding it."""
    out: dict[Span, int] = {}
    for n, cluster in enumerate(clusters):
        for m in cluster:
            out.setdefault((int(m[0]), int(m[1])), n)
    return out


def strata(mentions: Sequence[Span], links: Sequence[GoldLink]) -> dict[int, str]:
    """The askable mention ids (1-based) and their strata: distance bucket / window side, or `new`."""
    linked = {link.anaphor: link for link in links}
    out: dict[int, str] = {}
    for i, m in enumerate(mentions, 1):
        if not any(not _overlaps(mentions[j], m) for j in range(i - 1)):
            continue  # nothing earlier to choose: not asked
        link = linked.get(m)
        out[i] = NEW if link is None else f"{bucket_of(link.distance)}/{'intra' if link.intra_window else 'cross'}"
    return out


def sample_asked(by_id: dict[int, str], k: int, seed: int) -> tuple[list[int], dict[str, list[int]]]:
    """K asked ids taken from the strata in turn (all when k is 0 or there are fewer), sorted; and per stratum
    [asked, available]."""
    groups: dict[str, list[int]] = {}
    for i, name in sorted(by_id.items()):
        groups.setdefault(name, []).append(i)
    rng = random.Random(seed)
    for name in sorted(groups):
        rng.shuffle(groups[name])
    chosen: list[int] = []
    if k <= 0 or k >= len(by_id):
        chosen = list(by_id)
    else:
        queues = [groups[name] for name in sorted(groups)]
        depth = 0
        while len(chosen) < k:
            for q in queues:
                if depth < len(q) and len(chosen) < k:
                    chosen.append(q[depth])
            depth += 1
    picked = set(chosen)
    table = {name: [sum(i in picked for i in ids), len(ids)] for name, ids in sorted(groups.items())}
    return sorted(chosen), table


def candidates(i: int, mentions: Sequence[Span], entity: dict[Span, int], c: int) -> list[int]:
    """Candidate mention ids for asked mention `i`: the C nearest earlier entities (its own always among them),
    each as its closest earlier non-overlapping mention, in document order, then 0 (new entity)."""
    me = mentions[i - 1]
    own = entity.get(me)
    nearest: dict[int, int] = {}
    for j in range(i - 1, 0, -1):
        span = mentions[j - 1]
        if _overlaps(span, me):
            continue
        nearest.setdefault(entity.get(span, -j), j)
        if len(nearest) >= c and own in nearest:
            break  # the C nearest entities and the asked mention's own are known
    order = list(nearest.items())  # by recency: dicts keep insertion order
    keep = order[:c]
    if own in nearest and all(e != own for e, _ in keep):
        keep = [*keep[: c - 1], (own, nearest[own])]
    return sorted(j for _, j in keep) + [0]
