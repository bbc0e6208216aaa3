"""Built samples shared across models and processes: a task's full sample set, built once per tokenizer.

Building a long-context task's samples (exact-length haystacks, needle insertion, overlap measures) can take
longer than serving them; every model that measures lengths in the same tokenizer (bm25, minilm, hybrid and
minilm?rerank=maxsim all use MiniLM's) gets the same samples, so they are built once and read back.

The key (`sample_key`) is everything the samples depend on: the task's name, version, arguments, lengths and
seed; the tokenizer's name (samples record it) and the sha256 of its serialized form; the sha256 of the .py
files of the task's own folder (a plugin in the user's folder included: the module and the helpers beside it;
everything below a package plugin's folder), of `data_builders/` and of
`longctx_eval/text/` (hashed once per process), and the versions of the libraries samples are computed with.
Editing a builder, a task or a helper of it, or upgrading a library, is a miss. `--limit` is not in the key:
the full set is cached and the limit applied after; a planned dataset (`sample_plan`) builds only the samples
a limit chose, under the key and their ids (`plan_samples`), or takes them from the full set where it is cached.

Memory: an LRU bounded by context characters (`MEMORY_CHARS`), per process. Disk: one gzip-compressed JSON
file per key, `<cache folder>/samples/<key>.json.gz` (or $LONGCTX_EVAL_SAMPLE_CACHE; `off` keeps memory only),
contexts stored as their distinct lines once (the samples of one haystack share nearly all of them); written
atomically; least recently used files go first once the folder passes $LONGCTX_EVAL_SAMPLE_CACHE_MB (default
4096 MiB). A file records its key, what it was built from and the dataset hash of its samples; a read checks
all three (the hash recomputed over the samples read back), so a torn, corrupt or foreign file is one warning,
deleted, and the samples built again. A symbolic link is never read, written or deleted: the entry is opened
with O_NOFOLLOW, and a linked cache folder turns the disk level off (one warning). Samples whose gold or
metadata would not read back identical from JSON (tuples, non-string keys, NaN) are kept in memory only.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import stat
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from longctx_eval.atomic_io import atomic_output
from longctx_eval.byte_bound import CachedFile, shrink_to
from longctx_eval.cache_folder import bound_setting, subfolder_setting
from longctx_eval.errors import ConfigError, OutputError
from longctx_eval.hashing import sha256_json
from longctx_eval.progress import console, console_text
from longctx_eval.run.sampling import dataset_hash
from longctx_eval.sample import Sample
from longctx_eval.task import TaskInfo
from longctx_eval.text.tokenizer import Tokenizer

FOLDER_ENV = "LONGCTX_EVAL_SAMPLE_CACHE"
DISK_MB_ENV = "LONGCTX_EVAL_SAMPLE_CACHE_MB"
DEFAULT_DISK_MB = 4096
MEMORY_CHARS = 1 << 30
"""In-process budget in context characters: 100 needle samples at 1M tokens are about 450M characters."""
FORMAT = 1
SUFFIX = ".json.gz"
LIBRARIES = ("tokenizers", "nltk", "numpy", "bm25s", "torch", "transformers", "sentence-transformers")
"""Libraries whose version is in the key: tokenization, sentence splitting and the overlap measures."""
Status = Literal["memory", "disk", "built"]


def _disk_bytes() -> int:
    return bound_setting(DISK_MB_ENV, DEFAULT_DISK_MB)


def default_folder() -> Path | None:
    """$LONGCTX_EVAL_SAMPLE_CACHE (`off`: no disk level), else `cache_dir()/samples`."""
    return subfolder_setting(FOLDER_ENV, "samples")


def _py_files(folder: Path, depth: int = 4) -> list[Path]:
    """Every .py file below `folder` (no links, no hidden or __pycache__ folders), sorted."""
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if entry.name.startswith(".") or entry.name == "__pycache__" or entry.is_symlink():
            continue
        if entry.is_dir() and depth > 0:
            out += _py_files(Path(entry.path), depth - 1)
        elif entry.is_file() and entry.name.endswith(".py"):
            out.append(Path(entry.path))
    return out


@cache
def folder_sha256(folder: Path, depth: int = 4) -> str:
    """sha256 over the relative paths and bytes of the .py files below `folder`, `depth` folders down (0: its own
    files only), once per process and folder."""
    parts: list[list[str | None]] = []
    for path in _py_files(folder, depth):
        try:
            parts.append([str(path.relative_to(folder)), hashlib.sha256(path.read_bytes()).hexdigest()])
        except OSError:
            parts.append([str(path.relative_to(folder)), None])
    return sha256_json(parts)


def task_sources_sha256(source: Path) -> str:
    """A task module's folder's own .py files (the module and its `_helper.py` modules); for a package plugin
    (`name/__init__.py`) everything below it."""
    folder = source.resolve().parent
    return folder_sha256(folder, 4 if source.name == "__init__.py" else 0)


def _package_folder(name: str) -> Path | None:
    """Where a top-level package lives, found without importing it (the core never imports data_builders)."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


