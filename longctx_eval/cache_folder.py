"""The suite's cache folder: converted assets, index and embedding caches, the weights-hash cache."""

from __future__ import annotations

import os
from pathlib import Path

from longctx_eval.errors import ConfigError


def cache_dir() -> Path:
    """Where converted assets live: $LONGCTX_EVAL_CACHE, else ~/.cache/longctx-eval."""
    root = os.environ.get("LONGCTX_EVAL_CACHE") or Path.home() / ".cache" / "longctx-eval"
    return Path(root)


def subfolder_setting(env: str, name: str) -> Path | None:
    """A cache's disk folder: $env (`off`, `0`, `none`, `false`: no disk level), else `cache_dir()/name`."""
    raw = os.environ.get(env, "").strip()
    if raw.lower() in ("off", "0", "none", "false"):
        return None
    return Path(raw).expanduser() if raw else cache_dir() / name


def bound_setting(env: str, default_mb: int) -> int:
    """A cache's byte bound from $env in MiB (a non-negative whole number), else `default_mb`."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default_mb << 20
    if not raw.isdigit():
        raise ConfigError(f"{env}={raw!r}: expected a non-negative whole number of MiB")
    return int(raw) << 20
