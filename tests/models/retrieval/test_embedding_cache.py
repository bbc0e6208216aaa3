"""The chunk-vector cache: exact vectors, reuse across samples that share a haystack, invalidation, the disk packs.

The real MiniLM (the packaged `minilm`) on real needle samples (one haystack, a needle at several depths),
and a fake hash encoder where only the cache's bookkeeping is under test.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import numpy as np
import pytest

from data_builders import get_source
from data_builders.needle.grid import RETRIEVAL
from data_builders.needle.insertion import build_needle_doc
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.retrieval import embedding_cache as ec
from longctx_eval.models.retrieval.dense import DenseIndexer, encode_canonical
from longctx_eval.models.retrieval.embedding_cache import EmbeddingCache, namespace_key
from longctx_eval.models.retrieval.index_cache import IndexCache
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request
from longctx_eval.text.chunking import ChunkConfig, chunk_document

LENGTH = 1536
"""MiniLM tokens per needle sample: about 14 chunks of 128 (MiniLM embeds ~2,400 tokens/s on 2 idle cores)."""


@pytest.fixture(scope="module")
def minilm():
    spec = parse_spec("minilm?device=cpu")
    return MODEL_KINDS.get(spec.kind).load(spec)


@pytest.fixture(scope="module")
def needles(minilm_tokenizer):
    """Three needle samples on one haystack (the needle builder's shared haystack seed), at 20%, 50%, 80%."""
    src = get_source("austen")
    return [
        build_needle_doc(src, minilm_tokenizer, LENGTH, depth, random.Random(i), haystack_seed=4242)
        for i, depth in enumerate((0.2, 0.5, 0.8))
    ]


def _chunk_texts(doc, tokenizer) -> list[str]:
    return [c.text for c in chunk_document(doc.context, tokenizer, ChunkConfig(RETRIEVAL.chunk_tokens, 16))]


def _request(doc) -> Request:
    return Request("s", doc.question, doc.context, doc.question, retrieval=RETRIEVAL)


# -- exactness (real MiniLM) -------------------------------------------------------------------------------


def test_a_chunks_vector_does_not_depend_on_its_batch(minilm, needles, minilm_tokenizer):
    dense: DenseIndexer = minilm.indexers[0]
    texts = _chunk_texts(needles[0], minilm_tokenizer)
    together = dense.embed(texts)
    assert together.dtype == np.float32 and together.shape == (len(texts), 384)
    alone = np.stack([dense.embed([t])[0] for t in texts[:2]])
    assert np.array_equal(alone, together[:2])  # bit for bit
    assert np.array_equal(dense.embed(texts[1::3]), together[1::3])
    # The same model: padding to a bucket moves a vector by float rounding only.
    plain = dense.encode(texts[:4])
    assert float(np.abs(plain - together[:4]).max()) < 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_one_thread_or_two_give_the_same_vectors(minilm):
    import torch

    dense: DenseIndexer = minilm.indexers[0]
    words = [
        "bell",
        "ship",
        "harbour",
        "lantern",
        "keeper",
        "winter",
        "water",
        "stone",
        "window",
        "letter",
        "council",
        "evening",
    ]
    texts = [f"the {a} and the {b} came slowly north over quiet water." for a in words for b in words[:2]]
    assert len(texts) > 16  # one bucket: a call above SMALL_CALL, on every thread
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        together = encode_canonical(dense.model, texts, 64)
        torch.set_num_threads(1)
        assert np.array_equal(encode_canonical(dense.model, texts, 64), together)
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(np.stack([dense.embed([t])[0] for t in texts[:3]]), together[:3])  # small calls


def test_needle_samples_on_one_haystack_embed_only_their_new_chunks(minilm, needles, tmp_path):
    cache = IndexCache(tmp_path / "index", disk_bytes=1 << 30)
    minilm.cache = cache
    try:
        shared = [minilm.retrieve([_request(d)])[0] for d in needles]
        counts = [p.data["embeddings"] for p in shared]
        n = [p.data["chunks"] for p in shared]
        assert counts[0] == {"embedded": n[0], "memory": 0, "disk": 0}, counts
        for c, total in zip(counts[1:], n[1:], strict=True):
            # The chunks around the needle and at the end (each sample's haystack is cut to its exact length).
            assert 1 <= c["embedded"] <= total // 3 and c["embedded"] + c["memory"] == total and c["disk"] == 0
        emb = cache.embeddings()
        assert emb.totals.embedded == sum(c["embedded"] for c in counts)
        # Without the cache (a fresh memory-only one, so nothing is shared): the last sample, two thirds of
        # whose vectors came from the other samples, gets the same hits, scores equal as floats, because every
        # vector is the one a fresh encoding gives.
        minilm.cache = IndexCache(None, 0)
        alone = minilm.retrieve([_request(needles[2])])[0]
        assert alone.data["embeddings"]["embedded"] == alone.data["chunks"]
        assert alone.hits == shared[2].hits
        # A second process reads every vector back from the packs.
        cache.forget_memory()
        minilm.cache = cache
        again = minilm.retrieve([_request(needles[1])])[0]
        assert again.data["embeddings"] == {"embedded": 0, "memory": 0, "disk": n[1]}
        assert again.data["index_cache"] == "disk" and again.hits == shared[1].hits
    finally:
        minilm.cache = None


def test_another_encoder_identity_shares_no_vector(minilm, needles, minilm_tokenizer):
    """Weights, max_seq_length, dtype, device, batch size, normalisation, prompt, modules and library versions
    all key the vectors: changing any one embeds everything again."""
    dense: DenseIndexer = minilm.indexers[0]
    base = dense.namespace()
    texts = _chunk_texts(needles[0], minilm_tokenizer)[:4]
    cache = EmbeddingCache(None, 0)
    cache.vectors(base, texts, dense.embed, dim=384, unit=True)
    _, again = cache.vectors(base, texts, dense.embed, dim=384, unit=True)
    assert again.as_dict() == {"embedded": 0, "memory": 4, "disk": 0}
    changed = [
        {**base, "weights": "0" * 64},
        {**base, "max_seq_length": 128},
        {**base, "normalize": False},
        {**base, "device": "cuda:0"},
        {**base, "prompt": "query: "},
        {**base, "libraries": {**base["libraries"], "torch": "0.0"}},
    ]
    keys = {namespace_key(ns) for ns in [base, *changed]}
    assert len(keys) == len(changed) + 1
    calls = []
    for ns in changed:
        _, reuse = cache.vectors(ns, texts, lambda t: calls.append(len(t)) or fake_embed(t))
        assert reuse.embedded == 4 and reuse.looked_up == 0
    # The indexer's own namespace follows its model: another max_seq_length is another namespace.
    model = dense.model
    old = model.max_seq_length
    try:
        model.max_seq_length = 128
        other = DenseIndexer(model, dense.batch_size, dense.identity()["weights"], "cpu")
        assert namespace_key(other.namespace()) != namespace_key(base)
    finally:
        model.max_seq_length = old


def test_long_texts_are_truncated_as_plain_encoding_truncates(minilm):
    dense: DenseIndexer = minilm.indexers[0]
    long = " ".join(["harbour lantern keeper"] * 200)  # about 600 tokens, past max_seq_length (256)
    canonical = encode_canonical(dense.model, [long, "short text"], 64)
    plain = dense.encode([long, "short text"])
    assert float(np.abs(canonical - plain).max()) < 1e-5


# -- bookkeeping and the disk packs (a fake encoder) ----------------------------------------------------------


def fake_embed(texts: list[str]) -> np.ndarray:
    """A deterministic unit vector per text (8 dimensions, from its sha256)."""
    rows = []
    for t in texts:
        raw = np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8].astype(np.float32) + 1
        rows.append(raw / np.linalg.norm(raw))
    return np.stack(rows).astype(np.float32)


