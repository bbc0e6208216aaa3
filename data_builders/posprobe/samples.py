"""posprobe samples for `tasks/posprobe.py`: the stratified passkey grid per length and its calibration set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from data_builders.posprobe.language import QUESTION, PasskeyDoc, ToyLanguage, build_passkey, filler_ids
from longctx_eval import DataError, Sample, Tokenizer, sha256_json

QUINTILES = 5


class TokenizerCodec:
    """A suite Tokenizer as the builder's codec: ids without special tokens, lossless decode."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.prefix = special_prefix(tokenizer)

    def encode_ids(self, text: str) -> list[int]:
        """Token ids of `text`, no special tokens."""
        return list(self.tokenizer.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of `ids`."""
        return self.tokenizer.decode(ids)


def special_prefix(tokenizer: Tokenizer) -> list[int]:
    """The special tokens the tokenizer's post-processor puts before a text (e.g. [<bos>]; [] for SmolLM2)."""
    plain = tokenizer.backend.encode("a", add_special_tokens=False).ids
    full = tokenizer.backend.encode("a", add_special_tokens=True).ids
    for i in range(len(full) - len(plain) + 1):
        if full[i : i + len(plain)] == plain:
            return list(full[:i])
    return []


def rng_for(*parts: Any) -> np.random.Generator:
    """A generator seeded from the hash of `parts` (e.g. seed and length), independent of call order."""
    return np.random.default_rng(int(sha256_json(list(parts))[:16], 16))


def depth_grid(n: int) -> list[float]:
    """The stratified grid d_i = (i + 0.5) / n."""
    return [(i + 0.5) / n for i in range(n)]


def spread_order(n: int) -> list[int]:
    """0..n-1 ordered by their base-2 radical inverse, so every prefix (e.g. `--limit 12`) spans all depths."""

    def radical_inverse(i: int) -> float:
        out, scale = 0.0, 0.5
        while i:
            out += scale * (i & 1)
            i >>= 1
            scale /= 2
        return out

    return sorted(range(n), key=lambda i: (radical_inverse(i), i))


def quintile_mid(depth: float) -> float:
    """The midpoint of the depth quintile holding `depth` (0.1, 0.3, ..., 0.9): the depth stratum."""
    q = min(QUINTILES - 1, int(depth * QUINTILES))
    return round((q + 0.5) / QUINTILES, 2)


@dataclass(frozen=True)
class ProbeBuilder:
    """Builds the probe's passkey sequences in one tokenizer; the same (seed, length) gives the same bytes."""

    codec: TokenizerCodec
    seed: int
    needles: int
    language: ToyLanguage
    text_every: int = 5

    def docs(self, length: int) -> list[PasskeyDoc]:
        """`needles` sequences of exactly `length` tokens on the stratified depth grid."""
        rng = rng_for("posprobe", self.seed, length)
        return [
            build_passkey(self.codec, self.codec.prefix, length, d, rng, self.language)
            for d in depth_grid(self.needles)
        ]

    def samples(self, lengths: list[int]) -> Iterator[tuple[Sample, PasskeyDoc]]:
        """Samples with gold positions and strata (length, depth quintile), paired with their sequence."""
        for length in lengths:
            docs = self.docs(length)
            for i in spread_order(len(docs)):
                doc = docs[i]
                q1, p1 = doc.query_positions[0], doc.needle_positions[0]
                yield (
                    Sample(
                        id=f"L{length}-n{i:03d}",
                        context=doc.context,
                        question=QUESTION.strip(),
                        gold={
                            "answers": [doc.value],
                            "needle_positions": doc.needle_positions,
                            "answer_positions": doc.answer_positions,
                        },
                        metadata={
                            "target_tokens": length,
                            "depth": quintile_mid(doc.depth),
                            "needle_index": i,
                            "has_text": self.text_every > 0 and i % self.text_every == 0,
                            "needle_depth": round(doc.depth, 6),
                            "actual_depth": round(doc.actual_depth, 6),
                            "distance": q1 - p1,
                            "seed": self.seed,
                            "tokenizer": self.codec.tokenizer.name,
                            "tokenizer_sha256": self.codec.tokenizer.sha256,
                        },
                    ),
                    doc,
                )

    def text_ids(self, length: int, index: int) -> list[int]:
        """A needle-free filler sequence of exactly `length` tokens (plain and tail perplexity)."""
        rng = rng_for("posprobe-text", self.seed, length, index)
        prefix = self.codec.prefix
        return [*prefix, *filler_ids(self.codec, self.language, rng, length - len(prefix))]

    def calibration(self, length: int, n: int) -> dict[str, Any]:
        """The retrieval-head calibration set: n sequences at `length` from a seed of its own."""
        rng = rng_for("posprobe-calibration", self.seed, length)
        docs = [build_passkey(self.codec, self.codec.prefix, length, d, rng, self.language) for d in depth_grid(n)]
        return {"length": length, "seed": self.seed, "sequences": [probe_inputs(d) for d in docs]}


def probe_inputs(doc: PasskeyDoc) -> dict[str, Any]:
    """The structured request fields of one sequence."""
    return {
        "input_ids": doc.ids,
        "needle_positions": doc.needle_positions,
        "answer_positions": doc.answer_positions,
        "filler_spans": [list(s) for s in doc.filler_spans],
    }


def check_lengths(lengths: list[int], calibration_length: int) -> None:
    """Probe lengths and the calibration length must be large enough to hold a needle and question."""
    small = [n for n in [*lengths, calibration_length] if n < 32]
    if small:
        raise DataError(f"posprobe lengths {small} are below 32 tokens; expected lengths that hold filler and a needle")
