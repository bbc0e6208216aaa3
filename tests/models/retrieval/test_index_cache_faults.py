"""The disk index cache never trusts an entry it cannot verify, and never costs a run more than a rebuild.

Real bm25s indexes over real retrieval documents (MiniLM's tokenizer); every poisoned entry is made the way
the fault campaign made it: a zero-byte file, random bytes, another document's entry copied over this one's,
an entry written before entries recorded what they were built from, a cache folder that cannot be written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from data_builders import get_source
from data_builders.retrieval.docs import RETRIEVAL, build_retrieval_doc
from longctx_eval.cli import main
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.retrieval.bm25 import BM25Indexer
from longctx_eval.models.retrieval.chunk_retriever import layout_problem
from longctx_eval.models.retrieval.index_cache import PROVENANCE, IndexCache
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request


@pytest.fixture(scope="module")
def docs(minilm_tokenizer):
    """Two documents of the same length (seeds 0 and 1) and a longer one, as in the campaign."""
    src = get_source("synthetic")
    return (
        build_retrieval_doc(src, minilm_tokenizer, 1024, 0, 3, topics=2),
        build_retrieval_doc(src, minilm_tokenizer, 1024, 1, 3, topics=2),
        build_retrieval_doc(src, minilm_tokenizer, 2048, 0, 3, topics=2),
    )


def _requests(doc) -> list[Request]:
    return [Request(q.id, q.text, doc.context, q.text, retrieval=RETRIEVAL) for q in doc.queries]


def _bm25(cache: IndexCache):
    adapter = MODEL_KINDS.get("bm25").load(parse_spec("bm25"))
    adapter.cache = cache
    return adapter


def _serve(cache: IndexCache, doc):
    """A fresh process's view: nothing in memory, everything from the disk level."""
    cache.forget_memory()
    preds = _bm25(cache).retrieve(_requests(doc))
    return [p.hits for p in preds], preds[0].data


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.npz"), key=lambda p: p.stat().st_mtime_ns)


@pytest.fixture
def reference(tmp_path, docs):
    """Doc A indexed once into a fresh cache: its hits, its two entries (chunk layout, bm25 index)."""
    cache = IndexCache(tmp_path / "a", disk_bytes=1 << 30)
    hits, data = _serve(cache, docs[0])
    assert data["index_cache"] == "built" and cache.warnings == []
    again, data = _serve(cache, docs[0])
    assert again == hits and data["index_cache"] == "disk" and cache.warnings == []
    return cache, hits


def _layout_and_index(cache: IndexCache) -> tuple[Path, Path]:
    """A's chunk layout entry and its bm25 entry (the layout holds 'spans')."""
    paths = _entries(cache.folder)
    assert len(paths) == 2
    with np.load(paths[0]) as first:
        return (paths[0], paths[1]) if "spans" in first.files else (paths[1], paths[0])


@pytest.mark.parametrize(
    ("poison", "said"),
    [
        (lambda p: p.write_bytes(b""), "is empty (0 bytes)"),
        (lambda p: p.write_bytes(os.urandom(3000)), "is unreadable"),
        (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "is unreadable"),
    ],
    ids=["zero-byte", "random-bytes", "truncated"],
)
def test_unreadable_entry_is_one_warning_and_a_rebuild(reference, docs, poison, said):
    cache, hits = reference
    for path in _layout_and_index(cache):
        poison(path)
        got, data = _serve(cache, docs[0])
        assert got == hits and data["index_cache"] == "built"
        assert len(cache.warnings) == 1 and said in cache.warnings[0] and str(path) in cache.warnings[0]
        cache.warnings.clear()
        assert _serve(cache, docs[0])[1]["index_cache"] == "disk" and cache.warnings == []  # overwritten, good


def _copy_entries(src: IndexCache, dst: IndexCache) -> None:
    """Overwrite dst's layout and index entries with src's (the campaign's `cp` of doc B's .npz files)."""
    for s, d in zip(_layout_and_index(src), _layout_and_index(dst), strict=True):
        shutil.copyfile(s, d)


@pytest.mark.parametrize("other", [1, 2], ids=["same-length-doc", "longer-doc"])
def test_another_documents_entries_are_not_trusted(tmp_path, reference, docs, other):
    cache, hits = reference
    donor = IndexCache(tmp_path / "b", disk_bytes=1 << 30)
    _serve(donor, docs[other])
    _copy_entries(donor, cache)
    got, data = _serve(cache, docs[0])
    assert got == hits and data["index_cache"] == "built" and data["chunks"] == _serve(cache, docs[0])[1]["chunks"]
    assert len(cache.warnings) == 2 and all("not this one (a copied file?)" in w for w in cache.warnings)
    assert all(h.char_end <= len(docs[0].context) for per in got for h in per)


