"""The chunk-vector cache under the index cache's rules: verified on read, one bound, links, one warning.

A poisoned pack or entry is one warning and a rebuild with the same hits (the real MiniLM on real retrieval
documents); the folder's byte bound covers the index entries and the packs together and never deletes
through a link; an unwritable cache costs one warning in a whole `run`, not one per level.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from data_builders import get_source
from data_builders.retrieval.docs import RETRIEVAL, build_retrieval_doc
from longctx_eval.cli import main
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.retrieval.cache_bound import cached_files
from longctx_eval.models.retrieval.index_cache import IndexCache
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

NS = {"kind": "fake", "dim": 8}


def fake_embed(texts: list[str]) -> np.ndarray:
    """Unit vectors from the texts' bytes: only the cache's bookkeeping is under test where this is used."""
    rows = np.array([[len(t) + i + 1 for i in range(8)] for t in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def minilm():
    spec = parse_spec("minilm?device=cpu")
    return MODEL_KINDS.get(spec.kind).load(spec)


@pytest.fixture(scope="module")
def doc(minilm_tokenizer):
    return build_retrieval_doc(get_source("synthetic"), minilm_tokenizer, 1024, 0, 3, topics=2)


def _serve(adapter, cache: IndexCache, doc):
    """A fresh process's view: nothing in memory, everything else from the disk level."""
    cache.forget_memory()
    adapter.cache = cache
    try:
        preds = adapter.retrieve([Request(q.id, q.text, doc.context, q.text, retrieval=RETRIEVAL) for q in doc.queries])
    finally:
        adapter.cache = None
    return [p.hits for p in preds], preds[0].data


def test_a_poisoned_pack_and_entry_are_warnings_and_the_hits_stay(tmp_path, minilm, doc):
    cache = IndexCache(tmp_path / "index", disk_bytes=1 << 30)
    hits, data = _serve(minilm, cache, doc)
    assert data["embeddings"]["embedded"] == data["chunks"] and cache.warnings == []
    (pack,) = (tmp_path / "index" / "embeddings").glob("*/*.npz")
    (entry,) = (tmp_path / "index").glob("??/*.npz")  # the chunk layout (the dense matrix is not persisted)
    pack.write_bytes(b"")
    entry.write_bytes(os.urandom(200))
    again, data = _serve(minilm, cache, doc)
    assert again == hits and data["embeddings"]["embedded"] == data["chunks"]
    emb = cache.embeddings()
    assert len(emb.warnings) == 1 and "is empty (0 bytes)" in emb.warnings[0]
    assert len(cache.warnings) == 1 and "unreadable" in cache.warnings[0]
    # Both were replaced by good files: the next process reads them, warns of nothing.
    emb.warnings.clear()
    cache.warnings.clear()
    third, data = _serve(minilm, cache, doc)
    assert third == hits and data["embeddings"]["disk"] == data["chunks"] and data["index_cache"] == "disk"
    assert cache.warnings == [] and emb.warnings == []


def test_an_unwritable_cache_is_one_warning_in_a_dense_run(tmp_path, monkeypatch, capsys):
    """The index cache path is a file: chunk layouts and vectors both fail to write, one warning in all."""
    from longctx_eval.models.retrieval import index_cache

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("LONGCTX_EVAL_INDEX_CACHE", str(blocker))
    monkeypatch.setattr(index_cache, "_SHARED", {})
    base = ["run", "--tasks", "needle", "--lengths", "512", "--limit", "2", "--model", "minilm"]
    assert main([*base, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("cannot be written") == 1 and "Traceback" not in err
    assert blocker.read_text() == "x"
    assert (tmp_path / "out" / "minilm" / "scores" / "needle.jsonl").is_file()


def test_one_bound_covers_entries_and_packs(tmp_path):
    folder = tmp_path / "index"
    cache = IndexCache(folder, disk_bytes=1 << 30)
    for i in range(3):
        cache.get_or_build(f"{i:02d}" + "e" * 62, lambda i=i: {"a": np.full(2000, i, dtype=np.float32)})
        cache.embeddings().vectors(NS, [f"chunk {i} {j}" for j in range(50)], fake_embed, dim=8, unit=True)
    files = cached_files(folder)
    assert {p.parent.parent.name for _, _, p in files} == {"index", "embeddings"}  # both kinds counted
    total = sum(size for _, size, _ in files)
    bound = total // 2
    bounded = IndexCache(folder, disk_bytes=bound)
    bounded.embeddings().vectors(NS, ["one more chunk"], fake_embed, dim=8, unit=True)
    assert sum(size for _, size, _ in cached_files(folder)) <= bound
    bounded.get_or_build("ff" + "e" * 62, lambda: {"a": np.zeros(2000, dtype=np.float32)})
    assert sum(size for _, size, _ in cached_files(folder)) <= bound
    # What was pruned is embedded or built again, never an error.
    again = IndexCache(folder, disk_bytes=bound)
    texts = [f"chunk 0 {j}" for j in range(50)]
    vectors, reuse = again.embeddings().vectors(NS, texts, fake_embed, dim=8, unit=True)
    assert np.array_equal(vectors, fake_embed(texts)) and reuse.looked_up + reuse.embedded == 50


def test_the_bound_prunes_index_entries_before_packs(tmp_path):
    # Packs cost an embedding pass to make again, entries an assembly: entries go first, even newer ones.
    folder = tmp_path / "index"
    cache = IndexCache(folder, disk_bytes=1 << 30)
    cache.embeddings().vectors(NS, [f"chunk {j}" for j in range(50)], fake_embed, dim=8, unit=True)
    packs = {p for _, _, p in cached_files(folder)}
    for i in range(4):
        cache.get_or_build(f"{i:02d}" + "e" * 62, lambda i=i: {"a": np.full(2000, i, dtype=np.float32)})
    entries = sorted(((used, p) for used, _, p in cached_files(folder) if p not in packs))
    assert len(entries) == 4
    pack_bytes = sum(size for _, size, p in cached_files(folder) if p in packs)
    one = max(size for _, size, p in cached_files(folder) if p not in packs)
    bounded = IndexCache(folder, disk_bytes=pack_bytes + 2 * one)
    bounded.get_or_build("ff" + "e" * 62, lambda: {"a": np.zeros(2000, dtype=np.float32)})
    left = {p for _, _, p in cached_files(folder)}
    assert packs <= left  # every pack kept
    assert [p in left for _, p in entries] == [False, False, False, True]  # the oldest entries went first


def test_the_bound_never_deletes_through_a_link(tmp_path):
    folder = tmp_path / "index"
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = [outside / f"{i}.npz" for i in range(3)]
    for v in victims:
        v.write_bytes(b"x" * 4096)
    (folder / "embeddings").mkdir(parents=True)
    (folder / "embeddings" / ("0" * 64)).symlink_to(outside)  # another namespace's folder, linked out
    (folder / "ab").mkdir()
    (folder / "ab" / "linked.npz").symlink_to(victims[0])  # an entry that is a link
    cache = IndexCache(folder, disk_bytes=0)  # everything is over the bound
    cache.embeddings().vectors(NS, ["a", "b"], fake_embed, dim=8, unit=True)
    cache.get_or_build("cd" + "e" * 62, lambda: {"a": np.zeros(10, dtype=np.float32)})
    assert all(v.read_bytes() == b"x" * 4096 for v in victims)
    assert all(p.resolve().is_relative_to(folder.resolve()) for _, _, p in cached_files(folder))
    assert Path(folder / "ab" / "linked.npz").is_symlink()
