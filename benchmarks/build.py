"""Building at 1M tokens: an exact-length haystack, the needle dataset (documents + samples) round-tripped, and the
sample builders of the needle family, cross_paragraph and retrieval timed against a baseline commit's (`samples`)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def build_job(params: dict[str, Any]) -> dict[str, Any]:
    """`step` "assemble": one exact-length document; "dataset": the needle builder's parquet, then chunk + index;
    "samples": one task's first samples timed (`samples_job`)."""
    from benchmarks.gpt2 import our_tokenizer

    if params["step"] == "samples":
        return samples_job(params)
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


SPEED_ARGS = {
    "needle": {"depths": 25, "per_cell": 4},
    "needle_lowlex": {"depths": 25, "per_cell": 4},
    "needle_multikey": {"depths": 25, "per_cell": 4},
    "needle_multivalue": {"per_length": 100, "haystacks": 4},
    "needle_multiquery": {"per_length": 100, "haystacks": 4},
    "cross_paragraph": {"per_cell": 5},
    "retrieval": {"docs_per_length": 5},
}
"""The reference suite's task arguments (`suites/reference.toml`, the retrievers' rows)."""


def samples_job(params: dict[str, Any]) -> dict[str, Any]:
    """Build a task's first `samples` samples at one length in the MiniLM tokenizer, timing each one.

    Runs whatever `data_builders`/`tasks` this interpreter imports: the bench points it at this checkout or at the
    baseline's (`run_child(..., pythonpath=...)`), so the same job times old and new code."""
    import os

    import data_builders
    from longctx_eval.discovery import discover
    from longctx_eval.models.assets import load_tokenizer
    from longctx_eval.run.sampling import dataset_hash

    load_start = os.getloadavg()[0]
    tok = load_tokenizer(params.get("tokenizer", "minilm"))
    info = discover().get(params["task"])
    task = info.build(SPEED_ARGS[params["task"]], lengths=[params["length"]], seed=params["seed"], tokenizer=tok)
    samples, times = [], []
    it = iter(task.samples())
    for _ in range(params["samples"]):
        started = time.perf_counter()
        samples.append(next(it))
        times.append(time.perf_counter() - started)
    return {
        "code": str(Path(data_builders.__file__).resolve().parent.parent),
        "per_sample_s": times,
        "dataset_hash": dataset_hash(samples),
        "load_average": [load_start, os.getloadavg()[0]],
    }
