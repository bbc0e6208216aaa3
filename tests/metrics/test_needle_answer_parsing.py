"""Deterministic answer parsing and matching (longctx_eval.metrics.answer_parsing)."""

from __future__ import annotations

import pytest

from longctx_eval.metrics.answer_parsing import (
    exact_match,
    found_values,
    match_answer,
    parse_all,
    parse_answer,
    share_found,
)

UUID = "4ae9cdcd-6e5d-4207-a51c-24bf121cdcdb"


@pytest.mark.parametrize(
    ("text", "kind", "parsed"),
    [
        (" 6084690.", "number", "6084690"),
        ("The number is 6,084,690, I think; or 12.", "number", "6084690"),
        ("no digits here", "number", ""),
        (f" {UUID.upper()}.", "uuid", UUID),
        (f"It is uuid {UUID} and 1234567.", "uuid", UUID),
        ("4ae9cdcd-6e5d", "uuid", ""),
        (" Zigzag-Pendulum.\nMore text", "word", "zigzag pendulum"),
        ("\n\n  Avrielle.", "name", "avrielle"),
        ("", "word", ""),
    ],
)
def test_parse_by_value_kind(text, kind, parsed):
    assert parse_answer(text, kind) == parsed


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="value kind"):
        parse_answer("x", "colour")


def test_exact_match_needs_the_parsed_answer_to_equal_the_gold():
    assert exact_match(" 6084690.", "6084690", "number")
    assert not exact_match(" 60846901.", "6084690", "number")
    assert exact_match(f"{UUID.upper()}", UUID, "uuid")
    assert exact_match(" zigzag-pendulum.", "zigzag-pendulum", "word")
    assert not exact_match(" zigzag-pendulum, then more words", "zigzag-pendulum", "word")
    assert not exact_match("", "", "word")  # an empty answer never matches


def test_match_answer_counts_empty_answers():
    m = match_answer(None, "6084690", "number")
    assert (m.parsed, m.contains, m.exact, m.empty) == ("", False, False, True)
    m = match_answer("  ...  ", "6084690", "number")
    assert m.empty and not m.contains
    m = match_answer("The number is 6084690, as stated.", "6084690", "number")
    assert (m.parsed, m.contains, m.exact, m.empty) == ("6084690", True, True, False)
    m = match_answer("16084690", "6084690", "number")  # containment is on token boundaries
    assert not m.contains and not m.exact


def test_partial_credit_is_the_share_of_values_found():
    golds = ["1111111", "2222222", "3333333", "4444444"]
    answer = "1111111, 3333333 and 5555555."
    assert found_values(answer, golds) == [True, False, True, False]
    assert share_found(answer, golds) == 0.5
    assert share_found("", golds) == 0.0 and share_found("x", []) == 0.0
    assert parse_all(answer, "number") == ["1111111", "3333333", "5555555"]
    assert parse_all(f"{UUID} and {UUID.upper()}", "uuid") == [UUID, UUID]
    listed = ":\n\n1. 1111111\n2) 3333333\n- 4444444\n* zigzag-pendulum"
    assert parse_all(listed, "number") == ["1111111", "3333333", "4444444"]  # list markers are not values
    assert parse_all(listed, "word")[-1] == "zigzag pendulum"
