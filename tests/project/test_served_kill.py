"""A client killed mid-batch keeps every reply that had arrived (campaign 1.10), against a real loopback server.

`longctx-eval run` with an `openai:` model (default batch_size 32: the whole task is one batch) in a
subprocess, one request in flight at a time behind a counting fault proxy (no faults) in front of `serve`;
SIGKILL once N replies are in predictions.jsonl. Before, nothing was saved until the batch returned.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from servers import SERVE_MODEL, http_json, root

from longctx_eval.run_folder.predictions import PredictionStore
from tests.conftest import REPO

N_SAMPLES, KILL_AFTER = 4, 2


def _lines(path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.mark.slow  # about a minute: two CLI processes and six SmolLM2 generations on a CPU
def test_sigkill_after_n_replies_keeps_them_and_the_rerun_sends_only_the_rest(serve_hf, fault_proxy, tmp_path):
    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    spec = f"openai:{SERVE_MODEL}@{proxy}?tokenizer=smollm2-135m&max_in_flight=1&name=served"
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "run", "--model", spec, "--tasks", "needle"]
    cmd += [
        "--lengths",
        "256",
        "--limit",
        str(N_SAMPLES),
        "--task-arg",
        "needle.source=synthetic",
        "--task-arg",
        "needle.reserve=0",
    ]
    cmd += ["--task-arg", f"needle.depths={N_SAMPLES}", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    preds = out / "served" / "predictions.jsonl"
    with (tmp_path / "client.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 240
            while _lines(preds) < KILL_AFTER and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "client.log").read_text()[-2000:]
    sent = http_json(root(proxy) + "/fault-stats")[1]["requests"]
    kept = PredictionStore(preds)
    assert kept.warnings == [] and KILL_AFTER <= len(kept.records) < N_SAMPLES  # whole lines, checks intact
    assert all(r["status"] == "ok" and r["text"] is not None for r in kept.records.values())
    assert sent - len(kept.records) <= 1  # lost: at most the one request in flight

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{len(kept.records)} of {N_SAMPLES} predictions already done" in rerun.stderr
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == sent + N_SAMPLES - len(kept.records)
    final = PredictionStore(preds)
    assert len(final.records) == N_SAMPLES and all(k in final.records for k in kept.records)
    run = json.loads((out / "served" / "run.json").read_text())
    assert run["tasks"][0]["n_samples"] == N_SAMPLES
