"""Which tasks export to another harness, and the checks that refuse the rest in one line.

A task exports when it is scored on generated text, one request per sample, and its rows come from a builder
of the same name whose rows `data_builders.interop` turns back into the task's Samples. Its score fields are
the ones a generated answer gets from the task's scorer (retrieval fields are not reported by other harnesses).
"""

from __future__ import annotations

from dataclasses import dataclass

from longctx_eval.capability import Capability
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.export.built_dataset import BuiltDataset
from longctx_eval.task import TaskInfo


@dataclass(frozen=True)
class ExportTarget:
    """An exportable task: the score fields of a generated answer, the first the primary one."""

    task: str
    fields: tuple[str, ...]


EXPORTABLE: dict[str, ExportTarget] = {
    t.task: t
    for t in (
        ExportTarget("needle", ("score", "exact", "empty")),
        ExportTarget("cross_paragraph", ("score", "exact", "empty", "intermediate", "distractor")),
    )
}
"""Tasks whose rows `data_builders.interop.ROW_READERS` reads (a test checks that both name the same tasks)."""


def export_target(name: str, include_paths: tuple[str, ...] = ()) -> tuple[TaskInfo, ExportTarget]:
    """The task called `name` and its export target; ConfigError (exit 2) for an unknown or unexportable task."""
    info = discover(include_paths).get(name)  # unknown: one line with a did-you-mean
    exportable = ", ".join(EXPORTABLE)
    if Capability.GENERATE not in info.requires.options:
        raise ConfigError(
            f"task {name!r} cannot be exported: it is not scored on generated text (it requires "
            f"{info.requires.describe()}); exportable tasks: {exportable}"
        )
    target = EXPORTABLE.get(name)
    if target is None:
        raise ConfigError(
            f"task {name!r} cannot be exported yet: only tasks with one generation request per sample and a "
            f"dataset builder of their own export; exportable tasks: {exportable}"
        )
    return info, target


def check_dataset(target: ExportTarget, built: BuiltDataset) -> None:
    """ConfigError unless `built` was built by the task's own builder with at least one length."""
    if built.builder != target.task:
        raise ConfigError(
            f"--dataset {built.folder}: built by builder {built.builder!r}; task {target.task!r} needs "
            f"`longctx-eval build {target.task} ...`"
        )
    if not built.lengths:
        raise ConfigError(f"--dataset {built.folder}: the card lists no lengths")
