"""Retrieval at scale: MiniLM and BM25 over one retrieval-task document of 128K and of 1M MiniLM tokens.

Per (retriever, length), two fresh processes share one empty index-cache folder: the first chunks, indexes and
answers the document's queries (cold), the second answers them again from the disk cache (cached). Each reports
seconds (model load, first query with indexing, the other queries) and the process's peak RSS (VmHWM). The
documents are the `retrieval` task's (`data_builders.retrieval.docs`, austen haystack, seed 0), built once in a
process of their own and kept under the cache folder.

    python -m benchmarks.retrieval_scale            # writes benchmarks/results/retrieval_scale.json
    python -m benchmarks --parts retrieval_scale    # the same, inside `make bench`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LENGTHS = (131_072, 1_048_576)
RETRIEVERS = ("bm25", "minilm")
TIMEOUT_S = 3 * 3600
REPO = Path(__file__).resolve().parent.parent


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def doc_paths(length: int, seed: int) -> tuple[Path, Path]:
    """Where the benchmark document of `length` tokens and its queries are kept."""
    from longctx_eval.models.assets import cache_dir

    folder = cache_dir() / "bench" / "retrieval"
    return folder / f"retrieval-{length}-{seed}.txt", folder / f"retrieval-{length}-{seed}.json"


def build_job(params: dict[str, Any]) -> dict[str, Any]:
    """Build (or reuse) the task's document of `length` MiniLM tokens; its queries and gold spans beside it."""
    from data_builders import get_source
    from data_builders.retrieval.docs import build_retrieval_doc
    from longctx_eval.models.assets import load_tokenizer

    length, seed = params["length"], params["seed"]
    text_path, meta_path = doc_paths(length, seed)
    if text_path.is_file() and meta_path.is_file():
        return {**json.loads(meta_path.read_text()), "reused": True}
    started = time.perf_counter()
    doc = build_retrieval_doc(get_source(params["source"]), load_tokenizer("minilm"), length, 0, seed)
    meta = {
        "length": length,
        "source": params["source"],
        "chars": len(doc.context),
        "build_s": round(time.perf_counter() - started, 2),
        "queries": [
            {
                "id": q.id,
                "text": q.text,
                "spans": [[doc.planted[i].char_start, doc.planted[i].char_end] for i in q.gold],
            }
            for q in doc.queries
        ],
    }
    text_path.parent.mkdir(parents=True, exist_ok=True)
    text_path.write_bytes(doc.context.encode("utf-8"))
    meta_path.write_text(json.dumps(meta))
    return {**meta, "reused": False}


def retrieve_job(params: dict[str, Any]) -> dict[str, Any]:
    """Load one retriever and answer every query of one document; the first query builds (or reads) the index."""
    os.environ["LONGCTX_EVAL_INDEX_CACHE"] = params["cache"]
    from data_builders.retrieval.docs import RETRIEVAL
    from longctx_eval import Request
    from longctx_eval.metrics.retrieval import ranking_scores
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.spec import parse_spec

    text_path, meta_path = doc_paths(params["length"], params["seed"])
    text = text_path.read_bytes().decode("utf-8")
    queries = json.loads(meta_path.read_text())["queries"]
    started = time.perf_counter()
    spec = parse_spec(params["retriever"])
    adapter = MODEL_KINDS.get(spec.kind).load(spec)
    load_s = time.perf_counter() - started
    seconds, recall5, first_data = [], [], {}
    started = time.perf_counter()
    for q in queries:
        pred = adapter.retrieve([Request(q["id"], q["text"], text, q["text"], retrieval=RETRIEVAL)])[0]
        seconds.append(pred.seconds)
        first_data = first_data or dict(pred.data or {})
        recall5.append(ranking_scores(pred.hits, [tuple(s) for s in q["spans"]], (5,))["recall@5"])
    return {
        "load_s": round(load_s, 2),
        "first_query_s": round(seconds[0], 2),
        "index_cache": first_data.get("index_cache"),
        "index_cache_parts": first_data.get("index_cache_parts"),
        "chunks": first_data.get("chunks"),
        "later_query_s_median": round(statistics.median(seconds[1:]), 4) if len(seconds) > 1 else None,
        "queries": len(queries),
        "all_queries_s": round(time.perf_counter() - started, 2),
        "recall@5": round(sum(recall5) / len(recall5), 3),
    }


