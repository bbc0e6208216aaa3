"""Weights are hashed once (issue 17): sha256 cached by (path, size, mtime) in a small JSON file, written
atomically; a changed file is hashed again; an unusable cache never stops a load."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from longctx_eval import hashing
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec


@pytest.fixture
def reads(monkeypatch, tmp_path):
    """The cache in a fresh folder; counts the files actually read to hash them."""
    monkeypatch.setenv(hashing.HASH_CACHE_ENV, str(tmp_path / "hash-cache"))
    seen: list[str] = []
    real = hashing.file_sha256

    def counting(path):
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(hashing, "file_sha256", counting)
    return seen


def test_a_file_is_read_once_until_it_changes(tmp_path, reads):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 1000)
    first = hashing.cached_file_sha256(f)
    assert first == hashlib.sha256(b"a" * 1000).hexdigest() and reads == ["w.bin"]
    assert hashing.cached_file_sha256(f) == first and reads == ["w.bin"]  # from the cache
    f.write_bytes(b"b" * 1000)  # same size, new content and mtime
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert hashing.cached_file_sha256(f) == hashlib.sha256(b"b" * 1000).hexdigest() and len(reads) == 2
    cache = hashing.hash_cache_path()
    entry = json.loads(cache.read_text())[str(f.resolve())]
    assert set(entry) == {"size", "mtime_ns", "sha256"} and entry["size"] == 1000
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # atomic: no temp file left behind


def test_an_unusable_cache_is_ignored(tmp_path, monkeypatch, reads):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 10)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv(hashing.HASH_CACHE_ENV, str(blocker))
    got = hashing.cached_file_sha256(f)
    assert got == hashlib.sha256(b"x" * 10).hexdigest()  # computed, the cache folder cannot exist
    monkeypatch.setenv(hashing.HASH_CACHE_ENV, str(tmp_path / "c"))
    (tmp_path / "c").mkdir()
    hashing.hash_cache_path().write_text("{ torn")
    assert hashing.cached_file_sha256(f) == got  # a corrupt cache file is rewritten, not an error
    assert json.loads(hashing.hash_cache_path().read_text())[str(f.resolve())]["sha256"] == got


def test_loading_a_model_again_reads_no_weights_to_hash_them(tiny_llama_dir, reads):
    a = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    assert reads == ["model.safetensors"]
    b = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    assert reads == ["model.safetensors"] and a.meta.sha256 == b.meta.sha256
