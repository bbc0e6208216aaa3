"""The needle grid (length x repetition x depth), its prompt and scoring rule: one generator for the needle
task (`tasks/needle.py`) and the `needle` dataset builder, so both produce the same documents."""

from __future__ import annotations

import random
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.cluster import haystack_cluster
from data_builders.haystack.prompt_budget import PROMPT_RESERVE, context_tokens
from data_builders.haystack.sharing import by_haystack, spread_haystack
from data_builders.needle.insertion import MAGIC_TEMPLATES, NeedleDoc, build_needle_doc
from data_builders.needle.lexical_overlap import Overlap, measure_overlaps
from longctx_eval.errors import DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.sample import RetrievalParams, Sample
from longctx_eval.text.tokenizer import Tokenizer

PROMPT_TEMPLATE = "Read the following text and answer the question after it.\n\n{context}\n\nQuestion: {question}"
"""The generation prompt: `PROMPT_TEMPLATE.format(context=..., question=...)`, sent as one user turn; the reply
starts with the sample's answer prefix (e.g. "The special magic number for X mentioned in the provided text is")."""
NEW_TOKENS_MARGIN = 4
"""Generation budget beyond the answer's own tokens (an end-of-turn token, a stray word)."""
VALUE_KIND_CYCLE = ("number", "word", "uuid")
"""The needle grid's value kinds: cell (depth index i, repetition r) gets VALUE_KIND_CYCLE[(i + r) % 3]."""
RETRIEVAL = RetrievalParams(chunk_tokens=128, chunk_overlap=16, k=10)
"""Retrievers chunk the context (128 tokens, 16 shared) and return the top 10 chunks for the question."""
RECALL_KS = (1, 3, 5)

SCORING = f"""\
- **Prompt**: `prompt_template` as one user turn; the reply is continued from the row's `answer_prefix`
  (after the chat template's generation prompt), greedy decoding, at most the row's `max_new_tokens` (the
  value's tokens in the card's tokenizer plus {NEW_TOKENS_MARGIN}). The answer is the continuation only.
- **Generation** (`score`): normalized containment. The model's answer and the gold value are both
  normalized: Unicode NFKC, casefolded, each ASCII punctuation character and each of `‘ ’ “ ” – —` replaced
  by a space, runs of whitespace collapsed to one space, trimmed. The answer scores 1 when
  `" " + normalize(gold) + " "` occurs in `" " + normalize(answer) + " "` (the value on token boundaries),
  else 0. `exact`: the answer parsed by `value_kind` (number: the first digit run; uuid: the first UUID,
  lowercased; word: the first non-empty line, normalized) equals the gold value parsed the same way.
  `empty` is the rate of answers with nothing left after normalization.
- **Retrieval** (`recall@k`, `mrr`): the retriever ranks chunks of the context ({RETRIEVAL.chunk_tokens} tokens,
  {RETRIEVAL.chunk_overlap} shared with the previous chunk, top {RETRIEVAL.k}) with the question as query. The
  needle's rank is that of the first returned chunk whose char span covers all of
  `[needle_start, needle_end)`; `recall@k` (k = {", ".join(map(str, RECALL_KS))}) is 1 when that rank is at
  most k, else 0, and `mrr` is 1/rank (0 when no chunk covers it).
- A metric is the mean over the samples of one (length, depth) cell; samples whose prompt exceeds the
  model's window are excluded from it and counted in `over_length`.
"""
"""The needle task's scoring rule in words, for the dataset card."""


def depth_grid(n: int) -> list[float]:
    """`n` evenly spaced depths from 0 (start) to 1 (end); 0.5 alone when n == 1."""
    return [0.5] if n == 1 else [round(i / (n - 1), 4) for i in range(n)]


def haystack_seed(seed: int, length: int, rep: int) -> int:
    """The haystack shared by every depth of one (seed, length, repetition); with `haystacks` = h > 0, `rep` is
    the haystack's index 0..h-1 (`sharing.spread_haystack`), so the family's tasks read the same haystacks."""
    return int(sha256_json(["needle-haystack", seed, length, rep])[:8], 16)


def cell_rng(seed: int, length: int, depth: float, rep: int) -> random.Random:
    """The per-sample generator of one cell: it draws the key and the value."""
    return random.Random(sha256_json([seed, length, depth, rep]))


def value_kind_of(depth_index: int, rep: int) -> str:
    """The value kind of one cell: the kinds cycle over the depths, shifted by one per repetition."""
    return VALUE_KIND_CYCLE[(depth_index + rep) % len(VALUE_KIND_CYCLE)]


def answer_budget(tokenizer: Tokenizer, values: Sequence[str], separator: str = ".") -> int:
    """max_new_tokens for a reply naming `values`: their tokens (each after a space, then `separator`) + margin."""
    return sum(tokenizer.count(f" {v}{separator}") for v in values) + NEW_TOKENS_MARGIN


