"""CLI arguments of a needle-family run on a tiny haystack, for tests about the runner rather than the task."""

from __future__ import annotations


def tiny_needle(lengths: str, task: str = "needle") -> list[str]:
    """`--tasks TASK --lengths LENGTHS` with reserve 0: each context is the whole length, as before needle v5.

    Tests of resume, faults, adapters and run folders use 128-512-token needle samples on tiny models; with the
    default 192-token prompt reserve those lengths would leave too little (or no) context."""
    return ["--tasks", task, "--lengths", lengths, "--task-arg", f"{task}.reserve=0"]
