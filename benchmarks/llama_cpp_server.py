"""llama-cpp-python's server on a GGUF, started with the recipe of docs/served.md (`--logits_all False --flash_attn
True`), for the Gemma 3 speed part (benchmarks/gemma3_speed.py): start, greedy streamed completions timed to their
first and last token, stop. Standard library only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 240.0
ALIAS = "gemma3-270m-q4"


def server_command(gguf: Path, port: int, n_ctx: int, threads: int) -> list[str]:
    """`python -m llama_cpp.server` as docs/served.md starts it for Gemma 3 (one slot, `threads` CPU threads)."""
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
        "--logits_all", "False",
        "--flash_attn", "True",
        "--interrupt_requests", "False",
        "--verbose", "False",
    ]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict[str, Any], timeout: float = 3000.0) -> Any:
    """POST `body` as JSON; the parsed reply."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


@contextmanager
def llama_server(gguf: Path, n_ctx: int, threads: int, log: Path) -> Iterator[str]:
    """The server on a free loopback port for the block; yields its root URL once /v1/models answers."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            server_command(gguf, port, n_ctx, threads), stdout=out, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with status {proc.returncode}; log {log}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server not ready after {READY_TIMEOUT_S:.0f} s; log {log}")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def prompt_tokens(url: str, text: str) -> int:
    """The server's own token count of `text` (its BOS included), to check it reads the prompt as we do."""
    return int(post(url + "/extras/tokenize/count", {"input": text})["count"])


def forget_prompt(url: str) -> None:
    """A one-token completion of another prompt: llama-cpp-python reuses the longest prefix of the last prompt it
    evaluated, so the next timed prompt then prefills from its second token, as `hf:` does with its cache cleared."""
    post(url + "/v1/completions", {"model": ALIAS, "prompt": "Hi", "max_tokens": 1, "temperature": 0.0})


def timed_completion(url: str, text: str, max_tokens: int) -> dict[str, Any]:
    """A greedy streamed completion of `text`: time to its first token (the prefill), the seconds after it (the
    decode), the tokens streamed (one per event) and the reply."""
    body = {"model": ALIAS, "prompt": text, "max_tokens": max_tokens, "temperature": 0.0, "stream": True}
    req = urllib.request.Request(
        url + "/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    with urllib.request.urlopen(req, timeout=3000) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            choice = json.loads(line[5:])["choices"][0]
            if choice.get("text") or choice.get("finish_reason") is None:
                if first is None:
                    first = time.perf_counter()
                pieces.append(choice.get("text") or "")
    end = time.perf_counter()
    first = first if first is not None else end
    return {"ttft_s": first - t0, "decode_s": end - first, "tokens": len(pieces), "text": "".join(pieces)}
