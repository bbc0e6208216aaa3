"""Paths inside a run folder: never through a symbolic link, never outside the folder.

Every file a run folder holds (`.lock`, `manifest.json`, `predictions.jsonl` and its quarantine, `run.json`,
`samples/`, `scores/`) is reached through `inside`, which refuses a name that could leave the folder and a
link anywhere below it; files are then opened with `O_NOFOLLOW` (or replaced atomically, which refuses a
link too: `io.atomic_output`), so a link planted between the check and the open is refused as well.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from longctx_eval.errors import OutputError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""Added to every `os.open` of a run folder's file: opening a symbolic link fails (ELOOP)."""


def link_refusal(path: Path, target: str | None = None) -> OutputError:
    """The one-line error for a symbolic link met where a run folder's file or folder should be."""
    if target is None:
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
    return OutputError(
        f"{path} is a symbolic link (to {target}); a run folder's files are never read or written through links: "
        "remove it and run again"
    )


def inside(run_dir: Path, *parts: str) -> Path:
    """RUN_DIR/parts..., refused (OutputError) if a part could leave the folder or an existing part is a link."""
    path = Path(run_dir)
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise OutputError(f"{part!r} cannot name a file inside the run folder {run_dir}")
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                continue  # the open or mkdir that follows names the file in the way
            raise OutputError(f"{path} cannot be checked: {exc.strerror}") from exc
        if stat.S_ISLNK(mode):
            raise link_refusal(path)
    return path


def is_link_error(exc: OSError) -> bool:
    """Whether an `os.open(..., NOFOLLOW)` failed because the path is a symbolic link."""
    return exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and NOFOLLOW != 0)
