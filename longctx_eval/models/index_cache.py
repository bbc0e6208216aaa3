"""Per-document retrieval indexes (chunk spans, embeddings, BM25 matrices) cached in memory and on disk.

An entry is a dict of numpy arrays keyed by a content hash (document sha256, chunk config, tokenizer and index
identity), so a second run over the same document reads its index back instead of re-embedding it. Memory:
least-recently used entries are dropped past a byte budget. Disk: one `.npz` file per entry under
`cache_dir()/index/` (or $LONGCTX_EVAL_INDEX_CACHE; `off` keeps memory only), written atomically; the oldest
files (by last use) are deleted once the folder passes $LONGCTX_EVAL_INDEX_CACHE_MB (default 4096 MiB).
"""

from __future__ import annotations

import os
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

import numpy as np

from longctx_eval.assets import cache_dir
from longctx_eval.errors import ConfigError, OutputError
from longctx_eval.io import atomic_output

FOLDER_ENV = "LONGCTX_EVAL_INDEX_CACHE"
DISK_MB_ENV = "LONGCTX_EVAL_INDEX_CACHE_MB"
DEFAULT_DISK_MB = 4096
MEMORY_BYTES = 1 << 30
"""In-process budget: a 1M-token document's MiniLM index is about 16 MB, its BM25 index about 6 MB."""

Arrays = dict[str, np.ndarray]
Status = Literal["memory", "disk", "built"]
"""Where an entry came from: this process's memory, the disk cache, or built now."""


class IndexCache:
    """A two-level cache of array dicts: an LRU dict in memory over an optional folder of `.npz` files."""

    def __init__(self, folder: Path | None, disk_bytes: int, memory_bytes: int = MEMORY_BYTES) -> None:
        self.folder = folder
        self.disk_bytes = disk_bytes
        self.memory_bytes = memory_bytes
        self._memory: OrderedDict[str, Arrays] = OrderedDict()
        self._held = 0

    def get_or_build(self, key: str, build: Callable[[], Mapping[str, np.ndarray]]) -> tuple[Arrays, Status]:
        """The entry for `key` from memory or disk, else `build()` stored in both; with where it came from."""
        held = self._memory.get(key)
        if held is not None:
            self._memory.move_to_end(key)
            return held, "memory"
        loaded = self._read(key)
        if loaded is not None:
            self._remember(key, loaded)
            return loaded, "disk"
        arrays = {k: np.asarray(v) for k, v in build().items()}
        self._remember(key, arrays)
        self._write(key, arrays)
        return arrays, "built"

    def forget_memory(self) -> None:
        """Drop every in-memory entry (the disk files stay)."""
        self._memory.clear()
        self._held = 0

    def path(self, key: str) -> Path | None:
        """The file that holds (or would hold) `key` on disk; None when the disk level is off."""
        return None if self.folder is None else self.folder / key[:2] / f"{key}.npz"

    def _remember(self, key: str, arrays: Arrays) -> None:
        size = sum(a.nbytes for a in arrays.values())
        if size > self.memory_bytes:
            return
        self._memory[key] = arrays
        self._held += size
        while self._held > self.memory_bytes:
            _, old = self._memory.popitem(last=False)
            self._held -= sum(a.nbytes for a in old.values())

    def _read(self, key: str) -> Arrays | None:
        path = self.path(key)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
            os.utime(path)  # last use, for the size bound
        except (OSError, ValueError, zipfile.BadZipFile):
            return None  # unreadable (another version, a torn copy): rebuilt and overwritten
        return arrays

    def _write(self, key: str, arrays: Arrays) -> None:
        path = self.path(key)
        if path is None:
            return
        try:
            with atomic_output(path) as fh:
                np.savez(fh, **arrays)
        except (OSError, OutputError):
            return  # a read-only or full disk costs a rebuild next time, never the run
        self._prune(keep=path)

    def _prune(self, keep: Path) -> None:
        """Delete the least recently used files until the folder holds at most `disk_bytes`."""
        assert self.folder is not None
        files = []
        for p in self.folder.glob("*/*.npz"):
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files):
            if total <= self.disk_bytes:
                break
            if p == keep:
                continue
            p.unlink(missing_ok=True)
            total -= size


def _disk_bytes() -> int:
    raw = os.environ.get(DISK_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_DISK_MB << 20
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise ConfigError(f"{DISK_MB_ENV}={raw!r}: expected a non-negative whole number of MiB")
    return mb << 20


def default_folder() -> Path | None:
    """$LONGCTX_EVAL_INDEX_CACHE (`off`: no disk level), else `cache_dir()/index`."""
    raw = os.environ.get(FOLDER_ENV, "").strip()
    if raw.lower() in ("off", "0", "none", "false"):
        return None
    return Path(raw).expanduser() if raw else cache_dir() / "index"


_SHARED: dict[tuple[Path | None, int], IndexCache] = {}


def shared_cache() -> IndexCache:
    """The process-wide cache for the current settings: every retriever in a run shares its documents' indexes."""
    settings = (default_folder(), _disk_bytes())
    cache = _SHARED.get(settings)
    if cache is None:
        cache = _SHARED[settings] = IndexCache(*settings)
    return cache
