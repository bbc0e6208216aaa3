"""The typed run-file records and the one reader/writer of run files; schema.json is generated from here.

Validation is strict: files are validated from their JSON text with no coercion (a string, a boolean or a
float where an integer belongs is an error; an integer is accepted where a float belongs), and NaN or
Infinity is rejected on read and can never be written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.errors import RunFileError

SCHEMA_VERSION = 1
SKIP_KINDS = ("missing_data", "capability", "over_window", "error", "crashed")
SliceValue = bool | int | float | str
"""A sample-metadata value results are sliced by (bucketed: a hop count, a distance bucket, a flag)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SuiteInfo(_Strict):
    version: str = Field(description="longctx-eval version")
    git: str | None = Field(description="git commit of the suite checkout, null outside a checkout")


class ModelMeta(_Strict):
    spec: str = Field(description="the model spec as given, e.g. 'smollm2-135m' or 'hf:org/name?dtype=bfloat16'")
    name: str = Field(description="short display name, one leaderboard entry per name")
    kind: str = Field(description="adapter kind: hf, retriever, bm25, oracle, ...")
    revision: str | None = Field(default=None, description="hub revision or local folder path")
    sha256: str | None = Field(default=None, description="hash of the weights (or index parameters)")
    params: int | None = Field(default=None, ge=0, description="parameter count, null for non-neural systems")
    dtype: str | None = None
    tokenizer: str = Field(description="name of the tokenizer lengths are measured in")
    tokenizer_sha256: str | None = None
    chat_template_sha256: str | None = None
    context_window: int | None = Field(default=None, ge=1, description="max prompt+generation tokens, null if none")
    capabilities: list[str]
    settings: dict[str, Any] = Field(default_factory=dict, description="settings that key predictions")
    identity_sha256: str | None = Field(default=None, description="hash of the model identity (spec, weights)")
    runtime: dict[str, Any] = Field(
        default_factory=dict,
        description="how the model ran here, never part of its identity: device, dtype, attention kernel, batching, "
        "effective generation settings, the context window and why (hf)",
    )


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
    clusters: int | None = Field(
        default=None,
        ge=0,
        description="distinct clusters (haystacks, documents) the n samples come from; null = unknown",
    )
    n_eff: float | None = Field(
        default=None,
        ge=0,
        description="n / (1 + (mean cluster size - 1) x ICC), one-way ANOVA ICC clipped at 0; null when every "
        "cluster is one sample (n_eff = n), all come from one cluster, or the metric has several fields",
    )
    ci95: tuple[float, float] = Field(
        description="95% percentile-bootstrap interval: clusters resampled, then samples within each"
    )
    slice: dict[str, SliceValue] | None = Field(
        default=None,
        description="in a task's `slices` only: the one metadata key and value these samples share (depth pooled)",
    )


class Throughput(_Strict):
    samples_per_s: float
    prompt_tokens_per_s: float
    seconds: float = Field(description="model time summed over this task's predictions")
    output_tokens_per_s: float | None = Field(
        default=None, description="generated (completion) tokens per second; null when no prediction counted any"
    )
    prefill_seconds: float | None = Field(
        default=None, description="hf: of `seconds`, the prefill (prompt up to the first token); null when unknown"
    )
    decode_seconds: float | None = Field(
        default=None, description="hf: of `seconds`, the decode (after the first token); null when unknown"
    )
    ttft_s: LatencyStats | None = Field(
        default=None, description="hf: time to first token per request (its batch's prefill), percentiles"
    )
    peak_device_memory_mb: float | None = Field(
        default=None,
        description="hf on CUDA: the highest peak allocated device memory of a request (MiB, summed "
        "over the model's GPUs); null on the CPU",
    )
    computed: int | None = Field(
        default=None, ge=0, description="predictions served by the run that wrote this file; null when unknown"
    )
    resumed: int | None = Field(
        default=None,
        ge=0,
        description="predictions an earlier run of the folder wrote (resumed): their seconds were measured then",
    )
    cached: int | None = Field(
        default=None,
        ge=0,
        description="predictions served from an index built elsewhere (a retriever's disk cache from an earlier "
        "run, or another model's in the same command): their seconds leave out building it",
    )