@cache
def builder_sources() -> dict[str, str | None]:
    """sha256 of `data_builders/` and `longctx_eval/text/` sources, and the libraries' versions (once per process)."""
    text = Path(__file__).resolve().parents[1] / "text"
    builders = _package_folder("data_builders")
    out: dict[str, str | None] = {
        "data_builders": folder_sha256(builders) if builders is not None else None,
        "text": folder_sha256(text),
    }
    for lib in LIBRARIES:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = None
    return out


def sample_key(
    info: TaskInfo, args: Mapping[str, Any], lengths: Sequence[int], seed: int, tokenizer: Tokenizer | None
) -> str | None:
    """The cache key of a task's full sample set, or None when it cannot be keyed (then it is never cached)."""
    source = Path(info.source)
    if not source.is_file():
        return None
    try:
        record = {
            "format": FORMAT,
            "task": info.name,
            "version": info.version,
            "args": json.loads(json.dumps(dict(args), sort_keys=True, allow_nan=False)),
            "lengths": [int(n) for n in lengths],
            "seed": seed,
            "tokenizer": None
            if tokenizer is None
            else {"name": tokenizer.name, "sha256": tokenizer.sha256, "class": type(tokenizer).__qualname__},
            "task_sources": task_sources_sha256(source),
            "builders": builder_sources(),
        }
    except (TypeError, ValueError, AttributeError):  # an argument JSON cannot hold, a tokenizer without a hash
        return None
    return sha256_json(record)


def _round_trips(samples: Sequence[Sample]) -> bool:
    """Whether every sample reads back from JSON equal to itself (no tuples, non-string keys or NaN)."""
    for s in samples:
        if not all(isinstance(x, str) for x in (s.id, s.context, s.question)):
            return False
        try:
            side = [dict(s.gold), dict(s.metadata)]
            if json.loads(json.dumps(side, allow_nan=False)) != side:
                return False
        except (TypeError, ValueError):
            return False
    return True


