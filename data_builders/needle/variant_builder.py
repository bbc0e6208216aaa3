"""Dataset builders of the needle variants (`longctx-eval build needle_multikey|needle_multivalue|needle_multiquery|
needle_lowlex`): each variant task's samples as parquet for HF Datasets, one config per length.

Needles of one haystack share one stored document; a row holds the insertions that rebuild its context
exactly (`materialize`), and `variant_sample(row, documents)` is the task's Sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import groupby
from typing import Any

from datasets import Features, List, Value

from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Document, Part, builder
from data_builders.haystack.prompt_budget import PROMPT_RESERVE, reserve_option
from data_builders.needle.family import FamilyCell, family_sample
from data_builders.needle.grid import NEW_TOKENS_MARGIN, PROMPT_TEMPLATE, RETRIEVAL
from data_builders.needle.lowlex import lowlex_cells
from data_builders.needle.multikey import multikey_cells
from data_builders.needle.multiquery import multiquery_cells
from data_builders.needle.multivalue import RESERVE as MULTIVALUE_RESERVE
from data_builders.needle.multivalue import multivalue_cells
from data_builders.needle.storage import rebuild, split_insertions
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.sample import Sample

VARIANT_VERSION = "2"

_int, _str, _float = Value("int64"), Value("string"), Value("float64")
QUESTION_FEATURES = {
    "question": _str,
    "answer_prefix": _str,  # the reply starts with it (rendered after the chat template's generation prompt)
    "answers": List(_str),
    "needles": List(_int),  # indices into `needles`: where the answers are, in `answers` order
    "max_new_tokens": _int,
    "overlap_bm25": _float,
    "overlap_cosine": _float,
}
NEEDLE_FIELDS = {
    "text": _str,
    "key": _str,
    "value": _str,
    "role": _str,  # target, distractor, value or query
    "depth": _float,  # requested, 0..1
    "actual_depth": _float,  # token_start / context_tokens
    "start": _int,  # half-open char span in the materialized context
    "end": _int,
    "token_start": _int,  # half-open token span in the context's tokenization
    "token_end": _int,
}
VARIANT_FEATURES = Features(
    {
        "id": _str,
        "doc_id": _str,  # the haystack in the `documents` config
        "insert_at": List(_int),  # offsets of the document where each insertion goes, ascending
        "insertion": List(_str),  # the inserted needles with their separating spaces, exactly as inserted
        "doc_end": _int,  # the context uses document[:doc_end]
        "question": _str,  # the questions, one per line (one question for all variants but multiquery)
        "questions": List(QUESTION_FEATURES),
        "needles": List(NEEDLE_FIELDS),
        "value_kind": _str,
        "target_tokens": _int,  # the length: the whole prompt budget (context + prompt reserve)
        "context_tokens": _int,  # the context is exactly this many tokens in the dataset's tokenizer
        "depth": _float,  # the target needle's grid depth; null where needles sit in every quarter
        "rep": _int,
        "seed": _int,
        "haystack_seed": _int,
        "overlap_bm25": _float,
        "overlap_cosine": _float,
        "overlap_bucket": _str,
    }
)

USAGE = """\
Each row of a `{name}_<length>` config is one sample. Its context is the document `doc_id` of the
`documents` config with the needles inserted, rebuilt exactly by

```python
from data_builders.needle.storage import rebuild
context = rebuild(doc, row["insert_at"], row["insertion"], row["doc_end"])
assert all(context[n["start"]:n["end"]] == n["text"] for n in row["needles"])
```

(without this code: walk `insert_at`/`insertion` in order, copying `doc` up to each offset and then the
insertion, and finally `doc[last_offset:doc_end]`). The context is exactly `context_tokens` tokens in the
tokenizer under Provenance; each needle's `token_start`/`token_end` index its tokens. `target_tokens` (the
config's length) is the whole prompt budget: the context plus a prompt reserve for the template, question,
chat template, answer prefix and `max_new_tokens`.
`data_builders.needle.variant_builder.variant_sample(row, documents)` gives the task's `Sample`.

{what}

Each entry of `questions` is one request: the prompt template below with that `question`, the reply
continued from its `answer_prefix`, at most `max_new_tokens` new tokens.
"""

_SCORING_COMMON = f"""\
- **Prompt**: the template as one user turn; the reply is continued from the question's `answer_prefix`
  (after the chat template's generation prompt), greedy, at most `max_new_tokens` new tokens (the answer
  value's tokens in the card's tokenizer plus {NEW_TOKENS_MARGIN}; for several values, their tokens as a
  numbered list plus {NEW_TOKENS_MARGIN}). The answer is the continuation only.
