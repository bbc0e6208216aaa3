"""Spawn one child measurement, time it from outside, and collect its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    # Every method gets the same single-threaded tokenizer, as the peers' own calls are single-threaded.
    "TOKENIZERS_PARALLELISM": "false",
}


def run_child(job: str, params: dict[str, Any], timeout_s: float = 900, code: Path | None = None) -> dict[str, Any]:
    """Run `job` in a fresh interpreter; adds the whole-process wall time and the kernel's peak RSS.

    `code`: a folder holding other `longctx_eval`, `data_builders` and `tasks` packages (no `benchmarks`), imported
    instead of this checkout's: the child starts in it, with this checkout after it on the path for `benchmarks`."""
    env = {**os.environ, **CHILD_ENV}
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), str(REPO)])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        log = Path(tmp) / "log.txt"
        cmd = [sys.executable, "-m", "benchmarks.child", job, json.dumps(params), str(out)]
        started = time.perf_counter()
        with log.open("wb") as fh:
            proc = subprocess.Popen(cmd, cwd=code or REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
            timer = threading.Timer(timeout_s, proc.kill)
            timer.start()
            # wait4 gives this child's own rusage, so its peak RSS is not mixed with earlier children's.
            _, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        if proc.returncode != 0 or not out.is_file():
            tail = log.read_text(errors="replace")[-2000:]
            return {"error": f"exit {proc.returncode} after {wall:.0f} s", "log_tail": tail}
        result = json.loads(out.read_text())
    result["process_s"] = wall
    result["ru_maxrss_mib"] = usage.ru_maxrss / 1024
    return result
