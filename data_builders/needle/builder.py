"""The `needle` dataset builder (`longctx-eval build needle`): the needle task's grid as parquet for HF Datasets.

Needles of one (length, repetition) share one stored haystack and `materialize` rebuilds each context
exactly; with `--option flat=true` every row carries its full context instead (no join).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import groupby
from typing import Any

from datasets import Features, List, Value

from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Document, Part, builder
from data_builders.haystack.cluster import haystack_cluster
from data_builders.haystack.prompt_budget import PROMPT_RESERVE, reserve_option
from data_builders.needle.grid import PROMPT_TEMPLATE, SCORING, NeedleCell, needle_cells
from data_builders.needle.grid import needle_sample as _sample
from data_builders.needle.insertion import NeedleDoc
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.sample import Sample

NEEDLE_VERSION = "4"

_int, _str, _float = Value("int64"), Value("string"), Value("float64")
NEEDLE_FEATURES = Features(
    {
        "id": _str,
        "doc_id": _str,  # the haystack in the `documents` config
        "insert_at": _int,  # char offset in the document where `insertion` goes
        "insertion": _str,  # the needle with its separating space, exactly as inserted
        "doc_end": _int,  # the context uses document[:doc_end] (the tail is cut to the exact length)
        "question": _str,
        "answer_prefix": _str,  # the reply starts with it (rendered after the chat template's generation prompt)
        "max_new_tokens": _int,  # the value's tokens in the dataset's tokenizer + a small margin
        "answers": List(_str),
        "needle": _str,
        "needle_start": _int,  # half-open char span of the needle in the materialized context
        "needle_end": _int,
        "needle_token_start": _int,  # half-open token span in the context's tokenization
        "needle_token_end": _int,
        "key": _str,
        "value": _str,
        "value_kind": _str,  # number, word or uuid
        "target_tokens": _int,  # the length: the whole prompt budget (context + prompt reserve)
        "context_tokens": _int,  # the context is exactly this many tokens in the dataset's tokenizer
        "depth": _float,  # requested, 0..1
        "actual_depth": _float,  # needle_token_start / context_tokens
        "rep": _int,
        "seed": _int,
        "haystack_seed": _int,
        "overlap_bm25": _float,  # the question's lexical overlap with the needle (docs/needle.md)
        "overlap_cosine": _float,
        "overlap_bucket": _str,
    }
)

_JOIN_FIELDS = ("doc_id", "insert_at", "insertion", "doc_end")
FLAT_FEATURES = Features(
    {"id": _str, "context": _str, **{k: v for k, v in NEEDLE_FEATURES.items() if k not in ("id", *_JOIN_FIELDS)}}
)
"""The rows of a flat build (`--option flat=true`): the full context in each row, no `documents` config."""

# The card text is part of a build's bytes: change it together with NEEDLE_VERSION (4: the card names the module
# path below, not the pre-0.2 `data_builders.needle_builder`).
JOINED_USAGE = """\
Each row of a `needle_<length>` config is one question. Its context is not stored in the row: it is the
document `doc_id` of the `documents` config with the needle inserted, rebuilt exactly by

```python
context = doc[:row["insert_at"]] + row["insertion"] + doc[row["insert_at"]:row["doc_end"]]
assert context[row["needle_start"]:row["needle_end"]] == row["needle"]
```

