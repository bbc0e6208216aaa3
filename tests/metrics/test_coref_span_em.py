"""Span-EM, link recall, distance buckets and window membership on hand-built documents."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from longctx_eval.metrics.span_em import (
    GoldLink,
    bucket_of,
    fixed_windows,
    gold_link_pairs,
    gold_links,
    in_one_window,
    link_counts,
    ratios,
    span_em,
    system_antecedents,
)

# Gold: entity A = (0,1) (10,10) (30,31); entity B = (5,5) (20,20).
GOLD = [[(0, 1), (10, 10), (30, 31)], [(5, 5), (20, 20)]]


def test_gold_links_take_the_closest_preceding_antecedent() -> None:
    assert gold_link_pairs(GOLD) == [((10, 10), (0, 1)), ((20, 20), (5, 5)), ((30, 31), (10, 10))]


def test_span_em_by_hand() -> None:
    assert span_em(GOLD, GOLD) == 1.0
    # (30,31) linked to (0,1) directly skipping (10,10): its antecedent (0,1) is still in its gold cluster;
    # (20,20) put with entity A: its antecedent (10,10) is wrong; (10,10) starts its system cluster: none.
    system = [[(0, 1), (30, 31)], [(10, 10), (20, 20)], [(5, 5)]]
    assert system_antecedents(system)[(30, 31)] == (0, 1)
    assert span_em(GOLD, system) == pytest.approx(1 / 3)
    # An undetected anaphor has no antecedent; a spurious system mention in between is the antecedent.
    assert span_em(GOLD, [[(0, 1), (10, 10)], [(5, 5), (7, 7), (20, 20)]]) == pytest.approx(1 / 3)


def test_link_recall_counts_both_ends_in_one_system_cluster() -> None:
    links = [GoldLink(a, b, 0, True) for a, b in gold_link_pairs(GOLD)]
    c = link_counts(GOLD, links, [[(0, 1), (30, 31), (10, 10)], [(5, 5)], [(20, 20)]])
    assert (c["link_recall_n"], c["link_recall_d"]) == (2, 3)
    assert (c["span_em_n"], c["span_em_d"]) == (2, 3)


def test_buckets() -> None:
    assert [bucket_of(d) for d in (0, 127, 128, 511, 512, 2047, 2048, 8191, 8192, 10**6)] == [
        "<128", "<128", "128-512", "128-512", "512-2K", "512-2K", "2K-8K", "2K-8K", ">=8K", ">=8K"
    ]  # fmt: skip
    with pytest.raises(ValueError):
        bucket_of(-1)


def test_groups_only_where_links_exist() -> None:
    # Distances measured in another tokenization: word i spans model tokens [2i, 2i + 2).
    starts = [2 * i for i in range(40)]
    ends = [2 * i + 2 for i in range(40)]
    links = gold_links(GOLD, starts, ends, fixed_windows(80, 24, 12))
    assert [link.distance for link in links] == [20, 30, 40]
    assert [link.intra_window for link in links] == [True, False, False]
    c = link_counts(GOLD, links, GOLD)
    assert c["span_em@<128_d"] == 3 and c["span_em@intra_d"] == 1 and c["span_em@cross_d"] == 2
    assert "span_em@>=8K_d" not in c
    assert ratios(c)["span_em@cross"] == 1.0


def test_windows() -> None:
    assert fixed_windows(10, 4, 3) == [(0, 4), (3, 7), (6, 10)]
    assert fixed_windows(3, 4, 2) == [(0, 3)]
    with pytest.raises(ValueError):
        fixed_windows(10, 4, 5)


@given(st.integers(1, 300), st.integers(1, 64), st.data())
def test_in_one_window_matches_brute_force(n: int, window: int, data: st.DataObject) -> None:
    stride = data.draw(st.integers(1, window))
    start = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(start + 1, n))
    windows = fixed_windows(n, window, stride)
    assert in_one_window(start, end, windows) == any(s <= start and end <= e for s, e in windows)
