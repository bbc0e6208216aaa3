"""The index cache folder's byte bound: least recently used `.npz` files go first, links never followed.

One bound covers the whole folder: the index entries (`<folder>/<ab>/<key>.npz`) and the chunk-vector packs
below it (`<folder>/embeddings/<namespace>/<pack>.npz`), so `LONGCTX_EVAL_INDEX_CACHE_MB` is what the folder
holds at most. A read refreshes a file's modification time (its last use). Index entries go before packs
(each in least-recently-used order): an entry is assembled again from the packs and the term counts in well
under a second, while a pruned pack means embedding its chunks again, and the 1M-token BM25 entries of the
reference suite (6 MB each, hundreds of them) would otherwise push every pack out. The walk never enters a linked
folder and never counts or deletes a link, so nothing outside the folder is ever deleted; temporary files of
writes in progress (`.name.tmp`) are left alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from longctx_eval.byte_bound import CachedFile, shrink_to

MAX_DEPTH = 3
"""`<folder>/embeddings/<namespace>/<pack>.npz` is the deepest file the cache writes."""


def cached_files(root: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of every regular `.npz` file up to `MAX_DEPTH` levels below `root`."""
    out: list[tuple[float, int, Path]] = []
    stack = [(root, 1)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                stack.append((Path(entry.path), depth + 1))
            elif stat.S_ISREG(st.st_mode) and entry.name.endswith(".npz") and not entry.name.startswith("."):
                out.append((st.st_mtime, st.st_size, Path(entry.path)))
    return out


PACKS = "embeddings"
"""The folder below the cache root that holds the chunk-vector packs."""


RESCAN_WRITES = 64
"""After a write, the folder is listed again at the latest this many writes (of this process) after the last
listing, even when its own writes alone keep it under the bound: what other processes wrote is seen then."""

_held: dict[tuple[Path, int], list[int]] = {}
"""Per (folder, bound): [bytes it held after this process last listed it, plus this process's writes since;
writes since]."""


def prune(root: Path, bound: int, keep: Path, added: int | None = None) -> list[Path]:
    """Delete files below `root` (never `keep`), index entries before packs and each least recently used
    first, until they hold at most `bound` bytes; the paths deleted.

    With `added` (the bytes just written to `keep`), the folder is listed only when the bytes it held at the
    last listing plus this process's writes since exceed `bound`, or RESCAN_WRITES writes after that listing:
    listing thousands of entries after every write cost the reference suite's retrievers about 0.2 s a request.
    Without it, always."""
    held = _held.get((root, bound))
    if added is not None and held is not None:
        held[0] += added
        held[1] += 1
        if held[0] <= bound and held[1] < RESCAN_WRITES:
            return []

    def order(item: CachedFile) -> tuple[bool, float, str]:
        used, _, path = item
        return (path.relative_to(root).parts[0] == PACKS, used, str(path))

    files = cached_files(root)
    deleted = shrink_to(files, bound, keep, order)
    gone = set(deleted)
    _held[(root, bound)] = [sum(size for _, size, path in files if path not in gone), 0]
    return deleted


def written_size(path: Path) -> int | None:
    """Bytes of the file just written, for `prune(added=)` (None, so the folder is listed, when unreadable)."""
    try:
        return path.stat(follow_symlinks=False).st_size
    except OSError:
        return None
