"""The composite serving score: throughput, P95 latency, recall and semantic fidelity, each normalised to [0, 1].

    throughput = clip(output tokens/s / 1000, 0, 1)        aggregate output tokens/s of the task
    latency    = clip(1 - P95 latency (s) / 0.200, 0, 1)   P95 time to first token by default (or end to end)
    recall     = the task's primary metric, pooled, with each failed request counted 0 (0-1 scores only):
                 pooled x successes / (successes + failures)
    fidelity   = mean embedding similarity (cosine of the answer's and the reference's sentence embeddings)
                 over the samples that fit the window, each clipped to [0, 1]; a failed (status `error`) or
                 empty answer counts 0
    composite  = sum(w_i * component_i) / sum(w_i)          default weights 0.3 / 0.25 / 0.25 / 0.2

Every component, its raw input and the weights are written beside the composite, so nobody has to trust the
weights. Fidelity is the task's own `embedding_similarity` field where it declares the semantic metrics
(`metrics/semantic.py`: the embedder is named in its run-file `semantic` section), else the same cosine with the
packaged all-MiniLM-L6-v2 (float32, sentence-transformers' exact pipeline); `fidelity_metric` says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from longctx_eval.errors import ConfigError
from longctx_eval.metrics.embedding_similarity import EMBEDDING_FIELD, embedding_similarity
from longctx_eval.metrics.semantic import answer_text, reference_text
from longctx_eval.results import CompositeScore, CompositeWeights, TaskResult
from longctx_eval.sample import Sample
from longctx_eval.scoring.semantic import fidelity_label

THROUGHPUT_REF_TPS = 1000.0
"""Output tokens/s that score 1 (throughput component = tokens/s / 1000, clipped)."""
LATENCY_REF_S = 0.200
"""P95 latency that scores 0 (latency component = 1 - P95 / 200 ms, clipped)."""
LATENCY_KINDS = ("ttft", "e2e")
DEFAULT_WEIGHTS = CompositeWeights(throughput=0.3, latency=0.25, recall=0.25, fidelity=0.2)
COMPONENTS = ("throughput", "latency", "recall", "fidelity")

Embed = Callable[[list[str]], np.ndarray]


def parse_weights(text: str) -> CompositeWeights:
    """`--composite-weights 0.3,0.25,0.25,0.2` (throughput, latency, recall, fidelity) -> checked weights."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4 or any(not math.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
        raise ConfigError(
            f"--composite-weights {text!r}: expected 4 numbers >= 0 with a positive sum, in the order "
            "throughput,latency,recall,fidelity, e.g. 0.3,0.25,0.25,0.2"
        )
    return CompositeWeights(**dict(zip(COMPONENTS, values, strict=True)))


@dataclass(frozen=True)
class CompositeConfig:
    """How the composite is computed: the weights and which latency's P95 is scored."""

    weights: CompositeWeights = DEFAULT_WEIGHTS
    latency: str = "ttft"

    def __post_init__(self) -> None:
        if self.latency not in LATENCY_KINDS:
            raise ConfigError(f"--composite-latency {self.latency!r}: expected one of {', '.join(LATENCY_KINDS)}")


def clip01(value: float) -> float:
    """`value` clipped to [0, 1]."""
    return min(1.0, max(0.0, float(value)))


def throughput_score(output_tokens_per_s: float) -> float:
    """Aggregate output tokens/s per 1000, clipped to [0, 1]."""
    return clip01(output_tokens_per_s / THROUGHPUT_REF_TPS)


def latency_score(p95_s: float) -> float:
    """1 - P95 latency / 200 ms, clipped to [0, 1]."""
    return clip01(1.0 - p95_s / LATENCY_REF_S)


def semantic_fidelity(answers: Sequence[str], references: Sequence[str], embed: Embed) -> float:
    """Mean over pairs of the cosine of the answer's and the reference's embeddings, each clipped to [0, 1];
    an empty answer counts 0."""
    if len(answers) != len(references) or not answers:
        raise ValueError(f"semantic_fidelity needs equal, non-empty lists (got {len(answers)}, {len(references)})")
    return float(np.clip(embedding_similarity(answers, references, embed), 0.0, 1.0).mean())


def composite_score(
    *,
    output_tokens_per_s: float,
    latency_p95_s: float,
    recall: float,
    recall_metric: str,
    fidelity: float,
    fidelity_n: int,
    config: CompositeConfig = CompositeConfig(),  # noqa: B008  (frozen, immutable)
    failed: int = 0,
    fidelity_metric: str | None = None,
) -> CompositeScore:
    """The composite from its four raw inputs (`recall` and `fidelity` already counting the `failed` requests
    as 0); every component and the weights are kept in the record."""
    if not 0.0 <= recall <= 1.0:
        raise ValueError(f"recall {recall_metric}={recall} is not a 0-1 score")
    components = {
        "throughput": throughput_score(output_tokens_per_s),
        "latency": latency_score(latency_p95_s),
        "recall": clip01(recall),
        "fidelity": clip01(fidelity),
    }
    w = config.weights.model_dump()
    value = sum(w[k] * components[k] for k in COMPONENTS) / sum(w.values())
    return CompositeScore(
        value=value,
        weights=config.weights,
        throughput=components["throughput"],
        latency=components["latency"],
        recall=components["recall"],
        fidelity=components["fidelity"],
        output_tokens_per_s=output_tokens_per_s,
        latency_metric=config.latency,
        latency_p95_s=latency_p95_s,
        recall_metric=recall_metric,
        fidelity_n=fidelity_n,
        failed_as_zero=failed,
        fidelity_metric=fidelity_metric,
    )