NS = {"kind": "fake", "dim": 8}
TEXTS = [f"chunk number {i} of the haystack." for i in range(10)]


class Counting:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return fake_embed(texts)


def _packs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.npz"), key=lambda p: p.stat().st_mtime_ns)


def test_only_missing_chunks_are_embedded_each_once_and_in_order(tmp_path):
    cache = EmbeddingCache(tmp_path, 1 << 30)
    enc = Counting()
    vectors, reuse = cache.vectors(NS, [*TEXTS[:5], TEXTS[0], TEXTS[2]], enc, dim=8, unit=True)
    assert enc.texts == TEXTS[:5] and reuse.embedded == 5 and reuse.looked_up == 0
    assert np.array_equal(vectors, fake_embed([*TEXTS[:5], TEXTS[0], TEXTS[2]]))
    vectors, reuse = cache.vectors(NS, TEXTS[3:8], enc, dim=8, unit=True)
    assert enc.texts == [*TEXTS[:5], *TEXTS[5:8]] and reuse.as_dict() == {"embedded": 3, "memory": 2, "disk": 0}
    assert np.array_equal(vectors, fake_embed(TEXTS[3:8]))
    assert len(_packs(tmp_path)) == 2  # one pack per encoding call
    fresh = EmbeddingCache(tmp_path, 1 << 30)  # another process on the same folder
    vectors, reuse = fresh.vectors(NS, TEXTS[:8], Counting(), dim=8, unit=True)
    assert reuse.as_dict() == {"embedded": 0, "memory": 0, "disk": 8} and np.array_equal(vectors, fake_embed(TEXTS[:8]))


