"""Building at 1M tokens: an exact-length haystack, and the needle dataset (documents + samples) round-tripped."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def build_job(params: dict[str, Any]) -> dict[str, Any]:
    """`step` "assemble": one exact-length document; "dataset": the needle builder's parquet, then chunk + index."""
    from benchmarks.gpt2 import our_tokenizer

    tokenizer = our_tokenizer(params["backend"])
    if params["step"] == "assemble":
        from data_builders import assemble, get_source

        source = get_source(params["source"])  # loads the corpus; not part of assembling
        started = time.perf_counter()
        text = assemble(source, tokenizer, params["tokens"], params["seed"])
        return {"run_s": time.perf_counter() - started, "chars": len(text), "tokens": params["tokens"]}
    with tempfile.TemporaryDirectory() as tmp:
        return _dataset(params, tokenizer, Path(tmp) / "needle")


def _dataset(params: dict[str, Any], tokenizer: Any, out: Path) -> dict[str, Any]:
    from data_builders import get_source
    from data_builders.dataset.export import build_dataset
    from data_builders.dataset.registry import BuildConfig

    source = get_source(params["source"])
    config = BuildConfig(
        lengths=(params["tokens"],), depths=params["depths"], seed=params["seed"], source=params["source"]
    )
    started = time.perf_counter()
    build_dataset("needle", config, out, tokenizer, source=source)
    result: dict[str, Any] = {
        "run_s": time.perf_counter() - started,
        "samples": params["depths"],
        "dataset_bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()),
    }
    result.update(_chunk_needle_context(out, tokenizer))
    return result


def _chunk_needle_context(out: Path, tokenizer: Any) -> dict[str, Any]:
    """Materialize the middle sample's 1M-token context, chunk and index it, and find its needle through the index."""
    import pyarrow.parquet as pq

    from data_builders.needle.builder import documents_by_id, materialize
    from longctx_eval.text import ChunkConfig, OffsetIndex, chunk_document

    rows = pq.read_table(next(out.glob("data/needle_*.parquet"))).to_pylist()
    docs = documents_by_id(pq.read_table(next(out.glob("data/documents/*.parquet"))).to_pylist())
    row = rows[len(rows) // 2]
    context = materialize(row, docs)
    started = time.perf_counter()
    chunks = chunk_document(context, tokenizer, ChunkConfig(max_tokens=512, overlap=64))
    index = OffsetIndex(chunks, len(context), chunks[-1].token_end)
    chunk_s = time.perf_counter() - started
    start, end = row["needle_start"], row["needle_end"]
    hits = index.covering(start, end)
    found = bool(hits) and all(
        chunks[c].text[index.to_local_char(c, start) :][: end - start] == row["needle"] for c in hits
    )
    token_hits = index.covering_tokens(row["needle_token_start"], row["needle_token_end"])
    return {
        "context_tokens": chunks[-1].token_end,
        "chunk_index_s": chunk_s,
        "needle_depth": row["depth"],
        "needle_found_through_index": found and token_hits == hits,
    }
