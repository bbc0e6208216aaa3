"""Sentence embeddings for semantic chunking with the packaged MiniLM: each distinct sentence embedded once, batched.

Two precisions (docs/semantic.md has the measurements): "fast" (default) runs the transformer directly in
bfloat16 where the CPU has native bfloat16 (AVX512-BF16 or AMX), else float32; "exact" is float32. Both
compute what the sentence-transformers pipeline of all-MiniLM-L6-v2 computes (Transformer -> mean pooling
over real tokens -> L2 normalize), on batches of sentences sorted by word-piece length so they carry little
padding, without the pipeline's per-call overhead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.text.chunking import Embed

_DTYPES = ("float32", "bfloat16", "float16")
PRECISIONS = ("fast", "exact")


def smooth(vectors: np.ndarray, window: int) -> np.ndarray:
    """Row j becomes the sum of unit rows j-window..j+window: a window's embedding without embedding the window."""
    if window == 0 or len(vectors) == 0:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    total = np.concatenate([np.zeros((1, unit.shape[1]), unit.dtype), np.cumsum(unit, axis=0, dtype=np.float64)])
    n = len(unit)
    idx = np.arange(n)
    hi, lo = np.minimum(idx + window + 1, n), np.maximum(idx - window, 0)
    return (total[hi] - total[lo]).astype(np.float32)


def native_bfloat16(device: str) -> bool:
    """Whether `device` runs bfloat16 matmuls natively (CPU: AVX512-BF16 or AMX); emulated bfloat16 is slower."""
    import torch

    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # an older torch without the probes: stay on float32
        return False


def _mean_pooled(path: Path) -> int | None:
    """The model's max_seq_length when its sentence-transformers modules are Transformer, mean pooling and
    Normalize (all-MiniLM-L6-v2's), so the direct path computes the same vectors; else None."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        types = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = next(m for m in modules if m["type"].endswith(".Pooling"))
        pool = json.loads((path / pooling["path"] / "config.json").read_text())
        max_len = json.loads((path / "sentence_bert_config.json").read_text()).get("max_seq_length")
    except (OSError, ValueError, KeyError, StopIteration):
        return None
    modes = {k for k, v in pool.items() if k.startswith("pooling_mode") and v}
    if types != ["Transformer", "Pooling", "Normalize"] or modes != {"pooling_mode_mean_tokens"}:
        return None
    return int(max_len) if isinstance(max_len, int) else None


class _Direct:
    """Tokenizer + transformer, mean pooling, L2 normalize: SentenceTransformer.encode's math without its loop."""

    def __init__(self, path: Path, device: str, dtype: str, max_len: int) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path), dtype=getattr(torch, dtype)).to(device).eval()
        self.device = device
        self.max_seq_length = min(max_len, self.tokenizer.model_max_length)

    def encode(self, texts: list[str], batch_size: int, **_: Any) -> np.ndarray:
        torch = self.torch
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length, return_attention_mask=False)[
            "input_ids"
        ]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(-lengths, kind="stable")  # longest first: the largest allocation happens once
        pad = self.tokenizer.pad_token_id or 0
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for i in range(0, len(order), batch_size):
                rows = order[i : i + batch_size]
                width = int(lengths[rows].max())
                batch = np.full((len(rows), width), pad, dtype=np.int64)
                for r, k in enumerate(rows):
                    batch[r, : lengths[k]] = ids[k]
                input_ids = torch.from_numpy(batch).to(self.device)
                mask = torch.from_numpy(np.arange(width) < lengths[rows][:, None]).to(self.device)
                hidden = self.model(
                    input_ids=input_ids, attention_mask=mask.long(), token_type_ids=torch.zeros_like(input_ids)
                ).last_hidden_state.float()
                m = mask.unsqueeze(-1).float()
                pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
                out[rows] = torch.nn.functional.normalize(pooled, p=2, dim=1).cpu().numpy()
        return out