def test_a_pack_written_by_another_process_later_is_found(tmp_path):
    a, b = EmbeddingCache(tmp_path, 1 << 30), EmbeddingCache(tmp_path, 1 << 30)
    b.vectors(NS, TEXTS[:2], Counting())  # b has scanned the folder once
    a.vectors(NS, TEXTS[2:6], Counting())
    _, reuse = b.vectors(NS, TEXTS[2:6], Counting())
    assert reuse.disk == 4 and reuse.embedded == 0


def _poison_random(path: Path) -> None:
    path.write_bytes(os.urandom(300))


def _poison_empty(path: Path) -> None:
    path.write_bytes(b"")


def _poison_truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _poison_vectors(path: Path) -> None:
    """Vectors changed, record kept: the recorded sha256 no longer matches."""
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["vectors"] = arrays["vectors"][::-1].copy()
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


def _poison_forged(path: Path) -> None:
    """Vectors scaled and the record rewritten to match: the unit-length check still catches it."""
    import json

    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["vectors"] = (arrays["vectors"] * 2).astype(np.float32)
    record = json.loads(str(arrays[ec.PROVENANCE]))
    record["vectors_sha256"] = hashlib.sha256(arrays["vectors"].tobytes()).hexdigest()
    arrays[ec.PROVENANCE] = np.asarray(json.dumps(record, sort_keys=True))
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


def _poison_renamed(path: Path) -> None:
    path.rename(path.with_name("0" * 64 + ".npz"))


@pytest.mark.parametrize(
    ("poison", "said"),
    [
        (_poison_random, "unreadable"),
        (_poison_empty, "empty"),
        (_poison_truncated, "unreadable"),
        (_poison_vectors, "differ from those it recorded"),
        (_poison_forged, "unit length"),
        (_poison_renamed, "not its file name"),
    ],
)
def test_an_unusable_pack_is_one_warning_and_its_chunks_are_embedded_again(tmp_path, poison, said):
    EmbeddingCache(tmp_path, 1 << 30).vectors(NS, TEXTS[:4], Counting())
    (pack,) = _packs(tmp_path)
    poison(pack)
    cache = EmbeddingCache(tmp_path, 1 << 30)
    enc = Counting()
    vectors, reuse = cache.vectors(NS, TEXTS[:4], enc, dim=8, unit=True)
    assert reuse.embedded == 4 and np.array_equal(vectors, fake_embed(TEXTS[:4]))
    assert len(cache.warnings) == 1 and said in cache.warnings[0]
    # The bad file is gone and a good pack took its place: the next process reads it, no warning.
    later = EmbeddingCache(tmp_path, 1 << 30)
    _, reuse = later.vectors(NS, TEXTS[:4], Counting(), dim=8, unit=True)
    assert reuse.disk == 4 and later.warnings == []


def test_a_pack_of_another_namespace_copied_in_is_refused(tmp_path):
    other = {"kind": "fake", "dim": 8, "weights": "other"}
    EmbeddingCache(tmp_path, 1 << 30).vectors(other, TEXTS[:3], Counting())
    (pack,) = _packs(tmp_path)
    target = tmp_path / namespace_key(NS)
    target.mkdir()
    (target / pack.name).write_bytes(pack.read_bytes())
    cache = EmbeddingCache(tmp_path, 1 << 30)
    _, reuse = cache.vectors(NS, TEXTS[:3], Counting())
    assert reuse.embedded == 3 and "another encoder" in cache.warnings[0]


