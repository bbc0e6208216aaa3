"""Task discovery: the in-tree tasks/ folder, --include-path folders and the `longctx_eval.tasks` entry points."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from longctx_eval.errors import ConfigError, TaskDefinitionError, did_you_mean
from longctx_eval.task import TaskInfo, take_pending

ENTRY_POINT_GROUP = "longctx_eval.tasks"
IN_TREE = Path(__file__).resolve().parent.parent / "tasks"


def _plugin_files(folder: Path) -> list[Path]:
    """Task modules of a folder: `name.py` or `name/__init__.py`; names starting with '_' are helpers."""
    found = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(("_", ".")):
            continue
        if p.suffix == ".py":
            found.append(p)
        elif p.is_dir() and (p / "__init__.py").is_file():
            found.append(p / "__init__.py")
    return found


def _import_file(path: Path) -> list[TaskInfo]:
    """Import one plugin file under a private module name and return the tasks it registered."""
    tag = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    modname = f"longctx_eval_plugins.{path.parent.name if path.name == '__init__.py' else path.stem}_{tag}"
    if modname in sys.modules:
        return list(getattr(sys.modules[modname], "__longctx_tasks__", []))
    is_pkg = path.name == "__init__.py"
    spec = importlib.util.spec_from_file_location(
        modname, path, submodule_search_locations=[str(path.parent)] if is_pkg else None
    )
    if spec is None or spec.loader is None:
        raise TaskDefinitionError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    take_pending()
    try:
        spec.loader.exec_module(module)
    except TaskDefinitionError as exc:
        del sys.modules[modname]
        if str(exc).startswith(str(path)):
            raise
        raise TaskDefinitionError(f"{path}{_line_in(path, exc)}: {exc}") from exc
    except Exception as exc:
        del sys.modules[modname]
        line = _line_in(path, exc)
        raise TaskDefinitionError(
            f"{path}{line}: plugin failed to import: {type(exc).__name__}: {exc}. "
            "Expected a module defining one @task-decorated factory"
        ) from exc
    tasks = take_pending()
    if len(tasks) != 1:
        del sys.modules[modname]
        what = "no @task-decorated factory" if not tasks else f"{len(tasks)} tasks"
        raise TaskDefinitionError(
            f"{path}: defines {what}; expected exactly one @task(name=..., ...) factory per module"
        )
    module.__longctx_tasks__ = tasks  # type: ignore[attr-defined]
    return tasks


def _line_in(path: Path, exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f":{exc.lineno}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename) == path:
            return f":{frame.lineno}"
    return ""


_EP_CACHE: dict[str, list[TaskInfo]] = {}


def _from_entry_points() -> list[TaskInfo]:
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.value in _EP_CACHE:  # a module registers its tasks once, at its first import
            found.extend(_EP_CACHE[ep.value])
            continue
        take_pending()
        try:
            ep.load()
        except Exception as exc:
            raise TaskDefinitionError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r} failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        tasks = take_pending()
        if not tasks:
            raise TaskDefinitionError(
                f"entry point {ep.name!r} ({ep.value}) registered no task; expected a module with one @task factory"
            )
        _EP_CACHE[ep.value] = tasks
        found.extend(tasks)
    return found


def discover(include_paths: Sequence[str | Path] = (), *, in_tree: bool = True) -> dict[str, TaskInfo]:
    """Every task from the in-tree folder, the given folders and the entry points, by name."""
    infos: list[TaskInfo] = []
    folders = ([IN_TREE] if in_tree and IN_TREE.is_dir() else []) + [Path(p) for p in include_paths]
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"--include-path {folder}: not a folder; expected a folder of task modules")
        for path in _plugin_files(folder):
            infos.extend(_import_file(path))
    infos.extend(_from_entry_points())
    registry: dict[str, TaskInfo] = {}
    for info in infos:
        if info.name in registry and registry[info.name].source != info.source:
            raise TaskDefinitionError(
                f"task name {info.name!r} is defined twice: {registry[info.name].source} and {info.source}"
            )
        registry[info.name] = info
    return registry


def select(registry: dict[str, TaskInfo], names: Iterable[str]) -> list[TaskInfo]:
    """The named tasks, in order; an unknown name is an error with a suggestion."""
    chosen = []
    for name in names:
        if name not in registry:
            raise ConfigError(f"unknown task {name!r}.{did_you_mean(name, registry)}")
        chosen.append(registry[name])
    return chosen
