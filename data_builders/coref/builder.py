"""The coreference dataset builders: LitBank, OntoGUM and synthetic chains stretched to each length, as rows.

Each row holds its full text and its gold clusters three ways: word spans (inclusive, as in CoNLL files
and the coref tasks' gold), character spans into `text` and token spans in the dataset's tokenizer (both
half-open). The documents come from `coref_documents`, the generator the coref tasks use, here built to the
length itself (L = the unmarked document's tokens); the tasks build the same documents shorter, so that their
whole marked prompt fits L (docs/coref.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from datasets import Features, List, Value

from data_builders.coref.documents import StretchedDoc, corpus_documents, rendered, synthetic_documents
from data_builders.coref.splits import Corpus, litbank, ontogum
from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Part, builder
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Tokenizer

COREF_BUILDER_VERSION = "1"

_int, _str = Value("int64"), Value("string")
_SPANS = List(List(List(_int)))
COREF_FEATURES = Features(
    {
        "id": _str,  # "<doc id>@<target_tokens>" (corpora) or "synthetic-L<length>-r<rep>"
        "doc_id": _str,
        "corpus": _str,  # litbank, ontogum, synthetic
        "split": _str,
        "target_tokens": _int,  # the length stratum: the text is at most this many tokens, close to it
        "n_tokens": _int,  # the text's length in the dataset's tokenizer
        "text": _str,
        "words": List(_str),  # the document's words, gold document and haystack together
        "word_starts": List(_int),  # character offset of each word in `text`
        "sentence_ends": List(_int),  # exclusive word index where each sentence ends
        "clusters": _SPANS,  # gold entities as [first word, last word] (inclusive, CoNLL convention)
        "clusters_char": _SPANS,  # the same mentions as half-open [start, end) character spans of `text`
        "clusters_token": _SPANS,  # ... and as half-open [start, end) token spans in the dataset's tokenizer
        "singletons": Value("bool"),  # whether entities mentioned once are annotated (LitBank, synthetic)
        "native_words": _int,  # words of the gold document (the rest is haystack)
        "haystack_words": _int,
        "seed": _int,
        "source": _str,  # haystack source name ("" for synthetic narratives: no haystack)
    }
)

USAGE = """\
Each row of a `<builder>_<length>` config is one document stretched to about `<length>` tokens of the
tokenizer under Provenance (LitBank and OntoGUM documents get haystack paragraphs between their sentences,
never inside a mention; synthetic narratives are written to the length). The text is in the row. The
suite's coref tasks (version 2) count the whole prompt against a length (instructions, marks, question and
answer), so their sample at a length is the same document stretched less: this dataset holds documents of
the length itself, a reader's own prompt on top. Gold entities are given three ways, mention by mention in
the same order:

* `clusters`: `[first word, last word]` into `words`, **inclusive** (the CoNLL convention);
* `clusters_char`: `[start, end)` character offsets into `text`, half-open;
* `clusters_token`: `[start, end)` token offsets in the dataset's tokenizer, half-open.

```python
from datasets import load_dataset

ds = load_dataset("parquet", data_files={"test": "data/coref_litbank_8192.parquet"}, split="test")
row = ds[0]
for words, chars in zip(row["clusters"], row["clusters_char"]):
    for (w0, w1), (c0, c1) in zip(words, chars):
        mention = row["text"][c0:c1]
        assert mention.startswith(row["words"][w0]) and mention.endswith(row["words"][w1])
```

`singletons` says whether entities mentioned once are annotated (LitBank, synthetic: yes; OntoGUM: no, as in
OntoNotes): score a system's clusters in the same regime (drop its singletons when it is false).
"""

LICENCES = {
    "litbank": """\
**Licence of the documents.** The gold documents are LitBank (CC BY 4.0; public-domain Project Gutenberg
texts): David Bamman, Olivia Lewke and Anya Mansoor (2020), "An Annotated Dataset of Coreference in English
Literature", LREC 2020; https://github.com/dbamman/litbank. The haystack paragraphs between their sentences
come from the source under Provenance, under its licence.
""",
    "ontogum": """\
**Licence of the documents.** The gold documents are the CC BY and CC BY-SA part of OntoGUM (GUM V11.1.0;
the bio and voyage documents are CC BY-SA 3.0, share-alike): Yilun Zhu, Sameer Pradhan and Amir Zeldes
(2021), "OntoGUM: Evaluating Contextualized SOTA Coreference Resolution on 12 More Genres", ACL-IJCNLP 2021;
Amir Zeldes (2017), "The GUM Corpus", Language Resources and Evaluation 51(3); https://github.com/amir-zeldes/gum.
The haystack paragraphs between their sentences come from the source under Provenance, under its licence.
""",
    "synthetic": """\