def test_links_are_never_followed(tmp_path):
    EmbeddingCache(tmp_path / "real", 1 << 30).vectors(NS, TEXTS[:3], Counting())
    (pack,) = _packs(tmp_path / "real")
    # A pack that is a link to a valid pack elsewhere: skipped, never read.
    root = tmp_path / "cache"
    (root / namespace_key(NS)).mkdir(parents=True)
    (root / namespace_key(NS) / pack.name).symlink_to(pack)
    cache = EmbeddingCache(root, 1 << 30)
    _, reuse = cache.vectors(NS, TEXTS[:3], Counting())
    assert reuse.embedded == 3 and "symbolic link" in cache.warnings[0]
    # The new pack would have the link's name: the write refuses to go through it (one more warning).
    assert len(cache.warnings) == 2 and "symbolic link" in cache.warnings[1]
    assert (root / namespace_key(NS) / pack.name).is_symlink() and pack.is_file()
    # A namespace folder that is a link: the disk level is off, nothing is written through it.
    linked = tmp_path / "linked"
    linked.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (linked / namespace_key(NS)).symlink_to(outside)
    cache = EmbeddingCache(linked, 1 << 30)
    cache.vectors(NS, TEXTS[:3], Counting())
    _, reuse = cache.vectors(NS, TEXTS[:3], Counting())
    assert reuse.memory == 3  # memory still serves
    assert list(outside.iterdir()) == [] and len(cache.warnings) == 1 and "symbolic link" in cache.warnings[0]


def test_an_unwritable_cache_is_one_warning_and_memory_still_serves(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = EmbeddingCache(blocker, 1 << 30)
    cache.vectors(NS, TEXTS[:3], Counting())
    cache.vectors(NS, TEXTS[3:6], Counting())
    _, reuse = cache.vectors(NS, TEXTS[:6], Counting())
    assert reuse.memory == 6 and len(cache.warnings) == 1 and "cannot be written" in cache.warnings[0]


def test_a_write_that_fails_midway_leaves_no_pack(tmp_path, monkeypatch):
    def torn(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ec.np, "savez", torn)
    cache = EmbeddingCache(tmp_path, 1 << 30)
    _, reuse = cache.vectors(NS, TEXTS[:3], Counting())
    assert reuse.embedded == 3 and "cannot be written" in cache.warnings[0]
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no pack, no temp file


def test_the_folder_is_bounded_least_recently_used_first(tmp_path):
    cache = EmbeddingCache(tmp_path, 1 << 30)
    for i in range(4):
        cache.vectors(NS, TEXTS[2 * i : 2 * i + 2], Counting())
    for age, p in enumerate(sorted(tmp_path.glob("*/*.npz"), key=lambda p: p.stat().st_mtime_ns)):
        os.utime(p, (1_000_000 + age, 1_000_000 + age))  # distinct last-use times, oldest first
    sizes = [p.stat().st_size for p in _packs(tmp_path)]
    bounded = EmbeddingCache(tmp_path, disk_bytes=sum(sizes[:2]) + 1)
    bounded.vectors(NS, TEXTS[8:10], Counting())  # a fifth pack: the oldest go
    left = _packs(tmp_path)
    assert sum(p.stat().st_size for p in left) <= sum(sizes[:2]) + 1 and len(left) == 2
    _, reuse = EmbeddingCache(tmp_path, 1 << 30).vectors(NS, TEXTS[:10], Counting())
    assert reuse.disk == 4 and reuse.embedded == 6


def test_memory_is_bounded(tmp_path):
    cache = EmbeddingCache(None, 0, memory_bytes=5 * 8 * 4)  # five 8-float vectors
    cache.vectors(NS, TEXTS, Counting())
    _, reuse = cache.vectors(NS, TEXTS[-5:], Counting())
    assert reuse.memory == 5
    _, reuse = cache.vectors(NS, TEXTS[:5], Counting())
    assert reuse.embedded == 5
