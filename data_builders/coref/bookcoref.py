"""BookCoref (SapienzaNLP, ACL 2025) as its loader assembles it: one book (or one 1,500-word window) per JSONL line.

A record is `{"doc_key" (or "doc_id"), "sentences": [[word, ...], ...], "clusters": [[[start, end], ...], ...],
"characters": ...}`: spans are inclusive word indices over the flattened sentences; clusters are characters only.
The `full` layout holds whole books; the `split` layout cuts them into windows keyed `<book>_split1500_S<k>`.
The files come from the Hugging Face Hub (annotations) and Project Gutenberg (text), joined by BookCoref's own
loader online; nothing here downloads. A malformed line is a DataError naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_builders.coref.conll import CorefDocument
from longctx_eval.errors import ConfigError, DataError

Span = tuple[int, int]

BOOKCOREF_ENV_VAR = "LONGCTX_BOOKCOREF"
LAYOUTS = ("auto", "full", "split")
SPLITS = ("train", "validation", "test")
_SPLIT_KEY = re.compile(r"^(?P<book>.+)_split(?P<size>\d+)_S(?P<part>\d+)$")
BOOKCOREF_HELP = (
    "BookCoref's books are not shipped: its annotations are on the Hugging Face Hub (sapienzanlp/bookcoref) and "
    "its text comes from Project Gutenberg, joined by its own loader online (github.com/SapienzaNLP/bookcoref: "
    "`python download_data.py --output_dir DIR`, or `--configuration splitted` for 1,500-word windows); "
    f"give the JSONL file or DIR with --task-arg coref_book.path=PATH or set ${BOOKCOREF_ENV_VAR}=PATH"
)


@dataclass(frozen=True)
class Book:
    """One record: a whole book (`full`) or one window of it (`split`), its words, sentences and character chains."""

    key: str  # the record's doc_key
    book: str  # the book it belongs to (the key without `_split1500_S<k>`)
    part: int  # the window's index in the split layout; 0 for a whole book
    sentences: tuple[tuple[str, ...], ...]
    clusters: tuple[tuple[Span, ...], ...]
    characters: tuple[str, ...]  # character names where the record gives them
    path: str
    line: int

    @property
    def layout(self) -> str:
        """`split` for a window of a book, `full` for a whole book."""
        return "full" if self.key == self.book else "split"

    @property
    def n_words(self) -> int:
        """Words over all sentences."""
        return sum(len(s) for s in self.sentences)

    def document(self) -> CorefDocument:
        """The record as a coreference document: flattened words, sentence ends, clusters as given."""
        tokens = tuple(w for s in self.sentences for w in s)
        ends, n = [], 0
        for s in self.sentences:
            n += len(s)
            ends.append(n)
        name = f"({self.key}); part 000"
        return CorefDocument(name, tokens, tuple(ends), self.clusters, path=self.path, line=self.line)


def bookcoref_location(path: str | None = None) -> str | None:
    """Where the user's BookCoref files are: `path` when given, else $LONGCTX_BOOKCOREF, else None."""
    return path or os.environ.get(BOOKCOREF_ENV_VAR) or None


def bookcoref_file(path: str, split: str = "test", layout: str = "auto") -> Path:
    """The JSONL file to read: `path` itself, or in a folder `<split>.jsonl` (download_data.py's name), else
    `<split>_split.jsonl` / `<split>_splitted.jsonl`, also under `full/` or `split/` subfolders."""
    if split not in SPLITS:
        raise ConfigError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    if layout not in LAYOUTS:
        raise ConfigError(f"layout: expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    where = Path(path).expanduser()
    if where.is_file():
        return where
    if not where.is_dir():
        raise ConfigError(f"path: {str(where)!r} does not exist; expected a BookCoref JSONL file or its folder")
    full = [f"{split}.jsonl", f"full/{split}.jsonl"]
    windows = [f"{split}_split.jsonl", f"{split}_splitted.jsonl", f"split/{split}_split.jsonl", f"split/{split}.jsonl"]
    names = {"full": full, "split": windows, "auto": full + windows}[layout]
    for name in names:
        if (where / name).is_file():
            return where / name
    raise ConfigError(f"path: {str(where)!r} holds none of {', '.join(names)}; expected BookCoref's {split} file")


def read_bookcoref(path: str | Path) -> list[Book]:
    """Every record of an assembled BookCoref JSONL file, checked; a bad line is a DataError naming line and field."""
    where = Path(path)
    books: list[Book] = []
    seen: dict[str, int] = {}
    for lineno, record in _records(where):
        book = _book(record, str(where), lineno)
        if book.key in seen:
            raise DataError(f"{where}:{lineno}: field 'doc_key': {book.key!r} repeats line {seen[book.key]}")
        seen[book.key] = lineno
        books.append(book)
    if not books:
        raise DataError(f"{where}: no records; expected one BookCoref book per line")
    return books


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    with handle:
        try:
            for lineno, text in enumerate(handle, 1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(record, dict):
                    raise DataError(f"{path}:{lineno}: expected a JSON object per line, got {type(record).__name__}")
                yield lineno, record
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _book(record: dict[str, Any], path: str, line: int) -> Book:
    where = f"{path}:{line}"
    key = record.get("doc_key", record.get("doc_id"))
    if not isinstance(key, str) or not key.strip():
        raise DataError(f"{where}: field 'doc_key': expected the book's id as a non-empty string, got {key!r}")
    sentences = record.get("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise DataError(f"{where}: field 'sentences': expected a non-empty list of word lists")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, list) or not sentence or not all(isinstance(w, str) for w in sentence):
            raise DataError(f"{where}: field 'sentences'[{i}]: expected a non-empty list of strings")
    n = sum(len(s) for s in sentences)
    clusters = record.get("clusters")
    if not isinstance(clusters, list):
        raise DataError(f"{where}: field 'clusters': expected a list of clusters of [start, end] spans")
    checked = tuple(_cluster(c, f"{where}: field 'clusters'[{i}]", n) for i, c in enumerate(clusters))
    match = _SPLIT_KEY.match(key)
    book, part = (match["book"], int(match["part"])) if match else (key, 0)
    sents = tuple(tuple(s) for s in sentences)
    return Book(key, book, part, sents, checked, _names(record.get("characters"), where), path, line)


def _cluster(cluster: object, where: str, n: int) -> tuple[Span, ...]:
    if not isinstance(cluster, list) or not cluster:
        raise DataError(f"{where}: expected a non-empty list of [start, end] spans")
    spans = []
    for j, span in enumerate(cluster):
        ok = isinstance(span, list) and len(span) == 2 and all(type(v) is int for v in span)
        if not ok or not 0 <= span[0] <= span[1] < n:
            raise DataError(
                f"{where}[{j}]: expected [start, end] word indices with 0 <= start <= end < {n}, got {span!r}"
            )
        spans.append((span[0], span[1]))
    return tuple(spans)


def _names(characters: object, where: str) -> tuple[str, ...]:
    """Character names: the README's list of {name, cluster}, or the released files' dict keyed by character."""
    if characters is None:
        return ()
    if isinstance(characters, dict):
        return tuple(str(k) for k in characters)
    if isinstance(characters, list) and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in characters):
        return tuple(c["name"] for c in characters)
    raise DataError(f"{where}: field 'characters': expected a list of {{name, cluster}} or a dict by character")
