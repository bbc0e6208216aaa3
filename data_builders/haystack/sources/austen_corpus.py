"""The `austen` corpus recipe: Austen's six novels and Moby Dick, from two pinned Debian packages of R data."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_builders.haystack.sources.debfile import deb_files, read_lazyload
from longctx_eval.errors import DataError


@dataclass(frozen=True)
class DebPin:
    """A Debian package holding R data: its pinned file and the sha256 of the R data files inside."""

    package: str
    version: str
    filename: str  # of the pinned build, in Debian 12 "bookworm"
    sha256: str  # of that .deb
    r_package: str  # R's name for it: the data lives in usr/lib/R/site-library/<r_package>/data
    rdb_sha256: str  # Rdata.rdb and Rdata.rdx: the same bytes in every architecture's build
    rdx_sha256: str

    @property
    def data_dir(self) -> str:
        return f"usr/lib/R/site-library/{self.r_package}/data"


JANEAUSTENR = DebPin(
    package="r-cran-janeaustenr",
    version="1.0.0-1",
    filename="r-cran-janeaustenr_1.0.0-1_all.deb",
    sha256="df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95",
    r_package="janeaustenr",
    rdb_sha256="8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21",
    rdx_sha256="cab8cbe4ce965d3b42b35c03383bafccc0eb78151f70e4748ead45270470c22f",
)
TOKENIZERS = DebPin(
    package="r-cran-tokenizers",
    version="0.3.0-1",
    filename="r-cran-tokenizers_0.3.0-1_amd64.deb",  # compiled code inside, so one file per architecture
    sha256="6312f013ebfde5650235bfd7ba5c44d9e4cf9f2da9855337c9483fe778f0d8c7",
    r_package="tokenizers",
    rdb_sha256="2a7581d1d9c2f49fd8c8493e556f984f4a5cdc071eeb6248b0fa719be6b088fe",
    rdx_sha256="597c9d0f30a6fd0f70a87130d5b424e6cf690894efd8ac283e75cd44d58847cd",
)
PINS = (JANEAUSTENR, TOKENIZERS)

# Publication order of the novels, then Moby Dick.
NOVELS = ("prideprejudice", "sensesensibility", "emma", "mansfieldpark", "northangerabbey", "persuasion")
# The corpus file built by `build_corpus`; every dataset built from `austen` records this hash.
CORPUS_SHA256 = "dec4584d66eebc2ecddbc57e73542c7c14ca4081b626a45886c85a068349c963"
RECIPE_VERSION = "1"

_PG_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG EBOOK.*$", re.MULTILINE)
_PG_END = re.compile(r"^(End of (the )?Project Gutenberg|\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG)", re.MULTILINE)


def paragraphs_from_lines(lines: list[str]) -> list[str]:
    """Unwrap hard-wrapped lines: blank lines end a paragraph, the lines of one are stripped and joined by spaces."""
    out: list[str] = []
    current: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped:
            current.append(stripped)
        elif current:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return out


def strip_gutenberg(text: str, where: str) -> str:
    """The body of a Project Gutenberg text: after the START line, before the END line, credits removed."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    start, end = _PG_START.search(text), _PG_END.search(text)
    if start is None or end is None or end.start() < start.end():
        raise DataError(f"{where}: no Project Gutenberg START/END markers where expected")
    body = text[start.end() + 1 : end.start()]
    # The transcriber credit right after the header is PG front matter, not the book.
    return re.sub(r"^Produced by [^\n]*\n", "", body, count=1, flags=re.MULTILINE)


def _verified_data(path: Path, pin: DebPin) -> dict[str, bytes]:
    """The two R data files of `pin` from the .deb at `path`, checked against the pinned hashes."""
    names = {f"{pin.data_dir}/Rdata.rdb", f"{pin.data_dir}/Rdata.rdx"}
    files = deb_files(path, names)
    for suffix, want in (("rdb", pin.rdb_sha256), ("rdx", pin.rdx_sha256)):
        got = hashlib.sha256(files[f"{pin.data_dir}/Rdata.{suffix}"]).hexdigest()
        if got != want:
            raise DataError(
                f"{path}: {pin.data_dir}/Rdata.{suffix} has sha256 {got}, expected {want} "
                f"({pin.package} {pin.version}); another version of the package holds other data"
            )
    return {suffix: files[f"{pin.data_dir}/Rdata.{suffix}"] for suffix in ("rdb", "rdx")}


def _lines(obj: Any, where: str) -> list[str]:
    if not hasattr(obj, "__len__") or not all(isinstance(x, str) for x in obj):  # numpy str_ is a str
        raise DataError(f"{where}: expected a character vector, got {type(obj).__name__}")
    return [str(x) for x in obj]


def build_corpus(janeaustenr_deb: Path, tokenizers_deb: Path) -> str:
    """The corpus text: paragraphs joined by blank lines, ending with a newline; deterministic."""
    ja = _verified_data(janeaustenr_deb, JANEAUSTENR)
    tk = _verified_data(tokenizers_deb, TOKENIZERS)
    books = read_lazyload(ja["rdx"], ja["rdb"], f"{janeaustenr_deb.name}:Rdata")
    moby = read_lazyload(tk["rdx"], tk["rdb"], f"{tokenizers_deb.name}:Rdata")
    paragraphs: list[str] = []
    for name in NOVELS:
        if name not in books:
            raise DataError(f"{janeaustenr_deb}: no R object {name!r} (found {sorted(books)})")
        paragraphs += paragraphs_from_lines(_lines(books[name], name))
    mobydick = _lines(moby.get("mobydick", ()), "mobydick")
    if len(mobydick) != 1:
        raise DataError(f"{tokenizers_deb}: expected 'mobydick' as one string, got {len(mobydick)} elements")
    paragraphs += paragraphs_from_lines(strip_gutenberg(mobydick[0], "mobydick").split("\n"))
    return "\n\n".join(paragraphs) + "\n"
