"""`coref:baseline`: a deterministic, offline, rule-based resolver over given (gold) mentions.

Sieves in document order, each mention joining the cluster of the first antecedent found:
1. exact string match (non-pronouns, determiners ignored);
2. proper-name match: a name's last or first word, or a title plus surname, matching an earlier name;
3. head match: same head noun, number and gender, neither mention inside the other;
4. pronouns: third person to the nearest earlier compatible mention (number, gender learnt per cluster,
   person vs thing) within a window of mentions; first and second person to the nearest earlier pronoun of
   the same person and number.
Singletons are kept or dropped as the request's regime says (LitBank keeps them; OntoNotes does not).
It is a baseline: it needs no model and no network, and its scores are reported as they are.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from longctx_eval.capability import Capability
from longctx_eval.errors import DataError
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import PRONOUN_WINDOW, CorefOptions
from longctx_eval.sample import Prediction, Request

VERSION = "1"
# pronoun -> (person, number, gender); gender m/f/n (neuter), '' unknown
PRONOUNS: dict[str, tuple[int, str, str]] = {
    **dict.fromkeys(("i", "me", "my", "mine", "myself"), (1, "sg", "")),
    **dict.fromkeys(("we", "us", "our", "ours", "ourselves"), (1, "pl", "")),
    **dict.fromkeys(("you", "your", "yours", "yourself", "yourselves", "thee", "thou", "thy", "thine"), (2, "", "")),
    **dict.fromkeys(("he", "him", "his", "himself"), (3, "sg", "m")),
    **dict.fromkeys(("she", "her", "hers", "herself"), (3, "sg", "f")),
    **dict.fromkeys(("it", "its", "itself"), (3, "sg", "n")),
    **dict.fromkeys(("they", "them", "their", "theirs", "themselves"), (3, "pl", "")),
}
DETERMINERS = frozenset(
    [
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "some",
        "any",
    ]
)
TITLES = {
    **dict.fromkeys(
        ["mr", "mister", "sir", "lord", "king", "prince", "duke", "father", "uncle", "brother", "monsieur", "herr"], "m"
    ),
    **dict.fromkeys(
        ["mrs", "miss", "ms", "madam", "lady", "queen", "princess", "duchess", "mother", "aunt", "sister", "madame"],
        "f",
    ),
}
GENDERED_NOUNS = {
    **dict.fromkeys(
        [
            "man",
            "boy",
            "gentleman",
            "husband",
            "son",
            "fellow",
            "lad",
            "king",
            "father",
            "brother",
            "uncle",
            "sir",
            "lord",
        ],
        "m",
    ),
    **dict.fromkeys(
        ["woman", "girl", "lady", "wife", "daughter", "maid", "queen", "mother", "sister", "aunt", "mistress"], "f"
    ),
}
STOP_HEAD = frozenset(
    [
        "of",
        "in",
        "on",
        "at",
        "with",
        "who",
        "whom",
        "whose",
        "which",
        "that",
        "from",
        "for",
        "to",
        "by",
        ",",
        "(",
        ";",
        ":",
    ]
)


@dataclass
class _Mention:
    span: tuple[int, int]
    words: list[str]
    norm: str
    head: str
    pronoun: tuple[int, str, str] | None
    proper: bool
    number: str
    gender: str


def _describe(tokens: Sequence[str], span: tuple[int, int]) -> _Mention:
    words = [str(w) for w in tokens[span[0] : span[1] + 1]]
    lower = [w.lower() for w in words]
    pronoun = PRONOUNS.get(lower[0]) if len(lower) == 1 else None
    content = lower[1:] if len(lower) > 1 and lower[0] in DETERMINERS else lower
    cut = next((i for i, w in enumerate(content) if i and w in STOP_HEAD), len(content))
    core = [w for w in content[:cut] if any(ch.isalnum() for ch in w)] or content or lower
    head = core[-1]
    original = words[len(lower) - len(content) :][:cut] or words
    proper = pronoun is None and any(w[:1].isupper() for w in original) and lower[0] not in DETERMINERS
    gender = pronoun[2] if pronoun else TITLES.get(core[0], GENDERED_NOUNS.get(head, ""))
    number = pronoun[1] if pronoun else ("pl" if head.endswith("s") and not proper and len(head) > 3 else "sg")
    return _Mention(span, words, " ".join(core), head, pronoun, proper, number, gender)


class _Clusters:
    """Union-find over mention indices with per-cluster gender, learnt from pronouns that join it."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.gender: dict[int, str] = {}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, i: int, j: int, gender: str) -> None:
        ri, rj = self.find(i), self.find(j)
        g = self.gender.get(ri) or self.gender.get(rj) or gender
        self.parent[max(ri, rj)] = min(ri, rj)
        if g:
            self.gender[min(ri, rj)] = g


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def resolve(
    tokens: Sequence[str], mentions: Sequence[Sequence[int]], singletons: bool = True, window: int = PRONOUN_WINDOW
) -> list[list[list[int]]]:
    """Clusters of the given mentions (inclusive [start, end] token spans), deterministic."""
    spans = sorted({(int(m[0]), int(m[1])) for m in mentions}, key=lambda m: (m[0], -m[1]))
    for s, e in spans:
        if not 0 <= s <= e < len(tokens):
            raise DataError(f"coref:baseline: mention {[s, e]} is outside the document's {len(tokens)} tokens")
    ms = [_describe(tokens, sp) for sp in spans]
    clusters = _Clusters(len(ms))
    by_norm: dict[str, int] = {}
    by_name: dict[str, int] = {}
    by_head: dict[str, int] = {}
    for i, m in enumerate(ms):
        j = _antecedent(i, m, ms, clusters, (by_norm, by_name, by_head), window)
        if j is not None:
            clusters.join(i, j, m.gender)
        elif m.gender:
            clusters.gender.setdefault(clusters.find(i), m.gender)
        if m.pronoun is None:
            by_norm[m.norm] = i
            by_head[m.head] = i
            if m.proper:
                for w in m.norm.split():
                    by_name[w] = i
    groups: dict[int, list[list[int]]] = {}
    for i, m in enumerate(ms):
        groups.setdefault(clusters.find(i), []).append(list(m.span))
    return [g for _, g in sorted(groups.items()) if singletons or len(g) > 1]


