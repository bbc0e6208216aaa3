"""The scoring pass of the semantic metrics: BERTScore and embedding similarity of every answer of a task at once.

A task that declares `semantic_metrics()` (`metrics/semantic.py`) gets, on each sample answered in text (status
ok, a reference in its gold), the fields bertscore_p, bertscore_r, bertscore_f1 and embedding_similarity in its
scores (a value that is not a number is left out), and a `semantic` section in its run-file entry: the models,
layer, idf and baseline used, and the drift of the mean F1 over the batches the runner served (scoring order:
shortest contexts first, so a drift line mixes serving time with length). idf, when on, is learnt from the
references of every sample of the task, so two systems on the same samples get the same weights.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.bertscore import BertScoreConfig, bertscore, idf_weights
from longctx_eval.metrics.embedding_similarity import EMBEDDING_FIELD, Embed, embedding_similarity
from longctx_eval.metrics.semantic import (
    SEMANTIC_FIELDS,
    SemanticMetric,
    answer_text,
    declared_semantic,
    reference_text,
)
from longctx_eval.results import BertScoreSetup, DriftPoint, EmbedderSetup, SemanticSection
from longctx_eval.sample import Prediction, Sample, Score, cluster_of
from longctx_eval.scoring.resample import column_means_ci

MIN_POINT = 10
"""The fewest answers a drift point holds: smaller runner batches (batch 1 on a CPU) are merged in order."""

Scored = list[tuple[Sample, Score]]


def check_setup(metrics: Sequence[SemanticMetric]) -> SemanticMetric:
    """The one configuration a task's semantic metrics share, checked before any model loads; a
    TaskDefinitionError names the setting and what was expected."""
    if len({(m.bertscore, m.embedder) for m in metrics}) > 1:
        raise TaskDefinitionError("the task's semantic metrics name different models; declare them with one call")
    c, embedder = metrics[0].bertscore, metrics[0].embedder
    for label, value in (("model", c.model), ("embedder", embedder)):
        if not isinstance(value, str) or not value.strip():
            raise TaskDefinitionError(
                f"semantic_metrics {label}: expected 'minilm' or a local model folder, got {value!r}"
            )
    if isinstance(c.layer, bool) or not isinstance(c.layer, int) or c.layer < 0:
        raise TaskDefinitionError(f"semantic_metrics layer: expected an integer >= 0, got {c.layer!r}")
    if not isinstance(c.idf, bool):
        raise TaskDefinitionError(f"semantic_metrics idf: expected True or False, got {c.idf!r}")
    b = c.baseline
    if b is not None:
        ok = isinstance(b, tuple) and len(b) == 3
        ok = ok and all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in b)
        if not ok or any(x >= 1 for x in b):
            raise TaskDefinitionError(
                f"semantic_metrics baseline: expected a tuple of three finite numbers (P, R, F1) below 1, got {b!r}"
            )
    return metrics[0]


@functools.cache
def sentence_embedder(source: str) -> tuple[Embed, EmbedderSetup]:
    """The sentence embedder named `source` ('minilm' or a local sentence-transformers folder) and its record,
    loaded once per process: float32 on the CPU, the model's own pooling and normalisation, single texts."""
    from longctx_eval.models.layer_encoder import model_folder, model_identity, quiet_loading
    from longctx_eval.models.semantic_embed import minilm_embedder

    folder = model_folder(source)
    with quiet_loading():
        embed = minilm_embedder(
            batch_size=64, window=0, model=None if source == "minilm" else folder, device="cpu", precision="exact",
            cache_sentences=0,
        )  # fmt: skip
    name, sha = model_identity(source)
    return embed, EmbedderSetup(model=source, name=name, sha256=sha, max_tokens=_max_tokens(folder))


def _max_tokens(folder: Path) -> int:
    """The embedder's word-piece limit: its sentence-transformers `max_seq_length`, else 512."""
    try:
        value = json.loads((folder / "sentence_bert_config.json").read_text()).get("max_seq_length")
    except (OSError, ValueError, AttributeError):
        value = None
    return value if isinstance(value, int) and value > 0 else 512


def bertscore_setup(config: BertScoreConfig) -> BertScoreSetup:
    """The run-file record of a BERTScore configuration (loads its encoder)."""
    from longctx_eval.models.layer_encoder import layer_encoder

    enc = layer_encoder(config.model, config.layer)
    return BertScoreSetup(
        model=config.model,
        name=enc.name,
        sha256=enc.sha256,
        layer=config.layer,
        layers=enc.layers,
        idf=config.idf,
        baseline=config.baseline,
        max_tokens=enc.max_tokens,
    )


def served_order(
    records: Mapping[str, Mapping[str, object]], keys: Sequence[Sequence[str]]
) -> list[tuple[int | None, int]]:
    """Per sample (its prediction keys): the runner batch its first request was served in (the `batch` the runner
    records; None in older prediction files) and its position in serving order (predictions.jsonl's line order)."""
    position = {k: n for n, k in enumerate(records)}
    out: list[tuple[int | None, int]] = []
    for ks in keys:
        batches = [b for k in ks if isinstance(b := records[k].get("batch"), int) and not isinstance(b, bool)]
        out.append((min(batches) if len(batches) == len(ks) else None, min(position[k] for k in ks)))
    return out


