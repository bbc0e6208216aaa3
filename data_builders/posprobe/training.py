"""Training batches of the position-encoding references: varied lengths, so no position is a cue.

Every passkey sequence is built at its own length, drawn uniformly from [MIN_LENGTH, window], and right-padded
to the window with `<pad>` at loss weight 0. Under causal attention the padding after a sequence is invisible
to it, so each sequence trains exactly as if it were alone, while the question, needle and answer positions
spread over the whole window (a fixed length put the question at positions 117-122 every time, and the
references learned to expect it there). The needle depth is uniform; plain filler sequences fill the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from data_builders.posprobe.language import QUESTION, ToyCodec, ToyLanguage, build_passkey, filler_ids

MIN_LENGTH = 32
"""Shortest passkey sequence: the needle and question take 22 tokens, so at least 10 are filler."""


@dataclass(frozen=True)
class TrainingBatch:
    """ids (B, window), per-position loss weights (weight t applies to predicting token t+1), what was drawn."""

    ids: np.ndarray
    weights: np.ndarray
    lengths: list[int]  # real tokens per sequence (the rest is <pad> at weight 0)
    depths: list[float | None]  # needle depth drawn per passkey sequence; None for plain filler
    question_positions: list[int | None]  # position of the question's first token; None for plain filler


def training_batch(
    rng: np.random.Generator,
    codec: ToyCodec,
    lang: ToyLanguage,
    batch: int,
    window: int,
    passkey_share: float,
    answer_weight: float,
    min_length: int = MIN_LENGTH,
) -> TrainingBatch:
    """`batch` sequences: a passkey share at lengths uniform over [min_length, window], the rest plain filler."""
    bos, pad = codec.vocab["<bos>"], codec.vocab["<pad>"]
    question_len = len(codec.encode_ids(QUESTION))
    ids = np.full((batch, window), pad, dtype=np.int64)
    weights = np.zeros((batch, window), dtype=np.float32)
    lengths: list[int] = []
    depths: list[float | None] = []
    questions: list[int | None] = []
    for b in range(batch):
        if rng.random() < passkey_share:
            length = int(rng.integers(min_length, window + 1))
            depth = float(rng.random())
            doc = build_passkey(codec, [bos], length, depth, rng, lang)
            seq = doc.ids
            weights[b, : length - 1] = 1.0
            weights[b, doc.query_positions] = answer_weight
            depths.append(depth)
            questions.append(doc.answer_positions[0] - question_len)
        else:
            length = window
            seq = [bos, *filler_ids(codec, lang, rng, window - 1)]
            weights[b, : length - 1] = 1.0
            depths.append(None)
            questions.append(None)
        ids[b, :length] = seq
        lengths.append(length)
    return TrainingBatch(ids, weights, lengths, depths, questions)