JOBS = {"build": build_job, "retrieve": retrieve_job}


def spawn(job: str, params: dict[str, Any], timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run `job` in a fresh interpreter; its result plus whole-process seconds and peak RSS (or an error)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "benchmarks.retrieval_scale", "--child", job, json.dumps(params), str(out)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        started = time.perf_counter()
        try:
            run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s"}
        wall = time.perf_counter() - started
        if run.returncode != 0 or not out.is_file():
            return {
                "error": f"exit {run.returncode} after {wall:.0f} s",
                "log_tail": (run.stderr or run.stdout)[-2000:],
            }
        result = json.loads(out.read_text())
    return {**result, "process_s": round(wall, 2)}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_retrieval_scale(
    lengths: tuple[int, ...] = LENGTHS, retrievers: tuple[str, ...] = RETRIEVERS, seed: int = 0, source: str = "austen"
) -> dict[str, Any]:
    """Build each document, then per retriever and length a cold and a cached run, each in a fresh process."""
    out: dict[str, Any] = {"source": source, "seed": seed, "documents": {}, "runs": {}}
    out["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    for length in lengths:
        log(f"retrieval_scale: document of {length:,} tokens")
        built = spawn("build", {"length": length, "seed": seed, "source": source})
        built.pop("queries", None)
        out["documents"][str(length)] = built
    for retriever in retrievers:
        for length in lengths:
            if "error" in out["documents"][str(length)]:
                continue
            with tempfile.TemporaryDirectory(prefix="index-cache-") as cache:
                params = {"retriever": retriever, "length": length, "seed": seed, "cache": cache}
                runs = {}
                for label in ("first", "cached"):
                    log(f"retrieval_scale: {retriever} at {length:,} tokens, {label} run")
                    runs[label] = spawn("retrieve", params)
                    log(f"  {json.dumps(runs[label])[:300]}")
                runs["cache_bytes"] = sum(p.stat().st_size for p in Path(cache).rglob("*.npz"))
            out["runs"][f"{retriever}@{length}"] = runs
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def table(result: dict[str, Any]) -> str:
    """Markdown table of the runs: seconds and peak memory, cold and cached."""
    lines = [
        "| retriever | tokens | chunks | run | first query s (index) | other queries s (median) | whole process s | "
        "peak RSS MiB | index from | recall@5 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, runs in result.get("runs", {}).items():
        retriever, length = key.split("@")
        for label in ("first", "cached"):
            r = runs.get(label, {})
            if "error" in r:
                lines.append(f"| {retriever} | {int(length):,} | | {label} | {r['error']} | | | | | |")
                continue
            lines.append(
                f"| {retriever} | {int(length):,} | {r.get('chunks')} | {label} | {r.get('first_query_s')} | "
                f"{r.get('later_query_s_median')} | {r.get('process_s')} | {r.get('peak_rss_mib', 0):.0f} | "
                f"{r.get('index_cache')} | {r.get('recall@5')} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Standalone: run the measurement and write benchmarks/results/retrieval_scale.json (or run one child job)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        job, params, out = argv[1:4]
        result = JOBS[job](json.loads(params))
        result["peak_rss_mib"] = round(peak_rss_mib(), 1)
        Path(out).write_text(json.dumps(result))
        return 0
    p = argparse.ArgumentParser(prog="python -m benchmarks.retrieval_scale", description=__doc__)
    p.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    p.add_argument("--retrievers", default=",".join(RETRIEVERS))
    p.add_argument("--source", default="austen")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_scale.json")
    args = p.parse_args(argv)
    from benchmarks.environment import environment
    from longctx_eval.atomic_io import atomic_write_text

    started = time.perf_counter()
    result = run_retrieval_scale(
        tuple(int(x) for x in args.lengths.split(",")), tuple(args.retrievers.split(",")), source=args.source
    )
    meta = {"environment": environment(REPO), "seconds": round(time.perf_counter() - started, 1)}
    atomic_write_text(args.out, json.dumps({**meta, "retrieval_scale": result}, indent=1) + "\n")
    args.out.chmod(0o644)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
