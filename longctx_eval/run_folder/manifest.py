"""RUN_DIR/manifest.json: what was generated in a run folder, per task, so scoring reads only what belongs together.

The manifest is rewritten (atomically, under the run-folder lock) when a task starts and when its
generation finishes; each task entry pins the hash of its `samples/<task>.jsonl`, so `score` can tell a
task's own samples from those of another run with other settings.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, NonNegativeInt, PositiveInt, ValidationError

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.errors import RunFileError
from longctx_eval.hashing import sha256_json
from longctx_eval.results import Environment, ModelMeta, Skipped, SuiteInfo
from longctx_eval.run_folder.paths import inside
from longctx_eval.run_folder.shard import Shard

MANIFEST = "manifest.json"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ShardEntry(_Record):
    """A task run as shard `index` of `count`: `total` samples unsharded, this shard's at `positions` (in order)."""

    index: PositiveInt
    count: PositiveInt
    total: NonNegativeInt
    positions: list[NonNegativeInt]

    @classmethod
    def of(cls, shard: Shard, total: int, positions: list[int]) -> ShardEntry:
        return cls(index=shard.index, count=shard.count, total=total, positions=positions)


class TaskEntry(_Record):
    """One task's generation in this folder: its configuration, samples hash and progress."""

    name: str
    version: str
    capability: str
    status: Literal["running", "generated"]
    dataset_hash: str
    n_samples: int
    lengths: list[int]
    limit: int | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    length_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-length overrides of `args` (a suite's `args_at`) for the lengths that ran: str(length) -> arguments."""
    seed: int
    started: str
    seconds: float = 0.0
    samples_sha256: str | None = None
    planned: list[tuple[NonNegativeInt, FiniteFloat | None, NonNegativeInt]] = Field(default_factory=list)
    """Per (length, depth) stratum of the task's full grid: (length, depth or None, samples planned)."""
    include_paths: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    shard: ShardEntry | None = None
    """Where this folder is one shard of a run (`run --shard I/N`): which, and its samples' unsharded places."""

    def config(self) -> dict[str, Any]:
        """What identifies this task's results: name, version, capability, lengths, limit, arguments, seed
        (and per-length arguments where there are any, so a configuration without them hashes as before)."""
        out = {
            "name": self.name,
            "version": self.version,
            "capability": self.capability,
            "lengths": self.lengths,
            "limit": self.limit,
            "args": self.args,
            "seed": self.seed,
        }
        if self.length_args:
            out["length_args"] = self.length_args
        return out

    def config_hash(self, identity: dict[str, Any]) -> str:
        return sha256_json({**self.config(), "model_identity": identity})


class Manifest(_Record):
    """The run folder's model and every task generated in it (latest configuration per task)."""

    suite: SuiteInfo
    model: ModelMeta
    environment: Environment
    identity: dict[str, Any]
    started: str
    tasks: dict[str, TaskEntry] = Field(default_factory=dict)
    skipped: dict[str, Skipped] = Field(default_factory=dict)
    merged_from: list[str] = Field(default_factory=list)
    """The shard folders `longctx-eval merge` joined into this one (empty for a folder a run wrote)."""
    merged: str | None = None
    """When they were merged."""


def now_iso() -> str:
    """The current UTC time, ISO-8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write RUN_DIR/manifest.json atomically."""
    atomic_write_text(inside(run_dir, MANIFEST), manifest.model_dump_json(indent=2) + "\n")


def read_manifest(run_dir: Path) -> Manifest | None:
    """The folder's manifest (None when there is none); one written by an earlier version is converted."""
    path = inside(run_dir, MANIFEST)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        try:
            data = _from_v0(data)
        except (KeyError, TypeError, AttributeError) as exc:
            raise RunFileError(
                f"{path}: an old manifest (tasks as a list) that cannot be read ({type(exc).__name__}: {exc}); "
                "expected the manifest `longctx-eval run` writes"
            ) from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunFileError(f"{path}: field {where!r}: {first['msg']}") from None


def _from_v0(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest written before per-task entries: one list of finished tasks and one run configuration."""
    config = data.get("config", {})
    limits = {t["name"]: t.get("limit") for t in config.get("tasks", [])}
    tasks = {
        t["name"]: {
            **{k: t[k] for k in ("name", "version", "capability", "dataset_hash", "n_samples", "lengths")},
            "status": "generated",
            "limit": limits.get(t["name"]),
            "seed": config.get("seed", 0),
            "started": data["started"],
            "include_paths": config.get("include_paths", []),
        }
        for t in data["tasks"]
    }
    skipped = {s["task"]: s for s in data.get("skipped", [])}
    return {
        "suite": data["suite"],
        "model": data["model"],
        "environment": data["environment"],
        "identity": config.get("model_identity", {}),
        "started": data["started"],
        "tasks": tasks,
        "skipped": skipped,
    }
