"""Fact chains for the cross-paragraph task: invented entities, relation templates, and distractor facts.

A chain of 2 to 4 facts links a person to a final entity ("A works for B." "B is based in C." -> "In which
city does A work?" -> "C"). Distractors name near-identical entities; `check_unambiguous` proves that the
facts of a document still lead from the question's person to exactly one answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from longctx_eval.errors import ConfigError, DataError
from longctx_eval.metrics.text_match import normalize

MIN_HOPS, MAX_HOPS = 2, 4


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Invented names: a surname, an organisation stem, a city or a region is a head and a tail glued together.
FIRST_NAMES = _words(
    """
    Dalia Anselm Brisa Corvin Edda Florian Galen Hester Ilse Jorin Katrin Lennart Mirela Nils Orla Pavel
    Quinta Rosalie Sabine Tobias Ulla Viggo Wanda Yara Zofia Aurel Bettina Cosimo Dagny Elio Fenna Greta
    Hugo Inka Jasper Kaja Leander Magda Nerys Oskar Petra Rufus Selma Tamsin Ugo Vera Wilma Xaver Ysolde Zeno
    """
)
SURNAME_HEADS = _words("Fer Hal Pren Mor Tal Vesk Brun Cal Dun Esk Gar Hol Jar Kest Lor Nel Ost Pell Rav Sel Ulm Wend")
SURNAME_TAILS = _words("row vane by wick more ton ley ford gate ridge holm stead lowe")
STEM_HEADS = _words("Quill Brin Cor Dra Elm Fen Glen Hart Ist Jun Kel Lum Mer Nor Orr Pel Ros Sar Tam Ver Wyn Ash")
STEM_TAILS = _words("mark vane field stone crest light brook well spire gate")
CITY_HEADS = _words("Tarn Osk Vel Bram Cald Dorn Fal Grim Hask Iver Kor Lynd Nest Pry Rook Sten Thal Ulver Wyk Ard")
CITY_TAILS = _words("holt vale mouth bury haven stow port fell dale ness")
REGION_HEADS = _words("Vess Aldr Ebr Marr Sund Tyr Val Brev Cael Dray Fenn Kest Lusc Orv Piel Riv")
REGION_TAILS = _words("ary onia land ia eth oria avia enne ovia")
ROLES = ("an accountant", "an engineer", "a clerk", "a designer", "a buyer", "a chemist", "a translator", "a surveyor")
_VOWELS = "aeiou"


@dataclass(frozen=True)
class Family:
    """One kind of chain: how a person is tied to a place (work, study, a club), with its words."""

    name: str
    kinds: tuple[str, ...]  # what follows an organisation stem: "Systems", "College", "Rowing Club"
    article: str  # "" or "the " before the organisation's name inside a sentence
    member: tuple[str, ...]  # templates with {p} (person), {o} (organisation), {role}
    located: tuple[str, ...]  # templates with {o} and {c} (city)
    verb: str  # "work": "In which city does {p} work?"
    verb_s: str  # "works": "{p} works in the city of"


FAMILIES = (
    Family(
        "work",
        _words("Systems Holdings Analytics Logistics Laboratories Foundry Partners Textiles Instruments Shipping"),
        "",
        ("{p} works for {o}.", "{p} is employed by {o}.", "{p} works as {role} at {o}."),
        ("{O} is based in {c}.", "{O} has its headquarters in {c}.", "The offices of {o} are in {c}."),
        "work",
        "works",
    ),
    Family(
        "study",
        _words("Academy College Institute Conservatory Polytechnic Seminary"),
        "",
        ("{p} studies at {o}.", "{p} is a student at {o}.", "{p} is enrolled at {o}."),
        ("{O} is located in {c}.", "{O} stands in the city of {c}.", "The campus of {o} is in {c}."),
        "study",
        "studies",
    ),
    Family(
        "train",
        ("Rowing Club", "Athletic Club", "Fencing Club", "Cycling Club", "Swimming Club", "Chess Club"),
        "the ",
        ("{p} trains with {o}.", "{p} is a member of {o}.", "{p} joined {o} last spring."),
        ("{O} meets in {c}.", "{O} has its clubhouse in {c}.", "The grounds of {o} are in {c}."),
        "train",
        "trains",
    ),
)
IN_REGION = ("{c} lies in the region of {r}.", "{c} is a city in the region of {r}.", "The city of {c} is in {r}.")
GOVERNOR = ("The governor of {r} is {g}.", "{g} is the governor of {r}.", "{r} is governed by {g}.")
RELATIONS = ("member", "located", "in_region", "governor")
"""The chain's relations in order: hop i uses RELATIONS[i]; each maps a subject to exactly one object."""


