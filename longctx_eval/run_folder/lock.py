"""One writer per run folder: an flock on RUN_DIR/.lock, which also names its holder (pid, host, start, command).

The kernel releases an flock when its holder exits, however it exits (SIGKILL included), so a .lock file left
behind by a killed run never blocks the next one; the file is kept, never deleted (deleting a lock file races
with a process that has just opened it). Readers (`score`) may take the lock shared: any number of them at
once, none while a run writes. Taking a lock this process already holds is re-entrant (a run that scores at
its end does not lock itself out).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType

from longctx_eval.atomic_io import ensure_dir, write_failure
from longctx_eval.errors import LongctxError
from longctx_eval.run_folder.paths import NOFOLLOW, inside, is_link_error, link_refusal
from longctx_eval.secret_mask import mask_secrets

LOCK_NAME = ".lock"


class RunFolderBusy(LongctxError):
    """Another process is writing (or reading, for a writer) the same run folder."""


@dataclass
class _Held:
    fd: int
    shared: bool
    count: int


_HELD: dict[Path, _Held] = {}
_HELD_LOCK = threading.Lock()


def lock_path(run_dir: Path) -> Path:
    """RUN_DIR/.lock (a symbolic link there is refused: `run_paths`)."""
    return inside(run_dir, LOCK_NAME)


def lock_holder(run_dir: Path) -> dict | None:
    """What the lock file says about its last exclusive holder (pid, host, started, command), or None.

    The file outlives its holder: this says who held it last, not that it is held now.
    """
    try:
        info = json.loads(lock_path(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


class RunLock:
    """Context manager holding RUN_DIR/.lock: exclusive by default (a run), shared for readers (`score`).

    A folder already held in a conflicting way raises `RunFolderBusy` at once, naming the holder.
    """

    def __init__(self, run_dir: Path, *, shared: bool = False, command: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.shared = shared
        self.command = mask_secrets(command if command is not None else " ".join(shlex.quote(a) for a in sys.argv))
        self._key: Path | None = None

    @property
    def path(self) -> Path:
        """RUN_DIR/.lock."""
        return lock_path(self.run_dir)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock or raise RunFolderBusy (another process holds it) / OutputError (cannot create it)."""
        if self._key is not None:
            raise RuntimeError(f"{self.path} is already acquired by this RunLock")
        if not self.shared:
            ensure_dir(self.run_dir)
        key = self.run_dir.resolve() / LOCK_NAME
        with _HELD_LOCK:
            held = _HELD.get(key)
            if held is not None:
                if held.shared and not self.shared:
                    try:
                        self._flock(held.fd, fcntl.LOCK_EX)  # upgrade the shared lock this process holds
                    except RunFolderBusy:
                        self._relock_shared(held.fd)  # a failed conversion may have dropped the shared lock
                        raise
                    held.shared = False
                    self._write_holder(held.fd)
                held.count += 1
                self._key = key
                return
            fd = self._open()
            if fd is None:  # a reader of a folder it cannot write: nobody can write there either
                return
            try:
                self._flock(fd, fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX)
                if not self.shared:
                    self._write_holder(fd)
            except BaseException:
                os.close(fd)
                raise
            _HELD[key] = _Held(fd, self.shared, 1)
            self._key = key

    def release(self) -> None:
        """Let go of the lock (the last release of this process closes it; the file stays)."""
        key, self._key = self._key, None
        if key is None:
            return
        with _HELD_LOCK:
            held = _HELD[key]
            held.count -= 1
            if held.count:
                return
            del _HELD[key]
            try:
                if not held.shared:
                    os.ftruncate(held.fd, 0)  # no stale holder named after a clean exit
            except OSError:
                pass
            os.close(held.fd)  # closing releases the flock

    def _open(self) -> int | None:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | NOFOLLOW, 0o666)
        except OSError as exc:
            if is_link_error(exc):
                raise link_refusal(self.path) from exc
            if self.shared and exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM, errno.ENOENT):
                try:
                    return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | NOFOLLOW)
                except OSError:
                    return None
            raise write_failure(self.path, exc, action="create the lock", kept="nothing was written") from exc

    def _flock(self, fd: int, mode: int) -> None:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderBusy(self._busy_message()) from None

    @staticmethod
    def _relock_shared(fd: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)

    def _write_holder(self, fd: int) -> None:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": self.command,
        }
        data = (json.dumps(info, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except OSError:
            pass  # the lock holds without its label; a contender is told less, nothing else changes

    def _busy_message(self) -> str:
        info = None
        for _ in range(20):  # the holder writes its label just after locking: give it a moment
            info = lock_holder(self.run_dir)
            if info is not None:
                break
            time.sleep(0.01)
        advice = "wait for it, or give another --out"
        if info is None or not _alive(info):
            what = "a writer" if self.shared else "another process (a reader such as `score`, or a writer)"
            return f"run folder {self.run_dir} is in use by {what}; {advice}"
        host = "" if info.get("host") == socket.gethostname() else f" on {info.get('host')}"
        command = str(info.get("command") or "")
        command = f" ({command[:117]}...)" if len(command) > 120 else f" ({command})" if command else ""
        return (
            f"run folder {self.run_dir} is in use by pid {info.get('pid')}{host} since {info.get('started')}"
            f"{command}; {advice}"
        )


def _alive(info: dict) -> bool:
    """Whether the recorded holder could still be running (always assumed so for another host)."""
    pid = info.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if info.get("host") != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
