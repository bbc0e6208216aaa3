"""A `vllm` part job's finished work on disk, so that a stopped sitting resumes where it stopped instead of losing
every finished pass (a full grid is hours of CPU per backend).

One file per job and grid under .cache/bench-vllm/, written atomically after each step (a pass, or for `hf:` one
request of its interleaved lanes) and, when the job ends, holding its whole result; read back by the next run of the
same job on the same grid (a step state only for the same sample ids, which the job checks), and removed by the
part once the results file is written, so a later sitting measures afresh. A resumed job says so in its result
(`resumed`): which steps came from an earlier process, and when that process saved them.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.runner import REPO
from longctx_eval.atomic_io import atomic_write_text

ROOT = REPO / ".cache" / "bench-vllm"


class Checkpoint:
    """The saved state of job `job` on `params` (the grid, the lever set, whether lm-eval runs)."""

    def __init__(self, job: str, params: dict[str, Any], root: Path | None = None) -> None:
        key = json.dumps({"job": job, "params": params}, sort_keys=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        self.path = (ROOT if root is None else root) / f"{job}-{digest}.json"
        self.key = key

    def load(self, sample_ids: list[str] | None = None) -> dict[str, Any] | None:
        """The state an earlier process saved for this very job and grid (and, given `sample_ids`, these samples in
        this order); None when there is none."""
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        state = saved.get("state") if saved.get("key") == self.key else None
        if state is None or (sample_ids is not None and state.get("ids") != sample_ids):
            return None
        return state

    def save(self, state: dict[str, Any], sample_ids: list[str] | None = None) -> None:
        """Replace the saved state (atomically: a stop mid-write leaves the previous one), tagged with the ids."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        payload = {"key": self.key, "saved_utc": now, "state": {**state, "ids": sample_ids}}
        atomic_write_text(self.path, json.dumps(payload))

    def saved_utc(self) -> str | None:
        """When the state on disk was saved."""
        try:
            return json.loads(self.path.read_text()).get("saved_utc")
        except (OSError, ValueError):
            return None

    def resumes(self, state: dict[str, Any], where: str, at: int) -> list[dict[str, Any]]:
        """The resumptions `state` records, plus this one when it resumes at step `at` (> 0): for the result."""
        earlier = list(state.get("resumed", []))
        return earlier + [{where: at, "saved_utc": self.saved_utc()}] if at else earlier

    def clear(self) -> None:
        """Forget the state: the part has written the job's result into its results file."""
        self.path.unlink(missing_ok=True)
