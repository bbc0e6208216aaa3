"""Coreference task logic shared by the coref tasks: samples, prompt, scorer, oracle and metrics.

One sample is one (possibly haystack-stretched) document. Its requests serve both kinds of systems: a
coreference system (`coref` capability) reads `extra` (tokens, gold mentions, the singleton regime) and
returns clusters in `Prediction.data`; a generative model (`generate`) reads the prompt, which marks every
gold mention `[N text]` and asks for the antecedents of one batch of mentions. The gold (clusters, links
with their distances and window membership) is all the scorer needs, so `score RUN_DIR` rescores exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from data_builders.coref.documents import corpus_documents, rendered, synthetic_documents
from data_builders.coref.haystack import LongDoc
from data_builders.coref.splits import Corpus
from longctx_eval import Metric, Prediction, Request, Sample, Score, Tokenizer, custom, mean, ratio
from longctx_eval.metrics.coref import METRICS, document_counts, f1, scores_from_counts
from longctx_eval.metrics.coref_protocol import batches, close_links, parse_answers
from longctx_eval.metrics.span_em import GROUPS, GoldLink, fixed_windows, gold_links, link_counts

Span = tuple[int, int]


@dataclass(frozen=True)
class CorefConfig:
    """Protocol settings: anaphors per prompt, and the context window that splits links into intra/cross."""

    batch: int = 10
    window: int = 1024  # tokens of the evaluated model's tokenizer (words when there is none)
    stride: int = 512
    answer_tokens: int = 6  # generation budget per asked mention


@dataclass
class _Prepared:
    """What requests need beyond the sample: tokens, sorted mentions and their character spans."""

    tokens: list[str]
    mentions: list[Span]
    chars: list[tuple[int, int]]
    singletons: bool


def sorted_mentions(clusters: Sequence[Sequence[Sequence[int]]]) -> list[Span]:
    """Unique gold mentions in document order: by start, the longer (outer) one first."""
    return sorted({(int(m[0]), int(m[1])) for c in clusters for m in c}, key=lambda m: (m[0], -m[1]))


@dataclass
class CorefKit:
    """Builds samples and serves the task's prompt, scorer, oracle and metrics."""

    config: CorefConfig = field(default_factory=CorefConfig)
    tokenizer: Tokenizer | None = None
    prepared: dict[str, _Prepared] = field(default_factory=dict)

    def sample(self, long: LongDoc, sample_id: str, singletons: bool, metadata: dict) -> Sample:
        """One document as a sample; gold = clusters and measured links, metadata = strata and provenance."""
        doc = long.doc
        clusters = [list(c) for c in doc.clusters]  # the key as annotated; the regime only shapes system output
        r = rendered(long, self.tokenizer)
        text, word_chars, t_start, t_end, n_tok = r.text, r.word_chars, r.token_starts, r.token_ends, r.n_tokens
        windows = fixed_windows(max(n_tok, 1), self.config.window, self.config.stride)
        links = gold_links(clusters, t_start, t_end, windows)
        mentions = sorted_mentions(clusters)
        self.prepared[sample_id] = _Prepared(
            list(doc.tokens), mentions, [(word_chars[s][0], word_chars[e][1]) for s, e in mentions], singletons
        )
        gold = {
            "clusters": [[[s, e] for s, e in c] for c in clusters],
            "links": [link.to_list() for link in links],
            "singletons": singletons,
            "batch": self.config.batch,
        }
        meta = {
            **metadata,
            "context_tokens": n_tok,
            "native_words": long.native_tokens,
            "haystack_words": long.inserted_tokens,
            "mentions": len(mentions),
            "windows": {"window": self.config.window, "stride": self.config.stride},
            "tokenizer": self.tokenizer.name if self.tokenizer else "words",
        }
        return Sample(id=sample_id, context=text, question="", gold=gold, metadata=meta)

    def prompt(self, sample: Sample) -> list[Request]:
        """One request per batch of asked mentions (at least one, so a coref system always runs)."""
        prep = self.prepared.get(sample.id)
        if prep is None:
            raise KeyError(f"coref sample {sample.id!r} was not built by this task instance")
        marked = mark_mentions(sample.context, prep.chars)
        extra = {"tokens": prep.tokens, "mentions": [list(m) for m in prep.mentions], "singletons": prep.singletons}
        groups = batches(len(prep.mentions), self.config.batch) or [[]]
        out = []
        for asked in groups:
            prompt = antecedent_prompt(marked, asked, prep.mentions, prep.tokens)
            budget = self.config.answer_tokens * max(1, len(asked)) + 8
            query = f"antecedents of mentions {asked[0]}-{asked[-1]}" if asked else "no mention to link"
            out.append(Request(sample.id, prompt, sample.context, query, budget, extra={**extra, "ask": asked}))
        return out

    def scorer(self, sample: Sample, pred: Prediction) -> Score:
        """All CoNLL counts, LEA, BLANC links, Span-EM and link recall (by distance and window), malformed answers."""
        gold_clusters = [[tuple(m) for m in c] for c in sample.gold["clusters"]]
        system, malformed, asked = system_clusters(sample.gold, pred)
        counts = document_counts(gold_clusters, system)
        links = [GoldLink.from_list(row) for row in sample.gold["links"]]
        values = {**counts, **link_counts(gold_clusters, links, system)}
        doc = scores_from_counts(counts)
        values["conll_doc"] = doc["conll"][2]
        values["malformed_n"], values["asked_d"] = float(malformed), float(asked)
        return Score(values)

    def oracle(self, sample: Sample) -> Prediction:
        """The gold clusters as a coreference system's answer."""
        return Prediction(data={"clusters": sample.gold["clusters"]})


