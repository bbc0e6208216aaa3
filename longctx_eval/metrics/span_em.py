"""Span-EM and link recall, overall, by antecedent distance and within vs across context windows.

Span-EM: for each gold anaphor (a gold mention that is not the first of its cluster), the system's
antecedent is the closest preceding mention of the system cluster holding the anaphor's exact span (none
when the anaphor was not detected or starts its system cluster); Span-EM is the share of gold anaphors
whose system antecedent is exactly a mention of the anaphor's gold cluster. Link recall: the share of gold
links (anaphor -> closest gold antecedent) whose two ends the system put in one cluster. Mentions are
ordered by (start, end); spans are inclusive token offsets.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Span = tuple[int, int]

BUCKETS: tuple[tuple[int, float, str], ...] = (
    (0, 128, "<128"),
    (128, 512, "128-512"),
    (512, 2048, "512-2K"),
    (2048, 8192, "2K-8K"),
    (8192, float("inf"), ">=8K"),
)
"""Distance buckets [low, high) in tokens between the antecedent's start and the anaphor's start."""
GROUPS = (*(b[2] for b in BUCKETS), "intra", "cross")


@dataclass(frozen=True)
class GoldLink:
    """An anaphor, its closest preceding gold antecedent, their distance and whether one window holds both."""

    anaphor: Span
    antecedent: Span
    distance: int
    intra_window: bool

    def to_list(self) -> list[int]:
        """JSON form: [anaphor start, end, antecedent start, end, distance, intra 0/1]."""
        return [*self.anaphor, *self.antecedent, self.distance, int(self.intra_window)]

    @classmethod
    def from_list(cls, row: Sequence[int]) -> GoldLink:
        """Inverse of `to_list`."""
        return cls((int(row[0]), int(row[1])), (int(row[2]), int(row[3])), int(row[4]), bool(row[5]))


def as_span(m: Sequence[int]) -> Span:
    """A mention given as [start, end] or (start, end) as a tuple of ints."""
    return (int(m[0]), int(m[1]))


def gold_link_pairs(clusters: Iterable[Iterable[Sequence[int]]]) -> list[tuple[Span, Span]]:
    """(anaphor, closest preceding gold antecedent) for every non-first mention of every gold cluster."""
    pairs: list[tuple[Span, Span]] = []
    for cluster in clusters:
        ordered = sorted({as_span(m) for m in cluster})
        pairs.extend((ordered[i], ordered[i - 1]) for i in range(1, len(ordered)))
    return sorted(pairs)


def system_antecedents(clusters: Iterable[Iterable[Sequence[int]]]) -> dict[Span, Span | None]:
    """Each system mention's closest preceding mention in its cluster (None for a cluster's first).

    A span listed in two system clusters keeps its first cluster, as the scorer keeps a first occurrence.
    """
    out: dict[Span, Span | None] = {}
    for cluster in clusters:
        ordered = sorted({as_span(m) for m in cluster})
        for i, m in enumerate(ordered):
            out.setdefault(m, ordered[i - 1] if i else None)
    return out


def system_cluster_ids(clusters: Iterable[Iterable[Sequence[int]]]) -> dict[Span, int]:
    """Mention -> index of the first system cluster holding it."""
    out: dict[Span, int] = {}
    for n, cluster in enumerate(clusters):
        for m in cluster:
            out.setdefault(as_span(m), n)
    return out


def bucket_of(distance: int) -> str:
    """The label of the distance bucket holding `distance`."""
    for low, high, label in BUCKETS:
        if low <= distance < high:
            return label
    raise ValueError(f"distance {distance} is negative; expected >= 0")


def fixed_windows(n_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """Half-open token windows [k*stride, k*stride + window) until one reaches the end."""
    if window < 1 or not 1 <= stride <= window:
        raise ValueError(f"expected window >= 1 and 1 <= stride <= window, got window={window}, stride={stride}")
    out, start = [], 0
    while True:
        out.append((start, min(start + window, n_tokens)))
        if start + window >= n_tokens:
            return out
        start += stride


def in_one_window(start: int, end: int, windows: Sequence[tuple[int, int]]) -> bool:
    """Whether some window [s, e) contains the half-open token span [start, end); windows sorted."""
    starts = [w[0] for w in windows]
    ends = [w[1] for w in windows]
    # Both lists are sorted, so the windows containing the span form one contiguous run (as in OffsetIndex).
    return bisect_left(ends, end) < bisect_right(starts, start)


def gold_links(
    clusters: Iterable[Iterable[Sequence[int]]],
    token_start: Sequence[int],
    token_end: Sequence[int],
    windows: Sequence[tuple[int, int]],
) -> list[GoldLink]:
    """Gold links with distances and window membership measured in another tokenization.

    `token_start[i]`/`token_end[i]` give word i's half-open span in that tokenization (e.g. the model's),
    and `windows` are half-open spans of it.
    """
    out = []
    for ana, ant in gold_link_pairs(clusters):
        distance = max(0, token_start[ana[0]] - token_start[ant[0]])
        lo, hi = min(token_start[ant[0]], token_start[ana[0]]), max(token_end[ana[1]], token_end[ant[1]])
        out.append(GoldLink(ana, ant, distance, in_one_window(lo, hi, windows)))
    return out


def link_counts(
    gold_clusters: Iterable[Iterable[Sequence[int]]],
    links: Sequence[GoldLink],
    system_clusters: Sequence[Sequence[Sequence[int]]],
) -> dict[str, float]:
    """Span-EM and link-recall numerators and denominators, overall and per distance bucket and window group.

    Group fields (`span_em@<128_n`, ...) appear only when the document has a gold link in that group, so a
    group no document has is left out of the results rather than reported as 0.
    """
    gold_of = {as_span(m): n for n, c in enumerate(gold_clusters) for m in c}
    antecedent = system_antecedents(system_clusters)
    cluster_of = system_cluster_ids(system_clusters)
    out = {f"{k}_{s}": 0.0 for k in _names("") for s in ("n", "d")}
    for link in links:
        ant = antecedent.get(link.anaphor)
        em = ant is not None and gold_of.get(ant) == gold_of[link.anaphor]
        a, b = cluster_of.get(link.anaphor), cluster_of.get(link.antecedent)
        linked = a is not None and a == b
        for group in ("", bucket_of(link.distance), "intra" if link.intra_window else "cross"):
            for name, hit in zip(_names(group), (em, linked), strict=True):
                out[f"{name}_n"] = out.get(f"{name}_n", 0.0) + hit
                out[f"{name}_d"] = out.get(f"{name}_d", 0.0) + 1
    return out


def _names(group: str) -> tuple[str, str]:
    if not group:
        return "span_em", "link_recall"
    return f"span_em@{group}", f"link_recall@{group}"


def span_em(
    gold_clusters: Sequence[Sequence[Sequence[int]]], system_clusters: Sequence[Sequence[Sequence[int]]]
) -> float:
    """Span-EM of one document (1.0 when it has no anaphor, as nothing was missed)."""
    links = [GoldLink(a, b, 0, True) for a, b in gold_link_pairs(gold_clusters)]
    c = link_counts(gold_clusters, links, system_clusters)
    return c["span_em_n"] / c["span_em_d"] if c["span_em_d"] else 1.0


def ratios(counts: Mapping[str, float]) -> dict[str, float]:
    """Each `X_n / X_d` of summed counts as `X` (groups with no gold link are left out)."""
    return {k[:-2]: counts[k] / counts[k[:-2] + "_d"] for k in counts if k.endswith("_n") and counts[k[:-2] + "_d"]}
