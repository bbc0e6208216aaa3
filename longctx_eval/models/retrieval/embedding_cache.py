"""Chunk embeddings shared across documents: one vector per (encoder, chunk text), in memory and on disk.

Samples that share a haystack (the needle family puts one needle at many depths of one haystack) share almost
every chunk, so a dense retriever embeds each distinct chunk text once and looks the others up. Keys:

- **namespace**: sha256 of what the vector depends on besides the text: the encoder's identity (weights
  sha256, `max_seq_length`, dtype, device, batch size, normalisation, the encoding scheme, its prompt and
  pooling modules) and this cache's format (`namespace_key`);
- **chunk**: sha256 of the chunk's UTF-8 text.

A vector from the cache is bit-for-bit the one a fresh encoding gives, because the dense indexer's encoding is
canonical (`models/retrieval/dense.py`, `encode_canonical`): a text's vector never depends on the other texts in its
batch. Memory: an LRU of rows bounded in bytes, per process. Disk: `<index cache>/embeddings/<namespace
key>/<pack key>.npz`, one *pack* per encoding call (the chunks that were missing), written atomically; one
byte bound covers the index cache's folder, its entries and these packs together, least recently used files
deleted first (`cache_bound.py`, never through a link).

Nothing read from disk is trusted as is. A pack records its key (the sha256 of its namespace key and its
chunk digests, also its file name), its namespace, the sha256 of its digest and vector bytes and the shape
and dtype of both arrays; a read checks all of them, that every vector is finite and (for a normalising
encoder) of unit length. A pack that fails is one warning, is deleted, and its chunks are embedded again. A
symbolic link below the cache root (the `embeddings` folder, a namespace folder, a pack) is never read or
written through: one warning, and the disk level is off (a link as a pack is skipped). An unwritable folder
costs one warning per process (one in all with the index cache's entries); the run goes on from memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from longctx_eval.atomic_io import atomic_output
from longctx_eval.errors import LongctxError
from longctx_eval.hashing import sha256_json
from longctx_eval.models.retrieval.cache_bound import prune, written_size
from longctx_eval.progress import console, console_text

FORMAT = 1
FOLDER = "embeddings"
"""The cache's folder inside the index cache's folder."""
MEMORY_BYTES = 512 << 20
"""In-process budget for vectors: about 350,000 MiniLM vectors (1.5 KB each), 34 documents of 1M tokens."""
PROVENANCE = "__built_from__"
DIGEST_BYTES = 32
UNIT_TOLERANCE = 1e-3
"""A normalising encoder's vectors read back from disk must have a norm within this of 1."""
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

Embed = Callable[[list[str]], np.ndarray]
"""Texts in, one float32 row per text out."""


@dataclass
class Reuse:
    """Where the vectors of one lookup came from: embedded now, this process's memory, or the disk packs."""

    embedded: int = 0
    memory: int = 0
    disk: int = 0

    @property
    def looked_up(self) -> int:
        return self.memory + self.disk

    def add(self, other: Reuse) -> None:
        self.embedded += other.embedded
        self.memory += other.memory
        self.disk += other.disk

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class UnusablePack(Exception):
    """A pack that cannot be used; the message says why."""


def text_digest(text: str) -> bytes:
    """The chunk key: sha256 of the text's UTF-8 bytes (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def namespace_key(namespace: Mapping[str, Any]) -> str:
    """The key of everything a vector depends on besides its text."""
    return sha256_json({"format": FORMAT, "namespace": _normalised(namespace)})


def pack_key(ns_key: str, digests: np.ndarray) -> str:
    """A pack's key and file name: sha256 of its namespace key and its chunk digests, in order."""
    h = hashlib.sha256(ns_key.encode("ascii"))
    h.update(np.ascontiguousarray(digests, dtype=np.uint8).tobytes())
    return h.hexdigest()