def _antecedent(i: int, m: _Mention, ms: list[_Mention], cl: _Clusters, tables: tuple, window: int) -> int | None:
    if m.pronoun is not None:
        return _pronoun_antecedent(i, m, ms, cl, window)
    by_norm, by_name, by_head = tables
    for table, key in ((by_norm, m.norm), (by_name, m.head if m.proper else None), (by_head, m.head)):
        j = table.get(key) if key else None
        usable = j is not None and not _overlaps(ms[j].span, m.span) and _compatible(m, ms[j], cl, j)
        if usable and (table is not by_head or (not m.proper and not ms[cast(int, j)].proper)):  # usable: j is set
            return j
    return None


def _compatible(m: _Mention, a: _Mention, cl: _Clusters, j: int) -> bool:
    gender = cl.gender.get(cl.find(j)) or a.gender
    if m.gender and gender and m.gender != gender:
        return False
    return not (m.number and a.number and m.number != a.number and not a.proper and not m.proper)


def _pronoun_antecedent(i: int, m: _Mention, ms: list[_Mention], cl: _Clusters, window: int) -> int | None:
    person, number, gender = m.pronoun  # type: ignore[misc]
    for j in range(i - 1, max(-1, i - 1 - window), -1):
        a = ms[j]
        if _overlaps(a.span, m.span):
            continue
        if person != 3:
            if a.pronoun and a.pronoun[0] == person and (not number or a.pronoun[1] == number):
                return j
            continue
        if a.pronoun and a.pronoun[0] != 3:
            continue
        a_gender = cl.gender.get(cl.find(j)) or a.gender
        if gender == "n" and (a_gender in ("m", "f") or (a.proper and a_gender != "n")):
            continue
        if gender in ("m", "f") and a_gender and a_gender != gender:
            continue
        if gender in ("m", "f") and not a_gender and not a.proper and not a.pronoun:
            continue  # "he" does not take an ungendered common noun ("the table")
        if number and a.number and a.number != number and not (a.proper and number == "sg"):
            continue
        return j
    return None


class CorefBaseline(ModelAdapter):
    """Serves 'coref' over the request's gold mentions; options: window (pronoun look-back in mentions), tokenizer
    (what a task's length counts: `?tokenizer=smollm2-135m` builds the documents SmolLM2's cells read)."""

    capabilities = frozenset({Capability.COREF})

    def __init__(self, spec: ModelSpec) -> None:
        from longctx_eval.models.assets import load_tokenizer

        options = cast("CorefOptions", spec.options)
        self.window = options.window
        tok = load_tokenizer(options.tokenizer)  # it reads words; lengths only decide which documents it is given
        settings = {"baseline_version": VERSION, "mentions": "gold", "window": self.window}
        if "tokenizer" in options.model_fields_set:
            settings["tokenizer"] = options.tokenizer
        super().__init__(model_meta(spec, tok, self.capabilities, settings=settings), tok)
        self._memo: dict[str, list] = {}

    def predict_clusters(self, requests: Sequence[Request]) -> list[Prediction]:
        """Clusters for each request's document (requests of one document share one resolution)."""
        out = []
        for r in requests:
            t0 = time.perf_counter()
            tokens, mentions = r.extra.get("tokens"), r.extra.get("mentions")
            if tokens is None or mentions is None:
                raise ValueError("coref:baseline needs request.extra['tokens'] and ['mentions']")
            singletons = bool(r.extra.get("singletons", True))
            key = hashlib.sha256(json.dumps([tokens, mentions, singletons]).encode()).hexdigest()
            if key not in self._memo:
                self._memo = {key: resolve(tokens, mentions, singletons, self.window)}  # one document at a time
            out.append(Prediction(data={"clusters": self._memo[key]}, seconds=time.perf_counter() - t0))
        return out
