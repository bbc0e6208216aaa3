"""The suite's cache folder: converted assets, index and embedding caches, the weights-hash cache."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where converted assets live: $LONGCTX_EVAL_CACHE, else ~/.cache/longctx-eval."""
    root = os.environ.get("LONGCTX_EVAL_CACHE") or Path.home() / ".cache" / "longctx-eval"
    return Path(root)
