"""Embedding reuse: N needle samples on one haystack served by MiniLM, against one full embedding pass.

One haystack of L MiniLM tokens (`austen`, seed 0) and N needle samples built the way the needle builder builds
them (`data_builders.place`: a magic-number needle at the sentence boundary nearest depth i / (N - 1), the tail
cut so that every sample is exactly L tokens). Each retriever spec serves the N samples in one fresh process
with an empty index-cache folder, one request per sample in depth order:

- `full pass`: the first sample, nothing cached: chunking, embedding every chunk, the query;
- `all N`: the N samples' seconds together, chunks embedded and looked up in the chunk-vector cache;
- `ratio`: all N / the full pass (goal <= 1.5; without reuse every sample is a full pass, N);
- `exact`: for the last sample (almost every vector reused) and the middle one, a fresh memory-only cache
  (nothing shared) gives the same hits: chunk spans and float scores equal (`==`), i.e. bit-for-bit vectors.

A second child counts the chunks that differ between the bare haystack (cut to L tokens) and each sample,
for the greedy rule and for `resync` (`text/chunking.py`), with no model loaded.

`--bm25` serves the samples with `bm25` instead, in one process, and builds each sample's index twice,
interleaved (the order alternating per sample): assembled from the cached per-chunk term counts (what `bm25`
does, `models/retrieval/bm25_arrays.py`) and by bm25s itself (`bm25s_arrays`, what it did before); both arrays
must be equal (`==`, dtypes and shapes too). Per sample: both build seconds, the sample's seconds with either
build (everything else, chunking included, is shared), chunks tokenized / reused and the load average.

    python -m benchmarks.embedding_reuse                    # 131,072 tokens, 100 samples
    python -m benchmarks.embedding_reuse --length 1048576   # the issue's 1M-token haystack (~10 min of MiniLM idle)
    python -m benchmarks.embedding_reuse --bm25 --samples 25 --length 1048576   # bm25: assembled vs bm25s
    python -m benchmarks --parts embedding_reuse            # inside `make bench`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.retrieval_scale import peak_rss_mib

LENGTH = 131_072
SAMPLES = 100
SPECS = ("minilm", "minilm?chunking=resync")
REPO = Path(__file__).resolve().parent.parent
NEEDLE = "The special magic number for {key} is {value}."
QUESTION = "What is the special magic number for {key}?"


def doc_path(length: int, samples: int, seed: int) -> Path:
    """Where the haystack and the samples' insertions are kept (a few MB, not N contexts)."""
    from longctx_eval.models.assets import cache_dir

    return cache_dir() / "bench" / "embedding_reuse" / f"needles-{length}-{samples}-{seed}.json"


def build_job(params: dict[str, Any]) -> dict[str, Any]:
    """The haystack once, then per sample the builder's insertion: context = hay[:at] + insertion + hay[at:end]."""
    import random

    from data_builders import get_source
    from data_builders.haystack.assembly import haystack_text
    from data_builders.haystack.span_insertion import place
    from data_builders.needle.insertion import make_key, make_value
    from longctx_eval.models.assets import load_tokenizer

    length, samples, seed = params["length"], params["samples"], params["seed"]
    path = doc_path(length, samples, seed)
    if path.is_file():
        meta = json.loads(path.read_text())
        return {k: v for k, v in meta.items() if k not in ("haystack", "samples")} | {"reused": True}
    tok = load_tokenizer("minilm")
    started = time.perf_counter()
    hay = haystack_text(get_source(params["source"]), tok, length, seed)
    fit = _MemoCounting(tok)  # `place` measures each candidate cut on the whole text: through the memo, exactly
    rows = []
    for i in range(samples):
        rng = random.Random(f"embedding-reuse-{seed}-{i}")
        key, value = make_key(rng), make_value(rng)
        needle = NEEDLE.format(key=key, value=value)
        depth = i / max(1, samples - 1)
        context, (start,), _ = place(hay, [needle], [depth], length - tok.count(" " + needle), length, fit)
        at = start if start == 0 else start - 1
        insertion = needle + " " if start == 0 else " " + needle
        end = len(context) - len(insertion)
        assert hay.text[:at] + insertion + hay.text[at:end] == context
        rows.append({"depth": depth, "key": key, "at": at, "insertion": insertion, "end": end})
    bare_end = max(r["end"] for r in rows)
    meta = {
        "length": length,
        "samples": samples,
        "seed": seed,
        "source": params["source"],
        "chars": bare_end,
        "build_s": round(time.perf_counter() - started, 1),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**meta, "haystack": hay.text[:bare_end], "samples": rows}))
    return {**meta, "reused": False}


