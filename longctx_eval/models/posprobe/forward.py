"""The posprobe forward of transformers causal LMs (`attention` capability): one teacher-forced pass per sequence.

Each request carries token ids (`extra["input_ids"]`), the needle's and the answer's token positions, the
filler spans for text perplexity, and a calibration set of passkey sequences at a length inside the
training window. The probe picks retrieval heads once per checkpoint on that set (with the RoPE variant
off), freezes them, and returns per-needle statistics of the exact attention rows of the answer queries in
`Prediction.data`; `tasks/posprobe.py` turns them into scores.

On a hybrid model (Gemma 3: sliding-window and global layers) the rows, and so the retrieval heads, NPB, needle
mass and LAE, are those of the full-attention layers only (`data["attention_layers"]` names them; the calibration's
heads are (layer, head) with the model's own layer numbers); the sliding layers' within-window rows give
`lae_sliding`. The passkey answer and the NLLs are the whole model's, as on any model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from longctx_eval.errors import ConfigError
from longctx_eval.hashing import sha256_json
from longctx_eval.metrics import posprobe as pm
from longctx_eval.models.attention_layout import global_layers, layer_types, text_config
from longctx_eval.models.devices import DevicePeak, cuda_devices, free_device_memory, model_device
from longctx_eval.models.memory import PeakRSS
from longctx_eval.models.options import HFOptions
from longctx_eval.models.posprobe.attention_rows import ATTENTION_NAME, capture_rows
from longctx_eval.models.posprobe.learned_position import clamp_record
from longctx_eval.models.posprobe.rope_variants import check_variant, rope_applied, variant_parameters
from longctx_eval.models.references import reference_meta
from longctx_eval.sample import Prediction, Request

LOGIT_CHUNK = 256
"""Positions per LM-head chunk: the full L x vocab logits of a real model would not fit at 32K (SmolLM2: 6 GiB).
One chunk's logits and log-probabilities are 2 x 256 x 49152 x 4 B = 96 MiB for SmolLM2, a constant that does not
hide the forward's linear growth in the peak-memory fit (1024 made it 384 MiB and cost ~400 MiB of peak RSS)."""


@dataclass(frozen=True)
class ProbeConfig:
    """How one loaded model is probed: RoPE variant, training length, retrieval-head rule."""

    variant: str = "none"
    factor: float | None = None
    train_length: int = 2048
    head_threshold: float = 0.1
    max_heads: int = 8
    attention_only: bool = False

    def settings(self) -> dict[str, Any]:
        """What enters the model identity (and so every prediction key) beyond the spec."""
        return {"rope": self.variant, "rope_factor": self.factor, "train_length": self.train_length}


def probe_config(
    options: HFOptions, config: Any, folder: Path | None, train_length: int | None = None, checked: bool = False
) -> ProbeConfig:
    """The probe setup from the `rope`, `rope_factor`, `train_length` options and a reference.json.

    `train_length` and `checked` come from the load plan (models/hf/config.py) when the config was read, and the
    variant checked, before loading (the loaded config may then carry the variant's parameters already)."""
    meta = reference_meta(folder) if folder is not None else None
    if not checked:
        check_variant(config, options.rope)
    default_train: Any = (meta or {}).get("train_length") or getattr(config, "max_position_embeddings", 2048)
    rule = (meta or {}).get("retrieval_heads", {})
    return ProbeConfig(
        variant=options.rope,
        factor=options.rope_factor,
        train_length=train_length or options.train_length or int(default_train),
        head_threshold=float(rule.get("threshold", 0.1)),
        max_heads=int(rule.get("max_heads", 8)),
        attention_only=meta is not None and meta.get("capabilities") == ["attention"],
    )


@dataclass(frozen=True)
class Calibration:
    """Retrieval heads chosen at the calibration length, frozen for every length and variant."""

    heads: list[tuple[int, int]]
    scores: list[list[float]]
    length: int
    needles: int
    lae_ref: float  # LAE of the active variant at the calibration length, the reference of rho
    layers: list[int] | None = None
    """The model layers the rows (and `scores`) are of, where not every layer: `heads` index into them."""

    def record(self) -> dict[str, Any]:
        """The JSON stored with every prediction: heads as (model layer, head); `layers` where only some are probed
        (`scores[i]` is then layer `layers[i]`'s)."""
        layers = self.layers
        out: dict[str, Any] = {
            "heads": [[layers[i] if layers else i, h] for i, h in self.heads],
            "scores": [[round(s, 4) for s in row] for row in self.scores],
            "length": self.length,
            "needles": self.needles,
            "lae_ref": self.lae_ref,
        }
        if layers is not None:
            out["layers"] = list(layers)
        return out


