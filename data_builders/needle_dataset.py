"""The `needle` dataset builder: needles share one stored haystack; `materialize` rebuilds each context exactly."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from datasets import Features, List, Value

from data_builders.builders import BuildConfig, BuildContext, CardInfo, Document, Part, builder
from data_builders.needle import NeedleDoc, build_needle_doc
from longctx_eval.errors import DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.sample import Sample

NEEDLE_VERSION = "1"

_int, _str, _float = Value("int64"), Value("string"), Value("float64")
NEEDLE_FEATURES = Features(
    {
        "id": _str,
        "doc_id": _str,  # the haystack in the `documents` config
        "insert_at": _int,  # char offset in the document where `insertion` goes
        "insertion": _str,  # the needle with its separating space, exactly as inserted
        "doc_end": _int,  # the context uses document[:doc_end] (the tail is cut to the exact length)
        "question": _str,
        "answers": List(_str),
        "needle": _str,
        "needle_start": _int,  # half-open char span of the needle in the materialized context
        "needle_end": _int,
        "needle_token_start": _int,  # half-open token span in the context's tokenization
        "needle_token_end": _int,
        "key": _str,
        "value": _str,
        "target_tokens": _int,  # the context is exactly this many tokens in the dataset's tokenizer
        "depth": _float,  # requested, 0..1
        "actual_depth": _float,  # needle_token_start / target_tokens
        "rep": _int,
        "seed": _int,
        "haystack_seed": _int,
    }
)

USAGE = """\
Each row of a `needle_<length>` config is one question. Its context is not stored in the row: it is the
document `doc_id` of the `documents` config with the needle inserted, rebuilt exactly by

```python
context = doc[:row["insert_at"]] + row["insertion"] + doc[row["insert_at"]:row["doc_end"]]
assert context[row["needle_start"]:row["needle_end"]] == row["needle"]
```

(`data_builders.needle_dataset.materialize(row, documents)` does this and checks it). The context is
exactly `target_tokens` tokens in the tokenizer under Provenance; `needle_token_start`/`needle_token_end`
index its tokens. All depths of one length and repetition share one document: a haystack is stored once.
"""


def depth_grid(n: int) -> list[float]:
    """`n` evenly spaced depths from 0 (start) to 1 (end); the same grid as the needle task."""
    return [0.5] if n == 1 else [round(i / (n - 1), 4) for i in range(n)]


def haystack_seed(seed: int, length: int, rep: int) -> int:
    """The haystack shared by every depth of one (seed, length, repetition)."""
    return int(sha256_json(["needle-haystack", seed, length, rep])[:8], 16)


def _total(config: BuildConfig) -> int:
    return len(config.lengths) * config.depths * config.per_cell


@builder(
    "needle",
    version=NEEDLE_VERSION,
    features=NEEDLE_FEATURES,
    description="Single needle with a random 7-digit value in an exact-length haystack; length x depth grid.",
    total=_total,
    card=CardInfo(
        tags=("long-context", "needle-in-a-haystack", "retrieval"), task_categories=("question-answering",), usage=USAGE
    ),
)
def needle_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `needle_<length>` part per length: depth x repetition samples over one haystack per repetition."""
    cfg = ctx.config
    for length in cfg.lengths:
        documents: list[Document] = []
        samples: list[dict[str, Any]] = []
        for rep in range(cfg.per_cell):
            hseed = haystack_seed(cfg.seed, length, rep)
            docs: list[tuple[float, NeedleDoc]] = []
            for depth in depth_grid(cfg.depths):
                # The same per-sample rng as the needle task, so keys and values match it.
                rng = random.Random(sha256_json([cfg.seed, length, depth, rep]))
                docs.append(
                    (depth, build_needle_doc(ctx.source, ctx.tokenizer, length, depth, rng, haystack_seed=hseed))
                )
                ctx.advance(1)
            docs_of_rep, rows = _share(docs, f"needle-{length}-r{rep}", ctx)
            documents.extend(docs_of_rep)
            samples.extend({**row, "id": f"{row['id']}-r{rep}", "rep": rep, "seed": cfg.seed} for row in rows)
        yield Part(f"needle_{length}", samples, documents)


