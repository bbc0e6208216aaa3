"""The configuration of a run, strict: unknown keys and bad values are errors, never defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from longctx_eval.errors import ConfigError


@dataclass(frozen=True)
class RunConfig:
    """Which tasks at which lengths, with which seed and per-length sample limit, written where."""

    tasks: tuple[str, ...]
    lengths: tuple[int, ...] | None
    seed: int
    limit: int | None
    out: Path
    include_paths: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        d = asdict(self)
        d["out"] = str(self.out)
        d["tasks"] = list(self.tasks)
        d["lengths"] = list(self.lengths) if self.lengths else None
        d["include_paths"] = list(self.include_paths)
        return d


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
