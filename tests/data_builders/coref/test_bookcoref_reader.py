"""The BookCoref reader (both layouts, from books the synthetic generator writes) and its bad-input messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_builders.coref.bookcoref import Book, bookcoref_file, read_bookcoref
from data_builders.coref.synthetic_books import main as synthetic_books_main
from data_builders.coref.synthetic_books import split_record, synthetic_book, write_books
from longctx_eval.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def book() -> dict:
    return synthetic_book(4000, seed=3)


def test_a_written_book_reads_back_exactly(tmp_path: Path, book: dict) -> None:
    path = tmp_path / "test.jsonl"
    records = write_books(path, [4000, 2500], seed=3)
    assert records[0] == book  # seeded: the same book again
    books = read_bookcoref(path)
    assert [b.key for b in books] == [r["doc_key"] for r in records]
    first = books[0]
    assert first.layout == "full" and first.book == first.key and first.part == 0
    doc = first.document()
    words = [w for s in book["sentences"] for w in s]
    assert list(doc.tokens) == words and first.n_words == len(words) <= 4000
    assert doc.sentence_ends[-1] == len(words) and len(doc.sentence_ends) == len(book["sentences"])
    assert [[list(m) for m in c] for c in doc.clusters] == book["clusters"]
    assert first.characters == tuple(c["name"] for c in book["characters"])
    # every mention is a person slot of the narrative: a name, a title, a description or a pronoun
    for cluster, character in zip(doc.clusters, book["characters"], strict=True):
        s, e = cluster[0]
        assert " ".join(doc.tokens[s : e + 1]) == character["name"]


def test_the_split_layout_groups_windows_under_their_book(tmp_path: Path, book: dict) -> None:
    windows = split_record(book)
    words = sum(map(len, book["sentences"]))
    assert len(windows) >= -(-words // 1500) and sum(len(w) for x in windows for w in x["sentences"]) == words
    path = tmp_path / "test_split.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for w in windows))
    books = read_bookcoref(path)
    assert {b.book for b in books} == {book["doc_key"]} and [b.part for b in books] == list(range(len(windows)))
    assert all(b.layout == "split" and b.n_words <= 1500 for b in books)
    # a window's chains are the book's mentions inside it, rebased
    offset = books[0].n_words
    inside = sorted(
        (s - offset, e - offset)
        for c in book["clusters"]
        for s, e in c
        if offset <= s and e < offset + books[1].n_words
    )
    assert sorted(m for c in books[1].clusters for m in c) == inside


def test_a_folder_gives_the_split_file(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "test.jsonl").write_text("")
    (tmp_path / "validation_split.jsonl").write_text("")
    assert bookcoref_file(str(tmp_path)) == tmp_path / "full" / "test.jsonl"
    assert bookcoref_file(str(tmp_path), "validation", "split") == tmp_path / "validation_split.jsonl"
    with pytest.raises(ConfigError, match=r"holds none of train\.jsonl"):
        bookcoref_file(str(tmp_path), "train")
    with pytest.raises(ConfigError, match="does not exist"):
        bookcoref_file(str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="split: expected one of train, validation, test"):
        bookcoref_file(str(tmp_path), "dev")


GOOD = {"doc_key": "b_1", "sentences": [["Ann", "ran", "."], ["She", "fell", "."]], "clusters": [[[0, 0], [3, 3]]]}


def _with(**change: object) -> dict:
    record = dict(GOOD)
    for key, value in change.items():
        if value is None:
            record.pop(key)
        else:
            record[key] = value
    return record


BAD_LINES = [
    ("{not json", r":2: not JSON"),
    ("[1, 2]", r":2: expected a JSON object per line, got list"),
    (json.dumps(_with(doc_key=None)), r":2: field 'doc_key': expected the book's id"),
    (json.dumps(_with(doc_key="")), r":2: field 'doc_key'"),
    (json.dumps(_with(sentences=[])), r":2: field 'sentences': expected a non-empty list of word lists"),
    (json.dumps(_with(sentences=[["a", 1]])), r":2: field 'sentences'\[0\]: expected a non-empty list of strings"),
    (json.dumps(_with(sentences=[["a"], []])), r":2: field 'sentences'\[1\]"),
    (json.dumps(_with(clusters={"0": []})), r":2: field 'clusters': expected a list of clusters"),
    (json.dumps(_with(clusters=[[]])), r":2: field 'clusters'\[0\]: expected a non-empty list"),
    (json.dumps(_with(clusters=[[[0, 6]]])), r":2: field 'clusters'\[0\]\[0\]: .*0 <= start <= end < 6, got \[0, 6\]"),
    (json.dumps(_with(clusters=[[[0, 0], [3, 1]]])), r"'clusters'\[0\]\[1\]: .*got \[3, 1\]"),
    (json.dumps(_with(clusters=[[[0, 0.5]]])), r"'clusters'\[0\]\[0\]"),
    (json.dumps(_with(clusters=[[[True, 1]]])), r"'clusters'\[0\]\[0\]"),
    (json.dumps(_with(clusters=[[[0, 1, 2]]])), r"'clusters'\[0\]\[0\]"),
    (json.dumps(_with(characters="Ann")), r":2: field 'characters'"),
    (json.dumps(GOOD), r":2: field 'doc_key': 'b_1' repeats line 1"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES, ids=[m for _, m in BAD_LINES])
def test_a_malformed_line_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(DataError, match=message) as err:
        read_bookcoref(path)
    text = str(err.value)
    assert text.startswith(f"{path}:") and "\n" not in text


def test_blank_lines_are_skipped_and_an_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl"
    path.write_text("\n" + json.dumps(GOOD) + "\n\n")
    (only,) = read_bookcoref(path)
    assert isinstance(only, Book) and only.line == 2 and only.characters == ()
    path.write_text("\n")
    with pytest.raises(DataError, match="no records"):
        read_bookcoref(path)
    path.write_bytes(b'{"doc_key": "\xff"}\n')
    with pytest.raises(DataError, match="not UTF-8"):
        read_bookcoref(path)


def test_the_released_characters_dict_is_read(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps(_with(doc_key="x_split1500_S4", characters={"7": [[0, 0]]})) + "\n")
    (only,) = read_bookcoref(path)
    assert (only.book, only.part, only.layout, only.characters) == ("x", 4, "split", ("7",))


def test_the_generator_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "books.jsonl"
    assert synthetic_books_main([str(out), "--words", "600,900", "--split"]) == 0
    assert {b.book for b in read_bookcoref(out)} == {"synthetic_book_600_0", "synthetic_book_900_1"}
    assert synthetic_books_main([str(out), "--words", "ten"]) == 2
    assert "--words: expected comma-separated word counts" in capsys.readouterr().err
