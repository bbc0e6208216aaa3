"""Haystacks shared by a grid's samples (`data_builders/haystack/sharing.py`): a balanced spread of the samples
over h haystacks, and building one haystack at a time while yielding in the grid's order."""

from __future__ import annotations

from collections import Counter, defaultdict

from data_builders.haystack.sharing import by_haystack, spread_haystack


def test_without_haystacks_each_repetition_keeps_its_own():
    assert [spread_haystack(i, rep, 3, 4, 0) for rep in range(4) for i in range(3)] == [0] * 3 + [1] * 3 + [2] * 3 + [
        3
    ] * 3


def test_the_spread_is_balanced_and_the_first_repetitions_read_as_many_haystacks_as_they_can():
    for per_rep in range(1, 30):
        for reps in range(1, 18):
            for h in range(1, min(per_rep * reps, 45) + 1):
                where = [[spread_haystack(i, r, per_rep, reps, h) for i in range(per_rep)] for r in range(reps)]
                counts = Counter(x for row in where for x in row)
                assert sorted(counts) == list(range(h)), (per_rep, reps, h)
                assert max(counts.values()) - min(counts.values()) <= 1, (per_rep, reps, h)
                for m in range(1, reps + 1):  # a limit takes the first repetitions first
                    read = {x for row in where[:m] for x in row}
                    assert len(read) == min(h, m * per_rep), (per_rep, reps, h, m)


def test_the_reference_grids_spread_each_haystacks_depths():
    """25 depths x 4 repetitions over 20 haystacks (8K-128K), x 2 over 20 (1M, SmolLM2's variants): every
    haystack's depths are at least 5 grid steps apart and none repeats."""
    for reps in (4, 2):
        held = defaultdict(list)
        for r in range(reps):
            for i in range(25):
                held[spread_haystack(i, r, 25, reps, 20)].append(i)
        assert len(held) == 20
        for depths in held.values():
            ordered = sorted(depths)
            assert len(set(ordered)) == len(ordered)
            assert min(b - a for a, b in zip(ordered, ordered[1:], strict=False)) >= 5
            assert ordered[-1] - ordered[0] >= 10  # a spread, not a few neighbouring depths


def test_by_haystack_builds_one_haystack_at_a_time_and_yields_in_order():
    items = list(range(10))
    built: list[int] = []

    def build(k: int) -> list[str]:
        built.append(k)
        return [f"{k}a", f"{k}b"]

    out = list(by_haystack(items, lambda k: k % 3, build))
    assert out == [f"{k}{x}" for k in items for x in "ab"]
    assert built == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]  # haystack 0's items, then 1's, then 2's


def test_grouped_items_stream_as_they_are_built():
    """Items already in haystack order (the default grids) are yielded as soon as built, as before."""
    built: list[int] = []
    stream = by_haystack([0, 1, 2, 3], lambda k: k // 2, lambda k: built.append(k) or [k])
    assert next(stream) == 0 and built == [0]
    assert next(stream) == 1 and built == [0, 1]
    assert list(stream) == [2, 3]
