"""Atomic file writes: results are written to a temp file in the same folder and renamed into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from longctx_eval.errors import ConfigError


def ensure_dir(path: Path) -> Path:
    """Create `path` (and parents); an unwritable location is a one-line ConfigError naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output folder {path} cannot be created: {exc.strerror}") from exc
    if not os.access(path, os.W_OK):
        raise ConfigError(f"output folder {path} is not writable")
    return path


@contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A binary file that appears at `path` only once the block finishes; on error nothing is left behind."""
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a torn one."""
    with atomic_output(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """Atomic UTF-8 text write."""
    atomic_write_bytes(path, text.encode("utf-8"))
