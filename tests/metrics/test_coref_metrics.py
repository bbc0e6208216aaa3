# ruff: noqa: E501  (the official expected values are transcribed one case per entry)
"""Coref metrics: the official scorer's test suite (v8.01 expected values), hand-computed LEA and edge cases,
an independent brute-force implementation of every definition, and invariants (hypothesis)."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longctx_eval.errors import DataError
from longctx_eval.metrics.coref import document_counts, score_clusters

TOL = 1e-4  # the official test suite's tolerance

# TC-A key (DataFiles/TC-A.key): token spans of the letters; x, y, z are twinless response mentions.
SPANS = {"a": (0, 1), "b": (3, 6), "c": (9, 9), "d": (11, 12), "e": (14, 14), "f": (16, 18)}
SPANS.update({"x": (10, 10), "z": (13, 13), "y": (15, 15), "B": (4, 6)})


def clusters(spec: str, doc: str = "d", spans: dict | None = None) -> list[list[tuple[str, int, int]]]:
    """'{a} {bc}' -> clusters; unknown letters get their own one-token span far from the TC-A ones."""
    table = spans if spans is not None else SPANS
    out = []
    for group in spec.split():
        letters = group.strip("{}")
        out.append([(doc, *table.get(ch, (100 + ord(ch), 100 + ord(ch)))) for ch in letters])
    return out


KEY_A = "{a} {bc} {def}"
# (id, key, response, {metric: (R, P, F1)}) transcribed from test/CorefMetricTestConfig.pm of scorer v8.01.
OFFICIAL = [
    ("A1", KEY_A, "{a} {bc} {def}", {"muc": (1, 1, 1), "bcub": (1, 1, 1), "ceafm": (1, 1, 1), "ceafe": (1, 1, 1), "blanc": (1, 1, 1)}),
    ("A2", KEY_A, "{a} {de}", {"muc": (1 / 3, 1, 0.5), "bcub": ((7 / 3) / 6, 1, 14 / 25), "ceafm": (0.5, 1, 0.66667),
                               "ceafe": (0.6, 0.9, 0.72), "blanc": (0.21591, 1, 0.35385)}),
    ("A3", KEY_A, "{a} {bcx} {defy} {z}", {"muc": (1, 3 / 5, 0.75), "bcub": (1, (4 + 7 / 12) / 9, 110 / 163),
                                           "ceafm": (1, 0.66667, 0.8), "ceafe": (0.88571, 0.66429, 0.75918),
                                           "blanc": (1, 0.42593, 0.59717)}),
    ("A4", KEY_A, "{a} {bcx} {dy} {z}", {"muc": (1 / 3, 1 / 3, 1 / 3),
                                         "bcub": ((3 + 1 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7, 2 * (5 / 9) * (17 / 42) / ((5 / 9) + (17 / 42))),
                                         "ceafm": (0.66667, 0.57143, 0.61538), "ceafe": (0.73333, 0.55, 0.62857),
                                         "blanc": (0.35227, 0.27206, 0.30357)}),
    ("A5", KEY_A, "{a} {bcxB} {dy} {z}", {"muc": (1 / 3, 1 / 4, 2 / 7),
                                          "bcub": ((3 + 1 / 3) / 6, 2.5 / 8, 2 * (5 / 9) * (5 / 16) / ((5 / 9) + (5 / 16))),
                                          "ceafm": (0.66667, 0.5, 0.57143), "ceafe": (0.68889, 0.51667, 0.59048),
                                          "blanc": (0.35227, 0.19048, 0.24716)}),
    ("A6", KEY_A, "{a} {bcx} {dy} {Bz}", {"muc": (1 / 3, 1 / 4, 2 / 7),
                                          "bcub": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 8, 2 * (5 / 9) * (17 / 48) / ((5 / 9) + (17 / 48))),
                                          "ceafm": (0.66667, 0.5, 0.57143), "ceafe": (0.73333, 0.55, 0.62857),
                                          "blanc": (0.35227, 0.20870, 0.25817)}),
    ("A10", KEY_A, "{a} {b} {c} {d} {e} {f}", {"muc": (0, 0, 0), "bcub": (3 / 6, 1, 2 / 3), "blanc": (0.5, 0.36667, 0.42308)}),
    ("A11", KEY_A, "{abcdef}", {"muc": (1, 3 / 5, 6 / 8), "bcub": (1, (1 / 6 + 2 * 2 / 6 + 3 * 3 / 6) / 6, 14 / 25),
                                "blanc": (0.5, 0.13333, 0.21053)}),
    ("A12", KEY_A, "{a} {x} {y} {c} {d} {e} {z}", {"muc": (0, 0, 0),
                                                   "bcub": ((1 + 1 / 2 + 2 / 3) / 6, 4 / 7, 2 * (13 / 36) * (4 / 7) / ((13 / 36) + (4 / 7))),
                                                   "blanc": (0.22727, 0.11905, 0.15625)}),
    ("A13", KEY_A, "{axycdez}", {"muc": (1 / 3, 1 / 6, 2 / 9),
                                 "bcub": ((1 + 1 / 2 + 2 * 2 / 3) / 6, (1 / 7 + 1 / 7 + 2 * 2 / 7) / 7, 2 * (17 / 36) * (6 / 49) / ((17 / 36) + (6 / 49))),
                                 "blanc": (0.125, 0.02381, 0.04)}),
    ("B1", "{ab} {cde}", "{bcx} {de}", {"blanc": (1 / 2 * (1 / 4 + 1 / 3),) * 3}),
    ("C1", "{ab} {cde} {fg}", "{bcx} {de} {fg}", {"blanc": (1 / 2 * (2 / 5 + 10 / 16),) * 3}),
    ("D1", "{12345} {67} {89ABC}", "{12345} {6789ABC}", {"muc": (1, 9 / 10, 2 * (9 / 10) / (1 + 9 / 10)),
                                                       "bcub": (1, 16 / 21, 2 * (16 / 21) / (1 + 16 / 21))}),
    ("E1", "{12345} {67} {89ABC}", "{1234589ABC} {67}", {"muc": (1, 9 / 10, 2 * (9 / 10) / (1 + 9 / 10)),
                                                         "bcub": (1, 7 / 12, 2 * (7 / 12) / (1 + 7 / 12))}),
    ("F1", "{ABCD}", "{AB} {CD}", {"muc": (2 / 3, 1, 2 * (2 / 3) / (2 / 3 + 1))}),
    ("G1", "{AB} {CD}", "{ABCD}", {"muc": (1, 2 / 3, 2 * (2 / 3) / (1 + 2 / 3))}),
    ("H1", "{ABCD}", "{ABCD}", {"muc": (1, 1, 1)}),
    ("I1", "{ABCD}", "{AB} {CD}", {"muc": (2 / 3, 1, 2 * (2 / 3) / (2 / 3 + 1))}),
    ("J1", "{ABC}", "{AC}", {"muc": (1 / 2, 1, 2 * (1 / 2) / (1 / 2 + 1))}),
    ("K1", "{BCDEGHJ}", "{ABC} {DEF} {GHI}", {"muc": (3 / 6, 3 / 6, 3 / 6)}),
    ("L1", "{ABC} {DEFG}", "{AB} {CD} {FGH}", {"muc": (2 / 5, 2 / 4, 2 * (2 / 5) * (2 / 4) / (2 / 5 + 2 / 4))}),
    ("M1", "{abcdef}", "{abcdef}", {m: (1, 1, 1) for m in ("muc", "bcub", "ceafm", "ceafe", "blanc")}),
    ("M2", "{abcdef}", "{a} {b} {c} {d} {e} {f}", {"muc": (0, 0, 0), "blanc": (0, 0, 0)}),
    ("M3", "{abcdef}", "{ab} {cde} {f}", {"blanc": (0.26667, 1, 0.42105)}),
    ("M4", "{abcdef}", "{abcxyz}", {"blanc": (0.2, 0.2, 0.2)}),
    ("M5", "{abcdef}", "{a} {b} {c} {x} {y} {z}", {"muc": (0, 0, 0), "blanc": (0, 0, 0)}),
    ("M6", "{abcdef}", "{ab} {cxy} {z}", {"blanc": (0.06667, 0.25, 0.10526)}),
    ("N1", "{a} {b} {c} {d} {e} {f}", "{a} {b} {c} {d} {e} {f}", {"muc": (0, 0, 0), "blanc": (1, 1, 1)}),
    ("N2", "{a} {b} {c} {d} {e} {f}", "{abcdef}", {"muc": (0, 0, 0), "blanc": (0, 0, 0)}),
    ("N3", "{a} {b} {c} {d} {e} {f}", "{ab} {cde} {f}", {"blanc": (0.73333, 1, 0.84615)}),
    ("N4", "{a} {b} {c} {d} {e} {f}", "{a} {b} {c} {x} {y} {z}", {"muc": (0, 0, 0), "blanc": (0.2, 0.2, 0.2)}),
    ("N5", "{a} {b} {c} {d} {e} {f}", "{abcxyz}", {"blanc": (0, 0, 0)}),
    ("N6", "{a} {b} {c} {d} {e} {f}", "{ab} {cxy} {z}", {"blanc": (0.13333, 0.18182, 0.15385)}),
]  # fmt: skip


def _check(got: tuple[float, float, float], want: tuple[float, ...]) -> None:
    assert got == pytest.approx(tuple(float(w) for w in want), abs=TOL), f"got {got}, want {want}"


@pytest.mark.parametrize(("case", "key", "response", "expected"), OFFICIAL, ids=[c[0] for c in OFFICIAL])
def test_official_suite(case: str, key: str, response: str, expected: dict) -> None:
    # Families B-N use abstract letters: every letter is its own one-token span.
    spans = SPANS if case.startswith("A") else {}
    scores = score_clusters(clusters(key, spans=spans), clusters(response, spans=spans))
    for metric, want in expected.items():
        _check(scores[metric], want)


@pytest.mark.parametrize(
    ("case", "response", "order_note"),
    [
        ("A7", [["a"], ["b", "c", "x", "b"], ["d", "y"], ["z"]], "repeat of b in its own entity"),
        ("A8", [["a"], ["b", "c", "x"], ["d", "y"], ["b", "z"]], "repeat of b in a later entity"),
        ("A9", [["a"], ["b", "c", "x"], ["b"] * 10 + ["z"], ["d", "y"]], "b repeated 10 times (the scorer's limit)"),
    ],
)
def test_official_repeated_mentions_are_dropped(case: str, response: list, order_note: str) -> None:
    resp = [[("d", *SPANS[ch]) for ch in c] for c in response]
    scores = score_clusters(clusters(KEY_A), resp, strict_repeats=True)
    _check(scores["muc"], (1 / 3, 1 / 3, 1 / 3))
    _check(scores["bcub"], (5 / 9, 17 / 42, 2 * (5 / 9) * (17 / 42) / ((5 / 9) + (17 / 42))))
    _check(scores["ceafm"], (0.66667, 0.57143, 0.61538))
    _check(scores["ceafe"], (0.73333, 0.55, 0.62857))
    _check(scores["blanc"], (0.35227, 0.27206, 0.30357))


def test_more_than_ten_repeats_is_refused_in_strict_mode() -> None:
    resp = [[("d", *SPANS["a"])], [("d", *SPANS["b"])] * 12]
    with pytest.raises(DataError, match="refuses"):
        score_clusters(clusters(KEY_A), resp, strict_repeats=True)
    assert score_clusters(clusters(KEY_A), resp)["mentions"][1] == pytest.approx(1.0)


def test_repeated_spurious_mention_counts_at_each_occurrence() -> None:
    # key {ab}; response {abx} {x}: x is not in the key, so both occurrences stay (the scorer's rule).
    scores = score_clusters(clusters("{ab}", spans={}), clusters("{abx} {x}", spans={}))
    _check(scores["mentions"], (1, 2 / 3, 0.8))  # unique response spans: a, b, x
    _check(scores["muc"], (1, 1 / 2, 2 / 3))  # response links: 2 + 0
    _check(scores["bcub"], (1, (2 / 3 + 2 / 3) / 4, 2 * (1 / 3) / (1 + 1 / 3)))


# LEA (Moosavi & Strube 2016), computed by hand: R = sum |K| * resolved links / links(K) / sum |K|.
LEA = [
    ("A1", KEY_A, "{a} {bc} {def}", (1, 1)),
    ("A2", KEY_A, "{a} {de}", (F(2, 6), F(3, 3))),  # {a} resolved, {de} 1 of 3 links; P: 1 + 2*1/1
    ("A3", KEY_A, "{a} {bcx} {defy} {z}", (F(6, 6), F(4, 9))),  # P: 1 + 3*1/3 + 4*3/6 + 0
    ("A10", KEY_A, "{a} {b} {c} {d} {e} {f}", (F(1, 6), F(1, 6))),
    ("A11", KEY_A, "{abcdef}", (F(5, 6), F(4, 15))),  # P: 6 * 4/15 over 6
    ("D1", "{12345} {67} {89ABC}", "{12345} {6789ABC}", (1, F(13, 18))),  # P: (5 + 7*11/21) / 12
    ("F1", "{ABCD}", "{AB} {CD}", (F(1, 3), 1)),
    ("N1", "{a} {b} {c} {d} {e} {f}", "{a} {b} {c} {d} {e} {f}", (1, 1)),
    ("N2", "{a} {b} {c} {d} {e} {f}", "{abcdef}", (0, 0)),
]


@pytest.mark.parametrize(("case", "key", "response", "rp"), LEA, ids=[c[0] for c in LEA])
def test_lea_by_hand(case: str, key: str, response: str, rp: tuple) -> None:
    spans = SPANS if case.startswith("A") else {}
    r, p = (float(x) for x in rp)
    _check(
        score_clusters(clusters(key, spans=spans), clusters(response, spans=spans))["lea"],
        (r, p, 2 * r * p / (r + p) if r + p else 0),
    )


def test_blanc_is_per_document_not_pooled() -> None:
    key = clusters("{ab}", "d1", {}) + clusters("{c} {d}", "d2", {})
    resp = clusters("{a} {b}", "d1", {}) + clusters("{cd}", "d2", {})
    assert score_clusters(key, resp)["blanc"] == pytest.approx((0, 0, 0))
    pooled = [[("one", s, e) for _, s, e in c] for c in key], [[("one", s, e) for _, s, e in c] for c in resp]
    assert score_clusters(*pooled)["blanc"][2] == pytest.approx(0.4)  # what pooling would wrongly report


def test_documents_sum_numerators_and_denominators() -> None:
    k1, r1 = clusters("{abc}", "d1", {}), clusters("{ab} {c}", "d1", {})
    k2, r2 = clusters("{de} {fg}", "d2", {}), clusters("{defg}", "d2", {})
    scores = score_clusters(k1 + k2, r1 + r2)
    _check(scores["muc"], (F(1 + 2, 2 + 2), F(1 + 2, 1 + 3), 2 * F(3, 4) * F(3, 4) / F(6, 4)))


def test_zero_denominators_give_zero() -> None:
    assert all(v == (0.0, 0.0, 0.0) for v in score_clusters([], []).values())
    s = score_clusters(clusters(KEY_A), [])
    assert s["muc"] == (0.0, 0.0, 0.0) and s["bcub"] == (0.0, 0.0, 0.0) and s["conll"] == (0.0, 0.0, 0.0)
    only_response = score_clusters([], clusters(KEY_A), documents=["d"])
    assert only_response["mentions"] == (0.0, 0.0, 0.0)


def test_key_documents_decide_what_is_scored() -> None:
    key = clusters("{ab}", "d1", {})
    stray = clusters("{ab}", "elsewhere", {})
    assert score_clusters(key, key + stray)["mentions"] == pytest.approx((1, 1, 1))  # ignored, as the scorer does
    # An empty key document named explicitly still counts the response's mentions as spurious.
    assert score_clusters(key, key + stray, documents=["d1", "elsewhere"])["mentions"][1] == pytest.approx(0.5)


def test_same_span_in_two_key_entities_sits_in_both() -> None:
    # OntoGUM has six such spans: the scorer gives the span one id that then belongs to both key entities.
    key = [[("d", 0, 0), ("d", 2, 2)], [("d", 2, 2), ("d", 4, 4)]]
    c = document_counts([[(0, 0), (2, 2)], [(2, 2), (4, 4)]], [[(0, 0), (2, 2)], [(4, 4)]])
    assert c["mentions_rd"] == 3 and c["muc_rd"] == 2 and c["bcub_rd"] == 4
    # Key against itself: the response's second (2, 2) repeats a matched span and is dropped, and the span's
    # key chain is the last one holding it, so {(0,0), (2,2)} recovers no key link: MUC 0, as the scorer.
    assert score_clusters(key, key)["muc"] == pytest.approx((0, 0, 0))
    assert score_clusters(key, key)["mentions"] == pytest.approx((1, 1, 1))


def test_malformed_mentions_are_errors() -> None:
    with pytest.raises(DataError, match="not \\(doc_id, start, end\\)"):
        score_clusters([[("d", 3)]], [])
    with pytest.raises(DataError, match="start <= end"):
        score_clusters([[("d", 5, 2)]], [])


# ---- an independent implementation of each definition (research notes, section 3), brute force ----


def _ref_scores(key: list[list], resp: list[list]) -> dict[str, tuple[float, float]]:
    """Recall and precision numerators/denominators straight from the definitions, one document."""
    kset, rset = [set(k) for k in key], [set(r) for r in resp]
    km, rm = set().union(*kset) if kset else set(), set().union(*rset) if rset else set()

    def parts(c: set, other: list[set], universe: set) -> int:
        return sum(1 for o in other if c & o) + len(c - universe)

    muc = (sum(len(k) - parts(k, rset, rm) for k in kset), sum(len(k) - 1 for k in kset),
           sum(len(r) - parts(r, kset, km) for r in rset), sum(len(r) - 1 for r in rset))  # fmt: skip
    bcub = (sum(len(k & r) ** 2 / len(k) for k in kset for r in rset), sum(map(len, kset)),
            sum(len(k & r) ** 2 / len(r) for k in kset for r in rset), sum(map(len, rset)))  # fmt: skip

    def best(phi) -> float:  # noqa: ANN001
        small, big, swap = (kset, rset, False) if len(kset) <= len(rset) else (rset, kset, True)
        return max((sum(phi(*((b, a) if swap else (a, b))) for a, b in zip(small, perm, strict=False))
                    for perm in itertools.permutations(big, len(small))), default=0.0)  # fmt: skip

    phi3 = best(lambda k, r: len(k & r))
    phi4 = best(lambda k, r: 2 * len(k & r) / (len(k) + len(r)))

    def lea(a: list[set], b: list[set]) -> tuple[float, float]:
        num = 0.0
        for c in a:
            if len(c) == 1:
                num += any(c == o for o in b)
            else:
                num += len(c) * sum(len(c & o) * (len(c & o) - 1) / 2 for o in b) / (len(c) * (len(c) - 1) / 2)
        return num, sum(map(len, a))

    return {"muc": muc, "bcub": bcub, "ceafm": (phi3, len(km), phi3, len(rm)),
            "ceafe": (phi4, len(kset), phi4, len(rset)), "lea": (*lea(kset, rset), *lea(rset, kset)),
            "mentions": (len(km & rm), len(km), len(km & rm), len(rm))}  # fmt: skip


def _ref_blanc(keys: dict, resps: dict) -> tuple[float, float, float]:
    tot = [0] * 6
    for doc in keys:
        k, r = keys[doc], resps.get(doc, [])

        def links(chains: list) -> tuple[set, set]:
            co = {frozenset(p) for c in chains for p in itertools.combinations(c, 2)}
            non = {frozenset((a, b)) for x, y in itertools.combinations(chains, 2) for a in x for b in y}
            return co, non

        (kc, kn), (rc, rn) = links(k), links(r)
        for i, v in enumerate((len(kc & rc), len(kc), len(rc), len(kn & rn), len(kn), len(rn))):
            tot[i] += v
    rc = tot[0] / tot[1] if tot[1] else None
    rn = tot[3] / tot[4] if tot[4] else None
    pc, pn = (tot[0] / tot[2] if tot[2] else 0), (tot[3] / tot[5] if tot[5] else 0)
    fc, fn = (
        (2 * (rc or 0) * pc / ((rc or 0) + pc) if (rc or 0) + pc else 0),
        (2 * (rn or 0) * pn / ((rn or 0) + pn) if (rn or 0) + pn else 0),
    )
    if rc is None and rn is None:
        return 0, 0, 0
    if rc is None:
        return rn, pn, fn
    if rn is None:
        return rc, pc, fc
    return (rc + rn) / 2, (pc + pn) / 2, (fc + fn) / 2


@st.composite
def key_and_response(draw, max_mentions: int = 9):  # noqa: ANN001, ANN201
    """Up to 2 documents; response = key with mentions dropped, added and moved (no repeated span)."""
    docs = {}
    for doc in ("d1", "d2")[: draw(st.integers(1, 2))]:
        n = draw(st.integers(0, max_mentions))
        labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        key = [[(doc, i, i) for i, lab in enumerate(labels) if lab == c] for c in range(4)]
        universe = list(range(max_mentions + 3))
        present = draw(st.lists(st.sampled_from(universe), unique=True, max_size=len(universe)))
        rlabels = draw(st.lists(st.integers(0, 4), min_size=len(present), max_size=len(present)))
        resp = [[(doc, i, i) for i, lab in zip(present, rlabels, strict=True) if lab == c] for c in range(5)]
        docs[doc] = ([k for k in key if k], [r for r in resp if r])
    return docs


@settings(max_examples=150, deadline=None)
@given(key_and_response())
def test_matches_brute_force_definitions(docs: dict) -> None:
    key = [c for k, _ in docs.values() for c in k]
    resp = [c for _, r in docs.values() for c in r]
    got = score_clusters(key, resp, documents=list(docs))
    totals: dict[str, list[float]] = {}
    for k, r in docs.values():
        for m, vals in _ref_scores(k, r).items():
            totals[m] = [a + b for a, b in zip(totals.get(m, [0, 0, 0, 0]), vals, strict=True)]
    for m, (rn, rd, pn, pd) in totals.items():
        r, p = (rn / rd if rd else 0), (pn / pd if pd else 0)
        assert got[m][:2] == pytest.approx((r, p), abs=1e-9), m
    want_blanc = _ref_blanc({d: [set(c) for c in k] for d, (k, _) in docs.items()},
                            {d: [set(c) for c in r] for d, (_, r) in docs.items()})  # fmt: skip
    assert got["blanc"] == pytest.approx(want_blanc, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(key_and_response())
def test_perfect_response_scores_one_and_symmetry_holds(docs: dict) -> None:
    key = [c for k, _ in docs.values() for c in k]
    resp = [c for _, r in docs.values() for c in r]
    perfect = score_clusters(key, key, documents=list(docs))
    has_links = any(len(c) > 1 for c in key)
    for m in ("bcub", "ceafm", "ceafe", "lea", "mentions"):
        assert perfect[m] == pytest.approx((1, 1, 1)) or not key
    assert perfect["muc"] == pytest.approx((1, 1, 1) if has_links else (0, 0, 0))
    forward = score_clusters(key, resp, documents=list(docs))
    backward = score_clusters(resp, key, documents=list(docs))
    for m in ("muc", "bcub", "ceafm", "ceafe", "lea", "mentions"):
        assert forward[m][0] == pytest.approx(backward[m][1]) and forward[m][1] == pytest.approx(backward[m][0])
        assert forward[m][2] == pytest.approx(backward[m][2])


def test_perfect_response_scores_one_on_every_metric() -> None:
    key = clusters(KEY_A)
    assert all(v == pytest.approx((1, 1, 1)) for v in score_clusters(key, key).values())
