"""Where the coreference corpora live and how their standard splits are read.

Root: $LONGCTX_COREF_DATA when set, else the corpora shipped with the project (`data_builders/corpora/*.tar.xz`,
verified by sha256 and unpacked once into the cache, see `coref_archives`). Under it: `litbank/`
(github.com/dbamman/litbank `coref/conll/`, with the 10 fixed folds of github.com/dbamman/lrec2020-coref in
`splits/litbank_tenfold_splits/`) and `ontogum/` (the GUM corpus's OntoGUM layer in CoNLL-2012 layout in
`conll2012/`, its split list in `docs.tsv`). OntoNotes 5.0 is LDC-licensed and never shipped: pass your own
CoNLL-2012 files (`ontonotes(path)`, or `ontonotes_files(glob)`) or, online, the Hugging Face dataset
`conll2012_ontonotesv5` (`ontonotes_hf`).
"""

from __future__ import annotations

import csv
import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_builders.coref.conll import CorefDocument, read_conll
from longctx_eval.errors import ConfigError, DataError, PrerequisiteError, did_you_mean

ENV_VAR = "LONGCTX_COREF_DATA"
ONTONOTES_ENV_VAR = "LONGCTX_ONTONOTES"
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Corpus:
    """Documents of one corpus split and the regime they are scored in."""

    name: str
    split: str
    documents: tuple[CorefDocument, ...]
    singletons: bool  # LitBank annotates singletons; OntoNotes-scheme corpora do not


def data_root() -> Path:
    """The folder holding `litbank/` and `ontogum/`: $LONGCTX_COREF_DATA, else the shipped archives unpacked."""
    env = os.environ.get(ENV_VAR)
    if env:
        root = Path(env).expanduser()
        if not root.is_dir():
            raise PrerequisiteError(f"${ENV_VAR}={env!r} is not a folder; expected one holding litbank/ and ontogum/")
        return root
    from data_builders.coref.archives import shipped_root

    return shipped_root()


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}.{did_you_mean(split, SPLITS)}")


CORPUS_ALL = "all"
"""`split=all`: every document of a corpus once (LitBank: the test lists of its 10 folds; OntoGUM: its 3 splits)."""


def litbank(split: str = "test", fold: int = 0, root: Path | None = None) -> Corpus:
    """LitBank documents of one split of one of its 10 fixed folds (later work uses fold 0), or with `split="all"`
    all 100 documents (each fold's test list: every document is in exactly one), in file-name order."""
    if split != CORPUS_ALL:
        _check_split(split)
    if not 0 <= fold <= 9:
        raise ConfigError(f"LitBank fold must be 0..9, got {fold!r}")
    base = (root or data_root()) / "litbank"
    folds = range(10) if split == CORPUS_ALL else (fold,)
    stems: list[str] = []
    for k in folds:
        ids_file = (
            base / "splits" / "litbank_tenfold_splits" / str(k) / f"{'test' if split == CORPUS_ALL else split}.ids"
        )
        if not ids_file.is_file():
            raise PrerequisiteError(f"{ids_file} is missing; expected LitBank's fold lists under {base / 'splits'}")
        stems += [s.strip().removesuffix(".tsv") for s in ids_file.read_text(encoding="utf-8").split() if s.strip()]
    if split == CORPUS_ALL:
        stems = sorted(set(stems))
    docs = []
    for stem in stems:
        path = base / "coref" / "conll" / f"{stem}.conll"
        if not path.is_file():
            raise DataError(f"{base / 'splits'}: document {stem!r} has no file {path}")
        docs.extend(read_conll(path))
    return Corpus("litbank", split, tuple(docs), singletons=True)


def ontogum(split: str = "test", root: Path | None = None) -> Corpus:
    """OntoGUM documents (CoNLL-2012 layout) of GUM's official train/dev/test split, or with `split="all"` every
    document it has (all three splits: a model that was not trained on GUM may be evaluated on each)."""
    if split != CORPUS_ALL:
        _check_split(split)
    base = (root or data_root()) / "ontogum"
    table = base / "docs.tsv"
    if not table.is_file():
        raise PrerequisiteError(f"{table} is missing; expected OntoGUM's document table (doc, genre, split, ...)")
    with table.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    docs = []
    for row in rows:
        if split == CORPUS_ALL or row.get("split") == split:
            docs.extend(read_conll(base / "conll2012" / f"{row['doc']}.conll"))
    if not docs:
        raise DataError(f"{table}: no document in split {split!r}")
    return Corpus("ontogum", split, tuple(docs), singletons=False)


def ontonotes_files(pattern: str, split: str = "test") -> Corpus:
    """User-supplied OntoNotes 5.0 CoNLL-2012 files (a glob, e.g. `conll-2012/v4/data/test/**/*gold_conll`)."""
    paths = sorted(glob.glob(str(Path(pattern).expanduser()), recursive=True))
    if not paths:
        raise DataError(f"OntoNotes files: the glob {pattern!r} matched nothing; expected *_conll files")
    docs = [d for p in paths for d in read_conll(p)]
    return Corpus("ontonotes", split, tuple(docs), singletons=False)


_SPLIT_DIRS = {"train": ("train",), "dev": ("development", "dev"), "test": ("test",)}
_LANGUAGES = ("arabic", "chinese", "english")
ONTONOTES_HELP = (
    "OntoNotes 5.0 is licensed by the LDC (LDC2013T19) and cannot ship with longctx-eval; give its CoNLL-2012 "
    "files with --task-arg coref_ontonotes.path=PATH (the conll-2012/v4/data folder, its test/ folder, one "
    f"*_gold_conll file or a glob) or set ${ONTONOTES_ENV_VAR}=PATH"
)


