"""The shipped coreference corpora: two tar.xz archives in `data_builders/corpora/`, pinned by sha256.

`shipped_root()` verifies each archive against its pin and unpacks it once into
`longctx_eval.models.assets.cache_dir()/coref/<pins>/`, which then holds `litbank/` and `ontogum/` in their upstream
layout. Provenance, licences and attribution: `data_builders/corpora/LICENSES.md`. The archives are made by
`python -m data_builders.coref.make_archives SRC` from a folder with the same layout (see that module).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from longctx_eval.errors import DataError, PrerequisiteError
from longctx_eval.models.assets import file_sha256

ARCHIVE_DIR = Path(__file__).resolve().parent / "corpora"
_MARKER = "longctx_archives.json"


@dataclass(frozen=True)
class Archive:
    """One shipped corpus: its archive file, the sha256 pinned here and the files (globs) it holds."""

    name: str
    sha256: str
    members: tuple[str, ...]  # globs relative to the source folder, as `make_coref_archives` selects them

    @property
    def path(self) -> Path:
        """Where the archive lives in the package."""
        return ARCHIVE_DIR / f"{self.name}.tar.xz"


ARCHIVES = (
    Archive(
        "litbank",
        "7e3906459fca946b8c0fb7df58e59b64ed4c6f955276f7340b5a9dc660449e82",
        (
            "litbank/README.md",
            "litbank/SOURCE.md",
            "litbank/coref/conll/*.conll",
            "litbank/splits/litbank_tenfold_splits/*/*.ids",
        ),
    ),
    Archive(
        "ontogum",
        "a124f2d624ff3bd6f5ffb0c98116e57787793384bc16798db9085b17207a64c5",
        (
            "ontogum/LICENSE.txt",
            "ontogum/SOURCE.md",
            "ontogum/splits.md",
            "ontogum/docs.tsv",
            "ontogum/conll2012/*.conll",
            "ontogum/conll2012/make_conll2012.py",
            "ontogum/coref/ontogum/README.md",
            "ontogum/coref/ontogum/conll/*.conll",
        ),
    ),
)


def verify(archive: Archive) -> None:
    """PrerequisiteError when the archive is missing, DataError when its sha256 differs from the pin."""
    if not archive.path.is_file():
        raise PrerequisiteError(
            f"{archive.path} is missing; expected the shipped {archive.name} corpus (reinstall longctx-eval, "
            "or set $LONGCTX_COREF_DATA to a folder holding litbank/ and ontogum/)"
        )
    got = file_sha256(archive.path)
    if got != archive.sha256:
        raise DataError(
            f"{archive.path}: sha256 {got} differs from the pinned {archive.sha256}; expected the archive "
            "shipped with this version (rebuild it with `python -m data_builders.coref.make_archives`)"
        )


def _unpacked(root: Path, pins: dict[str, str]) -> bool:
    """True when `root` holds a complete unpack of exactly these archives (its marker is written last)."""
    try:
        return json.loads((root / _MARKER).read_text(encoding="utf-8")) == pins
    except (OSError, ValueError):
        return False


def shipped_root() -> Path:
    """The folder holding `litbank/` and `ontogum/`, unpacked once from the verified archives into the cache."""
    from longctx_eval.models.assets import cache_dir

    pins = {a.name: a.sha256 for a in ARCHIVES}
    key = hashlib.sha256(json.dumps(pins, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_dir() / "coref" / key
    if _unpacked(root, pins):
        return root
    for archive in ARCHIVES:
        verify(archive)
    tmp = root.with_name(f"{root.name}.tmp{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for archive in ARCHIVES:
            with tarfile.open(archive.path, "r:xz") as tar:
                tar.extractall(tmp, filter="data")
        (tmp / _MARKER).write_text(json.dumps(pins, sort_keys=True), encoding="utf-8")
        try:
            tmp.rename(root)
        except OSError:
            if _unpacked(root, pins):  # another process finished first
                return root
            shutil.rmtree(root)  # an interrupted or damaged earlier unpack
            tmp.rename(root)
    except (OSError, tarfile.TarError) as exc:
        raise PrerequisiteError(f"cannot unpack the coreference corpora into {root}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