class EmbeddingCache:
    """Vectors by (namespace, chunk text): an LRU in memory over an optional folder of verified packs."""

    def __init__(
        self,
        folder: Path | None,
        disk_bytes: int,
        memory_bytes: int = MEMORY_BYTES,
        bound_root: Path | None = None,
        on_unwritable: Callable[[str], None] | None = None,
    ) -> None:
        self.folder = folder
        """`<index cache>/embeddings`, or None for memory only."""
        self.disk_bytes = disk_bytes
        self.bound_root = bound_root
        """The folder `disk_bytes` bounds (the index cache's, packs and entries together); None: `folder`."""
        self.on_unwritable = on_unwritable
        """Who says the folder cannot be written (the index cache, once for both); None: this cache's warning."""
        self.memory_bytes = memory_bytes
        self._rows: OrderedDict[tuple[str, bytes], np.ndarray] = OrderedDict()
        self._held = 0
        self._packs: dict[str, _Packs] = {}
        self.totals = Reuse()
        """Every lookup of this process added up."""
        self.warnings: list[str] = []
        self._disk_off = False
        self._write_failed = False

    # -- lookups ---------------------------------------------------------------------------------------

    def vectors(
        self,
        namespace: Mapping[str, Any],
        texts: Sequence[str],
        embed: Embed,
        *,
        dim: int | None = None,
        unit: bool = False,
    ) -> tuple[np.ndarray, Reuse]:
        """One float32 row per text: from memory, else from a disk pack, else `embed(missing texts)` (each
        distinct missing text once, in order of first appearance), which is then remembered and written as one
        pack. `dim` and `unit` (vectors of norm 1) are what a pack read back must satisfy."""
        ns = namespace_key(namespace)
        digests = [text_digest(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        reuse = Reuse()
        wanted: dict[bytes, int] = {}  # digest -> first index among texts
        for i, d in enumerate(digests):
            if d in found or d in wanted:
                continue
            row = self._rows.get((ns, d))
            if row is not None:
                self._rows.move_to_end((ns, d))
                found[d] = row
                reuse.memory += 1
            else:
                wanted[d] = i
        if wanted:
            for d, row in self._from_disk(ns, namespace, list(wanted), dim, unit).items():
                found[d] = row
                self._remember(ns, d, row)
                reuse.disk += 1
                del wanted[d]
        if wanted:
            missing = list(wanted)
            fresh = np.asarray(embed([texts[wanted[d]] for d in missing]), dtype=np.float32)
            if fresh.ndim != 2 or fresh.shape[0] != len(missing):
                raise ValueError(f"the encoder returned shape {fresh.shape}; expected ({len(missing)}, dim)")
            for d, row in zip(missing, fresh, strict=True):
                found[d] = row
                self._remember(ns, d, row)
            reuse.embedded = len(missing)
            self._write(ns, namespace, missing, fresh)
        self.totals.add(reuse)
        if not texts:
            return np.zeros((0, dim or 0), dtype=np.float32), reuse
        return np.stack([found[d] for d in digests]).astype(np.float32, copy=False), reuse

    def forget_memory(self) -> None:
        """Drop every vector held in memory and what is known of the disk (as a new process would start)."""
        self._rows.clear()
        self._held = 0
        self._packs.clear()

    def _remember(self, ns: str, digest: bytes, row: np.ndarray) -> None:
        row = np.array(row, dtype=np.float32, copy=True)  # never a view that keeps a whole pack alive
        key = (ns, digest)
        old = self._rows.pop(key, None)
        if old is not None:
            self._held -= old.nbytes
        self._rows[key] = row
        self._held += row.nbytes
        while self._held > self.memory_bytes and self._rows:
            _, dropped = self._rows.popitem(last=False)
            self._held -= dropped.nbytes

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)

    # -- disk ------------------------------------------------------------------------------------------

    def _namespace_folder(self, ns: str) -> Path | None:
        """`embeddings/<ns>`, or None when the disk level is off (or a link below the cache root turned it off)."""
        if self.folder is None or self._disk_off:
            return None
        root = self.folder
        for path in (root, root / ns):
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    self._disk_off = True
                    self._warn(
                        f"embedding cache {path} is a symbolic link; the embedding cache is never read or written "
                        "through links, so it keeps vectors in memory only in this process"
                    )
                    return None
            except OSError:  # missing (created on the first write), or a file in the way (the write warns)
                break
        return root / ns

    def _from_disk(
        self, ns: str, namespace: Mapping[str, Any], wanted: list[bytes], dim: int | None, unit: bool
    ) -> dict[bytes, np.ndarray]:
        folder = self._namespace_folder(ns)
        if folder is None:
            return {}
        packs = self._packs.setdefault(ns, _Packs())
        if not packs.scanned_at(folder) or any(d not in packs.where for d in wanted):
            self._scan(folder, ns, namespace, packs)
        by_pack: dict[Path, list[bytes]] = {}
        for d in wanted:
            path = packs.where.get(d)
            if path is not None:
                by_pack.setdefault(path, []).append(d)
        out: dict[bytes, np.ndarray] = {}
        for path, ds in by_pack.items():
            try:
                digests, vectors = _load_pack(path, ns, namespace, dim, unit)
            except FileNotFoundError:  # pruned by another process since the scan
                packs.drop(path)
                continue
            except UnusablePack as exc:
                self._warn(f"embedding cache pack {path} {exc}; it is deleted and its chunks are embedded again")
                packs.drop(path)
                with contextlib.suppress(OSError):
                    if stat.S_ISREG(os.lstat(path).st_mode):
                        path.unlink()
                continue
            rows = {bytes(d): v for d, v in zip(digests, vectors, strict=True)}
            for d in ds:
                if d in rows:
                    out[d] = rows[d]
            with contextlib.suppress(OSError):
                os.utime(path)  # last use, for the size bound
        return out

    def _scan(self, folder: Path, ns: str, namespace: Mapping[str, Any], packs: _Packs) -> None:
        """Read the digests of every pack not seen yet (checking its record), so lookups know where rows are."""
        try:
            mtime = os.stat(folder).st_mtime_ns
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.name.endswith(".npz") or entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if path in packs.seen:
                continue
            packs.seen.add(path)
            if entry.is_symlink():
                self._warn(f"embedding cache pack {path} is a symbolic link; it is skipped (never read through links)")
                continue
            try:
                digests = _pack_digests(path, ns, namespace)
            except FileNotFoundError:
                continue
            except UnusablePack as exc:
                self._warn(f"embedding cache pack {path} {exc}; it is deleted and its chunks are embedded again")
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            for d in digests:
                packs.where.setdefault(bytes(d), path)
        packs.mtime = mtime

    def _write(self, ns: str, namespace: Mapping[str, Any], digests: list[bytes], vectors: np.ndarray) -> None:
        folder = self._namespace_folder(ns)
        if folder is None or self._write_failed:
            return
        dig = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), DIGEST_BYTES)
        vec = np.ascontiguousarray(vectors, dtype=np.float32)
        key = pack_key(ns, dig)
        path = folder / f"{key}.npz"
        record = _record(key, ns, namespace, dig, vec)
        try:
            with atomic_output(path) as fh:
                provenance: dict[str, Any] = {PROVENANCE: np.asarray(json.dumps(record, sort_keys=True))}
                np.savez(fh, digests=dig, vectors=vec, **provenance)
        except (OSError, LongctxError) as exc:  # read-only folder, a file in the way, a full disk, a link
            self._write_failed = True
            text = f"embedding cache {self.folder} cannot be written ({exc}); vectors are kept in memory only"
            (self.on_unwritable or self._warn)(text)
            return
        packs = self._packs.setdefault(ns, _Packs())
        packs.seen.add(path)
        for d in digests:
            packs.where.setdefault(d, path)
        self._prune(keep=path)

    def _prune(self, keep: Path) -> None:
        """Delete the least recently used files below the bound's root until they hold at most `disk_bytes`
        (`cache_bound.py`: the index cache's entries count too when this cache is its `embeddings()`)."""
        assert self.folder is not None
        for path in prune(self.bound_root or self.folder, self.disk_bytes, keep, added=written_size(keep)):
            for packs in self._packs.values():
                packs.drop(path)