def ontonotes_location(path: str | None = None) -> str | None:
    """Where the user's OntoNotes files are: `path` when given, else $LONGCTX_ONTONOTES, else None."""
    return path or os.environ.get(ONTONOTES_ENV_VAR) or None


def ontonotes_paths(path: str, split: str = "test", language: str = "english") -> list[Path]:
    """The CoNLL-2012 files under `path`: a file, a glob, or a folder (its `split` subfolder when it has one).

    In a folder, `*gold_conll` files are preferred over other `*_conll`/`*.conll` files, and when the tree
    has language folders (arabic/, chinese/, english/) only `language`'s files are kept.
    """
    _check_split(split)
    if language not in _LANGUAGES:
        raise ConfigError(f"unknown OntoNotes language {language!r}.{did_you_mean(language, _LANGUAGES)}")
    if any(ch in path for ch in "*?["):
        found = sorted(Path(p) for p in glob.glob(str(Path(path).expanduser()), recursive=True))
        files = [f for f in found if f.is_file()]
    else:
        base = Path(path).expanduser()
        if base.is_file():
            return [base]
        if not base.is_dir():
            raise DataError(f"OntoNotes path {path!r}: no such file or folder; expected CoNLL-2012 *_conll files")
        for name in _SPLIT_DIRS[split]:
            for sub in (base / name, base / "v4" / "data" / name, base / "data" / name):
                if sub.is_dir():
                    base = sub
                    break
            else:
                continue
            break
        files = sorted(
            f for f in base.rglob("*") if f.is_file() and (f.name.endswith("_conll") or f.suffix == ".conll")
        )
        files = [f for f in files if f.name.endswith("gold_conll")] or files
        parts = [set(f.relative_to(base).parts[:-1]) for f in files]
        if any(p & set(_LANGUAGES) for p in parts):
            files = [f for f, p in zip(files, parts, strict=True) if language in p]
    if not files:
        raise DataError(
            f"OntoNotes path {path!r} ({split}, {language}): no CoNLL-2012 file found; expected *_gold_conll files "
            "such as conll-2012/v4/data/test/data/english/annotations/**/*.v4_gold_conll"
        )
    return files


def ontonotes(path: str, split: str = "test", language: str = "english") -> Corpus:
    """OntoNotes 5.0 documents (one per part) from the user's CoNLL-2012 files under `path`."""
    docs = [d for p in ontonotes_paths(path, split, language) for d in read_conll(p)]
    if not docs:
        raise DataError(f"OntoNotes path {path!r}: the files hold no '#begin document'; expected CoNLL-2012 files")
    return Corpus("ontonotes", split, tuple(docs), singletons=False)


def ontonotes_hf(split: str = "test", config: str = "english_v4") -> Corpus:
    """OntoNotes 5.0 English from the Hugging Face dataset `conll2012_ontonotesv5` (needs the network once)."""
    _check_split(split)
    try:
        import datasets

        data = datasets.load_dataset("conll2012_ontonotesv5", config, split="validation" if split == "dev" else split)
    except Exception as exc:  # offline, or the hub refuses: say so in one line
        raise PrerequisiteError(
            f"conll2012_ontonotesv5/{config} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}); "
            "it needs the network once, or pass local CoNLL-2012 files with ontonotes_files()"
        ) from exc
    return Corpus("ontonotes", split, tuple(d for r in data for d in from_hf_record(r)), singletons=False)


def from_hf_record(record: Mapping[str, Any]) -> list[CorefDocument]:
    """One `conll2012_ontonotesv5` record as CorefDocuments, one per part (`part_id`), like `part 000`."""
    by_part: dict[int, list[Mapping[str, Any]]] = {}
    for sent in record["sentences"]:
        by_part.setdefault(int(sent.get("part_id", 0)), []).append(sent)
    return [_hf_part(str(record["document_id"]), part, sents) for part, sents in sorted(by_part.items())]


def _hf_part(doc_id: str, part: int, sentences: Sequence[Mapping[str, Any]]) -> CorefDocument:
    tokens: list[str] = []
    ends: list[int] = []
    speakers: list[str] = []
    clusters: dict[int, list[tuple[int, int]]] = {}
    for sent in sentences:
        base = len(tokens)
        tokens.extend(sent["words"])
        speakers.extend([str(sent.get("speaker") or "-")] * len(sent["words"]))
        for cid, start, end in sent.get("coref_spans", []):
            if not 0 <= start <= end < len(sent["words"]):
                raise DataError(f"{doc_id} part {part}: coref span {[cid, start, end]} is outside its sentence")
            clusters.setdefault(int(cid), []).append((base + int(start), base + int(end)))
        ends.append(len(tokens))
    return CorefDocument(
        name=f"({doc_id}); part {part:03d}",
        tokens=tuple(tokens),
        sentence_ends=tuple(ends),
        clusters=tuple(tuple(sorted(c)) for _, c in sorted(clusters.items())),
        path="hf:conll2012_ontonotesv5",
        speakers=tuple(speakers),
    )


CORPORA = {"litbank": litbank, "ontogum": ontogum}


def load_corpus(name: str, split: str = "test", fold: int = 0) -> Corpus:
    """A shipped corpus by name: 'litbank' (with `fold`) or 'ontogum'."""
    if name == "litbank":
        return litbank(split, fold)
    if name == "ontogum":
        return ontogum(split)
    raise ConfigError(f"unknown coreference corpus {name!r}.{did_you_mean(name, CORPORA)}")


def corpus_names() -> Sequence[str]:
    """Names `load_corpus` accepts."""
    return tuple(CORPORA)
