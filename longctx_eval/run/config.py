"""The configuration of a run, strict: unknown keys and bad values are errors, never defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longctx_eval.errors import ConfigError
from longctx_eval.run.cost import Budget
from longctx_eval.run_folder.shard import Shard
from longctx_eval.scoring.composite import CompositeConfig
from longctx_eval.scoring.effective_length import EffectiveLengthConfig
from longctx_eval.task import TaskInfo

MAX_LENGTHS = 1000
"""Lengths one task of a run may take (RULER and HELMET use 6-13): a longer list is refused before anything runs."""


@dataclass(frozen=True)
class TaskPlan:
    """One task of a run: lengths (None = the task's defaults), samples per length, and task arguments.

    `length_args` holds per-length overrides of `args` (a suite's `args_at`): length -> {argument: value}.
    """

    info: TaskInfo
    lengths: tuple[int, ...] | None = None
    limit: int | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    length_args: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lengths is not None and len(self.lengths) > MAX_LENGTHS:
            raise ConfigError(
                f"task {self.info.name!r}: {len(self.lengths):,} lengths; expected at most {MAX_LENGTHS:,} per task"
            )

    @property
    def resolved_lengths(self) -> list[int]:
        return list(self.lengths or self.info.default_lengths)

    @property
    def applied_length_args(self) -> dict[int, dict[str, Any]]:
        """The overrides of the lengths this plan runs (a length left out by --lengths has none), non-empty only."""
        return {n: dict(self.length_args[n]) for n in self.resolved_lengths if self.length_args.get(n)}

    def groups(self) -> list[tuple[list[int], dict[str, Any]]]:
        """(lengths, arguments) per distinct set of arguments, in length order of first use: one build each."""
        out: list[tuple[list[int], dict[str, Any]]] = []
        overrides = self.applied_length_args
        for n in self.resolved_lengths:
            args = {**self.args, **overrides.get(n, {})}
            held = next((g for g in out if g[1] == args), None)
            if held is None:
                out.append(([n], args))
            else:
                held[0].append(n)
        return out

    def with_args(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword fields of a copy whose `given` arguments (--task-arg) apply at every length, overrides too."""
        length_args = {n: {k: v for k, v in o.items() if k not in given} for n, o in self.length_args.items()}
        return {"args": {**self.args, **given}, "length_args": length_args}

    def as_dict(self) -> dict:
        out = {"name": self.info.name, "lengths": self.resolved_lengths, "limit": self.limit, "args": dict(self.args)}
        if self.applied_length_args:
            out["length_args"] = {str(n): a for n, a in self.applied_length_args.items()}
        return out


@dataclass(frozen=True)
class RunConfig:
    """What every model of one invocation shares: seed, output folder, extra plugin folders, strictness."""

    seed: int
    out: Path
    include_paths: tuple[str, ...] = ()
    strict: bool = False
    effective: EffectiveLengthConfig = field(default_factory=EffectiveLengthConfig)
    """Effective-length thresholds the run's scoring uses (`--effective-threshold`, `--effective-relative`)."""
    budget: Budget | None = None
    """`--max-cost`: the invocation's spending limit on served models (None = no limit)."""
    composite: CompositeConfig | None = None
    """Served runs' composite score: weights and latency kind (`--composite-weights`, `--composite-latency`)."""
    shard: Shard | None = None
    """`--shard I/N`: this process runs shard I of N of every task's samples, into its own run folder."""


def parse_task_args(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """`--task-arg TASK.KEY=VALUE` (repeatable) -> {task: {key: value}}; values are converted per task later."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        target, sep, value = item.partition("=")
        task, dot, key = target.strip().partition(".")
        if not sep or not dot or not task or not key:
            raise ConfigError(f"--task-arg {item!r}: expected TASK.KEY=VALUE, e.g. needle.source=synthetic")
        out.setdefault(task, {})[key] = value
    return out


def parse_lengths(text: str) -> tuple[int, ...] | None:
    """'default' -> None (each task's defaults); '1024,4k,1M' -> (1024, 4096, 1048576)."""
    text = text.strip()
    if text in ("", "default"):
        return None
    out = []
    for part in text.split(","):
        p = part.strip().lower()
        mult = {"k": 1024, "m": 1024 * 1024}.get(p[-1:], 1)
        digits = p[:-1] if mult > 1 else p
        if not digits.isdigit() or int(digits) <= 0:
            raise ConfigError(f"--lengths: {part.strip()!r} is not a positive token count; expected e.g. 1024,4k,1M")
        out.append(int(digits) * mult)
    return tuple(dict.fromkeys(out))


def parse_tasks(text: str) -> tuple[str, ...]:
    """'default' or a comma-separated list of task names."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise ConfigError("--tasks is empty; expected 'default' or task names, e.g. needle")
    return names


def check_limit(limit: int | None, where: str) -> int | None:
    """A limit is a positive number of samples per task and length."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ConfigError(f"{where}: limit must be a positive number of samples per length, got {limit!r}")
    return limit