def answer_of(pred: Prediction) -> str | None:
    """A prediction's text answer (multi-part: the parts' texts joined), None when it answered no text."""
    if pred.parts:
        texts = [p.text for p in pred.parts]
        return None if all(t is None for t in texts) else answer_text(texts)
    return pred.text


def semantic_scores(
    metrics: Sequence[Metric],
    scored: Scored,
    preds: Sequence[Prediction],
    served: Sequence[tuple[int | None, int]],
) -> tuple[Scored, SemanticSection | None]:
    """`scored` with the semantic fields added to every answered sample, and the run file's section (None when the
    task declares no semantic metric or no sample was answered in text). `served` is each sample's (runner batch
    or None, position in serving order)."""
    found = declared_semantic(metrics)
    if not found:
        return scored, None
    declared = check_setup(found)
    answered = [
        i
        for i, ((sample, _), pred) in enumerate(zip(scored, preds, strict=True))
        if pred.status == "ok" and answer_of(pred) is not None and reference_text(sample.gold) is not None
    ]
    if not answered:
        return scored, None
    from longctx_eval.models.layer_encoder import layer_encoder

    config = declared.bertscore
    encoder = layer_encoder(config.model, config.layer)
    cands = [answer_text(answer_of(preds[i])) for i in answered]
    refs = [str(reference_text(scored[i][0].gold)) for i in answered]
    idf = None
    if config.idf:
        every = [r for s, _ in scored if (r := reference_text(s.gold)) is not None]
        idf = idf_weights([encoder.encode_ids(r) for r in every])
    prf = bertscore(cands, refs, encoder, idf=idf or False, baseline=config.baseline)
    embed, embedder = sentence_embedder(declared.embedder)
    sims = embedding_similarity(cands, refs, embed)
    values = np.column_stack([prf, sims])
    out = list(scored)
    for row, i in zip(values, answered, strict=True):
        sample, score = scored[i]
        extra = {f: float(v) for f, v in zip(SEMANTIC_FIELDS, row, strict=True) if np.isfinite(v)}
        out[i] = (sample, Score({**score.values, **extra}, parsed=score.parsed))
    mode, points = drift_points(
        [served[i] for i in answered], values[:, 2], values[:, 3], [cluster_of(scored[i][0]) for i in answered]
    )
    section = SemanticSection(
        bertscore=bertscore_setup(config),
        embedding=embedder,
        answers=len(answered),
        batches=mode,
        min_point=MIN_POINT,
        drift=points,
    )
    return out, section


def drift_points(
    served: Sequence[tuple[int | None, int]], f1: np.ndarray, sim: np.ndarray, clusters: Sequence[str]
) -> tuple[str, list[DriftPoint]]:
    """Drift points in serving order: the runner's batches ('runner'), consecutive ones merged until a point holds
    MIN_POINT answers (a short last group joins the one before); without recorded batches ('order'), runs of
    MIN_POINT answers in serving order. Each point: mean F1 with its interval, its difference from the pooled
    mean, and mean embedding similarity (non-finite values left out)."""
    mode = "runner" if all(b is not None for b, _ in served) else "order"
    order = sorted(range(len(served)), key=lambda i: ((served[i][0] or 0) if mode == "runner" else 0, served[i][1]))
    batch = [served[i][0] if mode == "runner" else k // MIN_POINT for k, i in enumerate(order)]
    groups: list[list[int]] = []
    for k in range(len(order)):
        new_batch = k == 0 or batch[k] != batch[k - 1]
        if not groups or (new_batch and len(groups[-1]) >= MIN_POINT):
            groups.append([])
        groups[-1].append(k)
    if len(groups) > 1 and len(groups[-1]) < MIN_POINT:
        short = groups.pop()
        groups[-1] += short
    pooled = float(np.nanmean(f1)) if np.isfinite(f1).any() else float("nan")
    points = []
    for group in groups:
        rows = [order[k] for k in group]
        names = [str(clusters[i]) for i in rows]
        block = np.column_stack([f1[rows], sim[rows]])
        means, _, lo, hi = column_means_ci(block, clusters=names)
        if not np.isfinite(means[0]):
            continue
        points.append(
            DriftPoint(
                first_batch=int(batch[group[0]] or 0),
                last_batch=int(batch[group[-1]] or 0),
                n=len(rows),
                clusters=len(set(names)),
                bertscore_f1=round(float(means[0]), 6),
                ci95=(round(float(lo[0]), 6), round(float(hi[0]), 6)),
                delta_f1=round(float(means[0]) - pooled, 6),
                embedding_similarity=round(float(means[1]) if np.isfinite(means[1]) else 0.0, 6),
            )
        )
    return mode, points


def fidelity_label(section: SemanticSection | None) -> str:
    """What the composite's fidelity averages, in words: the field and its named embedder (None: the packaged
    MiniLM, which the composite embeds with itself)."""
    if section is None:
        from longctx_eval.models.assets import MINILM_SHA256

        return f"{EMBEDDING_FIELD} (all-MiniLM-L6-v2, sha256 {MINILM_SHA256[:8]})"
    e = section.embedding
    return f"{EMBEDDING_FIELD} ({e.name}" + (f", sha256 {e.sha256[:8]})" if e.sha256 else ")")
