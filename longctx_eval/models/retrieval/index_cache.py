"""Per-document retrieval indexes (chunk spans, embeddings, BM25 matrices) cached in memory and on disk.

An entry is a dict of numpy arrays keyed by a content hash (document sha256, chunk config, tokenizer and index
identity), so a second run over the same document reads its index back instead of re-embedding it. Memory:
least-recently used entries are dropped past a byte budget. Disk: one `.npz` file per entry under
`cache_dir()/index/` (or $LONGCTX_EVAL_INDEX_CACHE; `off` keeps memory only), written atomically; the oldest
files (by last use) are deleted once the folder passes $LONGCTX_EVAL_INDEX_CACHE_MB (default 4096 MiB).

A disk entry is never trusted as is: it carries what it was built from (its key, the caller's `built_from`
record: document hash, chunk layout hash, index identity) and the name, shape and dtype of every array, and
a read checks all of them plus the caller's `check` (spans inside the document, one index row per chunk).
A mismatch, an empty, torn or unreadable file is one warning and a rebuild that overwrites it; an
unwritable cache (read-only folder, a path that is a file) costs a rebuild and one warning per process.

Beside the entries, `embeddings()` is the cache's chunk-vector cache (`embedding_cache.py`, in the folder's
`embeddings/`; one byte bound covers the entries and the packs, `cache_bound.py`): dense indexes are assembled
from it and kept in memory only (`get_or_build(persist=False)`), so documents that share chunks share their
vectors on disk too.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from longctx_eval.atomic_io import atomic_output
from longctx_eval.cache_folder import bound_setting, subfolder_setting
from longctx_eval.errors import LongctxError
from longctx_eval.models.retrieval.cache_bound import prune, written_size
from longctx_eval.progress import console, console_text

if TYPE_CHECKING:
    from longctx_eval.models.retrieval.embedding_cache import EmbeddingCache

FOLDER_ENV = "LONGCTX_EVAL_INDEX_CACHE"
DISK_MB_ENV = "LONGCTX_EVAL_INDEX_CACHE_MB"
DEFAULT_DISK_MB = 4096
MEMORY_BYTES = 1 << 30
"""In-process budget: a 1M-token document's MiniLM index is about 16 MB, its BM25 index about 6 MB."""

Arrays = dict[str, np.ndarray]
Status = Literal["memory", "disk", "built"]
"""Where an entry came from: this process's memory, the disk cache, or built now."""
Check = Callable[[Arrays], "str | None"]
"""A caller's check of an entry read from disk: None when usable, else what is wrong with it."""
PROVENANCE = "__built_from__"
"""The array (a JSON string) in every disk entry naming its key, what it was built from and its arrays."""
FORMAT = 2


class UnusableEntry(Exception):
    """A disk entry that cannot be used (unreadable, or built from something else); the message says why."""


