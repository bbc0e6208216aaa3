"""A built dataset as another harness's samples, scored by the task itself (lm-eval and inspect_ai exports).

The files `longctx-eval export` writes import this module: each row of a `longctx-eval build` dataset becomes
the task's own `Sample` (the builder's row reader), the task's own prompt function gives its prompt, answer
prefix and budget, and the task's own scorer (through `longctx_eval.scoring.score.score_one`, as `score` runs it)
scores the generated text. Nothing is re-implemented, so the rule cannot drift from ours.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from data_builders.cross_paragraph.grid import row_sample
from data_builders.needle.builder import documents_by_id, needle_sample
from longctx_eval.discovery import discover
from longctx_eval.errors import DataError
from longctx_eval.export.built_dataset import BuiltDataset, read_built
from longctx_eval.export.targets import EXPORTABLE
from longctx_eval.sample import Prediction, Request, Sample
from longctx_eval.scoring.score import score_one
from longctx_eval.task import Task

RowReader = Callable[[Mapping[str, Any], Mapping[str, str] | None], Sample]

ROW_READERS: dict[str, RowReader] = {
    "needle": lambda row, docs: needle_sample(row, docs),
    "cross_paragraph": lambda row, docs: row_sample(row),
}
"""Task name -> (row, documents or None) -> the task's Sample of that row."""


@dataclass(frozen=True)
class Prompted:
    """What a harness sends for one sample: the user turn, the text the reply starts with, the budget."""

    prompt: str
    answer_prefix: str
    max_new_tokens: int


class ExportedTask:
    """One task over one built dataset: rows to Samples, Samples to prompts, generated text to our scores."""

    def __init__(self, name: str, folder: str | Path) -> None:
        self.name = name
        self.dataset: BuiltDataset = read_built(Path(folder))
        self.target = EXPORTABLE[name]
        self._read = ROW_READERS[name]
        info = discover().get(name)
        self.task: Task = info.build({}, lengths=list(self.dataset.lengths), seed=self.dataset.seed, tokenizer=None)
        self._documents: dict[str, str] | None = None

    def documents(self) -> dict[str, str] | None:
        """doc_id -> text of the dataset's `documents` config (None when its rows carry their context)."""
        paths = self.dataset.data_files.get("documents")
        if not paths:
            return None
        if self._documents is None:
            docs: dict[str, str] = {}
            for rel in paths:
                docs.update(documents_by_id(pq.read_table(self.dataset.folder / rel).to_pylist()))
            self._documents = docs
        return self._documents

    def sample(self, row: Mapping[str, Any]) -> Sample:
        """The task's Sample of one dataset row."""
        return self._read(row, self.documents())

    def rows(self, length: int) -> list[dict[str, Any]]:
        """The rows of one length, in the dataset's order."""
        return pq.read_table(self.dataset.parquet_of(length)).to_pylist()

    def samples(self, length: int) -> list[Sample]:
        """The task's Samples of one length, in the dataset's order."""
        return [self.sample(row) for row in self.rows(length)]

    def prompted(self, sample: Sample) -> Prompted:
        """The prompt, answer prefix and budget the task sends for `sample` (one request per sample)."""
        request = self.task.prompt(sample)
        if not isinstance(request, Request):
            raise DataError(f"{self.name} sample {sample.id!r}: several requests per sample do not export")
        return Prompted(request.prompt, request.answer_prefix, request.max_new_tokens)

    def score(self, sample: Sample, text: str) -> dict[str, float]:
        """Our score fields of a generated `text` (the continuation after the answer prefix) for `sample`."""
        values = score_one(self.task.scorer, sample, Prediction(text=text)).values
        return {f: float(values[f]) for f in self.target.fields}


@cache
def exported_task(name: str, folder: str) -> ExportedTask:
    """The ExportedTask of (task, dataset folder), built once per process."""
    return ExportedTask(name, folder)
