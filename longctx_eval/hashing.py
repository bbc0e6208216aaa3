"""Canonical hashing: every key and hash in a run is sha256 over canonical JSON, so equal inputs hash equal.

Also the hash of weight files, cached by (path, size, mtime) so a 140 GB model is read once, not on every load."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from longctx_eval.cache_folder import cache_dir
from longctx_eval.errors import LongctxError


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the byte form every hash is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_json(obj: Any) -> str:
    """sha256 hex digest of the canonical JSON of `obj`."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def sha256_text(text: str) -> str:
    """sha256 hex digest of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


HASH_CACHE_ENV = "LONGCTX_EVAL_HASH_CACHE"
"""A folder for the weights-hash cache instead of the suite's cache folder ($LONGCTX_EVAL_CACHE or
~/.cache/longctx-eval)."""
HASH_CACHE_FILE = "sha256-cache.json"


def hash_cache_path() -> Path:
    """Where `cached_file_sha256` keeps its entries: $LONGCTX_EVAL_HASH_CACHE/, else the suite's cache folder."""
    folder = os.environ.get(HASH_CACHE_ENV)
    if folder:
        return Path(folder).expanduser() / HASH_CACHE_FILE
    return cache_dir() / HASH_CACHE_FILE


def file_sha256(path: Path) -> str:
    """sha256 of a file, streamed in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_file_sha256(path: Path) -> str:
    """sha256 of a file, read once per (absolute path, size, mtime): later calls take it from a small JSON cache.

    A file rewritten in place changes its size or mtime and is hashed again. The cache is written atomically
    (temp file + rename) after each new hash; a cache that cannot be read or written is ignored, never an error
    (the hash is then computed, as without it)."""
    path = Path(path)
    st = path.stat()
    key = str(path.resolve())
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    cache_file = hash_cache_path()
    entry = _read_cache(cache_file).get(key)
    if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = file_sha256(path)
    try:
        from longctx_eval.atomic_io import atomic_write_text

        cache_file.parent.mkdir(parents=True, exist_ok=True)
        entries = _read_cache(cache_file)  # re-read: another process may have added entries meanwhile
        entries[key] = {**stamp, "sha256": digest}
        atomic_write_text(cache_file, json.dumps(entries, indent=0, sort_keys=True) + "\n")
    except (OSError, LongctxError):
        pass  # an unwritable cache only costs the next load a re-read
    return digest
