"""The index cache folder is listed after a write only when the bound may have been crossed (or every
RESCAN_WRITES writes); the bound holds exactly for this process's own writes."""

from __future__ import annotations

import os

from longctx_eval.models.retrieval import cache_bound
from longctx_eval.models.retrieval.cache_bound import RESCAN_WRITES, prune


def _write(path, size: int, when: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (when, when))
    return path


def _total(root) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.npz"))


def test_own_writes_are_pruned_as_soon_as_they_cross_the_bound(tmp_path, monkeypatch):
    listings = []
    real = cache_bound.cached_files
    monkeypatch.setattr(cache_bound, "cached_files", lambda root: listings.append(root) or real(root))
    bound = 10_000
    for i in range(30):  # 1,000 bytes each: from the 11th write on, each one evicts the oldest
        path = _write(tmp_path / "ab" / f"{i:02d}.npz", 1000, 1_000_000 + i)
        prune(tmp_path, bound, keep=path, added=1000)
        assert _total(tmp_path) <= bound
    assert (tmp_path / "ab" / "29.npz").exists() and not (tmp_path / "ab" / "19.npz").exists()
    assert len(listings) == 1 + 20  # the first write, then only the writes that crossed the bound


def test_what_another_process_wrote_is_seen_within_rescan_writes(tmp_path):
    bound = 100_000
    first = _write(tmp_path / "ab" / "first.npz", 10, 1_000_000)
    prune(tmp_path, bound, keep=first, added=10)
    _write(tmp_path / "cd" / "other.npz", 200_000, 1_000_001)  # another process: over the bound at once
    for i in range(RESCAN_WRITES):
        path = _write(tmp_path / "ab" / f"{i:03d}.npz", 10, 1_000_002 + i)
        prune(tmp_path, bound, keep=path, added=10)
    assert _total(tmp_path) <= bound and not (tmp_path / "cd" / "other.npz").exists()


def test_without_added_the_folder_is_always_listed(tmp_path):
    bound = 1000
    keep = _write(tmp_path / "ab" / "keep.npz", 10, 1_000_010)
    prune(tmp_path, bound, keep=keep, added=10)
    _write(tmp_path / "cd" / "other.npz", 5000, 1_000_000)
    assert prune(tmp_path, bound, keep=keep) == [tmp_path / "cd" / "other.npz"]