class CurvePoint(_Strict):
    x: float
    value: float = Field(description="mean of the point's score field over the samples carrying it")
    n: int = Field(ge=0)
    clusters: int | None = Field(default=None, ge=0, description="distinct clusters of the n samples; null = unknown")
    ci95: tuple[float, float] = Field(description="95% percentile-bootstrap interval (clusters, then samples)")


class CurveResult(_Strict):
    """A task's declared curve (e.g. Recall@K for K = 1..100) at one length, or pooled over lengths."""

    name: str
    length: int | None = Field(description="target context tokens; null = all evaluated lengths pooled")
    x_label: str
    y_label: str
    points: list[CurvePoint]


class ContrastResult(_Strict):
    """A metric on the samples with metadata key == a minus the same on key == b, with a bootstrap interval."""

    name: str
    metric: str
    key: str
    a: SliceValue
    b: SliceValue
    length: int | None = Field(description="target context tokens; null = all evaluated lengths pooled")
    value_a: float
    n_a: int = Field(ge=1)
    value_b: float
    n_b: int = Field(ge=1)
    clusters_a: int | None = Field(default=None, ge=1, description="distinct clusters of side a; null = unknown")
    clusters_b: int | None = Field(default=None, ge=1, description="distinct clusters of side b; null = unknown")
    difference: float = Field(description="value_a - value_b")
    ci95: tuple[float, float] = Field(
        description="95% interval: each side resampled on its own, or, when samples share clusters, the clusters "
        "of both sides resampled together, then the samples within them"
    )


class EffectiveLength(_Strict):
    """The longest evaluated length up to which the primary metric stays at or above a threshold everywhere.

    `value` 0 means the metric was below the threshold already at the shortest evaluated length.
    """

    kind: Literal["absolute", "relative"]
    metric: str
    threshold: float = Field(description="the score the metric had to reach at every length up to `value`")
    fraction: float | None = Field(
        default=None, description="relative only: threshold = fraction x the score at the shortest length"
    )
    base_length: int | None = Field(default=None, description="relative only: the shortest evaluated length")
    base_value: float | None = Field(default=None, description="relative only: the metric at base_length")
    value: int = Field(ge=0, description="effective length in tokens; 0 = below the threshold at the shortest length")
    ci95: tuple[int, int] = Field(description="2.5 and 97.5 percentiles over bootstrap replicates (lengths)")
    min_n: int | None = Field(
        default=None, ge=0, description="the fewest samples at an evaluated length (under 5: no interval shown)"
    )
    min_clusters: int | None = Field(
        default=None, ge=0, description="the fewest clusters at an evaluated length (under 2: no interval shown)"
    )
    lengths: list[int] = Field(description="the evaluated lengths the definition ran over")
    limited_by_window: bool = Field(
        description="the metric held at every evaluated length but longer planned lengths were over the window"
    )
    over_window_lengths: list[int] = Field(
        default_factory=list, description="planned lengths none of whose samples fit the model's window"
    )


class Coverage(_Strict):
    """How much of one stratum (length, depth) of the task's full grid was evaluated."""

    length: int = Field(ge=0, description="target context tokens of the stratum")
    depth: float | None = Field(default=None, description="needle depth 0-1; null for depth-free tasks")
    planned: int = Field(ge=0, description="samples in the task's full grid for this stratum")
    evaluated: int = Field(ge=0, description="scored samples: they fit the model's window and did not fail")
    over_length: int = Field(ge=0, description="samples whose prompt did not fit the model's window")
    failed: int = Field(
        default=0, ge=0, description="samples whose request failed (status error): not scored, re-run on resume"
    )

    @model_validator(mode="after")
    def _within_plan(self) -> Coverage:
        if self.evaluated + self.over_length + self.failed > self.planned:
            raise ValueError(
                f"evaluated ({self.evaluated}) + over_length ({self.over_length}) + failed ({self.failed}) "
                f"exceeds planned ({self.planned})"
            )
        return self


class CompositeWeights(_Strict):
    """Weights of the composite's components; the composite divides by their sum."""

    throughput: float = Field(ge=0)
    latency: float = Field(ge=0)
    recall: float = Field(ge=0)
    fidelity: float = Field(ge=0)


