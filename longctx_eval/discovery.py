"""Task discovery: the in-tree tasks/ folder, --include-path folders and the `longctx_eval.tasks` entry points.

Each plugin folder is imported as a private package (so a plugin imports its `_helper.py` modules
relatively, and the distribution claims no top-level `tasks` name); every task lands in one `Registry`.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import traceback
import types
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from longctx_eval.errors import ConfigError, TaskDefinitionError
from longctx_eval.registry import Registry
from longctx_eval.task import TaskInfo, take_pending

ENTRY_POINT_GROUP = "longctx_eval.tasks"
IN_TREE = Path(__file__).resolve().parent.parent / "tasks"
PLUGIN_ROOT = "longctx_eval_plugins"


def _plugin_names(folder: Path) -> list[tuple[str, Path]]:
    """Task modules of a folder: `name.py` or `name/__init__.py`; names starting with '_' are helpers."""
    found = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(("_", ".")):
            continue
        if p.suffix == ".py":
            found.append((p.stem, p))
        elif p.is_dir() and (p / "__init__.py").is_file():
            found.append((p.name, p / "__init__.py"))
    return found


def _folder_package(folder: Path) -> str:
    """A private package whose __path__ is `folder`, so its modules import each other relatively."""
    if PLUGIN_ROOT not in sys.modules:
        root = types.ModuleType(PLUGIN_ROOT)
        root.__path__ = []  # a namespace for the per-folder packages
        sys.modules[PLUGIN_ROOT] = root
    tag = hashlib.sha1(str(folder).encode()).hexdigest()[:10]
    name = f"{PLUGIN_ROOT}.{folder.name if folder.name.isidentifier() else 'plugins'}_{tag}"
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(folder)]
        pkg.__file__ = str(folder / "__init__.py")
        sys.modules[name] = pkg
    return name


def _import_plugin(package: str, stem: str, path: Path) -> list[TaskInfo]:
    """Import one plugin module and return the tasks it registered (exactly one)."""
    modname = f"{package}.{stem}"
    if modname in sys.modules:
        return list(getattr(sys.modules[modname], "__longctx_tasks__", []))
    take_pending()
    try:
        module = importlib.import_module(modname)
    except TaskDefinitionError as exc:
        sys.modules.pop(modname, None)
        if str(exc).startswith(str(path)):
            raise
        raise TaskDefinitionError(f"{path}{_line_in(path, exc)}: {exc}") from exc
    except Exception as exc:
        sys.modules.pop(modname, None)
        raise TaskDefinitionError(
            f"{path}{_line_in(path, exc)}: plugin failed to import: {type(exc).__name__}: {exc}. "
            "Expected a module defining one @task-decorated factory"
        ) from exc
    tasks = take_pending()
    if len(tasks) != 1:
        sys.modules.pop(modname, None)
        what = "no @task-decorated factory" if not tasks else f"{len(tasks)} tasks"
        raise TaskDefinitionError(
            f"{path}: defines {what}; expected exactly one @task(name=..., ...) factory per module"
        )
    module.__longctx_tasks__ = tasks  # type: ignore[attr-defined]
    return tasks


def _line_in(path: Path, exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno and Path(exc.filename or "") == path:
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


def discover(include_paths: Sequence[str | Path] = (), *, in_tree: bool = True) -> Registry[TaskInfo]:
    """Every task from the in-tree folder, the given folders and the entry points, in one registry."""
    registry: Registry[TaskInfo] = Registry("task")
    folders = ([IN_TREE] if in_tree and IN_TREE.is_dir() else []) + [Path(p).resolve() for p in include_paths]
    infos: list[TaskInfo] = []
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"--include-path {folder}: not a folder; expected a folder of task modules")
        package = _folder_package(folder)
        for stem, path in _plugin_names(folder):
            infos.extend(_import_plugin(package, stem, path))
    infos.extend(_from_entry_points())
    for info in infos:
        registry.register(info.name, info, source=info.source)
    return registry


def select(registry: Registry[TaskInfo], names: Iterable[str]) -> list[TaskInfo]:
    """The named tasks, in order; an unknown name is an error with a suggestion."""
    return [registry.get(name) for name in names]


def in_tree_tasks(registry: Registry[TaskInfo]) -> list[TaskInfo]:
    """The tasks shipped in the repository's tasks/ folder (what `--tasks default` runs), by name."""
    return [info for _, info in registry.items() if Path(info.source).is_relative_to(IN_TREE)]