- **Normalization**: Unicode NFKC, casefolded, each ASCII punctuation character and each of `‘ ’ “ ” – —`
  replaced by a space, whitespace collapsed, trimmed; a value is *contained* when
  `" " + normalize(value) + " "` occurs in `" " + normalize(answer) + " "`. `empty`: nothing left after
  normalization. `exact`: the answer parsed by `value_kind` (number: first digit run; uuid: first UUID,
  lowercased; word/name: first non-empty line, normalized) equals the value parsed the same way.
- **Retrieval**: the retriever ranks chunks of the context ({RETRIEVAL.chunk_tokens} tokens,
  {RETRIEVAL.chunk_overlap} shared, top {RETRIEVAL.k}) with the question as query; a needle's rank is that of
  the first chunk whose char span covers it whole.
"""

WHAT = {
    "needle_multikey": "The `target` needle answers the question; three `distractor` needles use the same "
    "template with similar keys (one shares the target key's qualifier, one its noun) and other values.",
    "needle_multivalue": "One key has four `value` needles, one in each quarter of the document; the one "
    "question asks for all of them.",
    "needle_multiquery": "Four `query` needles with different keys; each entry of `questions` asks for one "
    "of them as its own request on the same context.",
    "needle_lowlex": "One `target` needle names a character; the question shares no content word with it "
    "(an association links them, e.g. the Prado and Madrid). `key` holds the question's predicate.",
}

SCORING = {
    "needle_multikey": _SCORING_COMMON
    + """- `score`: the target value contained; `distractor_rate`: share of answers containing a distractor's
  value. Retrieval: `recall@k` (k = 1, 3, 5) of the target needle, `mrr`.
""",
    "needle_multivalue": _SCORING_COMMON
    + """- `score`: the share of the four values contained (partial credit); `all_found`: all four contained.
  Retrieval: `recall@k` (k = 1, 3, 5, 10) is the share of the value needles covered by one of the top k
  chunks; `mrr` the mean over the needles of 1/rank (0 when not returned).
""",
    "needle_multiquery": _SCORING_COMMON
    + """- `score`: the share of the questions whose answer contains its value; `all_found`: every one;
  `exact` and `empty_rate` likewise per question. Retrieval: each question's `recall@k` (k = 1, 3, 5) and
  `mrr` for its needle, averaged over the questions.
""",
    "needle_lowlex": _SCORING_COMMON
    + """- `score`: the character's name contained. Retrieval: `recall@k` (k = 1, 3, 5) of the needle, `mrr`.
""",
}


def _per_length(config: BuildConfig) -> int:
    raw = config.options.get("per_length", "6")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"--option per_length={raw!r}: expected a positive integer")
    return n


def _grid_total(config: BuildConfig) -> int:
    return len(config.lengths) * config.depths * config.per_cell


def _per_length_total(config: BuildConfig) -> int:
    return len(config.lengths) * _per_length(config)


Cells = Callable[[BuildContext], Iterable[FamilyCell]]


def _reserve_help(default: int) -> str:
    return f"tokens of each length left for the prompt around the context (default {default})"


def _card(name: str, grid: bool) -> CardInfo:
    what = WHAT[name]
    if not grid:
        what += " `--depths` and `--per-cell` do not apply: `--option per_length=N` samples per length."
    return CardInfo(
        tags=("long-context", "needle-in-a-haystack", "retrieval"),
        task_categories=("question-answering",),
        usage=USAGE.format(name=name, what=what),
        prompt_template=PROMPT_TEMPLATE,
        scoring=SCORING[name],
    )


def _parts(name: str, ctx: BuildContext, cells: Iterable[FamilyCell]) -> Iterator[Part]:
    """One `<name>_<length>` part per length; cells of one haystack share one stored document."""
    for length, of_length in groupby(cells, key=lambda c: c.length):
        documents: list[Document] = []
        rows: list[dict[str, Any]] = []
        for hseed, grouped in groupby(of_length, key=lambda c: c.haystack_seed):
            group = list(grouped)
            ctx.advance(len(group))
            docs, group_rows = _share(group, f"{name}-{length}-h{hseed:08x}", ctx)
            documents.extend(docs)
            rows.extend(group_rows)
        yield Part(f"{name}_{length}", rows, documents)


def _share(cells: list[FamilyCell], doc_id: str, ctx: BuildContext) -> tuple[list[Document], list[dict]]:
    split = [split_insertions(c.context, [(n["start"], n["end"]) for n in c.needles]) for c in cells]
    longest = max((s.bare for s in split), key=len)
    documents = [Document(doc_id, longest, ctx.tokenizer.count(longest))]
    rows = []
    for i, (cell, s) in enumerate(zip(cells, split, strict=True)):
        ref, doc = doc_id, longest
        if not longest.startswith(s.bare):  # the haystack skipped a paragraph for this cell's needles
            ref, doc = f"{doc_id}-{i}", s.bare
            documents.append(Document(ref, s.bare, ctx.tokenizer.count(s.bare)))
        if rebuild(doc, s.insert_at, s.insertion, len(s.bare)) != cell.context:
            raise DataError(f"{cell.id}: the stored document and insertions do not rebuild the context")
        fields = cell.fields()
        rows.append(
            {
                "id": cell.id,
                "doc_id": ref,
                "insert_at": list(s.insert_at),
                "insertion": list(s.insertion),
                "doc_end": len(s.bare),
                "question": "\n".join(q["question"] for q in fields["questions"]),
                **{k: v for k, v in fields.items() if k != "id"},
            }
        )
    return documents, rows


@builder(
    "needle_multikey",
    version=VARIANT_VERSION,
    features=VARIANT_FEATURES,
    description="Target needle among three distractor needles with similar keys; length x depth grid.",
    total=_grid_total,
    options={"reserve": _reserve_help(PROMPT_RESERVE)},
    card=_card("needle_multikey", grid=True),
)
def needle_multikey_parts(ctx: BuildContext) -> Iterator[Part]:
    """The needle_multikey task's cells."""
    c = ctx.config
    yield from _parts(
        "needle_multikey",
        ctx,
        multikey_cells(ctx.source, ctx.tokenizer, c.lengths, c.depths, c.per_cell, c.seed, reserve_option(c.options)),
    )


