"""The shipped coreference archives: pinned by sha256, unpacked once into the cache, overridable, rebuildable."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from data_builders.coref import archives as coref_archives
from data_builders.coref.archives import ARCHIVES, shipped_root, verify
from data_builders.coref.splits import data_root, litbank, ontogum
from longctx_eval.errors import DataError, PrerequisiteError


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LONGCTX_EVAL_CACHE", str(cache))
    monkeypatch.delenv("LONGCTX_COREF_DATA", raising=False)
    return cache


def test_archives_match_their_pins_and_the_licence_file() -> None:
    licences = (coref_archives.ARCHIVE_DIR / "LICENSES.md").read_text(encoding="utf-8")
    for archive in ARCHIVES:
        verify(archive)
        assert archive.sha256 in licences and f"{archive.path.stat().st_size:,}" in licences
    assert sorted(p.name for p in coref_archives.ARCHIVE_DIR.glob("*.tar.xz")) == ["litbank.tar.xz", "ontogum.tar.xz"]


def test_unpacked_once_into_the_cache(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = data_root()
    assert root.is_relative_to(fresh_cache / "coref")
    assert len(list((root / "litbank" / "coref" / "conll").glob("*.conll"))) == 100
    assert len(list((root / "ontogum" / "conll2012").glob("*.conll"))) == 150
    for name in ("litbank/SOURCE.md", "litbank/README.md", "ontogum/LICENSE.txt", "ontogum/SOURCE.md"):
        assert (root / name).is_file()

    def no_unpack(*args: object, **kwargs: object) -> None:
        raise AssertionError("unpacked twice")

    monkeypatch.setattr(tarfile, "open", no_unpack)
    assert shipped_root() == root
    assert len(litbank("test").documents) == 10 and len(ontogum("test").documents) == 18
    assert not list(root.parent.glob("*.tmp*"))  # no temporary folder left behind


def test_a_tampered_archive_is_refused(fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "corpora"
    shutil.copytree(coref_archives.ARCHIVE_DIR, copy)
    data = bytearray((copy / "ontogum.tar.xz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "ontogum.tar.xz").write_bytes(bytes(data))
    monkeypatch.setattr(coref_archives, "ARCHIVE_DIR", copy)
    with pytest.raises(DataError, match=r"ontogum.tar.xz: sha256 \w+ differs from the pinned"):
        shipped_root()
    assert not (fresh_cache / "coref").exists() or not any((fresh_cache / "coref").iterdir())
    (copy / "ontogum.tar.xz").unlink()
    with pytest.raises(PrerequisiteError, match="ontogum.tar.xz is missing"):
        shipped_root()


def test_env_var_overrides_the_shipped_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "mine"
    fold = root / "litbank" / "splits" / "litbank_tenfold_splits" / "0"
    fold.mkdir(parents=True)
    (fold / "test.ids").write_text("tiny.tsv\n")
    conll = root / "litbank" / "coref" / "conll"
    conll.mkdir(parents=True)
    (conll / "tiny.conll").write_text("#begin document (tiny); part 0\ntiny\t0\t0\tHe\t(0)\n\n#end document\n")
    monkeypatch.setenv("LONGCTX_COREF_DATA", str(root))
    assert data_root() == root
    (doc,) = litbank("test").documents
    assert doc.tokens == ("He",) and doc.clusters == (((0, 0),),)
    monkeypatch.setenv("LONGCTX_COREF_DATA", str(tmp_path / "nope"))
    with pytest.raises(PrerequisiteError, match="is not a folder"):
        data_root()


@pytest.mark.slow
def test_the_rebuild_script_reproduces_the_pinned_bytes(tmp_path: Path) -> None:
    from data_builders.coref.make_archives import main

    assert main([str(shipped_root()), "--out", str(tmp_path)]) == 0
    for archive in ARCHIVES:
        assert hashlib.sha256((tmp_path / archive.path.name).read_bytes()).hexdigest() == archive.sha256
