"""Suites: which model runs which tasks at which lengths and limits, read from a strict TOML file.

The default suite (`longctx_eval/suites/default.toml`) is what `make eval` runs with no MODEL and no TASKS.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from longctx_eval.errors import ConfigError, did_you_mean
from longctx_eval.registry import Registry
from longctx_eval.run.config import MAX_LENGTHS, TaskPlan, check_limit, parse_lengths
from longctx_eval.task import TaskInfo

SUITES = Path(__file__).resolve().parents[1] / "suites"
TASK_KEYS = frozenset({"lengths", "limit", "args", "args_at"})
BOM = "\ufeff"


def suite_path(name: str) -> Path:
    """A suite by name (a file in longctx_eval/suites/) or by path to a .toml file."""
    path = Path(name)
    if path.suffix == ".toml":
        if not path.is_file():
            raise ConfigError(f"suite file {path} does not exist")
        return path
    known = sorted(p.stem for p in SUITES.glob("*.toml"))
    if name not in known:
        raise ConfigError(f"unknown suite {name!r}.{did_you_mean(name, known)}")
    return SUITES / f"{name}.toml"


def load_suite(name: str, registry: Registry[TaskInfo]) -> dict[str, list[TaskPlan]]:
    """Model spec -> its task plans, in file order; every key is checked against what is known."""
    path = suite_path(name)
    try:
        # one leading byte-order mark is allowed (TOML is UTF-8 text; Windows editors write one)
        data = tomllib.loads(path.read_bytes().decode("utf-8").removeprefix(BOM))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); expected a UTF-8 TOML suite file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: a value is nested too deeply to read (arrays or inline tables hundreds of levels deep); "
            "expected a suite such as [bm25] needle = { lengths = [1024], args = { depths = 3 } }"
        ) from None
    except OSError as exc:
        raise ConfigError(f"suite file {path} cannot be read: {exc.strerror or exc}") from None
    plans: dict[str, list[TaskPlan]] = {}
    for spec, tasks in data.items():
        if not isinstance(tasks, dict) or not tasks:
            raise ConfigError(f"{path}: [{_shown(spec)}] must be a table of tasks, e.g. needle = {{}}")
        plans[spec] = [_plan(path, spec, task, opts, registry) for task, opts in tasks.items()]
    if not plans:
        raise ConfigError(f"{path}: the suite names no model")
    return plans


def _shown(name: str) -> str:
    """A table or key name as written in a message: quoted when it holds a line break or another unprintable
    character, so the message stays one line."""
    return name if name.isprintable() else repr(name)


def _plan(path: Path, spec: str, task: str, opts: object, registry: Registry[TaskInfo]) -> TaskPlan:
    where = f"{path}: [{_shown(spec)}] {_shown(task)}"
    if not isinstance(opts, dict):
        raise ConfigError(
            f"{where}: expected a table such as {{ lengths = [1024], limit = 2, args = {{ depths = 3 }} }}"
        )
    unknown = set(opts) - TASK_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"{where}: unknown key {key!r}.{did_you_mean(key, TASK_KEYS)}")
    lengths = opts.get("lengths")
    if lengths is not None and (
        not isinstance(lengths, list) or not lengths or not all(isinstance(n, int) and n > 0 for n in lengths)
    ):
        raise ConfigError(f"{where}: lengths must be a non-empty list of positive token counts, got {lengths!r}")
    if lengths is not None and len(lengths) > MAX_LENGTHS:
        raise ConfigError(f"{where}: {len(lengths):,} lengths; expected at most {MAX_LENGTHS:,} per task")
    info = registry.get(task)
    args = opts.get("args", {})
    if not isinstance(args, dict):
        raise ConfigError(f"{where}: args must be a table of task arguments, e.g. args = {{ source = 'synthetic' }}")
    checked = info.check_args(args, where)
    planned = tuple(lengths) if lengths else info.default_lengths
    length_args = _length_args(where, opts.get("args_at", {}), planned, info)
    return TaskPlan(
        info, tuple(lengths) if lengths else None, check_limit(opts.get("limit"), where), checked, length_args
    )


def _length_args(where: str, table: object, lengths: tuple[int, ...], info: TaskInfo) -> dict[int, dict[str, object]]:
    """`args_at = { 1048576 = { per_cell = 2 } }` (or `1M = ...`): per-length overrides of `args`, checked like it."""
    example = "args_at = { 1048576 = { per_cell = 2 } }"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: args_at must be a table of lengths, e.g. {example}")
    out: dict[int, dict[str, object]] = {}
    for raw, overrides in table.items():
        try:
            parsed = parse_lengths(raw)
        except (ConfigError, ValueError):  # ValueError: digits int() does not read, such as '²'
            parsed = None
        length = parsed[0] if parsed and len(parsed) == 1 else None
        if length is None or length not in lengths:
            raise ConfigError(
                f"{where}: args_at.{_shown(raw)}: not one of the task's lengths {list(lengths)}; "
                f"expected e.g. {example}"
            )
        if not isinstance(overrides, dict) or not overrides:
            raise ConfigError(
                f"{where}: args_at.{_shown(raw)} must be a non-empty table of task arguments, e.g. {example}"
            )
        out[length] = info.check_args(overrides, f"{where} args_at.{_shown(raw)}")
    return out
