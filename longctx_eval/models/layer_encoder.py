"""Contextual token embeddings of one transformer layer, for BERTScore (`metrics/bertscore.py`).

Loads a local encoder as bert_score 0.3.13 does (its "slow" tokenizer class, float32, the layers after the chosen
one cut off) and tokenizes as its `sent_encode` does: the text stripped, special tokens added, a leading space for
GPT-2 and RoBERTa tokenizers, truncated to the window (the smaller of the tokenizer's `model_max_length` and the
model's position embeddings). 'minilm' is the packaged all-MiniLM-L6-v2 (`models/assets.minilm_path`). Runs on
the CPU, so a rescoring anywhere gives the same numbers; one encoder per (model, layer) per process.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longctx_eval.errors import ConfigError, PrerequisiteError

BATCH = 64
"""Texts per forward pass (bert_score's default batch size), longest first."""


def model_folder(source: str) -> Path:
    """The folder of 'minilm' (the packaged all-MiniLM-L6-v2) or of a local model; ConfigError for anything else."""
    if source == "minilm":
        from longctx_eval.models.assets import minilm_path

        return minilm_path()
    path = Path(source).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"semantic model {source!r}: expected 'minilm' or a local transformers folder holding config.json "
            "(nothing is downloaded)"
        )
    return path


def model_identity(source: str) -> tuple[str, str | None]:
    """(display name, sha256 of its weights or None) of 'minilm' or a local folder."""
    if source == "minilm":
        from longctx_eval.models.assets import MINILM_SHA256

        return "all-MiniLM-L6-v2", MINILM_SHA256
    from longctx_eval.hashing import cached_file_sha256

    path = model_folder(source)
    weights = path / "model.safetensors"
    return path.name, (cached_file_sha256(weights) if weights.is_file() else None)


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """No "Loading weights" bar from transformers while a scoring model loads (the run's own bar is on screen)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _cut(model: Any, layer: int) -> bool:
    """Keep the first `layer` transformer layers, as bert_score's `get_model`; False when the layout is unknown."""
    import torch

    for owner, attr in ((getattr(model, "encoder", None), "layer"), (getattr(model, "transformer", None), "layer")):
        if owner is not None and isinstance(getattr(owner, attr, None), torch.nn.ModuleList):
            setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:layer]))
            return True
    if isinstance(getattr(model, "layers", None), torch.nn.ModuleList):
        model.layers = torch.nn.ModuleList(list(model.layers)[:layer])
        return True
    return False


class LayerEncoder:
    """A local encoder's tokenizer and the hidden state after its first `layer` layers."""

    def __init__(self, source: str, layer: int) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer, GPT2Tokenizer, RobertaTokenizer

        path = model_folder(source)
        try:
            with quiet_loading():
                self.tokenizer = AutoTokenizer.from_pretrained(str(path), use_fast=False)
                model = AutoModel.from_pretrained(str(path), dtype=torch.float32)
        except (OSError, ValueError) as exc:
            raise PrerequisiteError(f"semantic model {source!r} cannot be loaded offline: {exc}") from exc
        if hasattr(model, "decoder") and hasattr(model, "encoder"):
            model = model.encoder
        config = model.config
        self.layers = int(getattr(config, "num_hidden_layers", 0) or 0)
        if not 0 <= layer <= self.layers:
            raise ConfigError(f"bertscore layer: expected 0 to {self.layers} for {source!r}, got {layer}")
        self.layer = layer
        self.hidden_index = None if _cut(model, layer) else layer
        self.model = model.eval()
        self.torch = torch
        self.prefix_space = isinstance(self.tokenizer, GPT2Tokenizer | RobertaTokenizer)
        positions = getattr(config, "max_position_embeddings", None) or self.tokenizer.model_max_length
        self.max_tokens = int(min(self.tokenizer.model_max_length, positions))
        tok = self.tokenizer
        self.special_ids = frozenset(t for t in (tok.cls_token_id, tok.sep_token_id) if t is not None)
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.name, self.sha256 = model_identity(source)

    def encode_ids(self, text: str) -> list[int]:
        """bert_score's `sent_encode`: stripped, special tokens added, truncated to the window."""
        text = text.strip()
        if not text:
            return list(self.tokenizer.encode("", add_special_tokens=True))
        extra = {"add_prefix_space": True} if self.prefix_space else {}
        return list(
            self.tokenizer.encode(text, add_special_tokens=True, max_length=self.max_tokens, truncation=True, **extra)
        )

    def embed(self, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """One (tokens x dim) float32 array per id list, computed in padded batches of BATCH, longest first."""
        torch = self.torch
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out: list[np.ndarray] = [np.empty(0)] * len(ids)
        with torch.inference_mode():
            for start in range(0, len(order), BATCH):
                rows = order[start : start + BATCH]
                width = max(len(ids[i]) for i in rows)
                batch = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):
                    batch[r, : len(ids[i])] = torch.tensor(list(ids[i]), dtype=torch.long)
                    mask[r, : len(ids[i])] = 1
                result = self.model(batch, attention_mask=mask, output_hidden_states=self.hidden_index is not None)
                hidden = result[0] if self.hidden_index is None else result.hidden_states[self.hidden_index]
                hidden = hidden.float().numpy()
                for r, i in enumerate(rows):
                    out[i] = hidden[r, : len(ids[i])]
        return out


@functools.cache
def layer_encoder(source: str, layer: int) -> LayerEncoder:
    """The encoder of (model, layer), loaded once per process."""
    return LayerEncoder(source, layer)
