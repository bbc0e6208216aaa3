"""Real OpenAI-compatible servers on 127.0.0.1 for the served-model tests (imported by conftest.py).

Fixtures (each value is a base URL ending in /v1, as an OpenAI client takes it; `root(url)` drops the /v1 for
/tokenize and /fault-stats):
- `serve_hf`: `longctx-eval serve smollm2-135m` in a subprocess, model name `SERVE_MODEL` (session-scoped).
- `llama_cpp_server`: llama-cpp-python's server on the packaged SmolLM2 GGUF, model name `LLAMA_MODEL`
  (session-scoped; skipped only when llama_cpp is not importable: `make test` installs it).
- `fault_proxy`: a factory `fault_proxy(upstream, seed=0, schedule=..., **options) -> base URL` of a
  `FaultProxy` (longctx_eval/serve/fault_proxy.py) running on a background thread, stopped after the test.
The context managers `serve_hf_server` and `llama_cpp_server_at` do the same outside pytest fixtures.
Server logs go to a file under the session's tmp folder; a server that dies before it is ready fails the test
with the tail of its log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SERVE_MODEL = "smollm2-135m"
"""The model name `serve_hf` answers to."""
LLAMA_MODEL = "smollm2-135m-q4"
"""The model name (alias) `llama_cpp_server` answers to: SmolLM2-135M-Instruct Q4_1 GGUF."""
LLAMA_CTX = 8192
"""llama.cpp's context window in these tests (SmolLM2's trained window)."""
SERVER_THREADS = max(1, min(4, (os.cpu_count() or 2) // 2))
"""CPU threads of each server (torch's OMP_NUM_THREADS unless set, llama.cpp's --n_threads): half the cores. Idle
threads spin at every barrier, so on a busy 2-core machine two threads were 5-30x slower than one (llama.cpp:
5-70 s against 0.5 s for 16 tokens; torch: 9-27 s against 2 s for 8 tokens after a 231-token prompt)."""
READY_TIMEOUT_S = 240.0


def root(base_url: str) -> str:
    """The server root of a base URL (`http://127.0.0.1:PORT/v1` -> `http://127.0.0.1:PORT`)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 120.0) -> tuple[int, Any]:
    """GET (or POST `body` as JSON) and return (status, parsed JSON), for error statuses too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _log_tail(log: Path, n: int = 30) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(lines[-n:])


def _wait_ready(proc: subprocess.Popen, log: Path, find_url: Callable[[], str | None], what: str) -> str:
    """Wait until the server's GET /v1/models answers 200; its root URL."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited with status {proc.returncode} before it was ready; log {log}:\n" + _log_tail(log)
            )
        url = find_url()
        if url:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
                    if resp.status == 200:
                        return url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
        time.sleep(0.25)
    raise RuntimeError(f"{what} was not ready after {READY_TIMEOUT_S:.0f} s; log {log}:\n" + _log_tail(log))


@contextmanager
def _process(cmd: list[str], log: Path, find_url: Callable[[], str | None], what: str) -> Iterator[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.setdefault("OMP_NUM_THREADS", str(SERVER_THREADS))
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield _wait_ready(proc, log, find_url, what) + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def serve_hf_server(log_dir: Path, model: str = SERVE_MODEL) -> Iterator[str]:
    """`longctx-eval serve MODEL --port 0` in a subprocess; yields its base URL once /v1/models answers."""
    log = log_dir / f"serve-{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}.log"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "serve", model, "--port", "0", "--log-requests"]

    def find_url() -> str | None:
        m = re.search(r"listening on (http://\S+)", log.read_text(errors="replace")) if log.exists() else None
        return m.group(1) if m else None

    with _process(cmd, log, find_url, f"longctx-eval serve {model}") as url:
        yield url


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python (with its server extra) is installed."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


@contextmanager
def llama_cpp_server_at(
    log_dir: Path, n_ctx: int = LLAMA_CTX, gguf: Path | None = None, alias: str = LLAMA_MODEL, logits_all: bool = False
) -> Iterator[str]:
    """`python -m llama_cpp.server` on a GGUF (the packaged SmolLM2 unless given) at a free port; yields its base URL.

    The recipe of docs/served.md: `--logits_all False` (else it reserves logits for every position: 32.0 GiB for
    Gemma 3 at 32K; `logits_all=True` for echoed prompt log-probabilities) and `--flash_attn True` (off by default;
    an 8K prefill of Gemma 3 was 1.75x faster with it)."""
    from longctx_eval.models.assets import smollm2_gguf

    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf or smollm2_gguf()),
        "--model_alias", alias,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(SERVER_THREADS),
        "--n_threads_batch", str(SERVER_THREADS),
        "--logits_all", str(logits_all),
        "--flash_attn", "True",
        "--interrupt_requests", "False",  # a second request must queue, not cut the first one's stream short
        "--verbose", "False",
    ]  # fmt: skip
    log = log_dir / f"llama-cpp-server-{alias}.log"
    with _process(cmd, log, lambda: f"http://127.0.0.1:{port}", "llama_cpp.server") as url:
        first_completion(url, log, alias)
        yield url


def first_completion(base_url: str, log: Path, model: str = LLAMA_MODEL) -> None:
    """One 1-token completion before any test: a build that crashes at its first matmul then fails here, once, with
    the server's log, not as "connection refused" in every test that shares the server."""
    try:
        status, body = http_json(base_url + "/completions", {"model": model, "prompt": "Hi", "max_tokens": 1})
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        status, body = None, exc
    if status == 200:
        return
    time.sleep(1.0)  # let a dying server finish writing its log
    raise RuntimeError(
        f"llama_cpp.server at {base_url} failed its first completion ({status or 'no reply'}: {body}); "
        "a native x86-64 build that uses AMX died here with a general protection fault, and `make test` installs "
        f"a portable AVX2 build (the Makefile's LLAMA_CMAKE_ARGS); log {log}:\n" + _log_tail(log)
    )


@pytest.fixture(scope="session")
def serve_hf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (…/v1) of `longctx-eval serve smollm2-135m` on a free loopback port, for the whole session."""
    with serve_hf_server(tmp_path_factory.mktemp("serve-logs")) as url:
        yield url


@pytest.fixture(scope="session")
def llama_cpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (…/v1) of llama.cpp's server on the SmolLM2 GGUF, for the whole session."""
    if not llama_cpp_available():
        pytest.skip(
            "llama-cpp-python[server] is not installed: `make test` installs it (the api-test extra, "
            "built from source once, ~5 min), or `.venv/bin/pip install 'llama-cpp-python[server]==0.3.36'`"
        )
    with llama_cpp_server_at(tmp_path_factory.mktemp("llama-logs")) as url:
        yield url


@pytest.fixture
def fault_proxy() -> Iterator[Callable[..., str]]:
    """Factory: `fault_proxy(upstream, seed=0, schedule=DEFAULT_SCHEDULE, retry_after_s=, slow_delay_s=,
    drop_after_events=) -> base URL (…/v1)` of a fault-injection proxy; GET root(url)/fault-stats counts."""
    from longctx_eval.serve.fault_proxy import FaultProxy
    from longctx_eval.serve.fault_schedule import DEFAULT_SCHEDULE

    running = []

    def make(upstream: str, seed: int = 0, schedule: str = DEFAULT_SCHEDULE, **options: Any) -> str:
        server = FaultProxy(root(upstream), seed=seed, schedule=schedule, **options).start()
        running.append(server)
        return server.url + "/v1"

    yield make
    for server in running:
        server.close()
