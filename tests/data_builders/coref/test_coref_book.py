"""Book windows (each fills its budget, gold exact) and the coref_book task on generated book-format JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_builders.coref.book_windows import BookCutter, book_windows
from data_builders.coref.bookcoref import read_bookcoref
from data_builders.coref.haystack import render
from data_builders.coref.synthetic_books import write_books
from longctx_eval import Prediction
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, DataError, TaskUnavailable
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bookcoref") / "test.jsonl"
    write_books(path, [2600, 5200], seed=1)
    return path


def _mentions(doc, start: int = 0, end: int | None = None) -> list[tuple[str, ...]]:  # noqa: ANN001
    end = len(doc.tokens) if end is None else end
    spans = sorted((s, e) for c in doc.clusters for s, e in c if s >= start and e < end)
    return [tuple(doc.tokens[s : e + 1]) for s, e in spans]


@pytest.mark.parametrize("budget", [400, 1000])
def test_windows_fill_the_budget_and_keep_the_gold_exact(books: Path, budget: int) -> None:
    book = read_bookcoref(books)[1].document()
    windows = book_windows(book, budget)
    longest = max(e - s for s, e in zip((0, *book.sentence_ends), book.sentence_ends, strict=False))
    assert len(windows) >= len(book.tokens) // budget
    for k, w in enumerate(windows):
        assert w.index == k and w.end - w.start == len(w.long.doc.tokens) <= budget
        assert w.end - w.start > budget - longest  # filled: the next sentence would not have fit
        if k and k < len(windows) - 1:
            assert w.start == windows[k - 1].end  # consecutive, no gap, no overlap
        # the window's chains are the book's mentions inside it, same words
        assert _mentions(w.long.doc) == _mentions(book, w.start, w.end)
        assert w.long.doc.sentence_ends[-1] == len(w.long.doc.tokens)
    assert windows[0].start == 0
    assert windows[-1].end == len(book.tokens) or len(book.tokens) - windows[-1].end < budget / 2
    assert windows[-1].start <= windows[-2].end  # the tail reaches back, overlapping when it must


def test_windows_in_model_tokens_fit_and_a_short_book_has_none(books: Path, minilm_tokenizer) -> None:  # noqa: ANN001
    book = read_bookcoref(books)[1].document()
    windows = book_windows(book, 1500, minilm_tokenizer)
    sizes = [minilm_tokenizer.count(render(w.long.doc.tokens, w.long.doc.sentence_ends)[0]) for w in windows]
    assert sizes and all(1300 < n <= 1500 for n in sizes)
    cut = BookCutter(book, minilm_tokenizer)
    assert abs(cut.tokens - minilm_tokenizer.count(render(book.tokens, book.sentence_ends)[0])) <= 2
    assert book_windows(book, cut.tokens + 10, minilm_tokenizer) == []
    with pytest.raises(DataError, match="alone is longer than the window budget"):
        book_windows(book, 3)


def _task(lengths: list[int], **args: object):  # noqa: ANN202
    return discover().get("coref_book").factory(lengths=lengths, **args)


def test_the_task_windows_books_and_adds_them_whole(books: Path) -> None:
    task = _task([512, 1024], path=str(books), whole=True)
    samples = list(task.dataset())
    by_length: dict[int, list] = {}
    for s in samples:
        by_length.setdefault(s.metadata["target_tokens"], []).append(s)
    whole_at = max(by_length)
    assert set(by_length) == {512, 1024, whole_at}
    longest = max(s.metadata["prompt_tokens"] for s in by_length[whole_at])
    assert whole_at & (whole_at - 1) == 0 and longest <= whole_at < 2 * longest  # the least power of two holding it
    assert len({s.id for s in samples}) == len(samples)
    recs = {b.key: b.document() for b in read_bookcoref(books)}
    for length in (512, 1024):
        for s in by_length[length]:
            m = s.metadata
            assert m["prompt_tokens"] <= length  # the whole prompt fits the length (words: no tokenizer)
            assert m["prompt_tokens"] > 0.9 * length  # and fills it
            assert m["cluster"] == m["doc"] and m["corpus"] == "bookcoref"
            (request,) = task.requests(s, "coref")
            words = request.extra["tokens"]
            assert len(words) == m["word_end"] - m["word_start"]
            gold = sorted((a, b) for c in s.gold["clusters"] for a, b in c)
            assert [tuple(words[a : b + 1]) for a, b in gold] == _mentions(
                recs[m["doc"]], m["word_start"], m["word_end"]
            )
    whole = by_length[whole_at]
    assert [s.id for s in whole] == [f"{k}@book" for k in recs]
    assert [s.metadata["word_end"] for s in whole] == [len(d.tokens) for d in recs.values()]
    for s in samples:
        assert task.scorer(s, task.oracle(s))["conll_doc"] == 1.0


def test_coref_baseline_scores_a_book_window(books: Path) -> None:
    task = _task([1024], path=str(books))
    sample = next(iter(task.dataset()))
    adapter = load_model(parse_spec("coref:baseline"))
    (request,) = task.requests(sample, "coref")  # one request per window for a coreference system
    (pred,) = adapter.predict_clusters([request])
    score = task.scorer(sample, Prediction(parts=(pred,)))
    assert 0.3 < score["conll_doc"] < 1.0


def test_split_layout_records_are_documents_of_their_book(tmp_path: Path) -> None:
    path = tmp_path / "test_split.jsonl"
    write_books(path, [3200], seed=2, split=True)
    with pytest.raises(ConfigError, match="the split layout holds 1,500-word windows"):
        list(_task([1024], path=str(path)).dataset())
    samples = list(_task([1024], path=str(tmp_path), layout="split", whole=True).dataset())
    assert [s.id for s in samples] == [f"synthetic_book_3200_2_split1500_S{k}@book" for k in range(len(samples))]
    assert {s.metadata["cluster"] for s in samples} == {"synthetic_book_3200_2"}
    with pytest.raises(ConfigError, match="layout: 'full' asked for"):
        list(_task([1024], path=str(path), layout="full", whole=True).dataset())


def test_missing_path_says_how_to_get_the_files(monkeypatch: pytest.MonkeyPatch, books: Path) -> None:
    monkeypatch.delenv("LONGCTX_BOOKCOREF", raising=False)
    with pytest.raises(TaskUnavailable, match=r"sapienzanlp/bookcoref.*download_data\.py.*coref_book\.path=PATH"):
        _task([1024])
    monkeypatch.setenv("LONGCTX_BOOKCOREF", str(books))
    assert _task([1024]).dataset is not None
    with pytest.raises(DataError, match="no book is longer than 65536 tokens"):
        list(_task([65536]).dataset())


def test_per_book_spreads_windows(books: Path) -> None:
    every = [s.id for s in _task([512], path=str(books)).dataset()]
    two = [s.id for s in _task([512], path=str(books), per_book=2).dataset()]
    assert len(two) == 4 and set(two) <= set(every)
    assert [i for i in two if i.startswith("synthetic_book_5200_2")] == [
        i for i in every if i.startswith("synthetic_book_5200_2")
    ][:: len([i for i in every if i.startswith("synthetic_book_5200_2")]) - 1]


def test_a_malformed_book_file_is_bad_input_exit_2(tmp_path: Path) -> None:
    from longctx_eval.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_key": "b1", "sentences": [["A", "b"]], "clusters": [[[0, 5]]]}\n', encoding="utf-8")
    out = tmp_path / "runs"
    argv = ["run", "--model", "coref:baseline", "--tasks", "coref_book", "--lengths", "32768",
            "--task-arg", f"coref_book.path={bad}", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    manifest = json.loads((out / "coref-baseline" / "manifest.json").read_text())
    assert "bad.jsonl:1: field 'clusters'" in manifest["skipped"]["coref_book"]["reason"]