def _split(doc: NeedleDoc) -> tuple[str, int, str]:
    """(context without the needle, where the needle goes, the inserted text); re-inserting gives the context."""
    c, s, e = doc.context, doc.needle_start, doc.needle_end
    # The separating space goes with the needle: after it at the very start, before it anywhere else.
    at, end = (0, e + 1) if s == 0 else (s - 1, e)
    return c[:at] + c[end:], at, c[at:end]


def _share(docs: list[tuple[float, NeedleDoc]], doc_id: str, ctx: BuildContext) -> tuple[list[Document], list[dict]]:
    """Store the longest needle-free context once; every other one is a prefix of it (same haystack seed)."""
    split = [_split(doc) for _, doc in docs]
    longest = max((bare for bare, _, _ in split), key=len)
    documents = [Document(doc_id, longest, ctx.tokenizer.count(longest))]
    rows = []
    for i, ((depth, doc), (bare, at, insertion)) in enumerate(zip(docs, split, strict=True)):
        ref = doc_id
        if not longest.startswith(bare):
            # Only when the haystack had to skip a paragraph for this needle (see haystack.with_retries).
            ref = f"{doc_id}-d{i}"
            documents.append(Document(ref, bare, ctx.tokenizer.count(bare)))
        rows.append(_row(doc, depth, ref, at, insertion, len(bare)))
    return documents, rows


def _row(doc: NeedleDoc, depth: float, doc_id: str, at: int, insertion: str, doc_end: int) -> dict[str, Any]:
    return {
        "id": f"L{doc.target_tokens}-d{depth:.2f}",
        "doc_id": doc_id,
        "insert_at": at,
        "insertion": insertion,
        "doc_end": doc_end,
        "question": doc.question,
        "answers": [doc.value],
        "needle": doc.needle,
        "needle_start": doc.needle_start,
        "needle_end": doc.needle_end,
        "needle_token_start": doc.needle_token_start,
        "needle_token_end": doc.needle_token_end,
        "key": doc.key,
        "value": doc.value,
        "target_tokens": doc.target_tokens,
        "depth": float(depth),
        "actual_depth": doc.actual_depth,
        "haystack_seed": doc.haystack_seed,
    }


def documents_by_id(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """doc_id -> text from the rows of a `documents` config (a loaded `datasets.Dataset` works)."""
    return {row["doc_id"]: row["text"] for row in rows}


def materialize(sample: Mapping[str, Any], documents: Mapping[str, str]) -> str:
    """The exact context of a needle row: its document with the needle inserted, cut at `doc_end`."""
    doc_id = sample["doc_id"]
    doc = documents.get(doc_id)
    if doc is None:
        raise DataError(
            f"needle sample {sample.get('id')!r}: document {doc_id!r} is not among the {len(documents)} "
            "documents given; expected the `documents` config of the same dataset"
        )
    at, end = sample["insert_at"], sample["doc_end"]
    if not 0 <= at <= end <= len(doc):
        raise DataError(
            f"needle sample {sample.get('id')!r}: insert_at={at}, doc_end={end}; expected "
            f"0 <= insert_at <= doc_end <= {len(doc)} (the length of document {doc_id!r})"
        )
    context = doc[:at] + sample["insertion"] + doc[at:end]
    if context[sample["needle_start"] : sample["needle_end"]] != sample["needle"]:
        raise DataError(
            f"needle sample {sample.get('id')!r}: the needle is not at [{sample['needle_start']}, "
            f"{sample['needle_end']}) of the rebuilt context; the row and document {doc_id!r} do not match"
        )
    return context


def needle_sample(row: Mapping[str, Any], documents: Mapping[str, str], **metadata: Any) -> Sample:
    """A `Sample` as the needle task builds it, from one row (extra `metadata`, e.g. source, is merged in)."""
    return Sample(
        id=row["id"],
        context=materialize(row, documents),
        question=row["question"],
        gold={"answers": list(row["answers"]), "span": [row["needle_start"], row["needle_end"]]},
        metadata={
            "target_tokens": row["target_tokens"],
            "depth": row["depth"],
            "actual_depth": round(row["actual_depth"], 4),
            "seed": row["seed"],
            **metadata,
        },
    )