@dataclass(frozen=True)
class Forward:
    """What one forward pass yields: rows (probed layers, H, K, L), next-token NLL and greedy ids per position, and
    on a hybrid model the sliding layers' within-window rows."""

    rows: np.ndarray
    nll: np.ndarray
    greedy: np.ndarray
    window_rows: np.ndarray | None = None


def probed_layers(config: Any) -> list[int] | None:
    """The layers whose rows the probe reads: the full-attention ones where some layers slide, None (all) otherwise."""
    types = layer_types(config)
    full = global_layers(config)
    return full if len(full) < len(types) else None


def layers_record(config: Any) -> dict[str, Any] | None:
    """`data["attention_layers"]` of a hybrid model: which layers NPB, needle mass and LAE are computed on."""
    probed = probed_layers(config)
    if probed is None:
        return None
    window = getattr(text_config(config), "sliding_window", None)
    total = len(layer_types(config))
    return {
        "probed": probed,
        "layers": total,
        "rule": f"NPB, needle mass, LAE and the retrieval heads on the {len(probed)} full-attention layers of {total}; "
        f"the other {total - len(probed)} attend within a {window}-token sliding window (lae_sliding: their "
        "within-window rows); passkey and NLL are the whole model's",
    }


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def rows_attention(model: Any) -> Iterator[None]:
    """Dispatch attention through the row-capturing function for the duration of the block: what `forward_rows`
    needs to capture rows on any loaded model (the probe's own `run`, and benchmarks/gpu_check.py across devices)."""
    old = model.config._attn_implementation
    if old != ATTENTION_NAME:
        if not model._can_set_attn_implementation():
            raise ConfigError(
                f"{type(model).__name__} does not dispatch attention through transformers' AttentionInterface, so "
                "its exact rows cannot be probed; expected e.g. a Llama, Qwen2 or Mistral-family model"
            )
        model.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        if old != ATTENTION_NAME:
            model.set_attn_implementation(old)


def forward_rows(model: Any, ids: Sequence[int], queries: Sequence[int]) -> Forward:
    """One forward of `ids`: exact attention rows of the `queries` (none: no rows), per-position NLL, greedy ids.

    Every tensor is built on the model's device; rows, NLL and ids come to the host (numpy) only at the end."""
    device = model_device(model)
    x = torch.tensor([list(ids)], device=device)
    probed = probed_layers(model.config)
    window_rows = None
    with torch.no_grad(), capture_rows(queries, device=device) as cap:
        hidden = model.base_model(input_ids=x, use_cache=False).last_hidden_state[0]
        layers = probed if probed is not None else model.config.num_hidden_layers
        rows = cap.stacked(layers).cpu().numpy() if len(queries) else np.zeros((0,))
        if probed is not None and len(queries):
            sliding = [i for i in range(len(layer_types(model.config))) if i not in probed]
            window_rows = cap.stacked(sliding).cpu().numpy()
        nll, greedy = _next_token_stats(model, hidden, x[0])
    return Forward(rows=rows, nll=nll, greedy=greedy, window_rows=window_rows)


