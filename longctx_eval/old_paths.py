"""Module paths that moved in 0.2 keep importing for one release, each with a DeprecationWarning.

One table maps an old dotted name to its new one; a meta-path finder answers an import of an old name with
the new module itself (so `isinstance` checks, monkeypatching and module state stay shared). An old module
whose name is now a package (`longctx_eval.scoring`, once scoring.py) forwards that module's names through
`forward`, the package's lazy `__getattr__`. `data_builders` installs its own table the same way.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

MOVED: dict[str, str] = {
    "longctx_eval.io": "longctx_eval.atomic_io",
    "longctx_eval.run_dir": "longctx_eval.run_folder.naming",
    "longctx_eval.run_lock": "longctx_eval.run_folder.lock",
    "longctx_eval.run_paths": "longctx_eval.run_folder.paths",
    "longctx_eval.manifest": "longctx_eval.run_folder.manifest",
    "longctx_eval.predictions": "longctx_eval.run_folder.predictions",
    "longctx_eval.prediction_records": "longctx_eval.run_folder.prediction_lines",
    "longctx_eval.score_records": "longctx_eval.run_folder.score_lines",
    "longctx_eval.runner": "longctx_eval.run.runner",
    "longctx_eval.run_config": "longctx_eval.run.config",
    "longctx_eval.sampling": "longctx_eval.run.sampling",
    "longctx_eval.suite": "longctx_eval.run.suite",
    "longctx_eval.dry_run": "longctx_eval.run.dry_run",
    "longctx_eval.cost": "longctx_eval.run.cost",
    "longctx_eval.cost_estimate": "longctx_eval.run.cost_estimate",
    "longctx_eval.discovery": "longctx_eval.run.discovery",
    "longctx_eval.validate_task": "longctx_eval.run.validate_task",
    "longctx_eval.result_text": "longctx_eval.scoring.labels",
    "longctx_eval.metrics.metric_rows": "longctx_eval.scoring.rows",
    "longctx_eval.metrics.slicing": "longctx_eval.scoring.slicing",
    "longctx_eval.metrics.curve_points": "longctx_eval.scoring.curves",
    "longctx_eval.metrics.contrast_values": "longctx_eval.scoring.contrasts",
    "longctx_eval.metrics.effective_length": "longctx_eval.scoring.effective_length",
    "longctx_eval.metrics.composite": "longctx_eval.scoring.composite",
    "longctx_eval.metrics.latency": "longctx_eval.scoring.latency",
    "longctx_eval.metrics.timing": "longctx_eval.scoring.timing",
    "longctx_eval.metrics.resample": "longctx_eval.scoring.resample",
    "longctx_eval.metrics.paired_tests": "longctx_eval.scoring.paired_tests",
    "longctx_eval.paired_scores": "longctx_eval.scoring.paired_scores",
    "longctx_eval.run_comparison": "longctx_eval.scoring.comparison",
    "longctx_eval.leaderboard_merge": "longctx_eval.leaderboard.merge",
    "longctx_eval.leaderboard_render": "longctx_eval.leaderboard.markdown",
    "longctx_eval.leaderboard_breakdowns": "longctx_eval.leaderboard.breakdowns",
    "longctx_eval.leaderboard_details": "longctx_eval.leaderboard.details",
    "longctx_eval.leaderboard_noise": "longctx_eval.leaderboard.noise",
    "longctx_eval.leaderboard_serving": "longctx_eval.leaderboard.serving",
    "longctx_eval.leaderboard_significance": "longctx_eval.leaderboard.significance",
    "longctx_eval.leaderboard_site": "longctx_eval.leaderboard.site",
    "longctx_eval.plots": "longctx_eval.leaderboard.heatmaps",
    "longctx_eval.line_plots": "longctx_eval.leaderboard.line_plots",
}  # end of MOVED


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the already-imported new module."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module, imported under its own name."""
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module already ran."""


class OldPathFinder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names of one table."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = dict(table)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name (its module is the new one), or None for every other name."""
        new = self.table.get(fullname)
        if new is None:
            return None
        _warn(fullname, new)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install(table: Mapping[str, str]) -> None:
    """Register a finder for the old names of `table` (once per table), ahead of the path finders, so an old
    name never reaches a stale copy of its file elsewhere on the path (an editable install's finder would)."""
    if not any(isinstance(f, OldPathFinder) and f.table == dict(table) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder(table))


def forward(package: str, target: str) -> Callable[[str], Any]:
    """A package's `__getattr__` serving the names of the old module that had the package's name (now `target`)."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        if not hasattr(module, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _warn(f"{package}.{name}", f"{target}.{name}")
        return getattr(module, name)

    return __getattr__