**Licence of the documents.** The synthetic narratives are generated by longctx-eval (Apache-2.0).
""",
}


def _card(corpus: str) -> CardInfo:
    return CardInfo(
        tags=("long-context", "coreference", "entity-linking"),
        task_categories=("token-classification",),
        usage=f"{USAGE}\n{LICENCES[corpus]}",
        scoring=SCORING,
        license=CARD_LICENSES.get(corpus),
    )


# LitBank is CC BY 4.0; GUM documents carry CC BY or CC BY-SA per genre (and the haystack its own), so "other"
# with the per-corpus paragraph in the card; the synthetic narratives take the haystack source's licence.
CARD_LICENSES = {"litbank": "cc-by-4.0", "ontogum": "other"}


SCORING = """\
The coref tasks report the CoNLL F1 (mean of MUC, B-cubed and CEAF-e F1, counts summed over documents,
as the official CoNLL-2012 scorer v8.01), LEA, BLANC, CEAF-m, mention F1, and Span-EM and link recall by
antecedent distance and context window. `longctx_eval.metrics.coref.score_clusters` computes them from
`clusters` and a system's clusters; `longctx-eval coref-score KEY.conll RESPONSE.conll` does it for CoNLL
files. Language models are asked about sampled marked mentions, choosing the antecedent among candidates by
log-likelihood or answering `N: M` (prompts in docs/coref.md); the answers are scored the same way.
"""


def coref_row(doc: StretchedDoc, tokenizer: Tokenizer) -> dict[str, Any]:
    """One dataset row: the document's text, words and gold clusters as word, character and token spans."""
    long = doc.long
    r = rendered(long, tokenizer)
    clusters = long.doc.clusters
    return {
        "id": doc.sample_id,
        "doc_id": str(doc.metadata["doc"]),
        "corpus": str(doc.metadata["corpus"]),
        "split": str(doc.metadata.get("split", "")),
        "target_tokens": int(doc.metadata["target_tokens"]),
        "n_tokens": r.n_tokens,
        "text": r.text,
        "words": list(long.doc.tokens),
        "word_starts": [s for s, _ in r.word_chars],
        "sentence_ends": list(long.doc.sentence_ends),
        "clusters": [[[s, e] for s, e in c] for c in clusters],
        "clusters_char": [[[r.word_chars[s][0], r.word_chars[e][1]] for s, e in c] for c in clusters],
        "clusters_token": [[[r.token_starts[s], r.token_ends[e]] for s, e in c] for c in clusters],
        "singletons": doc.singletons,
        "native_words": long.native_tokens,
        "haystack_words": long.inserted_tokens,
        "seed": int(doc.metadata["seed"]),
        "source": str(doc.metadata.get("source", "")),
    }


def _parts(name: str, docs: Iterator[StretchedDoc], ctx: BuildContext, per_length: int) -> Iterator[Part]:
    """Group rows by length into `<name>_<length>` parts; a length no document fits in is an error."""
    rows: dict[int, list[dict[str, Any]]] = {length: [] for length in ctx.config.lengths}
    for doc in docs:
        rows[int(doc.metadata["target_tokens"])].append(coref_row(doc, ctx.tokenizer))
        ctx.advance(1)
    for length in ctx.config.lengths:
        if not rows[length]:
            raise DataError(
                f"builder {name!r}: no document fits in {length} tokens of {ctx.tokenizer.name}; "
                "expected longer --lengths"
            )
        ctx.advance(per_length - len(rows[length]))  # documents too long for this length
        yield Part(f"{name}_{length}", rows[length])


def _fold(config: BuildConfig) -> int:
    raw = config.options.get("fold", "0")
    if not raw.isdigit():
        raise ConfigError(f"--option fold={raw!r}: expected an integer 0..9")
    return int(raw)


@lru_cache(maxsize=8)
def _corpus(name: str, split: str, fold: int) -> Corpus:
    return litbank(split, fold) if name == "litbank" else ontogum(split)


def _corpus_total(name: str) -> Any:
    def total(config: BuildConfig) -> int:
        fold = _fold(config) if name == "litbank" else 0
        return len(config.lengths) * len(_corpus(name, config.options.get("split", "test"), fold).documents)

    return total


def _corpus_build(name: str, ctx: BuildContext) -> Iterator[Part]:
    cfg = ctx.config
    fold = _fold(cfg) if name == "litbank" else 0
    corpus = _corpus(name, cfg.options.get("split", "test"), fold)
    docs = corpus_documents(corpus, cfg.lengths, cfg.seed, ctx.source, ctx.tokenizer)
    yield from _parts(f"coref_{name}", docs, ctx, len(corpus.documents))


@builder(
    "coref_litbank",
    version=COREF_BUILDER_VERSION,
    features=COREF_FEATURES,
    description="LitBank (CC BY 4.0) documents in a haystack, gold entities as word, char and token spans.",
    total=_corpus_total("litbank"),
    options={"split": "train, dev or test (default test)", "fold": "LitBank fold 0..9 (default 0)"},
    card=_card("litbank"),
)
def coref_litbank_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `coref_litbank_<length>` part per length: every document of the split that fits, stretched."""
    yield from _corpus_build("litbank", ctx)


@builder(
    "coref_ontogum",
    version=COREF_BUILDER_VERSION,
    features=COREF_FEATURES,
    description="OntoGUM (CC BY / CC BY-SA GUM documents) in a haystack, gold as word, char and token spans.",
    total=_corpus_total("ontogum"),
    options={"split": "train, dev or test (default test)"},
    card=_card("ontogum"),
)
def coref_ontogum_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `coref_ontogum_<length>` part per length: every document of the split that fits, stretched."""
    yield from _corpus_build("ontogum", ctx)


@builder(
    "coref_synthetic",
    version=COREF_BUILDER_VERSION,
    features=COREF_FEATURES,
    description="Seeded synthetic narratives with exact person chains, --per-cell documents per length.",
    total=lambda config: len(config.lengths) * config.per_cell,
    card=_card("synthetic"),
)
def coref_synthetic_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `coref_synthetic_<length>` part per length: `per_cell` narratives written to that length."""
    cfg = ctx.config
    docs = synthetic_documents(cfg.lengths, cfg.seed, cfg.per_cell, ctx.tokenizer)
    yield from _parts("coref_synthetic", docs, ctx, cfg.per_cell)
