"""Rebuild the shipped coreference archives from a source folder: `python -m data_builders.coref.make_archives SRC`.

SRC holds `litbank/` and `ontogum/` in the layout their SOURCE.md files describe (upstream LitBank at
commit 3e50db0 with the lrec2020-coref fold lists; GUM V11.1.0's OntoGUM layer, CC BY / CC BY-SA documents
only, with the derived `conll2012/` files). Only the files `coref_archives.ARCHIVES` names are packed: the
CoNLL files, split lists and document table the readers use, and the README, SOURCE, LICENSE files that
carry provenance and licences. The tar is deterministic (sorted names, mtime 0, owner root, mode 0644,
xz preset 9e), so the same files and liblzma give the same bytes; the script prints each archive's size
and sha256, which must then be pinned in `coref_archives.ARCHIVES`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

from data_builders.coref.archives import ARCHIVE_DIR, ARCHIVES, Archive


def select(src: Path, archive: Archive) -> list[str]:
    """Relative paths (POSIX, sorted) of the source files the archive holds; each glob must match."""
    found: set[str] = set()
    for pattern in archive.members:
        hits = [p for p in src.glob(pattern) if p.is_file()]
        if not hits:
            raise SystemExit(f"{src}: {pattern!r} matches no file; expected the layout of {archive.name}/SOURCE.md")
        found.update(p.relative_to(src).as_posix() for p in hits)
    return sorted(found)


def pack(src: Path, names: Sequence[str]) -> bytes:
    """A deterministic tar.xz of `names` (relative to `src`)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            data = (src / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME)


def main(argv: Sequence[str] | None = None) -> int:
    """Write every archive from SRC into --out and print its size and sha256."""
    parser = argparse.ArgumentParser(prog="python -m data_builders.coref.make_archives", description=__doc__)
    parser.add_argument("src", type=Path, help="folder holding litbank/ and ontogum/")
    parser.add_argument("--out", type=Path, default=ARCHIVE_DIR, help=f"where to write (default {ARCHIVE_DIR})")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for archive in ARCHIVES:
        names = select(args.src, archive)
        data = pack(args.src, names)
        (args.out / archive.path.name).write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        state = "matches the pin" if digest == archive.sha256 else "NEW: pin it in coref_archives.ARCHIVES"
        print(f"{archive.path.name}: {len(names)} files, {len(data):,} bytes, sha256 {digest} ({state})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