class _Packs:
    """What one process knows of one namespace's folder: the packs read, and which pack holds each digest."""

    def __init__(self) -> None:
        self.where: dict[bytes, Path] = {}
        self.seen: set[Path] = set()
        self.mtime: int | None = None

    def scanned_at(self, folder: Path) -> bool:
        """Whether the folder is unchanged since the last scan (no pack added or removed)."""
        try:
            return self.mtime is not None and os.stat(folder).st_mtime_ns == self.mtime
        except OSError:
            return True

    def drop(self, path: Path) -> None:
        for d in [d for d, p in self.where.items() if p == path]:
            del self.where[d]


def _normalised(value: Mapping[str, Any]) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _described(array: np.ndarray) -> dict[str, Any]:
    return {"shape": list(array.shape), "dtype": array.dtype.str}


def _record(key: str, ns: str, namespace: Mapping[str, Any], digests: np.ndarray, vectors: np.ndarray) -> dict:
    return {
        "format": FORMAT,
        "key": key,
        "namespace_key": ns,
        "namespace": _normalised(namespace),
        "arrays": {"digests": _described(digests), "vectors": _described(vectors)},
        "digests_sha256": _sha(digests),
        "vectors_sha256": _sha(vectors),
    }


def _open_npz(path: Path) -> Any:
    """The pack at `path` opened without following a link (ELOOP is reported as unusable)."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnusablePack(f"cannot be opened ({exc.strerror})") from exc
    fh = os.fdopen(fd, "rb")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusablePack("is not a regular file")
        if os.fstat(fd).st_size == 0:
            raise UnusablePack("is empty (0 bytes)")
        try:
            return np.load(fh, allow_pickle=False), fh
        except Exception as exc:  # an untrusted file: whatever np.load raises
            raise UnusablePack(f"is unreadable ({type(exc).__name__}: {exc})") from exc
    except BaseException:
        fh.close()
        raise


def _checked_record(npz: Any, path: Path, ns: str, namespace: Mapping[str, Any]) -> dict:
    try:
        if set(npz.files) != {"digests", "vectors", PROVENANCE}:
            raise UnusablePack(f"holds {sorted(npz.files)}, not digests, vectors and its record")
        raw = npz[PROVENANCE]
    except UnusablePack:
        raise
    except Exception as exc:
        raise UnusablePack(f"is unreadable ({type(exc).__name__}: {exc})") from exc
    if raw.shape != () or raw.dtype.kind != "U":
        raise UnusablePack("has no readable record of what it holds")
    try:
        record = json.loads(str(raw))
    except ValueError as exc:
        raise UnusablePack(f"has an unreadable record ({exc})") from exc
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise UnusablePack("was written in another format")
    if record.get("namespace_key") != ns or record.get("namespace") != _normalised(namespace):
        raise UnusablePack("holds vectors of another encoder or settings (a copied file?)")
    if record.get("key") != path.stem:
        raise UnusablePack(f"records the key {str(record.get('key'))[:12]}…, not its file name's")
    return record


def _digests_of(npz: Any, record: dict, ns: str) -> np.ndarray:
    try:
        digests = npz["digests"]
    except Exception as exc:
        raise UnusablePack(f"is unreadable ({type(exc).__name__}: {exc})") from exc
    if digests.dtype != np.uint8 or digests.ndim != 2 or digests.shape[1] != DIGEST_BYTES:
        raise UnusablePack(f"has digests of shape {digests.shape} and dtype {digests.dtype}")
    if record.get("arrays", {}).get("digests") != _described(digests) or record.get("digests_sha256") != _sha(digests):
        raise UnusablePack("has digests that differ from those it recorded")
    if pack_key(ns, digests) != record["key"]:
        raise UnusablePack("has a key that is not the hash of its digests")
    return digests


def _pack_digests(path: Path, ns: str, namespace: Mapping[str, Any]) -> np.ndarray:
    """The chunk digests of the pack at `path`, once its record and digests check out (vectors not read)."""
    npz, fh = _open_npz(path)
    with fh, npz:
        return _digests_of(npz, _checked_record(npz, path, ns, namespace), ns)


def _load_pack(
    path: Path, ns: str, namespace: Mapping[str, Any], dim: int | None, unit: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Digests and vectors of the pack at `path`, every check passed (see the module docstring)."""
    npz, fh = _open_npz(path)
    with fh, npz:
        record = _checked_record(npz, path, ns, namespace)
        digests = _digests_of(npz, record, ns)
        try:
            vectors = npz["vectors"]
        except Exception as exc:
            raise UnusablePack(f"is unreadable ({type(exc).__name__}: {exc})") from exc
    if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != len(digests):
        raise UnusablePack(f"has vectors of shape {vectors.shape} and dtype {vectors.dtype} for {len(digests)} chunks")
    if dim is not None and vectors.shape[1] != dim:
        raise UnusablePack(f"has vectors of dimension {vectors.shape[1]}, expected {dim}")
    if record.get("arrays", {}).get("vectors") != _described(vectors) or record.get("vectors_sha256") != _sha(vectors):
        raise UnusablePack("has vectors that differ from those it recorded")
    if not np.isfinite(vectors).all():
        raise UnusablePack("has vectors that are not finite")
    if unit and len(vectors) and float(np.abs(np.linalg.norm(vectors, axis=1) - 1.0).max()) > UNIT_TOLERANCE:
        raise UnusablePack("has vectors that are not of unit length")
    return digests, vectors