def mark_mentions(text: str, chars: Sequence[tuple[int, int]]) -> str:
    """`text` with mention k (1-based, in the given order) wrapped as `[k ...]`; nested marks nest."""
    inserts: list[tuple[int, int, int, str]] = []
    for k, (s, e) in enumerate(chars, 1):
        inserts.append((s, 1, -e, f"[{k} "))  # at one offset: closes first, then opens outermost first
        inserts.append((e, 0, -s, "]"))
    inserts.sort(key=lambda x: (x[0], x[1], x[2]))
    out, pos = [], 0
    for at, _, _, mark in inserts:
        out.append(text[pos:at])
        out.append(mark)
        pos = at
    out.append(text[pos:])
    return "".join(out)


def antecedent_prompt(marked: str, asked: Sequence[int], mentions: Sequence[Span], tokens: Sequence[str]) -> str:
    """The instruction, the marked document and the mentions of this batch."""
    listing = "\n".join(f"{i}: {' '.join(tokens[mentions[i - 1][0] : mentions[i - 1][1] + 1])}" for i in asked)
    return (
        "Every mention of a person or thing in the document below is marked [N text], numbered in order.\n\n"
        f"Document:\n{marked}\n\n"
        "For each mention listed below, give the number of the closest earlier mention that refers to the same "
        "person or thing, or 0 if it is the first mention of it. Answer one line per mention as 'N: M', "
        "for example '7: 3'.\n\n"
        f"Mentions:\n{listing}\n\nAnswers:\n{asked[0] if asked else ''}:"
    )


