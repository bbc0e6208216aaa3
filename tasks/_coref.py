"""Coreference task logic shared by the coref tasks: samples, requests per mode, scorer, oracle and metrics.

One sample is one (possibly haystack-stretched) document whose gold mentions are given (the protocol measures
linking, not detection). A coreference system (`coref` capability) gets one request per document and returns
clusters. A language model is asked about some mentions (`asked=K`, stratified by antecedent distance and window,
seeded; `_coref_ask.py`), each request being the marked document (the shared prefix) and a short question:
`mode=choice` scores the candidate antecedents by log-likelihood, `mode=generate` asks for `N: M` answers in
batches. Every mode ends in one answer per asked mention, scored the same way (docs/coref.md); with sampling
the CoNLL metrics compare the asked mentions' links only. The length L bounds the whole prompt: the document is
stretched (or written) so that marks, question and answer budget fit in L (`fit`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from data_builders.coref.documents import (
    MIN_SYNTHETIC_TOKENS,
    StretchedDoc,
    corpus_documents,
    rendered,
    seed_for,
    synthetic_documents,
)
from data_builders.coref.haystack import LongDoc, split_words
from data_builders.coref.splits import Corpus
from longctx_eval import Metric, Prediction, Request, Sample, Score, Tokenizer, custom, mean, ratio
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.metrics.coref import METRICS, document_counts, f1, scores_from_counts
from longctx_eval.metrics.coref_protocol import (
    antecedent_counts,
    asked_graphs,
    asked_link_counts,
    choose,
    close_links,
    cluster_answers,
    parse_answers,
)
from longctx_eval.metrics.span_em import GROUPS, GoldLink, fixed_windows, gold_links, link_counts
from longctx_eval.progress import console
from longctx_eval.task import Requirement, any_of, between

from ._coref_ask import candidates, entity_of, sample_asked, strata
from ._coref_prompt import choice_option, choice_question, document_prefix, generate_question

Span = tuple[int, int]
MODES = ("choice", "generate")
TEMPLATE_ALLOWANCE = 64
"""Tokens kept for a chat template around the prompt (SmolLM2's adds 31) and a BOS token."""
_FIT_ROUNDS = 6


@dataclass(frozen=True)
class CorefConfig:
    """Protocol settings: mode, asked mentions, candidates, batch (generate), the intra/cross window."""

    batch: int = 10  # generate mode: asked mentions per prompt
    window: int = 1024  # tokens of the evaluated model's tokenizer (words when there is none)
    stride: int = 512
    answer_tokens: int = 6  # generate mode: generation budget per asked mention
    mode: str = "choice"
    asked: int = 20  # mentions asked per document (0: all)
    candidates: int = 5  # choice mode: earlier entities offered (the asked mention's own always among them)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r}: expected one of {', '.join(MODES)}")
        if self.window < 1 or not 1 <= self.stride <= self.window:
            raise ConfigError(f"window={self.window}: expected at least 1 token (stride {self.stride} <= window)")

    def requirement(self) -> Requirement:
        """What the task runs on in this mode: a coreference system, or a model serving the mode's capability."""
        lm = "loglikelihood" if self.mode == "choice" else "generate"
        return Requirement(any_of("coref", lm).options, note=f"for mode={self.mode}")


@dataclass
class _Prepared:
    """What requests need beyond the sample: tokens, sorted mentions, their character spans and texts."""

    tokens: list[str]
    mentions: list[Span]
    chars: list[tuple[int, int]]
    texts: list[str]
    singletons: bool


def sorted_mentions(clusters: Sequence[Sequence[Sequence[int]]]) -> list[Span]:
    """Unique gold mentions in document order: by start, the longer (outer) one first."""
    return sorted({(int(m[0]), int(m[1])) for c in clusters for m in c}, key=lambda m: (m[0], -m[1]))


def _counter(tokenizer: Tokenizer | None) -> Callable[[str], int]:
    return (lambda t: len(split_words(t))) if tokenizer is None else tokenizer.count


@dataclass(frozen=True)
class _Question:
    """One request's part after the document prefix: its text, query label, answer prefix, choices, budget."""

    text: str
    query: str
    answer: str
    choices: tuple[str, ...]
    budget: int


@dataclass
class CorefKit:
    """Builds samples and serves the task's requests (per mode and for coref systems), scorer, oracle, metrics."""

    config: CorefConfig = field(default_factory=CorefConfig)
    tokenizer: Tokenizer | None = None
    prepared: dict[str, _Prepared] = field(default_factory=dict)
    seed: int = 0
    skipped: dict[int, list[str]] = field(default_factory=dict)
    """Per length, why each document longer than it was skipped ("N tokens with marks and question")."""
    samples_built: dict[str, Sample] = field(default_factory=dict)
    """Samples `fit` built and chose, handed to the dataset without building them again."""

    def sample(self, long: LongDoc, sample_id: str, singletons: bool, metadata: dict) -> Sample:
        """One document as a sample; gold = clusters, links, asked mentions and candidates; metadata = strata."""
        cfg = self.config
        doc = long.doc
        clusters = [list(c) for c in doc.clusters]  # the key as annotated; the regime only shapes system output
        r = rendered(long, self.tokenizer)
        text, word_chars, t_start, t_end, n_tok = r.text, r.word_chars, r.token_starts, r.token_ends, r.n_tokens
        windows = fixed_windows(max(n_tok, 1), cfg.window, cfg.stride)
        links = gold_links(clusters, t_start, t_end, windows)
        mentions = sorted_mentions(clusters)
        chars = [(word_chars[s][0], word_chars[e][1]) for s, e in mentions]
        texts = [" ".join(text[a:b].split()) for a, b in chars]
        self.prepared[sample_id] = _Prepared(list(doc.tokens), mentions, chars, texts, singletons)
        by_id = strata(mentions, links)
        asked, table = sample_asked(by_id, cfg.asked, seed_for(self.seed, sample_id, "asked"))
        entity = entity_of(clusters)
        gold = {
            "clusters": [[[s, e] for s, e in c] for c in clusters],
            "links": [link.to_list() for link in links],
            "singletons": singletons,
            "batch": cfg.batch,
            "mode": cfg.mode,
            "asked": asked,
            "sampled": len(asked) < len(by_id),
            "candidates": [candidates(i, mentions, entity, cfg.candidates) for i in asked],
        }
        meta = {
            **metadata,
            "context_tokens": n_tok,
            "native_words": long.native_tokens,
            "haystack_words": long.inserted_tokens,
            "mentions": len(mentions),
            "windows": {"window": cfg.window, "stride": cfg.stride},
            "tokenizer": self.tokenizer.name if self.tokenizer else "words",
            "mode": cfg.mode,
            "asked": {"k": cfg.asked, "n": len(asked), "strata": table},
        }
        sample = Sample(id=sample_id, context=text, question="", gold=gold, metadata=meta)
        return Sample(sample.id, text, "", gold, {**meta, "prompt_tokens": self.prompt_tokens(sample)})

    def _prep(self, sample: Sample) -> _Prepared:
        prep = self.prepared.get(sample.id)
        if prep is None:
            raise KeyError(f"coref sample {sample.id!r} was not built by this task instance")
        return prep

    def prompt(self, sample: Sample) -> list[Request]:
        """A language model's requests in the task's mode: the marked document, then the question."""
        return self.choice_requests(sample) if self.config.mode == "choice" else self.generate_requests(sample)

    def prefix(self, sample: Sample) -> str:
        """The shared prefix of the document's requests: the instruction line and the marked document."""
        return document_prefix(mark_mentions(sample.context, self._prep(sample).chars))

    def choice_requests(self, sample: Sample) -> list[Request]:
        """One request per asked mention: its candidates scored as continuations after the question."""
        head = self.prefix(sample)
        return [
            Request(sample.id, head + q.text, sample.context, q.query, 0, answer_prefix=q.answer, choices=q.choices)
            for q in self._questions(sample)
        ]

    def generate_requests(self, sample: Sample) -> list[Request]:
        """One request per batch of asked mentions, answered as `N: M` lines."""
        head = self.prefix(sample)
        return [Request(sample.id, head + q.text, sample.context, q.query, q.budget) for q in self._questions(sample)]

    def _questions(self, sample: Sample) -> list[_Question]:
        """The part of each request after the shared prefix, in the task's mode: what `prompt_tokens` counts without
        joining the document to every question (a book asked about all its mentions would copy it thousands of
        times)."""
        prep = self._prep(sample)
        if self.config.mode == "choice":
            out = []
            for i, options in zip(sample.gold["asked"], sample.gold["candidates"], strict=True):
                question, answer = choice_question(i, prep.texts[i - 1])
                choices = tuple(choice_option(j, prep.texts[j - 1] if j else "") for j in options)
                out.append(_Question(question, f"antecedent of mention {i}", answer, choices, 0))
            return out
        return [
            _Question(
                generate_question(ids, [prep.texts[i - 1] for i in ids]),
                f"antecedents of mentions {ids[0]}-{ids[-1]}",
                "",
                (),
                self.config.answer_tokens * len(ids) + 8,
            )
            for ids in _batches(sample.gold["asked"], int(sample.gold["batch"]))
        ]

    def system_request(self, sample: Sample) -> Request:
        """A coreference system's one request per document: its words and gold mentions, no prompt."""
        prep = self._prep(sample)
        extra = {"tokens": prep.tokens, "mentions": [list(m) for m in prep.mentions], "singletons": prep.singletons}
        return Request(sample.id, "", sample.context, "clusters of the gold mentions", 0, extra=extra)

    def prompt_tokens(self, sample: Sample) -> int:
        """The longest request's tokens (template allowance, prefix, question, answer prefix and budget), the prefix
        counted once."""
        count = _counter(self.tokenizer)
        head = count(self.prefix(sample)) + TEMPLATE_ALLOWANCE
        longest = 0
        for q in self._questions(sample):
            suffix = count(q.text) + count(q.answer) + 2
            answer = max((count(c) for c in q.choices), default=0) + q.budget
            longest = max(longest, suffix + answer)
        return head + longest

    def fit(self, at: Callable[[int], StretchedDoc], length: int, floor: int) -> StretchedDoc | None:
        """The document built so that its longest prompt fits `length` (None: even the bare document does not)."""
        built: dict[int, tuple[StretchedDoc, Sample]] = {}

        def total(target: int) -> int:
            try:
                doc = at(target)
            except DataError:  # too short for even the first sentence of a narrative
                return length + 1 if target < length else 2 * length
            s = self.sample(doc.long, doc.sample_id, doc.singletons, doc.metadata)
            built[target] = (doc, s)
            return int(s.metadata["prompt_tokens"])

        if floor > length:
            self.skipped.setdefault(length, []).append(f"{floor} tokens before marks")
            return None
        target, points, overs = length, [], 0
        for _ in range(_FIT_ROUNDS):
            t = total(target)
            points.append((target, t))
            if t <= length and (length - t <= max(16, length // 50) or target == length):
                break
            slope = t / target if floor <= MIN_SYNTHETIC_TOKENS else 1.0  # a narrative's marks grow with it
            if len(points) > 1 and points[-1][0] != points[-2][0]:
                slope = max(0.5, (points[-1][1] - points[-2][1]) / (points[-1][0] - points[-2][0]))
            step = math.ceil((t - length) / slope)
            if t > length:  # over: each further round over steps twice as far (documents grow in paragraphs)
                step = step * 2**overs + 8 * overs
                overs += 1
            nxt = min(length, max(floor, target - step))
            if nxt == target:
                break
            target = nxt
        fits = [(tgt, tot) for tgt, tot in points if tot <= length]
        if not fits:
            self.skipped.setdefault(length, []).append(f"{points[-1][1]} tokens with marks and question")
            return None
        best = max(fits)[0]
        doc, s = built[best]
        self.samples_built[doc.sample_id] = s
        if best != points[-1][0]:
            self.sample(doc.long, doc.sample_id, doc.singletons, doc.metadata)  # its prepared state last
        return doc

    def scorer(self, sample: Sample, pred: Prediction) -> Score:
        """All CoNLL counts, LEA, BLANC links, Span-EM and link recall (by distance and window), malformed answers."""
        return score_sample(sample.gold, pred)

    def oracle(self, sample: Sample) -> Prediction:
        """The gold clusters as a coreference system's answer."""
        return Prediction(data={"clusters": sample.gold["clusters"]})

    def task_parts(self) -> dict:
        """The Task fields of this kit: requests per capability, what it runs on, scorer, oracle and metrics."""
        return {
            "prompt": self.prompt,
            "prompts": {"coref": self.system_request},
            "requires": self.config.requirement(),
            "scorer": self.scorer,
            "metrics": coref_metrics(),
            "oracle": self.oracle,
        }


def _batches(ids: Sequence[int], size: int) -> list[list[int]]:
    return [list(ids[k : k + size]) for k in range(0, len(ids), size)]


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


def answers_of(gold: dict, pred: Prediction, mentions: Sequence[Span]) -> tuple[dict[int, int | None], int, list]:
    """One answer per asked mention (None: new entity or no usable answer), the malformed count, and the system's
    clusters when a coreference system answered."""
    asked = [int(i) for i in gold["asked"]]
    parts = pred.parts or (pred,)
    clusters = system_clusters(pred)
    if clusters is not None:
        return cluster_answers(clusters, mentions, asked), 0, clusters
    answers: dict[int, int | None] = dict.fromkeys(asked)
    malformed = 0
    if gold["mode"] == "choice":
        for i, options, logprobs in zip(asked, gold["candidates"], choice_logprobs(pred, len(asked)), strict=True):
            got = choose(logprobs, options)
            if got is False:
                malformed += 1
            else:
                answers[i] = got  # type: ignore[assignment]
        return answers, malformed, []
    groups = _batches(asked, int(gold["batch"]))
    for k, ids in enumerate(groups):
        part = parts[k] if k < len(parts) else None
        if part is None or part.status != "ok":
            malformed += len(ids)
            continue
        found, bad = parse_answers(part.text, ids)
        answers.update(found)
        malformed += bad
    return answers, malformed, []


def score_sample(gold: dict, pred: Prediction) -> Score:
    """The sample's counts from its answers: the whole document's clusters when every askable mention was asked,
    else the asked mentions' links only (key and response over the same mentions)."""
    gold_clusters = [[(int(m[0]), int(m[1])) for m in c] for c in gold["clusters"]]
    mentions = sorted_mentions(gold_clusters)
    answers, malformed, system = answers_of(gold, pred, mentions)
    links = [GoldLink.from_list(row) for row in gold["links"]]
    if not gold["sampled"]:
        if not system:
            linked = [(i, j) for i, j in answers.items() if j is not None]
            ids_clusters = close_links(len(mentions), linked)
            keep = [c for c in ids_clusters if gold["singletons"] or len(c) > 1]
            system = [[mentions[i - 1] for i in c] for c in keep]
        counts = document_counts(gold_clusters, system)
        values = {**counts, **link_counts(gold_clusters, links, system)}
    else:
        index = {m: k for k, m in enumerate(mentions, 1)}
        entity = entity_of(gold_clusters)
        ent = {k: entity.get(m) for k, m in enumerate(mentions, 1)}
        key_of = {index[link.anaphor]: index[link.antecedent] for link in links}
        key_ante = {i: key_of.get(i) for i in answers}
        key, response = asked_graphs(answers, key_ante, lambda a, b: ent[a] is not None and ent[a] == ent[b])
        as_spans = [[[mentions[i - 1] for i in c] for c in side] for side in (key, response)]
        counts = document_counts(as_spans[0], as_spans[1])
        asked_links = [(x, index[x.anaphor], index[x.antecedent]) for x in links if index[x.anaphor] in answers]
        values = {**counts, **asked_link_counts(asked_links, answers, ent, response)}
    if gold["mode"] == "choice" and system_clusters(pred) is None:
        values.update(_antecedents(gold, pred, mentions, entity_of(gold_clusters)))
    values["conll_doc"] = scores_from_counts(counts)["conll"][2]
    values["malformed_n"], values["asked_d"] = float(malformed), float(len(answers))
    parsed = " ".join(f"{i}:{j or 0}" for i, j in sorted(answers.items()))
    return Score(values, parsed=parsed)


def system_clusters(pred: Prediction) -> list[list[tuple[int, int]]] | None:
    """The clusters a coreference system answered with, None where a language model answered per question."""
    for part in pred.parts or (pred,):
        if part.status == "ok" and part.data and "clusters" in part.data:
            return [[(int(m[0]), int(m[1])) for m in c] for c in part.data["clusters"]]
    return None


def choice_logprobs(pred: Prediction, n: int) -> list[Sequence[float] | None]:
    """The log-probabilities of each of the `n` asked mentions' requests, None where its part failed or is missing."""
    parts = pred.parts or (pred,)
    out = []
    for k in range(n):
        part = parts[k] if k < len(parts) else None
        usable = part is not None and part.status == "ok" and part.data
        out.append(part.data.get("logprobs") if usable else None)  # type: ignore[union-attr]
    return out


def _antecedents(gold: dict, pred: Prediction, mentions: Sequence[Span], entity: dict) -> dict[str, float]:
    """`antecedent_counts` of a language model's choice-mode answers (see docs/coref.md, "The entities offered")."""
    asked = [int(i) for i in gold["asked"]]
    logprobs = choice_logprobs(pred, len(asked))

    def same(a: int, b: int) -> bool:
        ea = entity.get(mentions[a - 1])
        return ea is not None and ea == entity.get(mentions[b - 1])

    return antecedent_counts(asked, gold["candidates"], logprobs, same)


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
    out.append(ratio("antecedent_n", "antecedent_d", "antecedent_acc"))
    out.append(ratio("antecedent_chance_n", "antecedent_d", "antecedent_chance"))
    out.append(mean("conll_doc", "conll_f1_macro"))
    return out


def protocol(mode: str, asked: int, candidates: int, batch: int, window: int) -> CorefConfig:
    """The task arguments as protocol settings (the window's stride is half the window)."""
    stride = max(1, window // 2)
    return CorefConfig(batch=batch, window=window, stride=stride, mode=mode, asked=asked, candidates=candidates)


PROTOCOL_BOUNDS = {
    "batch": between(1, 1000),
    "asked": between(0, 100_000),
    "candidates": between(1, 1000),
    "window": between(1, 10_000_000),
}
"""The numeric protocol arguments every coref task takes, with their ranges."""


def config_dict(config: CorefConfig) -> dict:
    """The protocol settings as recorded in sample metadata."""
    return asdict(config)


def _report(kit: CorefKit, name: str, lengths: Sequence[int], made: dict[int, int]) -> None:
    """Say which documents were longer than a length; a length with no document at all is an error."""
    for length in lengths:
        skipped = kit.skipped.get(length, [])
        if skipped:
            console.print(
                f"{name}: at {length}, {len(skipped)} document(s) longer than the length with their marks, "
                f"question and answer (skipped; shortest needs {min(int(x.split()[0]) for x in skipped)} tokens)",
                markup=False,
                highlight=False,
            )
        if not made.get(length):
            raise DataError(
                f"{name}: no document fits in {length} tokens with its marks, question and answer "
                f"({len(skipped)} skipped as longer); expected a longer length"
            )


def _samples(kit: CorefKit, docs: Iterator[StretchedDoc], name: str, lengths: Sequence[int]) -> Iterator[Sample]:
    """The fitted documents as samples, each recording how many documents its length skipped as longer."""
    made: dict[int, list[Sample]] = {}
    for d in docs:
        s = kit.samples_built.pop(d.sample_id, None)
        s = s if s is not None else kit.sample(d.long, d.sample_id, d.singletons, d.metadata)
        made.setdefault(int(d.metadata["target_tokens"]), []).append(s)
    _report(kit, name, lengths, {n: len(v) for n, v in made.items()})
    for length in lengths:
        skipped = len(kit.skipped.get(length, []))
        for s in made.get(length, []):
            yield Sample(s.id, s.context, s.question, s.gold, {**s.metadata, "documents_skipped_longer": skipped})


def corpus_samples(
    kit: CorefKit, corpus: Corpus, lengths: Sequence[int], seed: int, source: str = "synthetic"
) -> Iterator[Sample]:
    """Each corpus document stretched with haystack prose so that its longest prompt fits each length (longer
    documents skipped, a length with none an error)."""
    kit.seed = seed
    docs = corpus_documents(corpus, lengths, seed, source, kit.tokenizer, fit=kit.fit)
    yield from _samples(kit, docs, f"coref_{corpus.name}", lengths)


def synthetic_samples(kit: CorefKit, lengths: Sequence[int], seed: int, per_length: int) -> Iterator[Sample]:
    """`per_length` synthetic narratives per length, written so that the longest prompt fits it (singletons kept)."""
    kit.seed = seed
    docs = synthetic_documents(lengths, seed, per_length, kit.tokenizer, fit=kit.fit)
    yield from _samples(kit, docs, "coref_synthetic", lengths)