@dataclass(frozen=True)
class Fact:
    """One sentence stating `relation(subject) = object`."""

    sentence: str
    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class FactChain:
    """A question whose answer needs every fact of `facts`, in order, plus distractor facts about look-alikes."""

    family: str
    hops: int
    facts: tuple[Fact, ...]  # the chain: facts[0] names the question's person, facts[-1] the answer
    distractors: tuple[Fact, ...]
    question: str
    answer_prefix: str  # what the reply starts with, e.g. "Dalia Ferrow works in the city of"
    answer: str
    intermediates: tuple[str, ...]  # entities between the person and the answer
    distractor_answers: tuple[str, ...]  # what a model that follows a look-alike would answer

    @property
    def person(self) -> str:
        return self.facts[0].subject

    @property
    def distractor_entities(self) -> tuple[str, ...]:
        """Every entity named only by distractor facts (look-alikes, their organisations, cities, ...)."""
        chain = {self.person, *self.intermediates, self.answer}
        return tuple(e for e in self.entities() if e not in chain)

    def entities(self) -> list[str]:
        """Every entity named by a fact of the document (chain and distractors), in order of first mention."""
        seen: dict[str, None] = {}
        for f in (*self.facts, *self.distractors):
            seen.setdefault(f.subject)
            seen.setdefault(f.object)
        return list(seen)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Names:
    """Draws distinct invented names of each type from one generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _fresh(self, make) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise DataError("cross_paragraph: ran out of distinct invented names")  # pragma: no cover

    def person(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(FIRST_NAMES)} {r.choice(SURNAME_HEADS)}{r.choice(SURNAME_TAILS)}")

    def stem(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(STEM_HEADS)}{r.choice(STEM_TAILS)}")

    def city(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(CITY_HEADS)}{r.choice(CITY_TAILS)}")

    def region(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(REGION_HEADS)}{r.choice(REGION_TAILS)}")

    def look_alike_person(self, person: str) -> str:
        """The same first name, the first vowel of the surname changed: "Dalia Ferrow" -> "Dalia Farrow"."""
        first, surname = person.split(" ", 1)
        i = next(i for i, ch in enumerate(surname) if ch.lower() in _VOWELS)  # every surname head has one
        for v in self.rng.sample(_VOWELS, len(_VOWELS)):
            v = v.upper() if i == 0 else v
            name = f"{first} {surname[:i]}{v}{surname[i + 1 :]}"
            if v != surname[i] and name not in self.used:
                self.used.add(name)
                return name
        raise DataError(f"cross_paragraph: no look-alike for {person!r}")  # pragma: no cover


class _Writer:
    """Fills a relation's templates (one drawn at random) into a Fact."""

    def __init__(self, family: Family, rng: random.Random) -> None:
        self.family, self.rng = family, rng

    def org(self, stem: str, kind: str) -> str:
        return f"{stem} {kind}"

    def fact(self, relation: str, subject: str, obj: str) -> Fact:
        fam, r = self.family, self.rng
        if relation == "member":
            o = fam.article + obj
            text = r.choice(fam.member).format(p=subject, o=o, role=r.choice(ROLES))
        elif relation == "located":
            o = fam.article + subject
            text = r.choice(fam.located).format(o=o, O=_cap(o), c=obj)
        elif relation == "in_region":
            text = r.choice(IN_REGION).format(c=subject, r=obj)
        else:
            text = r.choice(GOVERNOR).format(r=subject, g=obj)
        return Fact(_cap(text), subject, relation, obj)


def _question(family: Family, person: str, hops: int) -> tuple[str, str]:
    """(question, answer prefix): the question names only the person; the prefix makes the reply short."""
    v, vs = family.verb, family.verb_s
    if hops == 2:
        return f"In which city does {person} {v}?", f"{person} {vs} in the city of"
    if hops == 3:
        return f"In which region does {person} {v}?", f"{person} {vs} in the region of"
    return (
        f"Who is the governor of the region where {person} {vs}?",
        f"The governor of the region where {person} {vs} is",
    )


def check_hops(hops: int) -> None:
    """ConfigError unless 2 <= hops <= 4."""
    if isinstance(hops, bool) or not isinstance(hops, int) or not MIN_HOPS <= hops <= MAX_HOPS:
        raise ConfigError(f"hops: expected an integer from {MIN_HOPS} to {MAX_HOPS}, got {hops!r}")


def _chain_objects(names: _Names, writer: _Writer, kind: str, hops: int) -> list[str]:
    """The entities after the person: organisation, city, region, governor (cut to `hops`)."""
    return [writer.org(names.stem(), kind), names.city(), names.region(), names.person()][:hops]