_EMBED: Embed | None = None


def minilm() -> Embed:
    """The packaged MiniLM embedder (float32, single sentences), loaded once per process."""
    global _EMBED
    if _EMBED is None:
        from longctx_eval.models.semantic_embed import minilm_embedder

        _EMBED = minilm_embedder(window=0, precision="exact", cache_sentences=0)
    return _EMBED


def serving_inputs(serving: object, latency: str) -> tuple[float, float] | None:
    """(aggregate output tokens/s, P95 of the chosen latency in seconds) from a task's run-file `serving` section
    (scoring/latency.py: throughput.output_tokens_per_s, ttft_s.p95, e2e_s.p95); None when it lacks either."""
    if serving is None:
        return None
    data = serving.model_dump() if hasattr(serving, "model_dump") else serving
    if not isinstance(data, Mapping):
        return None
    throughput = data.get("throughput")
    tps = throughput.get("output_tokens_per_s") if isinstance(throughput, Mapping) else None
    dist = data.get(f"{latency}_s")
    p95 = dist.get("p95") if isinstance(dist, Mapping) else None
    if not isinstance(tps, int | float) or not isinstance(p95, int | float):
        return None
    return float(tps), float(p95)


def task_composite(
    serving: object,
    primary: tuple[str, float] | None,
    answers: Sequence[object],
    golds: Sequence[Mapping[str, object]],
    config: CompositeConfig,
    embed: Embed | None = None,
    failed: int = 0,
    similarity: tuple[str, Sequence[float | None]] | None = None,
) -> tuple[CompositeScore | None, str | None]:
    """A task's composite from its serving stats, pooled primary metric (name, value, over the successes) and the
    answers and gold of the samples that fit the window, of which `failed` failed (each counts 0 in recall and
    fidelity); (None, reason) when a component cannot be computed. `similarity`: (its name, each sample's
    embedding similarity, None where it has none: counted 0), the task's own field, used instead of embedding
    the answers here."""
    inputs = serving_inputs(serving, config.latency)
    if inputs is None:
        return None, None  # not a served run: no composite, nothing to say
    if primary is None or not 0.0 <= primary[1] <= 1.0:
        return None, "composite score not computed: the primary metric is not a pooled 0-1 score"
    refs = [reference_text(g) for g in golds]
    if not refs or any(r is None for r in refs):
        return None, "composite score not computed: the task's gold has no reference answers ('answers')"
    if similarity is not None:
        label, values = similarity
        fidelity = float(np.mean([0.0 if v is None else min(1.0, max(0.0, v)) for v in values]))
    else:
        label = fidelity_label(None)
        fidelity = semantic_fidelity(
            [answer_text(a) for a in answers], [r for r in refs if r is not None], embed or minilm()
        )
    tps, p95 = inputs
    score = composite_score(
        output_tokens_per_s=tps,
        latency_p95_s=p95,
        recall=primary[1] * (len(refs) - failed) / len(refs),
        recall_metric=primary[0],
        fidelity=fidelity,
        fidelity_n=len(refs),
        config=config,
        failed=failed,
        fidelity_metric=label,
    )
    return score, None


def with_composite(
    result: TaskResult,
    primary_metric: str,
    samples: Sequence[Sample],
    records: Sequence[Mapping[str, object]],
    config: CompositeConfig | None = None,
) -> TaskResult:
    """`result` with its composite score when it has serving stats (a served run), else unchanged; `records` are
    the task's score records (answer, status) in the order of `samples`."""
    config = config or CompositeConfig()
    serving = getattr(result, "serving", None)
    if serving_inputs(serving, config.latency) is None:
        return result
    pooled = next(
        (r for r in result.results if r.metric == primary_metric and r.length is None and r.depth is None), None
    )
    fitting = [(s, rec) for s, rec in zip(samples, records, strict=True) if rec.get("status") in ("ok", "error")]
    semantic = getattr(result, "semantic", None)
    similarity = None
    if semantic is not None:  # the task's named metric, per sample (a failed or unanswered sample has none: 0)
        values = [_similarity_of(rec) if rec.get("status") == "ok" else None for _, rec in fitting]
        similarity = (fidelity_label(semantic), values)
    score, reason = task_composite(
        serving,
        None if pooled is None else (pooled.metric, pooled.value),
        [rec.get("answer") if rec.get("status") == "ok" else None for _, rec in fitting],
        [s.gold for s, _ in fitting],
        config,
        failed=sum(rec.get("status") == "error" for _, rec in fitting),
        similarity=similarity,
    )
    update: dict[str, object] = {"composite": score}
    if reason is not None:
        update["warnings"] = [*result.warnings, reason]
    return result.model_copy(update=update)


def _similarity_of(record: Mapping[str, object]) -> float | None:
    """A score record's embedding similarity, None when it has none."""
    scores = record.get("scores")
    value = scores.get(EMBEDDING_FIELD) if isinstance(scores, Mapping) else None
    return float(value) if isinstance(value, int | float) else None