class CompositeScore(_Strict):
    """A served run's composite score and every component beside it (docs/served.md#composite-score)."""

    value: float = Field(description="sum(weight x component) / sum(weights), in [0, 1]")
    weights: CompositeWeights
    throughput: float = Field(description="clip(output_tokens_per_s / 1000, 0, 1)")
    latency: float = Field(description="clip(1 - latency_p95_s / 0.2, 0, 1)")
    recall: float = Field(description="the task's primary metric, pooled (a 0-1 score)")
    fidelity: float = Field(description="mean cosine of answer and reference embeddings, each clipped to [0, 1]")
    output_tokens_per_s: float = Field(description="aggregate output tokens/s the throughput component scores")
    latency_metric: str = Field(description="the latency whose P95 is scored: ttft (first token) or e2e")
    latency_p95_s: float = Field(description="P95 of that latency, seconds")
    recall_metric: str = Field(description="the primary metric used as recall")
    fidelity_n: int = Field(ge=0, description="samples the fidelity averages over, failed requests included")
    failed_as_zero: int = Field(
        default=0, ge=0, description="failed requests (status error) counted 0 in recall and fidelity"
    )
    fidelity_metric: str | None = Field(
        default=None,
        description="what fidelity averages: the score field and its embedder, e.g. 'embedding_similarity "
        "(all-MiniLM-L6-v2, sha256 53aa5117)'; null in files written before it was named (the packaged MiniLM)",
    )


class BertScoreSetup(_Strict):
    """How a task's BERTScore was computed (scoring/semantic.py; equal to bert_score 0.3.13 on the same inputs)."""

    model: str = Field(description="'minilm' (the packaged all-MiniLM-L6-v2) or the local folder named")
    name: str = Field(description="the model's display name")
    sha256: str | None = Field(default=None, description="sha256 of its weights (model.safetensors); null = unknown")
    layer: int = Field(ge=0, description="the hidden state used: after this many transformer layers (0 = embeddings)")
    layers: int = Field(ge=0, description="the model's transformer layers")
    idf: bool = Field(description="tokens weighted by idf over the task's references (else equally)")
    baseline: tuple[float, float, float] | None = Field(
        default=None, description="(P, R, F1) baselines each rescaled as (x - b) / (1 - b); null = raw scores"
    )
    max_tokens: int = Field(ge=1, description="word pieces per text, special tokens included; longer is truncated")


class EmbedderSetup(_Strict):
    """The sentence embedder of a task's embedding similarity."""

    model: str = Field(description="'minilm' (the packaged all-MiniLM-L6-v2) or the local folder named")
    name: str
    sha256: str | None = Field(default=None, description="sha256 of its weights (model.safetensors); null = unknown")
    max_tokens: int = Field(ge=1, description="word pieces per text; longer is truncated")


class DriftPoint(_Strict):
    """One point of a task's semantic drift: the answers of consecutive runner batches (in serving order)."""

    first_batch: int = Field(ge=0, description="the first batch merged into this point (runner order)")
    last_batch: int = Field(ge=0)
    n: int = Field(ge=1, description="answers in the point")
    clusters: int = Field(ge=1, description="distinct clusters (haystacks, documents) of those answers")
    bertscore_f1: float = Field(description="mean BERTScore F1 of the point's answers")
    ci95: tuple[float, float] = Field(description="its 95% bootstrap interval (clusters, then samples)")
    delta_f1: float = Field(description="bertscore_f1 minus the task's pooled mean F1")
    embedding_similarity: float = Field(description="mean embedding similarity of the point's answers")


class SemanticSection(_Strict):
    """A task's semantic fidelity (docs/semantic_fidelity.md): how it was computed and its drift per batch; the
    per-sample values are in scores/<task>.jsonl, the means with intervals in `results`."""

    bertscore: BertScoreSetup
    embedding: EmbedderSetup
    answers: int = Field(ge=0, description="answers scored (status ok, with a text answer and a reference)")
    batches: str = Field(
        description="'runner': points from the batches the runner recorded (merged until each holds min_point "
        "answers); 'order': no batch recorded, consecutive answers in serving order"
    )
    min_point: int = Field(ge=1, description="the fewest answers a drift point holds")
    drift: list[DriftPoint] = Field(default_factory=list, description="per batch group, in serving order")


class LatencyStats(_Strict):
    """Percentiles of one latency (seconds) or speed over a task's served requests (scoring/latency.py)."""

    n: int = Field(ge=1)
    mean: float
    p50: float
    p95: float
    p99: float