def _chain_facts(writer: _Writer, person: str, objects: Sequence[str]) -> list[Fact]:
    subjects = [person, *objects[:-1]]
    return [writer.fact(RELATIONS[i], s, o) for i, (s, o) in enumerate(zip(subjects, objects, strict=True))]


def make_chain(rng: random.Random, hops: int, family: Family | None = None) -> FactChain:
    """A chain of `hops` facts and its distractors, all drawn from `rng`; checked to have one answer.

    Distractors: a look-alike person (one vowel of the surname changed) with a full chain of its own, a
    look-alike organisation (same stem, another kind) located in another city with a member of its own, and
    one unrelated fact for each later relation (another city in another region, another region's governor).
    """
    check_hops(hops)
    fam = family or rng.choice(FAMILIES)
    names, writer = _Names(rng), _Writer(fam, rng)
    kind, other_kind = rng.sample(fam.kinds, 2)
    person = names.person()
    objects = _chain_objects(names, writer, kind, hops)
    facts = _chain_facts(writer, person, objects)
    look_alike = names.look_alike_person(person)
    alike_objects = _chain_objects(names, writer, rng.choice(fam.kinds), hops)
    distractors = _chain_facts(writer, look_alike, alike_objects)
    alike_org = writer.org(objects[0].split(" ", 1)[0], other_kind)
    alike_city = names.city()
    distractors.append(writer.fact("located", alike_org, alike_city))
    distractors.append(writer.fact("member", names.person(), alike_org))
    for rel in RELATIONS[2:hops]:
        subject = names.city() if rel == "in_region" else names.region()
        obj = names.region() if rel == "in_region" else names.person()
        distractors.append(writer.fact(rel, subject, obj))
    question, prefix = _question(fam, person, hops)
    chain = FactChain(
        family=fam.name,
        hops=hops,
        facts=tuple(facts),
        distractors=tuple(distractors),
        question=question,
        answer_prefix=prefix,
        answer=objects[-1],
        intermediates=tuple(objects[:-1]),
        distractor_answers=(alike_objects[-1], *([alike_city] if hops == 2 else [])),
    )
    check_unambiguous(chain)
    return chain


def resolve(facts: Iterable[Fact], subject: str, relations: Sequence[str]) -> list[set[str]]:
    """Follow `relations` from `subject` through `facts`: the set of objects reached at each hop."""
    table: dict[tuple[str, str], set[str]] = {}
    for f in facts:
        table.setdefault((f.subject, f.relation), set()).add(f.object)
    reached, frontier = [], {subject}
    for rel in relations:
        frontier = set().union(*(table.get((s, rel), set()) for s in frontier))
        reached.append(frontier)
    return reached


def _contains(a: str, b: str) -> bool:
    """True when name `b` occurs in name `a` on word boundaries, after normalization."""
    return f" {normalize(b)} " in f" {normalize(a)} "


def check_unambiguous(chain: FactChain) -> None:
    """DataError unless the document's facts lead from the person to exactly one entity, the answer.

    Also: every entity name is distinct and none contains another (so containment scoring of the answer,
    an intermediate or a distractor's answer is unambiguous), and no distractor is about the person.
    """
    everything = (*chain.facts, *chain.distractors)
    reached = resolve(everything, chain.person, RELATIONS[: chain.hops])
    for hop, objects in enumerate(reached, 1):
        if len(objects) != 1:
            raise DataError(
                f"cross_paragraph chain about {chain.person!r}: hop {hop} reaches {sorted(objects)}; "
                "expected exactly one entity (a distractor makes the answer ambiguous)"
            )
    if reached[-1] != {chain.answer}:
        raise DataError(f"cross_paragraph chain about {chain.person!r}: reaches {reached[-1]}, not {chain.answer!r}")
    names = chain.entities()
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if _contains(a, b) or _contains(b, a):
                raise DataError(f"cross_paragraph: entity names {a!r} and {b!r} overlap; expected distinct names")
    if any(f.subject == chain.person or chain.person in f.sentence for f in chain.distractors):
        raise DataError(f"cross_paragraph: a distractor names the question's person {chain.person!r}")


_WORD = re.compile(r"[A-Za-z]+")


def invented_words(chain: FactChain) -> set[str]:
    """The lowercased invented words of a chain's entity names (surnames, stems, cities, regions)."""
    generic = {w.lower() for fam in FAMILIES for k in fam.kinds for w in k.split()} | {n.lower() for n in FIRST_NAMES}
    return {w.lower() for name in chain.entities() for w in _WORD.findall(name)} - generic
