"""Read files out of a Debian .deb and objects out of an R lazy-load database, in Python (no dpkg, no R)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longctx_eval.errors import DataError, PrerequisiteError

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER = 60


def ar_members(path: Path) -> dict[str, bytes]:
    """The members of an `ar` archive (a .deb is one: debian-binary, control.tar.*, data.tar.*)."""
    data = path.read_bytes()
    if not data.startswith(_AR_MAGIC):
        raise DataError(f"{path} is not a Debian package (expected an ar archive starting with '!<arch>')")
    members: dict[str, bytes] = {}
    pos = len(_AR_MAGIC)
    while pos + _AR_HEADER <= len(data):
        header = data[pos : pos + _AR_HEADER]
        if header[58:60] != b"`\n":
            raise DataError(f"{path}: corrupt ar header at byte {pos}")
        name = header[:16].decode("ascii").strip().rstrip("/")  # GNU ar ends names with '/'
        size = int(header[48:58].decode("ascii").strip())
        start = pos + _AR_HEADER
        members[name] = data[start : start + size]
        pos = start + size + (size & 1)  # members are padded to an even offset
    return members


def deb_files(path: Path, wanted: set[str]) -> dict[str, bytes]:
    """Contents of the files named in `wanted` (paths as in the package, without './') from data.tar.*."""
    members = ar_members(path)
    data_name = next((n for n in members if n.startswith("data.tar")), None)
    if data_name is None:
        raise DataError(f"{path}: no data.tar.* member (found {sorted(members)})")
    if data_name.endswith(".zst"):
        raise PrerequisiteError(f"{path}: {data_name} is zstd-compressed, which Python 3.11's tarfile cannot read")
    out: dict[str, bytes] = {}
    # Read members in memory: nothing is extracted to disk, so no path in the archive can escape.
    with tarfile.open(fileobj=io.BytesIO(members[data_name]), mode="r:*") as tar:
        for info in tar:
            name = info.name.removeprefix("./")
            if name in wanted and info.isfile():
                fh = tar.extractfile(info)
                assert fh is not None  # a regular file
                out[name] = fh.read()
    missing = wanted - out.keys()
    if missing:
        raise DataError(f"{path}: missing {sorted(missing)} in {data_name}")
    return out


def _unserialize(raw: bytes) -> Any:
    try:
        import rdata
    except ImportError as exc:
        raise PrerequisiteError("reading R data needs `pip install rdata==1.1.0` (part of the project's deps)") from exc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata warns that a bare serialization stream has no file magic
        return rdata.conversion.convert(rdata.parser.parse_data(raw, extension=".rds"))


def _decompress(blob: bytes, compressed: Any, where: str) -> bytes:
    """One value of a lazy-load .rdb: a 4-byte big-endian length, then (types 2 and 3) a type byte, then data."""
    (length,) = struct.unpack(">I", blob[:4])
    kind = int(compressed)
    if kind == 1:  # TRUE: zlib, R's default
        raw = zlib.decompress(blob[4:])
    else:
        tag, body = blob[4:5], blob[5:]
        decoders: dict[bytes, Callable[[bytes], bytes]] = {
            b"Z": lzma.decompress,
            b"2": bz2.decompress,
            b"1": zlib.decompress,
            b"0": bytes,
        }
        if tag not in decoders:
            raise DataError(f"{where}: unknown R compression type {kind}/{tag!r}")
        raw = decoders[tag](body)
    if len(raw) != length:
        raise DataError(f"{where}: decompressed {len(raw)} bytes, the header says {length}")
    return raw


def read_lazyload(rdx: bytes, rdb: bytes, where: str) -> dict[str, Any]:
    """Every object of an R lazy-load database (`Rdata.rdx` index + `Rdata.rdb` values) by name."""
    index = _unserialize(gzip.decompress(rdx))
    compressed = index["compressed"]
    compressed = compressed[0] if hasattr(compressed, "__len__") else compressed
    out: dict[str, Any] = {}
    for name, (offset, size) in index["variables"].items():
        blob = rdb[int(offset) : int(offset) + int(size)]
        out[str(name)] = _unserialize(_decompress(blob, compressed, f"{where}:{name}"))
    return out
