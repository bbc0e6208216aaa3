"""BLANC for gold or predicted mentions (Recasens & Hovy 2011; Luo et al. 2014), as in scorer v8.01."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import combinations

Chain = Sequence[Hashable]


def blanc_counts(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """Coreference (c) and non-coreference (n) link counts of one document: common, key and response."""
    if _has_repeats(keys) or _has_repeats(responses):
        return _by_sets(keys, responses)
    return _by_counting(keys, responses)


def _has_repeats(chains: Sequence[Chain]) -> bool:
    n = sum(len(c) for c in chains)
    return len({m for c in chains for m in c}) != n


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def _by_counting(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """Closed form when every mention is in one chain once (the usual case; exact and O(mentions))."""
    key_of = {m: i for i, k in enumerate(keys) for m in k}
    resp_of = {m: j for j, r in enumerate(responses) for m in r}
    common = [m for m in key_of if m in resp_of]
    cell = Counter((key_of[m], resp_of[m]) for m in common)
    per_key = Counter(key_of[m] for m in common)
    per_resp = Counter(resp_of[m] for m in common)
    c_common = sum(_pairs(v) for v in cell.values())
    c_key = sum(_pairs(len(k)) for k in keys)
    c_resp = sum(_pairs(len(r)) for r in responses)
    n_key = _pairs(len(key_of)) - c_key
    n_resp = _pairs(len(resp_of)) - c_resp
    # Pairs of shared mentions split by both clusterings: all pairs, minus same key chain, minus same
    # response chain, plus those counted twice (same chain in both).
    n_common = (
        _pairs(len(common))
        - sum(_pairs(v) for v in per_key.values())
        - sum(_pairs(v) for v in per_resp.values())
        + c_common
    )
    return _record(c_common, c_key, c_resp, n_common, n_key, n_resp)


def _by_sets(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """The scorer's literal link sets, for documents where a mention repeats (same span in two chains)."""
    kc, kn = _link_sets(keys)
    rc, rn = _link_sets(responses)
    return _record(len(kc & rc), len(kc), len(rc), len(kn & rn), len(kn), len(rn))


def _link_sets(chains: Sequence[Chain]) -> tuple[set, set]:
    order = {m: n for n, m in enumerate(sorted({m for c in chains for m in c}, key=repr))}

    def link(a: Hashable, b: Hashable) -> tuple:
        return (a, b) if order[a] <= order[b] else (b, a)

    coref = {link(a, b) for c in chains for a, b in combinations(c, 2)}
    non = {link(a, b) for x, y in combinations(chains, 2) for a in x for b in y}
    return coref, non


def _record(cc: int, ck: int, cr: int, nc: int, nk: int, nr: int) -> dict[str, float]:
    return {
        "blanc_c_num": float(cc),
        "blanc_c_key": float(ck),
        "blanc_c_resp": float(cr),
        "blanc_n_num": float(nc),
        "blanc_n_key": float(nk),
        "blanc_n_resp": float(nr),
    }


def blanc_from_counts(c: dict[str, float]) -> tuple[float, float, float]:
    """BLANC (R, P, F) from summed counts; a key with one kind of link only reports that kind, none gives 0."""
    rc = c["blanc_c_num"] / c["blanc_c_key"] if c["blanc_c_key"] else None
    rn = c["blanc_n_num"] / c["blanc_n_key"] if c["blanc_n_key"] else None
    pc = c["blanc_c_num"] / c["blanc_c_resp"] if c["blanc_c_resp"] else 0.0
    pn = c["blanc_n_num"] / c["blanc_n_resp"] if c["blanc_n_resp"] else 0.0
    if rc is None and rn is None:
        return 0.0, 0.0, 0.0
    if rc is None:
        assert rn is not None  # both None returned above
        return rn, pn, _f1(rn, pn)
    if rn is None:
        return rc, pc, _f1(rc, pc)
    return (rc + rn) / 2, (pc + pn) / 2, (_f1(rc, pc) + _f1(rn, pn)) / 2


def _f1(r: float, p: float) -> float:
    return 2 * r * p / (r + p) if r + p else 0.0