(`data_builders.needle.builder.materialize(row, documents)` does this and checks it). The context is
exactly `context_tokens` tokens in the tokenizer under Provenance; `needle_token_start`/`needle_token_end`
index its tokens. `target_tokens` (the config's length) is the whole prompt budget: the context plus a
prompt reserve for the template, question, chat template, answer prefix and `max_new_tokens`. All depths
of one length and repetition share one document: a haystack is stored once. Build with `--option flat=true`
for rows that carry their full `context` instead. The model's reply starts with the row's `answer_prefix`
(see Scoring).
"""

FLAT_USAGE = """\
Each row of a `needle_<length>` config is one question with its full `context` (built with
`--option flat=true`: no `documents` config, no join). The context is exactly `context_tokens` tokens in the
tokenizer under Provenance (`target_tokens`, the config's length, is the whole prompt budget: the context
plus a prompt reserve for the template, question, chat template, answer prefix and `max_new_tokens`);
`context[needle_start:needle_end] == needle`, and `needle_token_start`/`needle_token_end` index its tokens.
The model's reply starts with the row's `answer_prefix` (see Scoring).
"""


def _usage(config: BuildConfig) -> str:
    return FLAT_USAGE if is_flat(config) else JOINED_USAGE


def is_flat(config: BuildConfig) -> bool:
    """True when the build asks for flat rows (`--option flat=true`); ConfigError for another value."""
    value = config.options.get("flat", "false").strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"--option flat={config.options['flat']!r}: expected true or false")
    return value in ("true", "1", "yes")


def _total(config: BuildConfig) -> int:
    return len(config.lengths) * config.depths * config.per_cell


@builder(
    "needle",
    version=NEEDLE_VERSION,
    features=NEEDLE_FEATURES,
    description="Single needle with a random value (7-digit number, word pair or UUID) in an exact-length "
    "haystack; length x depth grid.",
    total=_total,
    options={
        "flat": "true: every row carries its full context (no documents config, no join); default false",
        "reserve": f"tokens of each length left for the prompt around the context (default {PROMPT_RESERVE})",
    },
    card=CardInfo(
        tags=("long-context", "needle-in-a-haystack", "retrieval"),
        task_categories=("question-answering",),
        usage=_usage,
        prompt_template=PROMPT_TEMPLATE,
        scoring=SCORING,
    ),
)
def needle_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `needle_<length>` part per length: the needle task's cells, one haystack per repetition."""
    cfg = ctx.config
    flat = is_flat(cfg)
    reserve = reserve_option(cfg.options)
    cells = needle_cells(ctx.source, ctx.tokenizer, cfg.lengths, cfg.depths, cfg.per_cell, cfg.seed, reserve)
    for length, of_length in groupby(cells, key=lambda c: c.length):
        documents: list[Document] = []
        samples: list[dict[str, Any]] = []
        for rep, of_rep in groupby(of_length, key=lambda c: c.rep):
            group = []
            for cell in of_rep:
                group.append(cell)
                ctx.advance(1)
            if flat:
                samples.extend(_flat_row(cell) for cell in group)
                continue
            docs_of_rep, rows = _share(group, f"needle-{length}-r{rep}", ctx)
            documents.extend(docs_of_rep)
            samples.extend({**row, "rep": rep, "seed": cfg.seed} for row in rows)
        yield Part(f"needle_{length}", samples, documents, FLAT_FEATURES if flat else None)


def _split(doc: NeedleDoc) -> tuple[str, int, str]:
    """(context without the needle, where the needle goes, the inserted text); re-inserting gives the context."""
    c, s, e = doc.context, doc.needle_start, doc.needle_end
    # The separating space goes with the needle: after it at the very start, before it anywhere else.
    at, end = (0, e + 1) if s == 0 else (s - 1, e)
    return c[:at] + c[end:], at, c[at:end]


def _share(cells: list[NeedleCell], doc_id: str, ctx: BuildContext) -> tuple[list[Document], list[dict]]:
    """Store the longest needle-free context once; every other one is a prefix of it (same haystack seed)."""
    split = [_split(cell.doc) for cell in cells]
    longest = max((bare for bare, _, _ in split), key=len)
    documents = [Document(doc_id, longest, ctx.tokenizer.count(longest))]
    rows = []
    for i, (cell, (bare, at, insertion)) in enumerate(zip(cells, split, strict=True)):
        ref = doc_id
        if not longest.startswith(bare):
            # Only when the haystack had to skip a paragraph for this needle (see haystack.with_retries).
            ref = f"{doc_id}-d{i}"
            documents.append(Document(ref, bare, ctx.tokenizer.count(bare)))
        rows.append({"id": cell.id, **_join_fields(ref, at, insertion, len(bare)), **_fields(cell)})
    return documents, rows


def _join_fields(doc_id: str, at: int, insertion: str, doc_end: int) -> dict[str, Any]:
    return {"doc_id": doc_id, "insert_at": at, "insertion": insertion, "doc_end": doc_end}


def _flat_row(cell: NeedleCell) -> dict[str, Any]:
    return {"id": cell.id, "context": cell.doc.context, **_fields(cell), "rep": cell.rep, "seed": cell.seed}


def _fields(cell: NeedleCell) -> dict[str, Any]:
    """The row fields every build has (in NEEDLE_FEATURES order after the join fields), rep and seed aside."""
    doc = cell.doc
    return {
        "question": doc.question,
        "answer_prefix": doc.answer_prefix,
        "max_new_tokens": cell.max_new_tokens,
        "answers": [doc.value],
        "needle": doc.needle,
        "needle_start": doc.needle_start,
        "needle_end": doc.needle_end,
        "needle_token_start": doc.needle_token_start,
        "needle_token_end": doc.needle_token_end,
        "key": doc.key,
        "value": doc.value,
        "value_kind": doc.value_kind,
        "target_tokens": cell.length,
        "context_tokens": doc.target_tokens,
        "depth": float(cell.depth),
        "actual_depth": doc.actual_depth,
        "haystack_seed": doc.haystack_seed,
        **cell.overlap.metadata(),
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


def needle_sample(row: Mapping[str, Any], documents: Mapping[str, str] | None = None, **metadata: Any) -> Sample:
    """A `Sample` as the needle task builds it, from one row (extra `metadata`, e.g. source, is merged in).

    A flat row carries its context; a joined row needs the `documents` (see `documents_by_id`).
    """
    if "context" in row:
        context = row["context"]
    elif documents is None:
        raise DataError(f"needle sample {row.get('id')!r}: the row has no context; pass the `documents` config")
    else:
        context = materialize(row, documents)
    return _sample(
        row["id"],
        context,
        row["question"],
        row["answers"][0],
        (row["needle_start"], row["needle_end"]),
        answer_prefix=row["answer_prefix"],
        max_new_tokens=row["max_new_tokens"],
        length=row["target_tokens"],
        context_tokens=row["context_tokens"],
        depth=row["depth"],
        actual_depth=row["actual_depth"],
        seed=row["seed"],
        value_kind=row["value_kind"],
        overlap_bm25=row["overlap_bm25"],
        overlap_cosine=row["overlap_cosine"],
        overlap_bucket=row["overlap_bucket"],
        cluster=haystack_cluster(row["haystack_seed"]),
        **metadata,
    )
