"""HF Datasets export: a builder's parts written as byte-reproducible parquet plus a dataset card."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, Value

from data_builders.dataset.card import CARD_MARKER, ConfigEntry, render_card
from data_builders.dataset.registry import (
    BuildConfig,
    BuildContext,
    BuilderInfo,
    Document,
    Part,
    check_options,
    get_builder,
)
from data_builders.haystack.assembly import HaystackSource, get_source
from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text, ensure_dir
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Tokenizer

DOCUMENTS_CONFIG = "documents"
DOCUMENT_FEATURES = Features(
    {
        "doc_id": Value("string"),
        "text": Value("string"),
        "n_chars": Value("int64"),
        "n_tokens": Value("int64"),  # in the dataset's tokenizer
        "sha256": Value("string"),  # of the UTF-8 text
    }
)
# Fixed writer options: same rows, same bytes (pyarrow writes no timestamps; `created_by` names its version).
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "data_page_size": 1 << 20,
    "version": "2.6",
}
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SHARED_MODE = 0o644  # a dataset is for sharing; the atomic temp file would leave it owner-only
_DOC_ROW_GROUP = 16  # documents can be megabytes each; small row groups keep readers' batches small

Progress = Callable[[int, int | None], None]
"""Called with (samples finished so far, total or None)."""


@dataclass(frozen=True)
class BuildReport:
    """What `build_dataset` wrote: the folder, every file's sha256, the configs and the card text."""

    out: Path
    files: dict[str, str]  # relative path -> sha256
    configs: list[ConfigEntry]
    card: str
    seconds: float


def arrow_table(rows: Sequence[Mapping[str, Any]], features: Features, where: str) -> pa.Table:
    """Rows as an Arrow table with `features` as schema (and HF metadata); DataError naming `where` on a mismatch."""
    expected = set(features)
    for i, row in enumerate(rows):
        if set(row) != expected:  # Arrow would fill a missing field with null and drop an extra one
            missing, extra = sorted(expected - set(row)), sorted(set(row) - expected)
            raise DataError(f"{where}: row {i} lacks fields {missing} and has unknown fields {extra}")
    try:
        return pa.Table.from_pylist(list(rows), schema=features.arrow_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError, TypeError) as exc:
        raise DataError(f"{where}: rows do not match the declared features ({exc}); expected {list(features)}") from exc


def parquet_bytes(table: pa.Table, row_group_size: int | None = None) -> bytes:
    """Parquet bytes of `table` with fixed writer options: equal tables give equal bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=row_group_size or max(1, table.num_rows), **_PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def _document_rows(documents: Sequence[Document]) -> list[dict[str, Any]]:
    return [
        {
            "doc_id": d.doc_id,
            "text": d.text,
            "n_chars": len(d.text),
            "n_tokens": d.n_tokens,
            "sha256": hashlib.sha256(d.text.encode("utf-8")).hexdigest(),
        }
        for d in documents
    ]


def prepare_out(out: Path) -> Path:
    """Create `out`; refuse a non-empty folder that is not an earlier longctx-eval dataset."""
    out = ensure_dir(out)
    entries = [p for p in out.iterdir() if not p.name.startswith(".")]
    card = out / "README.md"
    if entries and not (card.is_file() and CARD_MARKER in card.read_text(encoding="utf-8", errors="replace")):
        raise ConfigError(
            f"--out {out} is not empty and holds no longctx-eval dataset card; expected an empty folder "
            "or the folder of an earlier build (which is then replaced)"
        )
    return out


def build_dataset(
    name: str,
    config: BuildConfig,
    out: Path,
    tokenizer: Tokenizer,
    *,
    source: HaystackSource | None = None,
    license: str | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Run builder `name` and write DIR/data/*.parquet and DIR/README.md (written last, so it marks completion).

    `source`: `get_source(config.source)` if the caller already resolved it (the CLI does, to fail fast).
    """
    t0 = time.perf_counter()
    info = get_builder(name)
    check_options(info, config.options)
    src = source or get_source(config.source)
    out = prepare_out(out)
    total = info.total(config) if info.total else None
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(done, total)

    files: dict[str, str] = {}
    entries: list[ConfigEntry] = []
    doc_entries: list[ConfigEntry] = []
    doc_ids: set[str] = set()
    for part in info.fn(BuildContext(config, src, tokenizer, advance)):
        _check_part(name, part, {e.name for e in entries}, doc_ids)
        entry, doc_entry = _write_part(out, info, part, files)
        entries.append(entry)
        doc_entries.extend(doc_entry)
    if doc_entries:
        entries.append(
            ConfigEntry(
                DOCUMENTS_CONFIG,
                [p for e in doc_entries for p in e.paths],
                sum(e.num_examples for e in doc_entries),
                sum(e.num_bytes for e in doc_entries),
                DOCUMENT_FEATURES,
            )
        )
    card = render_card(info, config, src, tokenizer, entries, files, license or info.card.license or _license(src))
    _remove_stale(out, files)
    atomic_write_text(out / "README.md", card)
    (out / "README.md").chmod(_SHARED_MODE)
    return BuildReport(out, files, entries, card, time.perf_counter() - t0)


