"""The configuration of a run, strict: unknown keys and bad values are errors, never defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from longctx_eval.errors import ConfigError
from longctx_eval.task import TaskInfo


@dataclass(frozen=True)
class TaskPlan:
    """One task of a run: at which lengths (None = the task's defaults) and at most how many samples per length."""

    info: TaskInfo
    lengths: tuple[int, ...] | None = None
    limit: int | None = None

    @property
    def resolved_lengths(self) -> list[int]:
        return list(self.lengths or self.info.default_lengths)

    def as_dict(self) -> dict:
        return {"name": self.info.name, "lengths": self.resolved_lengths, "limit": self.limit}


@dataclass(frozen=True)
class RunConfig:
    """What every model of one invocation shares: seed, output folder, extra plugin folders."""

    seed: int
    out: Path
    include_paths: tuple[str, ...] = ()


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