def _load(model: Any, device: str, dtype: str, max_seq_length: int | None) -> Any:
    if model is not None and not isinstance(model, str | Path):
        # An already loaded SentenceTransformer (e.g. a dense retriever's), shared, not reloaded or cast.
        if max_seq_length is not None:
            model.max_seq_length = max_seq_length
        return model
    import torch

    # Imported here, not at module level: `text` stays importable without the asset packages.
    from longctx_eval.models.assets import minilm_path

    path = Path(minilm_path() if model is None else model)
    try:
        max_len = _mean_pooled(path)
        if max_len is not None:
            return _Direct(path, device, dtype, max_seq_length or max_len)
        from sentence_transformers import SentenceTransformer

        encoder = SentenceTransformer(str(path), device=device, model_kwargs={"dtype": getattr(torch, dtype)})
    except OSError as exc:
        raise PrerequisiteError(f"sentence embedder {str(path)!r} cannot be loaded offline: {exc}") from exc
    if max_seq_length is not None:
        encoder.max_seq_length = max_seq_length
    return encoder


def minilm_embedder(
    batch_size: int = 16,
    window: int = 1,
    *,
    model: Any = None,
    max_seq_length: int | None = None,
    device: str = "auto",
    dtype: str | None = None,
    precision: str = "fast",
    cache_sentences: int = 100_000,
) -> Embed:
    """An `Embed` for `chunk_document(..., ChunkConfig(semantic=True), embed=...)`, loading the model once.

    `window` > 0 compares sentence windows (j-window..j+window) built from the sentence embeddings, which
    steadies the signal on short lines of dialogue; 0 compares single sentences. `model`: a path or a loaded
    SentenceTransformer (default: the packaged all-MiniLM-L6-v2; a loaded one is used as it is).
    `max_seq_length` caps word pieces per sentence (default: the model's, 256 for MiniLM).
    `precision`: "fast" = bfloat16 weights where `device` computes bfloat16 natively, else float32 (on the
    benchmark slice: cosine to float32 >= 0.9999, identical chunk boundaries, 3-4x faster); "exact" =
    float32. An explicit `dtype` ("float32", "bfloat16", "float16") overrides the precision's choice.
    Up to `cache_sentences` sentence vectors (1.5 KB each) are kept for later calls; 0 keeps none.
    `device`: auto (CUDA when there is one, else the CPU, exactly as before on a machine without a GPU), cpu,
    cuda or cuda:N.
    torch's thread count is the caller's: on busy shared cores, fewer threads than cores can be several times
    faster (docs/semantic.md).
    """
    for label, value, low in (
        ("batch_size", batch_size, 1),
        ("window", window, 0),
        ("cache_sentences", cache_sentences, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"minilm_embedder {label}: expected an integer >= {low}, got {value!r}")
    if precision not in PRECISIONS:
        raise ConfigError(f"minilm_embedder precision: expected one of {PRECISIONS}, got {precision!r}")
    if dtype is not None and dtype not in _DTYPES:
        raise ConfigError(f"minilm_embedder dtype: expected one of {_DTYPES}, got {dtype!r}")
    if max_seq_length is not None and (
        isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 2
    ):
        raise ConfigError(f"minilm_embedder max_seq_length: expected an integer >= 2, got {max_seq_length!r}")
    from longctx_eval.models.devices import resolve_device

    device = resolve_device(device)  # auto: CUDA when there is one, else the CPU
    if dtype is None:
        dtype = "bfloat16" if precision == "fast" and native_bfloat16(device) else "float32"
    encoder = _load(model, device, dtype, max_seq_length)

    # Sentence -> unit vector, kept across calls: documents built on one haystack (one per needle depth,
    # as the dataset export does) then cost one embedding pass, not one per document.
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        # Repeated sentences ("Yes.", "CHAPTER I") are embedded once; both encoders sort each call's texts
        # by length, so batches carry little padding.
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        fresh: dict[str, np.ndarray] = {}
        if missing:
            vectors = encoder.encode(missing, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)
            fresh = dict(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = np.stack([fresh[t] if t in fresh else cache[t] for t in texts])
        if len(cache) + len(fresh) > cache_sentences:
            cache.clear()  # a crude bound; a new dataset rarely shares sentences with an old one
        if len(fresh) <= cache_sentences:
            cache.update(fresh)
        return smooth(rows, window)

    embed.dtype = dtype  # type: ignore[attr-defined]  # what the model computes in, for reports
    return embed
