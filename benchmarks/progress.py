"""Progress lines of the bench's jobs, on stderr so stdout carries only results (a parent shows the lines of its
children that start with two spaces: benchmarks/vllm_backends.py `spawn`)."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    """One progress line on stderr, flushed at once."""
    print(message, file=sys.stderr, flush=True)
