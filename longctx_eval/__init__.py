"""longctx-eval: exact, reproducible long-context evaluation.

The task-plugin API is the names below plus the public names of `data_builders` (haystack sources,
exact-length assembly, needle and fact insertion with exact spans); docs/plugins.md states the contract.
"""

from longctx_eval.capability import Capability
from longctx_eval.errors import (
    ConfigError,
    DataError,
    LongctxError,
    PrerequisiteError,
    RunFileError,
    TaskDefinitionError,
    TaskUnavailable,
)
from longctx_eval.hashing import sha256_json
from longctx_eval.metrics.aggregate import Metric, custom, mean, rate, ratio
from longctx_eval.metrics.contrast import Contrast, contrast
from longctx_eval.metrics.curves import Curve, curve
from longctx_eval.metrics.retrieval import first_covering_rank, recall_at
from longctx_eval.metrics.text_match import contains_answer, is_empty, normalize
from longctx_eval.provenance import __version__
from longctx_eval.sample import Hit, Prediction, Request, RetrievalParams, Sample, Score
from longctx_eval.sample_plan import Planned, PlannedDataset
from longctx_eval.task import Bounds, Requirement, Task, TaskInfo, any_of, between, gold_answer_oracle, task
from longctx_eval.text.tokenizer import Encoded, Tokenizer

__all__ = [
    "Bounds",
    "Capability",
    "TaskUnavailable",
    "ConfigError",
    "Contrast",
    "Curve",
    "DataError",
    "Encoded",
    "Hit",
    "LongctxError",
    "Metric",
    "Planned",
    "PlannedDataset",
    "Prediction",
    "PrerequisiteError",
    "Request",
    "Requirement",
    "RetrievalParams",
    "RunFileError",
    "Sample",
    "Score",
    "Task",
    "TaskDefinitionError",
    "TaskInfo",
    "Tokenizer",
    "__version__",
    "any_of",
    "between",
    "contains_answer",
    "contrast",
    "curve",
    "custom",
    "first_covering_rank",
    "gold_answer_oracle",
    "is_empty",
    "mean",
    "normalize",
    "rate",
    "ratio",
    "recall_at",
    "sha256_json",
    "task",
]
