"""The typed run-file records and the one reader/writer of run files; schema.json is generated from here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longctx_eval.errors import RunFileError
from longctx_eval.io import atomic_write_text

SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteInfo(_Strict):
    version: str = Field(description="longctx-eval version")
    git: str | None = Field(description="git commit of the suite checkout, null outside a checkout")


class ModelMeta(_Strict):
    spec: str = Field(description="the model spec as given, e.g. 'smollm2-135m' or 'hf:org/name?dtype=bfloat16'")
    name: str = Field(description="short display name, one leaderboard entry per name")
    kind: str = Field(description="adapter kind: hf, retriever, bm25, oracle, ...")
    revision: str | None = Field(default=None, description="hub revision or local folder path")
    sha256: str | None = Field(default=None, description="hash of the weights (or index parameters)")
    params: int | None = Field(default=None, description="parameter count, null for non-neural systems")
    dtype: str | None = None
    tokenizer: str = Field(description="name of the tokenizer lengths are measured in")
    tokenizer_sha256: str | None = None
    chat_template_sha256: str | None = None
    context_window: int | None = Field(default=None, description="max prompt+generation tokens, null if none")
    capabilities: list[str]


class Environment(_Strict):
    python: str
    torch: str | None = None
    transformers: str | None = None
    platform: str


class MetricResult(_Strict):
    metric: str
    length: int | None = Field(description="target context tokens; null = all lengths pooled")
    depth: float | None = Field(default=None, description="needle depth 0-1; null = all depths pooled")
    value: float
    n: int = Field(ge=0)
    ci95: tuple[float, float] = Field(description="95% percentile-bootstrap interval")


class Throughput(_Strict):
    samples_per_s: float
    prompt_tokens_per_s: float
    seconds: float = Field(description="model time summed over this task's predictions")


class TaskResult(_Strict):
    name: str
    version: str
    capability: str = Field(description="the model capability the task ran through")
    dataset_hash: str = Field(description="sha256 over every sample (context, question, gold, metadata)")
    n_samples: int
    over_length: int = Field(description="samples whose prompt did not fit the model's context window")
    errors: int = Field(description="samples whose prediction failed")
    results: list[MetricResult]
    throughput: Throughput


class Skipped(_Strict):
    task: str
    reason: str


class RunResult(_Strict):
    schema_version: int = SCHEMA_VERSION
    suite: SuiteInfo
    model: ModelMeta
    environment: Environment
    config: dict[str, Any] = Field(description="the run configuration: tasks, lengths, seed, limit")
    config_hash: str
    started: str = Field(description="ISO-8601 UTC start time")
    seconds: float
    tasks: list[TaskResult]
    skipped: list[Skipped]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a run file, as committed in leaderboards/schema.json."""
    schema = RunResult.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://longctx-eval/schema/run-v{SCHEMA_VERSION}.json"
    return schema


def write_run(run: RunResult, path: Path) -> None:
    """Write a run file atomically (temp file + rename)."""
    atomic_write_text(path, run.model_dump_json(indent=2) + "\n")


def read_run(path: Path) -> RunResult:
    """Read and validate a run file; corrupt or schema-invalid files raise RunFileError naming the path."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: cannot be read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        got = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise RunFileError(f"{path}: schema_version is {got!r}; expected {SCHEMA_VERSION}")
    try:
        return RunResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunFileError(f"{path}: field {where!r}: {first['msg']} ({exc.error_count()} schema error(s))") from exc