def _check_part(builder: str, part: Part, configs: set[str], doc_ids: set[str]) -> None:
    """Config names become file names and doc_ids are looked up across configs: both must be unique."""
    where = f"builder {builder!r}, config {part.config_name!r}"
    if not _CONFIG_NAME.match(part.config_name) or part.config_name == DOCUMENTS_CONFIG:
        raise DataError(f"{where}: expected a config name of letters, digits, '_', '-' other than 'documents'")
    if part.config_name in configs:
        raise DataError(f"{where}: the config was produced twice; expected one part per config")
    for doc in part.documents:
        if doc.doc_id in doc_ids:
            raise DataError(f"{where}: doc_id {doc.doc_id!r} is used twice; expected ids unique across the dataset")
        doc_ids.add(doc.doc_id)


def _write_part(
    out: Path, info: BuilderInfo, part: Part, files: dict[str, str]
) -> tuple[ConfigEntry, list[ConfigEntry]]:
    """Write one part's samples (and documents, if any); record the files' hashes in `files`."""
    name = part.config_name
    path = f"data/{name}.parquet"
    features = info.features if part.features is None else part.features
    table = arrow_table(part.samples, features, f"builder {info.name!r}, config {name!r}")
    files[path] = _write(out, path, parquet_bytes(table))
    entry = ConfigEntry(name, [path], table.num_rows, table.nbytes, features)
    if not part.documents:
        return entry, []
    path = f"data/documents/{name}.parquet"
    table = arrow_table(_document_rows(part.documents), DOCUMENT_FEATURES, f"documents of config {name!r}")
    files[path] = _write(out, path, parquet_bytes(table, _DOC_ROW_GROUP))
    return entry, [ConfigEntry(DOCUMENTS_CONFIG, [path], table.num_rows, table.nbytes, DOCUMENT_FEATURES)]


def _write(out: Path, rel: str, data: bytes) -> str:
    atomic_write_bytes(out / rel, data)
    (out / rel).chmod(_SHARED_MODE)
    return hashlib.sha256(data).hexdigest()


def _license(source: HaystackSource) -> str:
    """The source's HF license id if it declares one; the synthetic narrative is this project's (Apache-2.0)."""
    declared = getattr(source, "license", None)
    if isinstance(declared, str) and declared:
        return declared
    return "apache-2.0" if source.name == "synthetic" else "unknown"


def _remove_stale(out: Path, keep: Mapping[str, str]) -> None:
    # A rebuild with fewer lengths must not leave parquet files of the old build behind in data/.
    data = out / "data"
    if not data.is_dir():
        return
    for path in sorted(data.rglob("*.parquet")):
        if path.relative_to(out).as_posix() not in keep:
            path.unlink()