@builder(
    "needle_lowlex",
    version=VARIANT_VERSION,
    features=VARIANT_FEATURES,
    description="Needle linked to its question by association, no shared content word; length x depth grid.",
    total=_grid_total,
    options={"reserve": _reserve_help(PROMPT_RESERVE)},
    card=_card("needle_lowlex", grid=True),
)
def needle_lowlex_parts(ctx: BuildContext) -> Iterator[Part]:
    """The needle_lowlex task's cells."""
    c = ctx.config
    yield from _parts(
        "needle_lowlex",
        ctx,
        lowlex_cells(ctx.source, ctx.tokenizer, c.lengths, c.depths, c.per_cell, c.seed, reserve_option(c.options)),
    )


@builder(
    "needle_multivalue",
    version=VARIANT_VERSION,
    features=VARIANT_FEATURES,
    description="One key with four values in the four quarters of the document, all asked.",
    total=_per_length_total,
    options={
        "per_length": "samples per length (default 6; the value kinds cycle number, word, uuid)",
        "reserve": _reserve_help(MULTIVALUE_RESERVE),
    },
    card=_card("needle_multivalue", grid=False),
)
def needle_multivalue_parts(ctx: BuildContext) -> Iterator[Part]:
    """The needle_multivalue task's cells."""
    c = ctx.config
    cells = multivalue_cells(
        ctx.source, ctx.tokenizer, c.lengths, _per_length(c), c.seed, reserve_option(c.options, MULTIVALUE_RESERVE)
    )
    yield from _parts("needle_multivalue", ctx, cells)


@builder(
    "needle_multiquery",
    version=VARIANT_VERSION,
    features=VARIANT_FEATURES,
    description="Four needles with different keys in one document, each asked as its own request.",
    total=_per_length_total,
    options={
        "per_length": "samples per length (default 6; the value kinds cycle number, word, uuid)",
        "reserve": _reserve_help(PROMPT_RESERVE),
    },
    card=_card("needle_multiquery", grid=False),
)
def needle_multiquery_parts(ctx: BuildContext) -> Iterator[Part]:
    """The needle_multiquery task's cells."""
    c = ctx.config
    cells = multiquery_cells(ctx.source, ctx.tokenizer, c.lengths, _per_length(c), c.seed, reserve_option(c.options))
    yield from _parts("needle_multiquery", ctx, cells)


def documents_by_id(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """doc_id -> text from the rows of a `documents` config (a loaded `datasets.Dataset` works)."""
    return {row["doc_id"]: row["text"] for row in rows}


def materialize(row: Mapping[str, Any], documents: Mapping[str, str]) -> str:
    """The exact context of a variant row: its document with the needles inserted, cut at `doc_end`."""
    doc = documents.get(row["doc_id"])
    if doc is None:
        raise DataError(
            f"needle sample {row.get('id')!r}: document {row['doc_id']!r} is not among the {len(documents)} "
            "documents given; expected the `documents` config of the same dataset"
        )
    try:
        return rebuild(doc, row["insert_at"], row["insertion"], row["doc_end"])
    except DataError as exc:
        raise DataError(f"needle sample {row.get('id')!r}: {exc}") from None


def variant_sample(row: Mapping[str, Any], documents: Mapping[str, str], **metadata: Any) -> Sample:
    """The `Sample` the variant task builds, from one row and the `documents` config (extra metadata merged in)."""
    return family_sample(row, materialize(row, documents), **metadata)