def encode(key: str, samples: Sequence[Sample]) -> bytes:
    """The file of `samples`: gzip-compressed JSON, each context as indices into the set's distinct lines."""
    lines: dict[str, int] = {}
    rows = []
    for s in samples:
        ids = [lines.setdefault(line, len(lines)) for line in s.context.splitlines(keepends=True)]
        rows.append({"id": s.id, "context": ids, "question": s.question, "gold": s.gold, "metadata": s.metadata})
    doc = {"format": FORMAT, "key": key, "dataset_hash": dataset_hash(samples), "lines": list(lines), "samples": rows}
    return gzip.compress(json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8"), 6, mtime=0)


class UnusableEntry(Exception):
    """A disk entry that cannot be used; the message says why."""


def decode(key: str, data: bytes) -> list[Sample]:
    """The samples of a file written by `encode` for `key`; UnusableEntry when anything does not check."""
    try:
        doc = json.loads(gzip.decompress(data).decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
            raise UnusableEntry("it was written for another key or format")
        lines = doc["lines"]
        samples = [
            Sample(r["id"], "".join(lines[i] for i in r["context"]), r["question"], r["gold"], r["metadata"])
            for r in doc["samples"]
        ]
    except UnusableEntry:
        raise
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise UnusableEntry(f"unreadable ({type(exc).__name__})") from None
    if dataset_hash(samples) != doc.get("dataset_hash"):
        raise UnusableEntry("its samples do not match their recorded dataset hash")
    return samples


class SampleCache:
    """Full sample sets by key: this process's memory, then the disk folder (None: memory only)."""

    def __init__(self, folder: Path | None, disk_bytes: int, memory_chars: int = MEMORY_CHARS) -> None:
        self.folder = folder
        self.disk_bytes = disk_bytes
        self.memory_chars = memory_chars
        self._memory: OrderedDict[str, tuple[list[Sample], int]] = OrderedDict()
        self._held = 0
        self._warned: set[str] = set()

    def get_or_build(self, key: str | None, build: Callable[[], Iterable[Sample]]) -> tuple[list[Sample], Status]:
        """The samples of `key` from memory or disk, else `build()` them (and keep them); where they came from."""
        if key is None:
            return list(build()), "built"
        held = self.get(key)
        if held is not None:
            return held
        samples = list(build())
        self._write(key, samples)
        self._remember(key, samples)
        return list(samples), "built"

    def get(self, key: str | None) -> tuple[list[Sample], Status] | None:
        """The samples of `key` from memory or disk (kept in memory), or None when neither holds them."""
        if key is None:
            return None
        held = self._memory.get(key)
        if held is not None:
            self._memory.move_to_end(key)
            return list(held[0]), "memory"
        samples = self._from_disk(key)
        if samples is None:
            return None
        self._remember(key, samples)
        return list(samples), "disk"

    def forget_memory(self) -> None:
        """Drop this process's memory level (tests: a second model in a fresh process reads the disk)."""
        self._memory.clear()
        self._held = 0

    def _remember(self, key: str, samples: list[Sample]) -> None:
        size = sum(len(s.context) for s in samples)
        if size > self.memory_chars:
            return
        self._memory[key] = (samples, size)
        self._held += size
        while self._held > self.memory_chars:
            _, (_, dropped) = self._memory.popitem(last=False)
            self._held -= dropped

    def _warn(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            console.print(f"[yellow]warning[/yellow] sample cache: {console_text(text)}", highlight=False)

    def _usable_folder(self) -> Path | None:
        """The disk folder, or None when it is off or a symbolic link (never followed)."""
        if self.folder is None:
            return None
        if self.folder.is_symlink():
            self._warn(f"{self.folder} is a symbolic link; not followed, samples are kept in memory only")
            return None
        return self.folder

    def path_of(self, key: str) -> Path | None:
        """Where the entry of `key` lives on disk (None: no disk level)."""
        folder = self._usable_folder()
        return None if folder is None else folder / f"{key}{SUFFIX}"

    def _from_disk(self, key: str) -> list[Sample] | None:
        path = self.path_of(key)
        if path is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link (ELOOP), a folder, no permission: built again, the path left as it is
            self._warn(f"{path} cannot be read ({exc.strerror}); building the samples")
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    raise UnusableEntry("not a regular file")
                data = fh.read()
            samples = decode(key, data)
        except (UnusableEntry, OSError) as exc:
            self._warn(f"{path} is unusable ({exc}); deleted, building the samples again")
            _unlink_regular(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path, follow_symlinks=False)  # its last use, for the byte bound
        return samples

    def _write(self, key: str, samples: list[Sample]) -> None:
        path = self.path_of(key)
        if path is None or not _round_trips(samples):
            return
        try:
            data = encode(key, samples)
            with atomic_output(path) as fh:
                fh.write(data)
        except (OutputError, ConfigError, OSError) as exc:
            self._warn(f"cannot write {path.parent} ({exc}); samples are kept in memory only")
            return
        prune(path.parent, self.disk_bytes, keep=path)


def _unlink_regular(path: Path) -> None:
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()
    except OSError:
        pass


def prune(folder: Path, bound: int, keep: Path) -> list[Path]:
    """Delete the least recently used entries of `folder` (never `keep`, never a link) past `bound` bytes."""
    files: list[CachedFile] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
            files.append((st.st_mtime, st.st_size, Path(entry.path)))
    return shrink_to(files, bound, keep)


_SHARED: dict[tuple[Path | None, int], SampleCache] = {}


def shared_sample_cache() -> SampleCache:
    """The process-wide cache for the current settings: every model of a run shares it."""
    settings = (default_folder(), _disk_bytes())
    held = _SHARED.get(settings)
    if held is None:
        held = _SHARED[settings] = SampleCache(*settings)
    return held


def clear_memory() -> None:
    """Forget every process-wide cache and its memory level (tests that patch a builder start from nothing)."""
    _SHARED.clear()