def sample_id(length: int, depth: float, rep: int) -> str:
    """The sample id of one cell, e.g. "L4096-d0.25-r0"."""
    return f"L{length}-d{depth:.2f}-r{rep}"


@dataclass(frozen=True)
class NeedleCell:
    """One sample of the grid: where it sits (length, depth, repetition) and its needle document."""

    id: str
    length: int  # the whole prompt budget; the document's context is `length - reserve` tokens
    depth: float
    rep: int
    seed: int
    doc: NeedleDoc
    max_new_tokens: int  # the value's tokens in the cell's tokenizer + NEW_TOKENS_MARGIN
    overlap: Overlap  # the question's overlap with the needle sentence

    def sample(self, **metadata: Any) -> Sample:
        """The needle task's Sample of this cell (extra `metadata`, e.g. source, merged in)."""
        d = self.doc
        return needle_sample(
            self.id,
            d.context,
            d.question,
            d.value,
            (d.needle_start, d.needle_end),
            answer_prefix=d.answer_prefix,
            max_new_tokens=self.max_new_tokens,
            length=self.length,
            context_tokens=d.target_tokens,
            depth=self.depth,
            actual_depth=d.actual_depth,
            seed=self.seed,
            value_kind=d.value_kind,
            cluster=haystack_cluster(d.haystack_seed),
            **self.overlap.metadata(),
            **metadata,
        )


def needle_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    depths: int,
    per_cell: int,
    seed: int,
    reserve: int = PROMPT_RESERVE,
    haystacks: int = 0,
    only: Container[str] | None = None,
) -> Iterator[NeedleCell]:
    """Every cell, ordered by length, then repetition, then depth: all depths of a length come before a repeat.

    A length is the whole prompt budget: each context is exactly `length - reserve` tokens (`prompt_budget`).
    Every depth of one (length, repetition) shares one haystack (`haystack_seed`), so the dataset stores it once;
    with `haystacks` = h > 0 a length's cells spread over h haystacks instead (`sharing.spread_haystack`; built
    one haystack at a time, yielded in this order). The value kind cycles with the depth index and repetition
    (`value_kind_of`), so every length has each kind; key, value and kind do not depend on `haystacks`.
    `only`: build just the cells of these sample ids (the others are skipped unbuilt; each cell's haystack and
    generator depend on its own place alone, so a cell is the same built alone or with the whole grid).
    """
    grid = depth_grid(depths)
    for length in lengths:
        n = context_tokens(length, reserve)
        points = [
            (rep, i, depth, spread_haystack(i, rep, depths, per_cell, haystacks))
            for rep in range(per_cell)
            for i, depth in enumerate(grid)
            if only is None or sample_id(length, depth, rep) in only
        ]

        def build(point: tuple[int, int, float, int], length: int = length, n: int = n) -> Iterator[NeedleCell]:
            rep, i, depth, hay = point
            rng = cell_rng(seed, length, depth, rep)
            template = MAGIC_TEMPLATES[value_kind_of(i, rep)]
            hseed = haystack_seed(seed, length, hay)
            try:
                doc = build_needle_doc(source, tokenizer, n, depth, rng, template=template, haystack_seed=hseed)
            except DataError as exc:
                raise DataError(
                    f"length {length} (a {n}-token context after the {reserve}-token reserve): {exc}"
                ) from None
            (overlap,) = measure_overlaps([doc.question], doc.context, [(doc.needle_start, doc.needle_end)])
            budget = answer_budget(tokenizer, [doc.value])
            yield NeedleCell(sample_id(length, depth, rep), length, depth, rep, seed, doc, budget, overlap)

        yield from by_haystack(points, lambda p: p[3], build)


def needle_sample(
    id: str,
    context: str,
    question: str,
    answer: str,
    span: tuple[int, int],
    *,
    answer_prefix: str,
    max_new_tokens: int,
    length: int,
    context_tokens: int,
    depth: float,
    actual_depth: float,
    seed: int,
    **metadata: Any,
) -> Sample:
    """A needle Sample: gold answers, the needle's char span and how the reply is asked for (answer prefix,
    budget); metadata for the (length, depth) strata and the slices (value_kind, overlap_*).

    `length` (metadata `target_tokens`) is the whole prompt budget, `context_tokens` the context's own length."""
    return Sample(
        id=id,
        context=context,
        question=question,
        gold={
            "answers": [answer],
            "span": [span[0], span[1]],
            "answer_prefix": answer_prefix,
            "max_new_tokens": max_new_tokens,
        },
        metadata={
            "target_tokens": length,
            "context_tokens": context_tokens,
            "depth": depth,
            "actual_depth": round(actual_depth, 4),
            "seed": seed,
            **metadata,
        },
    )