class _MemoCounting:
    """MiniLM's tokenizer for `place`: token counts from the paragraph memo (`text/pieces.py`, exact for MiniLM,
    tested), so fitting each of N samples to exactly L tokens does not tokenize 1M tokens several times."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.name = tok.name

    def count(self, text: str) -> int:
        from longctx_eval.text.pieces import token_count

        return token_count(self.tok, text)

    def encode(self, text: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(ids=range(self.count(text)), offsets=())  # `place`'s caller here reads no offsets


def _contexts(params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    data = json.loads(doc_path(params["length"], params["samples"], params["seed"]).read_text())
    return data["haystack"], data["samples"]


def context_of(hay: str, row: dict[str, Any]) -> str:
    return hay[: row["at"]] + row["insertion"] + hay[row["at"] : row["end"]]


def serve_job(params: dict[str, Any]) -> dict[str, Any]:
    """Serve every sample with one retriever (empty cache folder), then check two samples without any cache."""
    os.environ["LONGCTX_EVAL_INDEX_CACHE"] = params["cache"]
    from data_builders.needle.grid import RETRIEVAL
    from longctx_eval import Request
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.retrieval.index_cache import IndexCache
    from longctx_eval.models.spec import parse_spec

    hay, rows = _contexts(params)
    started = time.perf_counter()
    spec = parse_spec(params["spec"])
    adapter = MODEL_KINDS.get(spec.kind).load(spec)
    load_s = time.perf_counter() - started
    dense = adapter.indexers[0]
    embed_s = [0.0]
    real_embed = dense.embed

    def timed_embed(texts: list[str]) -> Any:
        t0 = time.perf_counter()
        try:
            return real_embed(texts)
        finally:
            embed_s[0] += time.perf_counter() - t0

    dense.embed = timed_embed  # type: ignore[method-assign]
    per: list[dict[str, Any]] = []
    hits = {}
    check = sorted({len(rows) - 1, len(rows) // 2})
    for i, row in enumerate(rows):
        question = QUESTION.format(key=row["key"])
        req = Request(f"s{i}", question, context_of(hay, row), question, retrieval=RETRIEVAL)
        before = embed_s[0]
        t0 = time.perf_counter()
        adapter.prompt_tokens(req)  # the runner measures every request's length first
        pred = adapter.retrieve([req])[0]
        seconds = time.perf_counter() - t0
        data = pred.data or {}
        per.append(
            {
                "seconds": round(seconds, 4),
                "embed_s": round(embed_s[0] - before, 4),
                "chunks": data.get("chunks"),
                **data.get("embeddings", {}),
            }
        )
        if i in check:
            hits[i] = pred.hits
        if i == 0 or (i + 1) % 10 == 0:
            print(f"  sample {i + 1}/{len(rows)}: {json.dumps(per[-1])}", file=sys.stderr, flush=True)
    served_s = sum(p["seconds"] for p in per)
    exact: dict[str, Any] = {}
    if params.get("vector_check"):
        exact["vectors"] = _vector_check(adapter, dense, real_embed, context_of(hay, rows[-1]), params["vector_check"])
        check = []
    for i in check:
        adapter.cache = IndexCache(None, 0)  # memory only and empty: nothing from the other samples
        row = rows[i]
        question = QUESTION.format(key=row["key"])
        t0 = time.perf_counter()
        alone = adapter.retrieve([Request(f"s{i}", question, context_of(hay, row), question, retrieval=RETRIEVAL)])[0]
        exact[str(i)] = {
            "hits_equal": alone.hits == hits[i],
            "top_k": len(alone.hits),
            "max_score_difference": max(
                (abs(a.score - b.score) for a, b in zip(alone.hits, hits[i], strict=False)), default=0.0
            ),
            "embedded_without_cache": (alone.data or {}).get("embeddings", {}).get("embedded"),
            "seconds": round(time.perf_counter() - t0, 2),
        }
    first = per[0]
    embedded = sum(p.get("embedded", 0) for p in per)
    looked_up = sum(p.get("memory", 0) + p.get("disk", 0) for p in per)
    later = per[1:]
    return {
        "spec": params["spec"],
        "load_s": round(load_s, 2),
        "samples": len(per),
        "chunks_per_sample": statistics.median(p["chunks"] for p in per),
        "full_pass_s": first["seconds"],
        "full_pass_embed_s": first["embed_s"],
        "all_samples_s": round(served_s, 2),
        "ratio": round(served_s / first["seconds"], 3),
        "embed_ratio": round(sum(p["embed_s"] for p in per) / first["embed_s"], 3),
        "chunks_embedded": embedded,
        "chunks_looked_up": looked_up,
        "embedded_per_later_sample": {
            "mean": round(statistics.mean(p.get("embedded", 0) for p in later), 2) if later else None,
            "max": max((p.get("embedded", 0) for p in later), default=None),
        },
        "later_sample_s_median": round(statistics.median(p["seconds"] for p in later), 3) if later else None,
        "exact": exact,
        "per_sample": per,
    }


def _vector_check(adapter: Any, dense: Any, embed: Any, context: str, n: int) -> dict[str, Any]:
    """The last sample's cached vectors against a fresh encoding (one batch) of `n` of its chunks, chosen at random."""
    import random

    import numpy as np

    from data_builders.needle.grid import RETRIEVAL
    from longctx_eval.models.retrieval.embedding_cache import Reuse
    from longctx_eval.models.retrieval.index_cache import shared_cache
    from longctx_eval.text import ChunkConfig, chunk_document

    cfg = ChunkConfig(RETRIEVAL.chunk_tokens, RETRIEVAL.chunk_overlap, resync=adapter.chunking == "resync")
    texts = [c.text for c in chunk_document(context, adapter.tokenizer, cfg)]
    pick = sorted(random.Random(0).sample(range(len(texts)), min(n, len(texts))))
    t0 = time.perf_counter()
    cached, reuse = shared_cache().embeddings().vectors(dense.namespace(), [texts[i] for i in pick], embed)
    fresh = embed([texts[i] for i in pick])
    assert isinstance(reuse, Reuse)
    return {
        "vectors_equal": bool(np.array_equal(cached, fresh)),
        "chunks_checked": len(pick),
        "from_cache": reuse.looked_up,
        "max_abs_difference": float(np.abs(cached - fresh).max()),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def diff_job(params: dict[str, Any]) -> dict[str, Any]:
    """Chunks of each sample that are no chunk of the bare haystack (cut to L tokens), greedy and resync."""
    from data_builders.needle.grid import RETRIEVAL
    from longctx_eval.models.assets import load_tokenizer
    from longctx_eval.text import ChunkConfig, chunk_document

    hay, rows = _contexts(params)
    tok = load_tokenizer("minilm")
    bare = hay[: min(r["end"] for r in rows)]
    out = {}
    for mode in ("greedy", "resync"):
        cfg = ChunkConfig(RETRIEVAL.chunk_tokens, RETRIEVAL.chunk_overlap, resync=mode == "resync")
        base = chunk_document(bare, tok, cfg)
        known = {c.text for c in base}
        changed = [sum(c.text not in known for c in chunk_document(context_of(hay, r), tok, cfg)) for r in rows]
        out[mode] = {
            "haystack_chunks": len(base),
            "changed_mean": round(statistics.mean(changed), 2),
            "changed_median": statistics.median(changed),
            "changed_p95": sorted(changed)[int(0.95 * (len(changed) - 1))],
            "changed_max": max(changed),
        }
    return out


def bm25_job(params: dict[str, Any]) -> dict[str, Any]:
    """Serve every sample with `bm25`, each index built both ways (assembled, bm25s), interleaved; see the module."""
    os.environ["LONGCTX_EVAL_INDEX_CACHE"] = params["cache"]
    import numpy as np

    from data_builders.needle.grid import RETRIEVAL
    from longctx_eval import Request
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.retrieval.bm25_arrays import bm25s_arrays
    from longctx_eval.models.spec import parse_spec

    hay, rows = _contexts(params)
    spec = parse_spec(params.get("spec", "bm25"))
    adapter = MODEL_KINDS.get(spec.kind).load(spec)
    indexer = adapter.indexers[-1]  # bm25's only indexer, hybrid's second
    assembled_build = indexer.build
    counts = indexer.term_counts
    timing: dict[str, Any] = {}

    def both_builds(texts: list[str]) -> Any:
        runs = {
            "assembled": lambda: assembled_build(texts),
            "bm25s": lambda: bm25s_arrays(texts, indexer.k1, indexer.b),
        }
        order = ["bm25s", "assembled"] if timing["sample"] % 2 == 0 else ["assembled", "bm25s"]
        got = {}
        for name in order:
            t0 = time.perf_counter()
            got[name] = runs[name]()
            timing[name] = time.perf_counter() - t0
        a, b = got["assembled"], got["bm25s"]
        timing["equal"] = set(a) == set(b) and all(
            a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a
        )
        return a

    indexer.build = both_builds  # type: ignore[method-assign]
    per: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        timing.clear()
        timing["sample"] = i
        tokenized, reused = counts.tokenized, counts.reused
        question = QUESTION.format(key=row["key"])
        req = Request(f"s{i}", question, context_of(hay, row), question, retrieval=RETRIEVAL)
        t0 = time.perf_counter()
        adapter.prompt_tokens(req)  # the runner measures every request's length first
        pred = adapter.retrieve([req])[0]
        seconds = time.perf_counter() - t0
        if "equal" not in timing:
            raise RuntimeError(f"sample {i}: its bm25 index was not built (a cache hit?); the comparison needs a build")
        per.append(
            {
                "build_assembled_s": round(timing["assembled"], 4),
                "build_bm25s_s": round(timing["bm25s"], 4),
                "sample_s": round(seconds - timing["bm25s"], 4),
                "sample_bm25s_s": round(seconds - timing["assembled"], 4),
                "arrays_equal": timing["equal"],
                "chunks": (pred.data or {}).get("chunks"),
                "tokenized": counts.tokenized - tokenized,
                "reused": counts.reused - reused,
                "load_1min": round(os.getloadavg()[0], 2),
            }
        )
        if i == 0 or (i + 1) % 5 == 0:
            print(f"  sample {i + 1}/{len(rows)}: {json.dumps(per[-1])}", file=sys.stderr, flush=True)
    return {"spec": params.get("spec", "bm25"), "samples": len(per), **bm25_summary(per), "per_sample": per}


def bm25_summary(per: list[dict[str, Any]]) -> dict[str, Any]:
    """First sample, and the mean (and median) of the others, for each of the per-sample seconds; ratios."""
    out: dict[str, Any] = {"all_arrays_equal": all(p["arrays_equal"] for p in per)}
    rest = per[1:]
    for field in ("build_assembled_s", "build_bm25s_s", "sample_s", "sample_bm25s_s"):
        out[field] = {
            "first": per[0][field],
            "rest_mean": round(statistics.mean(p[field] for p in rest), 4) if rest else None,
            "rest_median": round(statistics.median(p[field] for p in rest), 4) if rest else None,
        }
    if rest:
        b = out["build_bm25s_s"]["rest_mean"] / max(out["build_assembled_s"]["rest_mean"], 1e-9)
        s = out["sample_bm25s_s"]["rest_mean"] / max(out["sample_s"]["rest_mean"], 1e-9)
        out["rest_build_speedup"] = round(b, 2)
        out["rest_sample_speedup"] = round(s, 2)
    out["tokenized_rest_mean"] = round(statistics.mean(p["tokenized"] for p in rest), 2) if rest else None
    loads = [p["load_1min"] for p in per]
    out["load_1min"] = {"median": statistics.median(loads), "min": min(loads), "max": max(loads)}
    return out


def run_bm25_reuse(length: int = LENGTH, samples: int = 25, seed: int = 0, source: str = "austen") -> dict[str, Any]:
    """Build the samples, then serve them with `bm25` in a fresh process, both builds per sample."""
    import tempfile

    params = {"length": length, "samples": samples, "seed": seed, "source": source}
    out: dict[str, Any] = {**params, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    log(f"embedding_reuse --bm25: {samples} needle samples of {length:,} tokens")
    out["build"] = spawn("build", params)
    if "error" not in out["build"]:
        with tempfile.TemporaryDirectory(prefix="index-cache-") as cache:
            out["run"] = spawn("bm25", {**params, "cache": cache})
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def bm25_table(result: dict[str, Any]) -> str:
    """Markdown: the first sample and the mean of the others, assembled against bm25s, and the exactness check."""
    r = result.get("run", {})
    if "error" in r or not r:
        return f"bm25 run failed: {r.get('error', result.get('build', {}).get('error'))}\n"
    load = r["load_1min"]
    lines = [
        f"{r['samples']} needle samples of {result['length']:,} tokens on one haystack; load average (1 min) "
        f"{load['median']} [{load['min']}, {load['max']}]; arrays equal in every sample: "
        f"{'yes' if r['all_arrays_equal'] else '**no**'}; chunks tokenized per later sample: "
        f"{r['tokenized_rest_mean']}",
        "",
        "| seconds | bm25s (before) first | assembled first | bm25s later (mean) | assembled later (mean) | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for label, old, new, ratio in (
        ("index build", "build_bm25s_s", "build_assembled_s", "rest_build_speedup"),
        ("whole sample", "sample_bm25s_s", "sample_s", "rest_sample_speedup"),
    ):
        lines.append(
            f"| {label} | {r[old]['first']:.3f} | {r[new]['first']:.3f} | {r[old]['rest_mean']:.3f} | "
            f"{r[new]['rest_mean']:.3f} | {r.get(ratio)}x |"
        )
    return "\n".join(lines) + "\n"


JOBS = {"build": build_job, "serve": serve_job, "diff": diff_job, "bm25": bm25_job}
TIMEOUT_S = 4 * 3600


def spawn(job: str, params: dict[str, Any], timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run `job` in a fresh interpreter; its result plus whole-process seconds (or an error and the log tail)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "benchmarks.embedding_reuse", "--child", job, json.dumps(params), str(out)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        started = time.perf_counter()
        try:
            run = subprocess.run(
                cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s"}
        wall = time.perf_counter() - started
        if run.returncode != 0 or not out.is_file():
            return {"error": f"exit {run.returncode} after {wall:.0f} s", "log_tail": run.stderr[-2000:]}
        result = json.loads(out.read_text())
    return {**result, "process_s": round(wall, 2)}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_embedding_reuse(
    length: int = LENGTH,
    samples: int = SAMPLES,
    specs: tuple[str, ...] = SPECS,
    seed: int = 0,
    source: str = "austen",
    vector_check: int = 0,
) -> dict[str, Any]:
    """Build the samples, count changed chunks, then serve them with each spec in a fresh process."""
    import tempfile

    out: dict[str, Any] = {"length": length, "samples": samples, "seed": seed, "source": source, "runs": {}}
    out["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    params = {"length": length, "samples": samples, "seed": seed, "source": source}
    log(f"embedding_reuse: {samples} needle samples of {length:,} tokens")
    out["build"] = spawn("build", params)
    if "error" in out["build"]:
        return out
    log("embedding_reuse: chunks that differ from the bare haystack (greedy, resync)")
    out["changed_chunks"] = spawn("diff", params)
    for spec in specs:
        with tempfile.TemporaryDirectory(prefix="index-cache-") as cache:
            log(f"embedding_reuse: {spec}")
            run = spawn("serve", {**params, "spec": spec, "cache": cache, "vector_check": vector_check})
            run["cache_mb"] = round(sum(p.stat().st_size for p in Path(cache).rglob("*.npz")) / 2**20, 2)
        out["runs"][spec] = run
        log(f"  {json.dumps({k: v for k, v in run.items() if k != 'per_sample'})[:600]}")
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def table(result: dict[str, Any]) -> str:
    """Markdown: per spec, the full pass, the N samples, the ratio, chunks embedded / looked up, exactness."""
    n = result.get("samples")
    lines = [
        f"| spec | chunks / sample | full pass s (embed s) | {n} samples s | ratio (goal <= 1.5; no reuse: {n}) | "
        "embed-time ratio | chunks embedded / looked up | new chunks per later sample (mean, max) | == without "
        "cache | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for spec, r in result.get("runs", {}).items():
        if "error" in r:
            lines.append(f"| `{spec}` | {r['error']} | | | | | | | | |")
            continue
        later = r["embedded_per_later_sample"]
        if "vectors" in r["exact"]:
            v = r["exact"]["vectors"]
            exact = f"vectors of {v['chunks_checked']} chunks: {'yes' if v['vectors_equal'] else '**no**'}"
        else:
            same = all(e["hits_equal"] for e in r["exact"].values())
            exact = f"hits of {len(r['exact'])} samples: {'yes' if same else '**no**'}"
        lines.append(
            f"| `{spec}` | {int(r['chunks_per_sample']):,} | {r['full_pass_s']:.1f} ({r['full_pass_embed_s']:.1f}) | "
            f"{r['all_samples_s']:.1f} | **{r['ratio']:.2f}x** | {r['embed_ratio']:.2f}x | "
            f"{r['chunks_embedded']:,} / {r['chunks_looked_up']:,} | {later['mean']}, {later['max']} | "
            f"{exact} | {r.get('peak_rss_mib', 0):.0f} |"
        )
    diff = result.get("changed_chunks", {})
    if diff and "error" not in diff:
        lines += [
            "",
            "| chunking | haystack chunks | chunks that differ per sample: mean | median | p95 | max |",
            "|---|---|---|---|---|---|",
        ]
        for mode in ("greedy", "resync"):
            d = diff[mode]
            lines.append(
                f"| {mode} | {d['haystack_chunks']:,} | {d['changed_mean']} | {d['changed_median']} | "
                f"{d['changed_p95']} | {d['changed_max']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Standalone: run and write benchmarks/results/embedding_reuse[-LENGTH].json (or run one child job)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        job, params, out = argv[1:4]
        result = JOBS[job](json.loads(params))
        result["peak_rss_mib"] = round(peak_rss_mib(), 1)
        Path(out).write_text(json.dumps(result))
        return 0
    p = argparse.ArgumentParser(prog="python -m benchmarks.embedding_reuse", description=__doc__)
    p.add_argument("--length", type=int, default=LENGTH)
    p.add_argument("--samples", type=int, default=SAMPLES)
    p.add_argument("--specs", default=",".join(SPECS))
    p.add_argument("--source", default="austen")
    p.add_argument(
        "--vector-check",
        type=int,
        default=0,
        help="check N random chunk vectors of the last sample instead of serving two samples again without any "
        "cache (at 1M tokens each such pass is a full embedding pass)",
    )
    p.add_argument(
        "--bm25",
        action="store_true",
        help="serve the samples with bm25, each index assembled from cached term counts and built by bm25s",
    )
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/embedding_reuse[-1m].json")
    args = p.parse_args(argv)
    from benchmarks.environment import environment
    from longctx_eval.atomic_io import atomic_write_text

    started = time.perf_counter()
    if args.bm25:
        bm25 = run_bm25_reuse(args.length, args.samples, source=args.source)
        meta = {"environment": environment(REPO), "seconds": round(time.perf_counter() - started, 1)}
        out = args.out or REPO / "benchmarks" / "results" / f"embedding_reuse-bm25-{args.length}.json"
        atomic_write_text(out, json.dumps({**meta, "embedding_reuse_bm25": bm25}, indent=1) + "\n")
        out.chmod(0o644)
        print(bm25_table(bm25))
        return 0 if bm25.get("run", {}).get("all_arrays_equal") else 1
    result = run_embedding_reuse(
        args.length, args.samples, tuple(args.specs.split(",")), source=args.source, vector_check=args.vector_check
    )
    meta = {"environment": environment(REPO), "seconds": round(time.perf_counter() - started, 1)}
    out = args.out or REPO / "benchmarks" / "results" / result_name(args.length)
    atomic_write_text(out, json.dumps({**meta, "embedding_reuse": result}, indent=1) + "\n")
    out.chmod(0o644)
    print(table(result))
    return 0


def result_name(length: int) -> str:
    return "embedding_reuse.json" if length == LENGTH else f"embedding_reuse-{length}.json"


if __name__ == "__main__":
    sys.exit(main())