def test_only_the_bm25_index_swapped_is_caught(tmp_path, reference, docs):
    cache, hits = reference
    donor = IndexCache(tmp_path / "b", disk_bytes=1 << 30)
    _serve(donor, docs[2])  # a longer document: more chunks than A's layout
    shutil.copyfile(_layout_and_index(donor)[1], _layout_and_index(cache)[1])
    got, data = _serve(cache, docs[0])
    assert got == hits and data["index_cache_parts"] == {"chunks": "disk", "bm25": "built"}
    assert len(cache.warnings) == 1 and "not this one (a copied file?)" in cache.warnings[0]


def test_entry_without_provenance_is_rebuilt(reference, docs):
    """An entry written before entries recorded what they were built from is never trusted."""
    cache, hits = reference
    layout, _ = _layout_and_index(cache)
    with np.load(layout) as npz:
        arrays = {k: npz[k] for k in npz.files if k != PROVENANCE}
    with layout.open("wb") as fh:
        np.savez(fh, **arrays)
    got, data = _serve(cache, docs[0])
    assert got == hits and data["index_cache_parts"]["chunks"] == "built"
    assert len(cache.warnings) == 1 and "records nothing of what it was built from" in cache.warnings[0]


def test_a_valid_entry_must_also_fit_what_it_is_used_for(docs):
    """The shape checks on their own: a bm25 index of another chunk count, spans past the end of the document."""
    ix = BM25Indexer(1.5, 0.75)
    index = ix.build(["alpha beta", "beta gamma", "gamma delta"])
    assert ix.check(index, 3) is None
    assert "3 chunks, expected 11" in ix.check(index, 11)
    n = len(docs[0].context)
    spans = np.asarray([[0, 100], [90, n + 200]], dtype=np.int64)
    assert "outside the" in layout_problem({"spans": spans, "tokens": spans}, n)
    assert layout_problem({"spans": spans[:1], "tokens": spans[:1]}, n) is None


def test_unwritable_cache_is_one_warning_per_run(tmp_path, docs):
    """A cache path that is a file: every entry is built in memory, one warning in all, same hits."""
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("not a folder")
    cache = IndexCache(blocker, disk_bytes=1 << 30)
    ref = IndexCache(None, 0)
    for doc in docs:
        got, data = _serve(cache, doc)
        assert got == _serve(ref, doc)[0] and data["index_cache"] == "built"
    assert len(cache.warnings) == 1 and "cannot be written" in cache.warnings[0]
    assert blocker.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only (0555) folder anyway")
def test_read_only_cache_folder_is_a_rebuild(tmp_path, docs):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        cache = IndexCache(folder, disk_bytes=1 << 30)
        _serve(cache, docs[0])
        _serve(cache, docs[1])
        assert len(cache.warnings) == 1 and "cannot be written" in cache.warnings[0]
    finally:
        folder.chmod(0o755)


def test_cli_survives_a_zero_byte_entry_and_a_file_as_cache(tmp_path, monkeypatch, capsys):
    """The campaign's 2.3 and 2.11 through `run`: both models of the command finish, exit 0, one warning."""
    from longctx_eval.models.retrieval import index_cache

    folder = tmp_path / "index"
    monkeypatch.setenv("LONGCTX_EVAL_INDEX_CACHE", str(folder))
    monkeypatch.setattr(index_cache, "_SHARED", {})
    base = ["run", "--tasks", "needle", "--lengths", "512", "--limit", "2"]
    assert main([*base, "--model", "bm25", "--out", str(tmp_path / "ref")]) == 0
    ref = (tmp_path / "ref" / "bm25" / "scores" / "needle.jsonl").read_text()
    emptied = sorted(folder.glob("*/*.npz"))
    for entry in emptied:
        entry.write_bytes(b"")
    monkeypatch.setattr(index_cache, "_SHARED", {})
    capsys.readouterr()
    out = tmp_path / "out"
    assert main([*base, "--model", "oracle,bm25?name=bm25b", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("is empty (0 bytes)") == len(emptied) > 0 and "Traceback" not in err
    assert (out / "bm25b" / "scores" / "needle.jsonl").read_text() == ref
    assert (out / "oracle" / "run.json").is_file() and (out / "bm25b" / "run.json").is_file()

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("LONGCTX_EVAL_INDEX_CACHE", str(blocker))
    monkeypatch.setattr(index_cache, "_SHARED", {})
    assert main([*base, "--model", "bm25", "--out", str(tmp_path / "file")]) == 0
    err = capsys.readouterr().err
    assert err.count("cannot be written") == 1
    assert (tmp_path / "file" / "bm25" / "scores" / "needle.jsonl").read_text() == ref