def _next_token_stats(model: Any, hidden: torch.Tensor, ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """NLL of each next token and the greedy prediction, the LM head applied in chunks of LOGIT_CHUNK positions."""
    head = model.get_output_embeddings()
    cap_logit = getattr(model.config, "final_logit_softcapping", None)
    n = len(ids) - 1
    nll, greedy = np.empty(n), np.empty(n, dtype=np.int64)
    for a in range(0, n, LOGIT_CHUNK):
        b = min(n, a + LOGIT_CHUNK)
        logits = head(hidden[a:b]).float()
        if cap_logit:
            logits = cap_logit * torch.tanh(logits / cap_logit)
        logp = torch.log_softmax(logits, dim=-1)
        targets = ids[a + 1 : b + 1, None].to(logp.device)  # the LM head may sit on another GPU (device_map)
        nll[a:b] = -logp.gather(1, targets)[:, 0].cpu().numpy()
        greedy[a:b] = logits.argmax(-1).cpu().numpy()
    return nll, greedy


def _fields(extra: dict[str, Any], where: str) -> tuple[list[int], list[int], list[int]]:
    try:
        ids, needle, answer = (list(map(int, extra[k])) for k in ("input_ids", "needle_positions", "answer_positions"))
    except KeyError as exc:
        raise ValueError(f"{where}: Request.extra lacks {exc.args[0]!r}; expected a posprobe request") from None
    if len(needle) != len(answer) or not answer or min(answer) < 1 or max(answer) >= len(ids):
        raise ValueError(f"{where}: needle/answer positions {needle}/{answer} do not fit {len(ids)} input ids")
    return ids, needle, answer


class AttentionProbe:
    """Serves `attention_stats` for one loaded model under one ProbeConfig."""

    def __init__(self, model: Any, config: ProbeConfig, base: dict[str, Any] | None = None) -> None:
        self.model = model
        self.config = config
        # The checkpoint's own rope parameters: "variant off" (calibration) and the per-length variants start from
        # them, also when the config was loaded with a static variant (rope_factor) already applied.
        self.base = dict(base) if base is not None else dict(getattr(model.config, "rope_parameters", None) or {})
        self._calibrations: dict[str, Calibration] = {}
        if getattr(model.config, "alibi_slopes", None) is not None:  # without the function it would run as NoPE
            model.set_attn_implementation(ATTENTION_NAME)

    def params_for(self, length: int) -> dict[str, Any]:
        """The rope parameters the active variant uses at `length` tokens."""
        c = self.config
        return variant_parameters(self.base, c.variant, length, c.train_length, c.factor)

    def _unscaled(self) -> Any:
        """The block runs with the checkpoint's own RoPE (a no-op unless a static variant was loaded)."""
        if not self.base or dict(self.model.config.rope_parameters or {}) == self.base:
            return _nothing()
        return rope_applied(self.model, self.base)

    def run(self, requests: Sequence[Request]) -> list[Prediction]:
        """One Prediction per request, its statistics in `data`; an out-of-memory request fails alone."""
        with rows_attention(self.model):
            return [self._guarded(r) for r in requests]

    def _guarded(self, request: Request) -> Prediction:
        """`_one`, retried once after freeing the device cache on an out-of-memory error, then a failed prediction."""
        for attempt in (1, 2):
            try:
                return self._one(request)
            except torch.OutOfMemoryError:
                free_device_memory()
                if attempt == 2:
                    n = len(request.extra.get("input_ids", ()))
                    return Prediction(status="error", prompt_tokens=n, error=f"out of memory at {n} tokens")
        raise AssertionError("unreachable")

    def _one(self, request: Request) -> Prediction:
        if request.extra.get("text"):
            return self._text(request)
        ids, needle, answer = _fields(dict(request.extra), request.sample_id)
        calibration = self.calibrate(request.extra.get("calibration"), request.sample_id)
        params = self.params_for(len(ids))
        queries = [a - 1 for a in answer]
        t0, peak, device_peak = time.perf_counter(), PeakRSS(), DevicePeak(cuda_devices(self.model))
        with peak, device_peak, rope_applied(self.model, params, self.config.train_length):
            fwd = forward_rows(self.model, ids, queries)
            clamp = clamp_record(self.model)  # read now: a later calibration forward would be "last"
        seconds = time.perf_counter() - t0
        data = summarize(fwd, ids, needle, answer, calibration.heads)
        hybrid = layers_record(self.model.config)
        if hybrid is not None and fwd.window_rows is not None:
            data["attention_layers"] = hybrid
            data["lae_sliding"] = float(pm.entropy_bits(fwd.window_rows).mean())
        data.update(clamp)
        data.update(_haystack_nll(fwd, request.extra.get("filler_spans", [])))
        data.update(
            length=len(ids),
            train_length=self.config.train_length,
            rope={"variant": self.config.variant, "parameters": params},
            calibration=calibration.record(),
            seconds=round(seconds, 4),
            peak_rss_mb=peak.megabytes,
            rss_start_mb=peak.start_megabytes,  # peak - start: what this forward added at its peak
        )
        if device_peak.megabytes is not None:
            data["peak_device_mb"] = device_peak.megabytes
        return Prediction(text=None, prompt_tokens=len(ids), completion_tokens=0, seconds=seconds, data=data)

    def _text(self, request: Request) -> Prediction:
        """Plain perplexity of a needle-free text: all its tokens, and those in the last L_train positions."""
        ids = [int(t) for t in request.extra["input_ids"]]
        t0 = time.perf_counter()
        with rope_applied(self.model, self.params_for(len(ids)), self.config.train_length):
            nll = forward_rows(self.model, ids, []).nll
            clamp = clamp_record(self.model)
        tail = nll[max(0, len(ids) - 1 - self.config.train_length) :]
        data = {
            **clamp,
            "length": len(ids),
            "train_length": self.config.train_length,
            "text_nll_sum": float(nll.sum()),
            "text_tokens": int(nll.size),
            "tail_nll_sum": float(tail.sum()),
            "tail_tokens": int(tail.size),
        }
        seconds = time.perf_counter() - t0
        return Prediction(text=None, prompt_tokens=len(ids), completion_tokens=0, seconds=seconds, data=data)

    def calibrate(self, block: dict[str, Any] | None, where: str) -> Calibration:
        """Retrieval heads from the request's calibration set, computed once per distinct set."""
        if not block or not block.get("sequences"):
            raise ValueError(f"{where}: Request.extra lacks a 'calibration' set of passkey sequences")
        key = sha256_json(block)
        if key not in self._calibrations:
            self._calibrations[key] = self._calibrate(block, where)
        return self._calibrations[key]

    def _calibrate(self, block: dict[str, Any], where: str) -> Calibration:
        per_head, targets, lae_none = [], [], []
        length = int(block["length"])
        for seq in block["sequences"]:
            ids, needle, answer = _fields(seq, f"{where} calibration")
            with self._unscaled():
                fwd = forward_rows(self.model, ids, [a - 1 for a in answer])
            per_head.append(pm.argmax_first(fwd.rows))  # (n_layers, H, K)
            targets.append(needle)
            lae_none.append(float(pm.entropy_bits(fwd.rows).mean()))
        scores = pm.retrieval_scores(np.stack(per_head, axis=2), np.array(targets))
        heads = pm.select_heads(scores, self.config.head_threshold, self.config.max_heads)
        params = self.params_for(length)
        lae_ref = float(np.mean(lae_none))
        c = self.config
        if c.variant != "none" and (c.factor is not None or length > c.train_length):  # else the variant is a no-op
            with rope_applied(self.model, params, self.config.train_length):
                lae_ref = float(np.mean([self._lae(s, where) for s in block["sequences"]]))
        layers = probed_layers(self.model.config)
        return Calibration(heads, scores.tolist(), length, len(block["sequences"]), lae_ref, layers)

    def _lae(self, seq: dict[str, Any], where: str) -> float:
        ids, _, answer = _fields(seq, f"{where} calibration")
        return float(pm.entropy_bits(forward_rows(self.model, ids, [a - 1 for a in answer]).rows).mean())


def _haystack_nll(fwd: Forward, spans: Sequence[Sequence[int]]) -> dict[str, float]:
    """Summed NLL and count of the filler tokens around the needle (how the needle disturbs plain text)."""
    targets = np.array([t for a, b in spans for t in range(max(1, a), b)], dtype=np.int64)
    nll = fwd.nll[targets - 1] if targets.size else np.zeros(0)
    return {"haystack_nll_sum": float(nll.sum()), "haystack_tokens": int(targets.size)}


def summarize(
    fwd: Forward, ids: Sequence[int], needle: Sequence[int], answer: Sequence[int], heads: Sequence[tuple[int, int]]
) -> dict[str, Any]:
    """Per-needle statistics: answer correctness and NLL, retrieval-head argmax/mass/entropy, all-head entropy."""
    queries = [a - 1 for a in answer]
    ent = pm.entropy_bits(fwd.rows)  # (n_layers, H, K)
    abar = pm.head_mean_rows(fwd.rows, heads)  # (K, L)
    return {
        "needle_positions": list(needle),
        "answer_positions": list(answer),
        "answer_correct": [bool(fwd.greedy[q] == ids[a]) for q, a in zip(queries, answer, strict=True)],
        "answer_nll": [round(float(fwd.nll[q]), 6) for q in queries],
        "ret_argmax": [int(j) for j in pm.argmax_first(abar)],
        "needle_mass": [round(float(m), 6) for m in pm.mass_at(abar, needle)],
        "ret_entropy": [round(float(h), 6) for h in pm.entropy_bits(abar)],
        "lae": float(ent.mean()),
        "lae_layers": [round(float(v), 6) for v in ent.mean(axis=(1, 2))],
        "lae_norm": float(pm.normalized_entropy(fwd.rows, queries).mean()),
        "sink_mass": pm.sink_mass(fwd.rows),
    }
