"""Atomic file writes: results are written to a temp file in the same folder and renamed into place.

A failed write (full disk, permissions, read-only file system) is a one-line `OutputError` naming the file;
the temp file is removed and the file already at the path is left as it was.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from longctx_eval.errors import ConfigError, OutputError

_UMASK_LOCK = threading.Lock()


def ensure_dir(path: Path) -> Path:
    """Create `path` (and parents); an unwritable location is a one-line ConfigError naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output folder {path} cannot be created: {exc.strerror}") from exc
    if not os.access(path, os.W_OK):
        raise ConfigError(f"output folder {path} is not writable")
    return path


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (Linux), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permission bits `open(path, "w")` would give a new file under the current umask (0644 under 022)."""
    return 0o666 & ~current_umask()


def write_failure(
    path: Path, exc: OSError, action: str = "write", kept: str = "the file already there (if any) is unchanged"
) -> OutputError:
    """A one-line OutputError for an OSError met while writing `path`: the path, the reason, what is kept."""
    return OutputError(f"cannot {action} {path}: {exc.strerror or exc}; {kept}")


@contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A binary file that appears at `path` only once the block finishes; on error nothing is left behind.

    The file gets the mode a newly created file gets under the umask; an OSError while creating, writing or
    renaming it is raised as `OutputError`. A symbolic link at `path` is refused, never replaced or followed.
    """
    if os.path.islink(path):
        raise OutputError(f"{path} is a symbolic link (to {os.readlink(path)}); refusing to write through it")
    ensure_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise write_failure(path, exc) from exc
    body_done, renamed = False, False
    try:
        try:
            os.fchmod(fd, new_file_mode())
            fh = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with fh:
            yield fh
            body_done = True
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        renamed = True
    except OSError as exc:
        # A write to `fh` fails without a file name; an OSError naming another file is the caller's own.
        if body_done or exc.filename is None:
            raise write_failure(path, exc) from exc
        raise
    finally:
        if not renamed:
            Path(tmp).unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a torn one."""
    with atomic_output(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """Atomic UTF-8 text write."""
    atomic_write_bytes(path, text.encode("utf-8"))