class ServingThroughput(_Strict):
    """Aggregate throughput over the time at least one request was in flight (`wall_s`)."""

    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    total_tokens_per_s: float | None = Field(default=None, description="prompt + output tokens per second")


class ServingStats(_Strict):
    """A served model's (`openai:`) latency, throughput, retries, failures and length checks for one task."""

    requests: int = Field(ge=0)
    ok: int = Field(ge=0)
    failed: int = Field(ge=0, description="requests that failed after every attempt (recorded, re-run on resume)")
    failure_kinds: dict[str, int] = Field(default_factory=dict)
    attempts: int = Field(ge=0)
    retries: int = Field(ge=0)
    retries_by_reason: dict[str, int] = Field(
        default_factory=dict, description="429, 5xx, timeout, connection, broken_stream, invalid_json"
    )
    ttft_s: LatencyStats | None = Field(default=None, description="first-token latency")
    e2e_s: LatencyStats | None = Field(default=None, description="last-token (end-to-end) latency")
    itl_s: LatencyStats | None = Field(default=None, description="inter-token latency (gaps between chunks)")
    tpot_s: LatencyStats | None = Field(default=None, description="(e2e - ttft) / (output tokens - 1)")
    output_tokens_per_s: LatencyStats | None = Field(default=None, description="per request: output tokens / e2e")
    prompt_tokens: int = Field(ge=0, description="server-reported prompt tokens of the successful requests")
    completion_tokens: int = Field(ge=0)
    wall_s: float = Field(ge=0, description="time at least one request was in flight")
    throughput: ServingThroughput
    length_checked: int = Field(default=0, ge=0, description="requests whose server reported prompt tokens")
    length_mismatches: int = Field(default=0, ge=0, description="of those, beyond the length tolerance")
    length_mismatch_samples: list[str] = Field(default_factory=list, description="their sample ids (first 50)")


class TaskResult(_Strict):
    name: str
    version: str
    capability: str = Field(description="the model capability the task ran through")
    dataset_hash: str = Field(description="sha256 over every sample (context, question, gold, metadata)")
    n_samples: int = Field(ge=0)
    over_length: int = Field(ge=0, description="samples whose prompt did not fit the model's context window")
    errors: int = Field(ge=0, description="samples whose request failed (status error): counted, never scored")
    failures: dict[str, int] = Field(
        default_factory=dict, description="why requests failed: each distinct error message with its sample count"
    )
    results: list[MetricResult]
    cluster_noun: str | None = Field(
        default=None, description="what the task's clusters are (haystacks, documents); null = clusters"
    )
    throughput: Throughput
    args: dict[str, Any] = Field(default_factory=dict, description="task arguments (--task-arg, suite 'args')")
    length_args: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="per-length overrides of args (suite 'args_at'), length -> arguments; null = none",
    )
    lengths: list[int] | None = Field(default=None, description="context lengths the task was asked to run")
    limit: int | None = Field(default=None, ge=0, description="--limit: samples per length, null = all")
    seed: int | None = None
    config_hash: str | None = Field(default=None, description="hash of this task's run configuration")
    started: str | None = Field(default=None, description="ISO-8601 UTC time this task's run started")
    scorer_sha256: str | None = Field(default=None, description="hash of the task's scoring code")
    coverage: list[Coverage] = Field(
        default_factory=list, description="per stratum: planned, evaluated and over-length sample counts"
    )
    pooled_lengths: list[int] | None = Field(
        default=None, description="lengths the pooled rows (length null) pool: those with evaluated samples"
    )
    warnings: list[str] = Field(default_factory=list, description="problems found while scoring, one line each")
    slices: list[MetricResult] = Field(
        default_factory=list,
        description="each task metric per value of each of the task's slice keys, per length and pooled",
    )
    curves: list[CurveResult] = Field(default_factory=list, description="the task's curves, per length and pooled")
    contrasts: list[ContrastResult] = Field(
        default_factory=list, description="the task's contrasts, per length and pooled"
    )
    effective_length: list[EffectiveLength] = Field(
        default_factory=list, description="absolute and relative effective length of the primary metric"
    )
    composite: CompositeScore | None = Field(
        default=None, description="served runs: the composite serving score with its components (optional)"
    )
    semantic: SemanticSection | None = Field(
        default=None, description="tasks declaring semantic metrics: BERTScore and embedder setup, drift per batch"
    )
    serving: ServingStats | None = Field(
        default=None, description="served models: latency percentiles, throughput, retries, length checks"
    )
    shard: str | None = Field(
        default=None,
        pattern=r"^[1-9][0-9]*/[1-9][0-9]*$",
        description="'I/N' where this is shard I of N of a run (run --shard): a part, until `longctx-eval merge`",
    )

    @model_validator(mode="after")
    def _slices_apart(self) -> TaskResult:
        if any(r.slice is not None for r in self.results):
            raise ValueError("a row of `results` has a slice; sliced rows belong in `slices`")
        if any(r.slice is None or len(r.slice) != 1 for r in self.slices):
            raise ValueError("every row of `slices` needs a slice of exactly one key")
        return self


