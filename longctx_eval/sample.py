"""The records that flow through a run: Sample -> Request -> Prediction -> Score."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from longctx_eval.hashing import sha256_json

Status = Literal["ok", "over_length", "error"]


@dataclass(frozen=True)
class Sample:
    """One evaluation item with its exact gold; strata (target_tokens, depth, ...) live in `metadata`."""

    id: str
    context: str
    question: str
    gold: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalParams:
    """How a retriever reads a request: chunk budget and overlap (tokens of its own tokenizer), depth k."""

    chunk_tokens: int = 128
    chunk_overlap: int = 16
    k: int = 10


@dataclass(frozen=True)
class Request:
    """What a model adapter receives: the full prompt for generators, context + query for retrievers."""

    sample_id: str
    prompt: str
    context: str
    query: str
    max_new_tokens: int = 32
    retrieval: RetrievalParams = field(default_factory=RetrievalParams)
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Task-specific structured input (e.g. tokens and gold mentions for a coreference system)."""
    part: int = 0
    """Index of this request among its sample's requests (set by the runner)."""
    answer_prefix: str = ""
    """Text the reply starts with (e.g. "The special magic number for X is"): generators render it after the
    chat template's generation prompt and continue from it; `Prediction.text` is the continuation only."""
    choices: tuple[str, ...] = ()
    """For `loglikelihood`: continuations scored after the rendered prompt (chat template, then `answer_prefix`),
    each normally starting with a space; the prediction's `data` holds per choice `logprobs` (summed over the
    choice's tokens), `choice_tokens` and `greedy` (whether each token is the argmax), in this order."""


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: its global character span in the context, its rank score."""

    char_start: int
    char_end: int
    score: float


@dataclass(frozen=True)
class Prediction:
    """A model's answer to one request, with the measured lengths that make the result honest."""

    text: str | None = None
    hits: tuple[Hit, ...] = ()
    status: Status = "ok"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    error: str | None = None
    data: Mapping[str, Any] | None = None
    """Structured output (e.g. predicted clusters) for capabilities that do not answer in text."""
    parts: tuple[Prediction, ...] = ()
    """When a task sends several requests for one sample, their predictions, in request order."""


@dataclass(frozen=True)
class Score:
    """Named per-sample values (e.g. score, empty, recall@5); a metric reduces one name over samples."""

    values: Mapping[str, float]
    parsed: str | None = None
    """The answer as the scorer read it (e.g. the first number in the reply), kept beside the raw text."""

    def __getitem__(self, key: str) -> float:
        return self.values[key]


def recorded_sample_hash(
    id: str, context_sha256: str, question: str, gold: Mapping[str, Any], metadata: Mapping[str, Any]
) -> str:
    """A sample's hash from what a run folder's samples file records of it (its context by sha256): the
    dataset hash is the hash of these in order (`run/sampling.py`), so a merged folder can recompute it."""
    return sha256_json([id, context_sha256, question, dict(gold), dict(metadata)])


Stratum = tuple[int, float | None]
"""A sample's cell: (target_tokens, depth or None)."""


class HasMetadata(Protocol):
    """A Sample, or a planned one (`sample_plan.Planned`): what `stratum_of` and `cluster_of` read."""

    @property
    def id(self) -> str: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...


def cluster_of(sample: HasMetadata) -> str:
    """What a sample is not independent of: metadata `cluster` (the haystack or document it was built from, set by
    its task), else the sample alone. Shards keep a cluster together."""
    cluster = sample.metadata.get("cluster")
    return sample.id if cluster is None else str(cluster)


def stratum_of(sample: HasMetadata) -> Stratum:
    """A sample's (length, depth) cell; depth is None for tasks without a depth grid."""
    depth = sample.metadata.get("depth")
    return int(sample.metadata["target_tokens"]), None if depth is None else float(depth)