class IndexCache:
    """A two-level cache of array dicts: an LRU dict in memory over an optional folder of `.npz` files."""

    def __init__(self, folder: Path | None, disk_bytes: int, memory_bytes: int = MEMORY_BYTES) -> None:
        self.folder = folder
        self.disk_bytes = disk_bytes
        self.memory_bytes = memory_bytes
        self._memory: OrderedDict[str, Arrays] = OrderedDict()
        self._held = 0
        self.warnings: list[str] = []
        """Every warning printed (one per unusable entry, at most one for an unwritable cache)."""
        self._write_failed = False
        self._embeddings: EmbeddingCache | None = None

    def embeddings(self) -> EmbeddingCache:
        """The chunk-vector cache beside this one: `<folder>/embeddings` on disk (memory only without a folder)."""
        if self._embeddings is None:
            from longctx_eval.models.retrieval.embedding_cache import FOLDER, EmbeddingCache

            folder = None if self.folder is None else self.folder / FOLDER
            self._embeddings = EmbeddingCache(
                folder, self.disk_bytes, bound_root=self.folder, on_unwritable=self.unwritable
            )
        return self._embeddings

    def get_or_build(
        self,
        key: str,
        build: Callable[[], Mapping[str, np.ndarray]],
        built_from: Mapping[str, Any] | None = None,
        check: Check | None = None,
        persist: bool = True,
    ) -> tuple[Arrays, Status]:
        """The entry for `key` from memory or disk, else `build()` stored in both; with where it came from.

        A disk entry is used only if it records this `key` and `built_from` (JSON-able), its arrays have the
        recorded shapes and dtypes and `check(arrays)` finds nothing wrong; otherwise it is rebuilt (one warning).
        `persist=False` keeps the entry in memory only (its build reads a disk cache of its own).
        """
        held = self._memory.get(key)
        if held is not None:
            self._memory.move_to_end(key)
            return held, "memory"
        expected = _normalised(built_from or {})
        loaded = self._read(key, expected, check) if persist else None
        if loaded is not None:
            self._remember(key, loaded)
            return loaded, "disk"
        arrays = {k: np.asarray(v) for k, v in build().items()}
        self._remember(key, arrays)
        if persist:
            self._write(key, arrays, expected)
        return arrays, "built"

    def forget_memory(self) -> None:
        """Drop every in-memory entry, chunk vectors included (the disk files stay), as a new process starts."""
        self._memory.clear()
        self._held = 0
        if self._embeddings is not None:
            self._embeddings.forget_memory()

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

    def unwritable(self, text: str) -> None:
        """Warn that the folder cannot be written, once per process for the entries and the packs together."""
        if not self._write_failed:
            self._write_failed = True
            self._warn(text)

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)

    def _read(self, key: str, expected: Any, check: Check | None) -> Arrays | None:
        path = self.path(key)
        try:
            if path is None or not path.is_file():
                return None
        except OSError:
            return None
        try:
            arrays = _load_verified(path, key, expected, check)
        except UnusableEntry as exc:
            self._warn(f"index cache entry {path} {exc}; it is rebuilt and overwritten")
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # last use, for the size bound
        return arrays

    def _write(self, key: str, arrays: Arrays, expected: Any) -> None:
        path = self.path(key)
        if path is None:
            return
        record = {
            "format": FORMAT,
            "key": key,
            "built_from": expected,
            "arrays": {name: _described(a) for name, a in arrays.items()},
        }
        try:
            with atomic_output(path) as fh:
                # savez's stub types **kwds against allow_pickle too: pass the arrays as Any-valued mappings
                stored: dict[str, Any] = arrays
                provenance: dict[str, Any] = {PROVENANCE: np.asarray(json.dumps(record, sort_keys=True))}
                np.savez(fh, **stored, **provenance)
        except (OSError, LongctxError) as exc:  # read-only folder, a file in the way, a full disk: a rebuild later
            self.unwritable(f"index cache {self.folder} cannot be written ({exc}); indexes are rebuilt on every run")
            return
        self._prune(keep=path)

    def _prune(self, keep: Path) -> None:
        """Delete the least recently used files (entries and chunk-vector packs) until the folder holds at most
        `disk_bytes` (`cache_bound.py`; listed only when this write may have crossed it)."""
        assert self.folder is not None
        prune(self.folder, self.disk_bytes, keep, added=written_size(keep))


def _normalised(value: Mapping[str, Any]) -> Any:
    """`value` as it reads back from JSON (tuples as lists, keys as strings), so records compare equal."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _described(array: np.ndarray) -> dict[str, Any]:
    return {"shape": list(array.shape), "dtype": array.dtype.str}


def _load_verified(path: Path, key: str, expected: Any, check: Check | None) -> Arrays:
    """The arrays of the entry at `path`, if it is readable and records `key`, `expected` and its own arrays."""
    if path.stat().st_size == 0:
        raise UnusableEntry("is empty (0 bytes)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as exc:  # an untrusted file: whatever np.load raises (EOFError, BadZipFile, ValueError...)
        raise UnusableEntry(f"is unreadable ({type(exc).__name__}: {exc})") from exc
    raw = arrays.pop(PROVENANCE, None)
    if raw is None or raw.shape != () or raw.dtype.kind != "U":
        raise UnusableEntry("records nothing of what it was built from (an older version or another file)")
    try:
        record = json.loads(str(raw))
    except ValueError as exc:
        raise UnusableEntry(f"has an unreadable provenance record ({exc})") from exc
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise UnusableEntry("was written in another format")
    if record.get("key") != key:
        raise UnusableEntry(f"holds the entry {str(record.get('key'))[:12]}…, not this one (a copied file?)")
    if record.get("built_from") != expected:
        raise UnusableEntry("was built from something else than this document and index")
    described = {name: _described(a) for name, a in arrays.items()}
    if record.get("arrays") != described:
        raise UnusableEntry("has arrays whose names, shapes or dtypes differ from those it recorded")
    problem = check(arrays) if check is not None else None
    if problem:
        raise UnusableEntry(f"does not fit: {problem}")
    return arrays


def _disk_bytes() -> int:
    return bound_setting(DISK_MB_ENV, DEFAULT_DISK_MB)


def default_folder() -> Path | None:
    """$LONGCTX_EVAL_INDEX_CACHE (`off`: no disk level), else `cache_dir()/index`."""
    return subfolder_setting(FOLDER_ENV, "index")


_SHARED: dict[tuple[Path | None, int], IndexCache] = {}


def shared_cache() -> IndexCache:
    """The process-wide cache for the current settings: every retriever in a run shares its documents' indexes."""
    settings = (default_folder(), _disk_bytes())
    cache = _SHARED.get(settings)
    if cache is None:
        cache = _SHARED[settings] = IndexCache(*settings)
    return cache