class Skipped(_Strict):
    task: str
    reason: str
    kind: str | None = Field(default=None, description="why: " + " | ".join(SKIP_KINDS))


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


def task_failed(task: TaskResult) -> bool:
    """Whether every sample of the task that fits the window failed (nothing could be scored)."""
    return task.errors > 0 and task.errors + task.over_length >= task.n_samples


def failure_summary(failures: dict[str, int], limit: int = 3) -> str:
    """The most frequent failure reasons, one line: 'reason A (2); reason B (1); 3 more'."""
    ranked = sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
    text = "; ".join(f"{reason} ({n})" if len(failures) > 1 else reason for reason, n in ranked[:limit])
    return text + (f"; {len(ranked) - limit} more" if len(ranked) > limit else "")


def strata_coverage(coverage: Sequence[Coverage]) -> list[Coverage]:
    """The disjoint strata of a task's coverage: per length its per-depth entries when it has any, else its
    depth-free entry (a per-length summary next to per-depth entries is dropped, so nothing counts twice)."""
    with_depth = {c.length for c in coverage if c.depth is not None}
    return [c for c in coverage if c.depth is not None or c.length not in with_depth]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a run file, as committed in leaderboards/schema.json."""
    schema = RunResult.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://longctx-eval/schema/run-v{SCHEMA_VERSION}.json"
    return schema


def dump_json(data: Any) -> str:
    """JSON text (indent 2, keys in model order) that never contains NaN or Infinity: those raise RunFileError."""
    try:
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
    except ValueError as exc:
        raise RunFileError(f"refusing to write a non-finite number (NaN or Infinity): {exc}") from exc


def run_text(run: RunResult) -> str:
    """The exact text `write_run` writes, checked to read back under strict validation."""
    text = dump_json(run.model_dump(mode="json"))
    try:
        RunResult.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise RunFileError(f"run of model {run.model.name!r} would not read back: {one_line(exc)}") from exc
    return text


def write_run(run: RunResult, path: Path) -> None:
    """Write a run file atomically (temp file + rename); NaN or Infinity anywhere raises RunFileError."""
    atomic_write_text(path, run_text(run))


def parse_run(text: str | bytes, where: str) -> RunResult:
    """Validate run-file text strictly; errors are one line starting with `where` and naming the field."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise RunFileError(f"{where}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{where}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    bad = non_finite_path(data)
    if bad is not None:
        raise RunFileError(f"{where}: field {bad!r}: NaN or Infinity; expected a finite number")
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        got = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise RunFileError(f"{where}: schema_version is {got!r}; expected {SCHEMA_VERSION}")
    try:
        return RunResult.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise RunFileError(f"{where}: {one_line(exc)}") from exc


def read_run(path: Path) -> RunResult:
    """Read and validate a run file; corrupt or schema-invalid files raise RunFileError naming the path."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise RunFileError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    return parse_run(text, str(path))


def one_line(exc: ValidationError) -> str:
    """The first schema error as "field 'a.b.0': message (input ...) (N schema error(s))"."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    value = first.get("input")
    got = ""
    if first["type"] != "missing" and isinstance(value, str | int | float | bool):
        got = f" (got {value!r})" if len(repr(value)) <= 40 else f" (got {repr(value)[:37]}...)"
    return f"field {where!r}: {first['msg']}{got} ({exc.error_count()} schema error(s))"


def non_finite_path(data: Any, path: str = "") -> str | None:
    """Dotted path of the first NaN or Infinity in parsed JSON, None when every number is finite."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = non_finite_path(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None
