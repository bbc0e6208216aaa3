"""One measurement in a fresh process: `python -m benchmarks.child JOB PARAMS_JSON OUT_JSON`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM): per process image, unlike RUSAGE_CHILDREN's running max."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def chunk_job(params: dict[str, Any]) -> dict[str, Any]:
    """Set up one chunker, chunk the document once, and (check runs only) verify its output."""
    from benchmarks.peers import METHODS

    text = Path(params["text"]).read_bytes().decode("utf-8")
    started = time.perf_counter()
    run = METHODS[params["method"]][1]()
    setup_s = time.perf_counter() - started
    started = time.perf_counter()
    spans = run(text)
    result: dict[str, Any] = {"setup_s": setup_s, "run_s": time.perf_counter() - started, "chunks": len(spans.texts)}
    if params.get("check"):
        result.update(_checks(text, spans))
    return result


def _checks(text: str, spans: Any) -> dict[str, Any]:
    from benchmarks.checks import check, check_index, check_token_offsets
    from benchmarks.gpt2 import tiktoken_r50k

    out = check(text, spans, tiktoken_r50k().encode_ordinary_batch)
    if spans.token_spans is not None:
        # Against the global tokenization by the same tokenizer the method used.
        out.update(check_token_offsets(text, spans, spans.extra["tokenizer"].encode(text).offsets))
    if "index" in spans.extra:
        out.update(check_index(text, spans.extra["index"]))
    return out


def _job(name: str) -> Any:
    if name == "chunk":
        return chunk_job
    if name == "semantic":
        from benchmarks.semantic import semantic_job

        return semantic_job
    if name == "build":
        from benchmarks.build import build_job

        return build_job
    if name == "sources":
        from benchmarks.sources import sources_job

        return sources_job
    if name == "posprobe":
        from benchmarks.posprobe import posprobe_job

        return posprobe_job
    if name == "prefix_cache":
        from benchmarks.peer_ruler import prefix_cache_job

        return prefix_cache_job
    raise SystemExit(f"unknown job {name!r}; expected chunk, semantic, build, sources, posprobe or prefix_cache")


def main(argv: list[str]) -> None:
    """Run the job, then write its result with the process's peak memory."""
    job, params, out = argv
    result = _job(job)(json.loads(params))
    result["peak_rss_mib"] = peak_rss_mib()
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
