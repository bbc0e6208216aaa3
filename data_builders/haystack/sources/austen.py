"""The `austen` haystack source: fetch two pinned Debian packages once, build and cache the corpus, serve paragraphs."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from data_builders.haystack.sources.austen_corpus import CORPUS_SHA256, PINS, RECIPE_VERSION, DebPin, build_corpus
from longctx_eval.errors import DataError, PrerequisiteError
from longctx_eval.models.assets import cache_dir, file_sha256

DEBS_ENV = "LONGCTX_EVAL_PROSE_DEBS"
CORPUS_NAME = f"austen-melville-v{RECIPE_VERSION}.txt"
_DOWNLOAD_URLS = (
    "https://packages.debian.org/bookworm/all/r-cran-janeaustenr/download",
    "https://packages.debian.org/bookworm/amd64/r-cran-tokenizers/download",
)


def prose_dir() -> Path:
    """Cache folder of the corpus and its .deb files: <cache_dir>/prose."""
    return cache_dir() / "prose"


def corpus_path() -> Path:
    """Where the built corpus is cached."""
    return prose_dir() / CORPUS_NAME


def how_to_get() -> str:
    """The ways to get the corpus, for error messages."""
    return (
        "run `python -m data_builders.haystack.sources.fetch_prose` (on Debian/Ubuntu it uses `apt-get download`); "
        f"elsewhere download the two .deb files ({', '.join(_DOWNLOAD_URLS)}) into a folder and set {DEBS_ENV} to it "
        "before running it; or use another haystack source: files:<glob> (e.g. the same books as Project "
        "Gutenberg .txt files) or synthetic"
    )


def _find_deb(folder: Path, pin: DebPin) -> Path | None:
    """The pinned file in `folder`, else (another architecture's build) any `<package>_<version>_*.deb`."""
    exact = folder / pin.filename
    if exact.is_file():
        return exact
    found = sorted(folder.glob(f"{pin.package}_{pin.version}_*.deb"))
    return found[0] if found else None


def _apt_download(pin: DebPin, dest: Path) -> Path:
    """`apt-get download` the pinned version into `dest` (falls back to the candidate version, checked later)."""
    if shutil.which("apt-get") is None:
        raise PrerequisiteError(
            f"the 'austen' corpus needs {pin.package}, and apt-get is not available: {how_to_get()}"
        )
    errors = []
    # A fresh Debian machine may have no package lists yet; as root, refresh them once and try again.
    refresh = [None, ["apt-get", "update", "-qq"]] if hasattr(os, "geteuid") and os.geteuid() == 0 else [None]
    for update in refresh:
        if update is not None:
            subprocess.run(update, capture_output=True, text=True, check=False)
        for target in (f"{pin.package}={pin.version}", pin.package):
            run = subprocess.run(["apt-get", "download", target], cwd=dest, capture_output=True, text=True)
            found = _find_deb(dest, pin) or next(iter(sorted(dest.glob(f"{pin.package}_*.deb"))), None)
            if run.returncode == 0 and found is not None:
                return found
            last = (run.stderr or run.stdout).strip().splitlines()[-1:] or [f"exit status {run.returncode}"]
            errors.append(f"`apt-get download {target}`: {last[0]}")
    hint = " (the package lists may be missing: run `apt-get update` as root first)"
    raise PrerequisiteError(f"could not download {pin.package}{hint}; {'; '.join(errors)}. Or: {how_to_get()}")


def _debs(download: bool) -> list[Path]:
    """The two .deb files: from $LONGCTX_EVAL_PROSE_DEBS, the cache, or (download=True) apt-get."""
    env = os.environ.get(DEBS_ENV)
    folder = Path(env).expanduser() if env else prose_dir() / "debs"
    if env and not folder.is_dir():
        raise PrerequisiteError(f"{DEBS_ENV}={env!r} is not a folder; expected one holding the two .deb files")
    out = []
    for pin in PINS:
        found = _find_deb(folder, pin)
        if found is None and env:
            raise PrerequisiteError(
                f"{DEBS_ENV}={env!r} holds no {pin.filename} (or {pin.package}_{pin.version}_*.deb)"
            )
        if found is None and not download:
            raise PrerequisiteError(f"the 'austen' haystack is not built yet: {how_to_get()}")
        if found is None:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder) as tmp:
                got = _apt_download(pin, Path(tmp))
                found = folder / got.name
                got.replace(found)
        out.append(found)
    return out


def _check_deb(path: Path, pin: DebPin) -> str:
    """The .deb's sha256; an unpinned file (another architecture) is accepted once its R data files match."""
    digest = file_sha256(path)
    if digest != pin.sha256 and path.name == pin.filename:
        raise DataError(f"{path} has sha256 {digest}, expected {pin.sha256}: delete it and fetch again")
    return digest  # other builds: `build_corpus` checks the R data files inside against the pins


def ensure_corpus(download: bool = True) -> tuple[Path, bool]:
    """The cached corpus file, building it first if needed; returns (path, was_cached)."""
    path = corpus_path()
    if path.is_file() and file_sha256(path) == CORPUS_SHA256:
        return path, True
    ja_deb, tk_deb = _debs(download)
    deb_hashes = {p.name: _check_deb(p, pin) for p, pin in zip((ja_deb, tk_deb), PINS, strict=True)}
    text = build_corpus(ja_deb, tk_deb)
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if digest != CORPUS_SHA256:
        raise DataError(
            f"the corpus built from {ja_deb.name} and {tk_deb.name} has sha256 {digest}, expected {CORPUS_SHA256} "
            f"(recipe v{RECIPE_VERSION}); the packages hold other text than the pinned ones"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)  # atomic: a reader never sees half a corpus
    manifest = {"sha256": digest, "recipe": RECIPE_VERSION, "chars": len(text), "debs": deb_hashes}
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path, False


class AustenSource:
    """Austen's six novels and Moby Dick (about 1.2M tokens): each paragraph once, from a seeded start, wrapping."""

    name = "austen"
    sha256 = CORPUS_SHA256
    # The novels are public domain (US, Project Gutenberg texts); the Debian packaging is MIT. The HF hub
    # has no public-domain id, so cards say "other" and explain it in their license section.
    license = "other"
    license_note = (
        "The texts (Austen's six novels, Melville's Moby Dick) are in the public domain; they come from Debian's "
        "packages r-cran-janeaustenr and r-cran-tokenizers, whose packaging is MIT-licensed."
    )

    def __init__(self) -> None:
        path, _ = ensure_corpus(download=False)  # builds from cached .debs; never downloads at build time
        self._paragraphs = path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")

    def paragraphs(self, seed: int) -> Iterator[str]:
        paras = self._paragraphs
        start = random.Random(seed).randrange(len(paras))
        return iter(paras[start:] + paras[:start])