def system_clusters(gold: dict, pred: Prediction) -> tuple[list[list[Span]], int, int]:
    """The system's clusters (from a coref system's data or the parsed answers), malformed and asked counts."""
    parts = pred.parts or (pred,)
    for part in parts:
        if part.status == "ok" and part.data and "clusters" in part.data:
            clusters = [[(int(m[0]), int(m[1])) for m in c] for c in part.data["clusters"]]
            return clusters, 0, 0
    mentions = sorted_mentions(gold["clusters"])
    groups = batches(len(mentions), int(gold["batch"])) or [[]]
    links, malformed, asked = [], 0, 0
    for part, ids in zip(parts, groups, strict=False):
        if part.status != "ok":
            continue
        answers, bad = parse_answers(part.text, ids)
        links.extend((i, j) for i, j in answers.items() if j is not None)
        malformed += bad
        asked += len(ids)
    ids_clusters = close_links(len(mentions), links)
    keep = [c for c in ids_clusters if gold["singletons"] or len(c) > 1]
    return [[mentions[i - 1] for i in c] for c in keep], malformed, asked


def _prf_reduce(prefix: str) -> Callable[[np.ndarray], float]:
    def reduce(a: np.ndarray) -> float:
        s = a.sum(axis=0)
        r = s[0] / s[1] if s[1] else 0.0
        p = s[2] / s[3] if s[3] else 0.0
        return f1(r, p)

    reduce.__name__ = f"{prefix}_f1"
    return reduce


def _conll_reduce(a: np.ndarray) -> float:
    # Micro CoNLL F1: the mean of MUC, B3 and CEAF-e F1, each from counts summed over documents.
    return sum(_prf_reduce("m")(a[:, 4 * k : 4 + 4 * k]) for k in range(3)) / 3


def _blanc_reduce(a: np.ndarray) -> float:
    from longctx_eval.metrics.coref_blanc import blanc_from_counts

    s = a.sum(axis=0)
    keys = ("blanc_c_num", "blanc_c_key", "blanc_c_resp", "blanc_n_num", "blanc_n_key", "blanc_n_resp")
    return blanc_from_counts(dict(zip(keys, s, strict=True)))[2]


def _fields(metric: str) -> list[str]:
    return [f"{metric}_{s}" for s in ("rn", "rd", "pn", "pd")]


def coref_metrics() -> list[Metric]:
    """CoNLL F1 first (micro: per-document counts summed), every metric's F1, Span-EM, link recall, malformed."""
    trio = [f for m in ("muc", "bcub", "ceafe") for f in _fields(m)]
    out = [custom("conll_f1", trio, _conll_reduce)]
    out += [custom(f"{m}_f1", _fields(m), _prf_reduce(m)) for m in METRICS]
    out.append(custom("blanc_f1", [f"blanc_{k}_{w}" for k in "cn" for w in ("num", "key", "resp")], _blanc_reduce))
    out.append(ratio("span_em_n", "span_em_d", "span_em"))
    out.append(ratio("link_recall_n", "link_recall_d", "link_recall"))
    for g in GROUPS:
        out.append(ratio(f"span_em@{g}_n", f"span_em@{g}_d", f"span_em@{g}"))
        out.append(ratio(f"link_recall@{g}_n", f"link_recall@{g}_d", f"link_recall@{g}"))
    out.append(ratio("malformed_n", "asked_d", "malformed_answers"))
    out.append(mean("conll_doc", "conll_f1_macro"))
    return out


def config_dict(config: CorefConfig) -> dict:
    """The protocol settings as recorded in sample metadata."""
    return asdict(config)


def corpus_samples(
    kit: CorefKit, corpus: Corpus, lengths: Sequence[int], seed: int, source: str = "synthetic"
) -> Iterator[Sample]:
    """Each corpus document stretched with haystack prose to each target length it fits in (longer: skipped)."""
    for d in corpus_documents(corpus, lengths, seed, source, kit.tokenizer):
        yield kit.sample(d.long, d.sample_id, d.singletons, d.metadata)


def synthetic_samples(kit: CorefKit, lengths: Sequence[int], seed: int, per_length: int) -> Iterator[Sample]:
    """`per_length` synthetic narratives of each target length, their person chains as gold (singletons kept)."""
    for d in synthetic_documents(lengths, seed, per_length, kit.tokenizer):
        yield kit.sample(d.long, d.sample_id, d.singletons, d.metadata)
