"""A cache folder's byte bound: delete files, in a given order of who goes first, until they fit.

The index cache (`models/retrieval/cache_bound.py`) and the sample cache (`run/sample_cache.py`) each list
their own files (never through a link) and say which go first; this is the one place that deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CachedFile = tuple[float, int, Path]
"""(last use as a modification time, bytes, path)."""


def shrink_to(
    files: Sequence[CachedFile], bound: int, keep: Path, order: Callable[[CachedFile], Any] | None = None
) -> list[Path]:
    """Delete `files` (never `keep`) first to last by `order` (default: least recently used first) until the
    rest hold at most `bound` bytes; the paths deleted. A file another process deleted first counts as gone."""
    total = sum(size for _, size, _ in files)
    deleted: list[Path] = []
    for _, size, path in sorted(files, key=order) if order is not None else sorted(files):
        if total <= bound:
            break
        if path == keep:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # another process pruned it first
        except OSError:
            continue
        total -= size
        deleted.append(path)
    return deleted
