"""Seeded synthetic long-document coreference: the synthetic narrative's world and templates, with every
person mention (full names, first names, titles, definite descriptions, pronouns) exported as gold clusters.

Each template slot that names a person (`{A}`, `{Af}`, `{At}`, `{Ahe}`, `{Ahim}`, `{Ahis}`, `{Aself}`, the
same for B, and `{C}`/`{Cf}` for someone else in the cast) is recorded as a mention of that person when the
sentence is filled, so the gold is exact by construction; pronouns refer to the person their template slot
names. Documents of any length: paragraphs are written until the target is reached, then the last ones
dropped until the rendered text fits.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass

from data_builders.coref.conll import CorefDocument
from data_builders.coref.haystack import _WORD, LongDoc, render
from data_builders.haystack import narrative_lexicon as L
from data_builders.haystack import narrative_templates as T
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Tokenizer

GENERATOR_VERSION = "1"
_FORMATTER = string.Formatter()
_PRONOUNS = {"f": ("she", "her", "her", "herself"), "m": ("he", "him", "his", "himself")}
_CAST, _MAX_CAST, _FOCUS = 6, 60, 8
_DEFINITE = 0.2  # share of full-name slots written as a definite description ("the blacksmith")
_TEMPLATE_GROUPS = (T.SETTING, T.ACTION, T.ACTION, T.DESCRIBE, T.INNER, T.HISTORY, T.BEATS)

_POOLS: dict[str, tuple[str, ...]] = {
    "adj": L.ADJECTIVES, "adj2": L.ADJECTIVES, "color": L.COLORS, "material": L.MATERIALS, "obj": L.OBJECTS,
    "obj2": L.OBJECTS, "feature": L.FEATURES, "weather": L.WEATHER, "time": L.TIMES, "season": L.SEASONS,
    "month": L.MONTHS, "day": L.WEEKDAYS, "n": L.NUMBER_WORDS, "food": L.FOODS, "drink": L.DRINKS,
    "emotion": L.EMOTIONS, "animal": L.ANIMALS, "sound": L.SOUNDS, "sound2": L.SOUNDS, "smell": L.SMELLS,
    "moved": L.MOVES, "said": L.SAYS, "asked": L.ASKS, "manner": L.MANNERS, "room": L.ROOMS,
    "river": L.RIVERS, "tree": L.TREES, "E": L.EVENTS, "V": L.VENUES,
}  # fmt: skip


@dataclass
class Person:
    """A cast member: the slots that name them and the attributes templates mention."""

    first: str
    last: str
    gender: str
    title: str
    job: str
    trait: str
    home: str
    age: str
    org: str
    pid: int  # stable id: cast indices shift when an old member leaves the cast


class _Story:
    """The cast, places and the seeded generator of one synthetic document."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.year = rng.randint(1880, 2015)
        self.towns = [rng.choice(L.TOWN_HEADS) + rng.choice(L.TOWN_TAILS) for _ in range(4)]
        self.orgs = [f"the {rng.choice(self.towns)} {rng.choice(L.ORG_KINDS)}" for _ in range(4)]
        self.people: list[Person] = []
        self.next_pid = 0
        for _ in range(_CAST):
            self.add_person()

    def add_person(self) -> int:
        rng, names = self.rng, {(p.first, p.last) for p in self.people}
        while True:
            gender = rng.choice("fm")
            first = rng.choice(L.FEMALE_NAMES if gender == "f" else L.MALE_NAMES)
            last = rng.choice(L.SURNAMES)
            if (first, last) not in names and all(p.first != first for p in self.people[-_FOCUS:]):
                break
        title = rng.choice(L.TITLES_F if gender == "f" else L.TITLES_M)
        home = rng.choice(self.towns)
        job, trait, age, org = (rng.choice(x) for x in (L.OCCUPATIONS, L.TRAITS, L.AGES, self.orgs))
        self.people.append(Person(first, last, gender, title, job, trait, home, age, org, self.next_pid))
        self.next_pid += 1
        if len(self.people) > _MAX_CAST:
            self.people.pop(rng.randrange(len(self.people) - _FOCUS))
        return len(self.people) - 1

    def pick(self, avoid: tuple[int, ...] = ()) -> int:
        n = len(self.people)
        while True:
            i = self.rng.randrange(max(0, n - _FOCUS), n) if self.rng.random() < 0.7 else self.rng.randrange(n)
            if i not in avoid:
                return i


Mention = tuple[int, int, int]  # char start, char end, person index


class _Sentence:
    """Fills one template, recording the character span and person of every person slot."""

    def __init__(self, story: _Story, roles: dict[str, int], named: set[int]) -> None:
        self.story, self.roles, self.rng, self.named = story, roles, story.rng, named
        self.values: dict[str, tuple[str, int | None, int]] = {}
        self.mentions: list[Mention] = []

    def fill(self, template: str, offset: int = 0) -> str:
        out = ""
        for literal, field, _, _ in _FORMATTER.parse(template):
            out += literal
            if field is None:
                continue
            if field in ("line", "question"):
                out += self.fill(self.rng.choice(L.LINES if field == "line" else L.QUESTIONS), offset + len(out))
                continue
            value, person, size = self.value(field)
            if person is not None:
                self.mentions.append((offset + len(out), offset + len(out) + size, person))
            out += value
        return out

    def value(self, field: str) -> tuple[str, int | None, int]:
        """(text, person id or None, length of the mention inside the text)."""
        if field not in self.values:
            text, person = self._draw(field)
            size = len(text)
            if text.endswith("'s") and person is not None:
                size -= 2  # "Clara's" standing in for "her": the mention is the name
            self.values[field] = (text, person, size)
        return self.values[field]

    def _draw(self, field: str) -> tuple[str, int | None]:
        rng, story = self.rng, self.story
        if field[:1] in "ABC" and field[1:] in _PERSON_FORMS:
            return self._person(field[0], field[1:])
        if field[:1] in "AB" and field[1:] in ("job", "trait", "home", "age", "org"):
            return getattr(story.people[self.roles[field[0]]], field[1:]), None
        if field.startswith("a_"):
            word = self.value(field[2:])[0]
            return ("an " if word[0].lower() in "aeiou" else "a ") + word, None
        if field in _POOLS:
            return rng.choice(_POOLS[field]), None
        return _DERIVED[field](self), None

    def _person(self, role: str, form: str) -> tuple[str, int]:
        if role == "C":
            self.roles.setdefault("C", self.story.pick(avoid=(self.roles["A"], self.roles["B"])))
        person = self.story.people[self.roles[role]]
        if form in ("he", "him", "his") and self._unclear(person):
            # A pronoun before the person is named in this paragraph, or with a same-gender person named
            # too, has no recoverable referent: name the person instead.
            text = person.first + ("'s" if form == "his" else "")
            form = "f"
        else:
            text = _PERSON_FORMS[form](self, person, role)
        if form in ("", "f", "t"):
            self.named.add(person.pid)
        return text, person.pid

    def _unclear(self, person: Person) -> bool:
        if person.pid not in self.named:
            return True
        others = [self.story.people[i] for r, i in self.roles.items() if self.story.people[i].pid != person.pid]
        return any(o.gender == person.gender and o.pid in self.named for o in others)


def _full(s: _Sentence, p: Person, role: str) -> str:
    other = s.story.people[s.roles["B" if role == "A" else "A"]]
    if role != "C" and p.job != other.job and s.rng.random() < _DEFINITE:
        return f"the {p.job}"
    return f"{p.first} {p.last}"


_PERSON_FORMS: dict[str, Callable[[_Sentence, Person, str], str]] = {
    "": _full,
    "f": lambda s, p, r: p.first,
    "t": lambda s, p, r: f"{p.title} {p.last}",
    "he": lambda s, p, r: _PRONOUNS[p.gender][0],
    "him": lambda s, p, r: _PRONOUNS[p.gender][1],
    "his": lambda s, p, r: _PRONOUNS[p.gender][2],
    "self": lambda s, p, r: _PRONOUNS[p.gender][3],
}

_DERIVED: dict[str, Callable[[_Sentence], str]] = {
    "T": lambda s: s.rng.choice(s.story.towns),
    "T2": lambda s: s.rng.choice(s.story.towns),
    "O": lambda s: s.rng.choice(s.story.orgs),
    "O2": lambda s: s.rng.choice(s.story.orgs),
    "year": lambda s: str(s.story.year),
    "old_year": lambda s: str(s.rng.randint(1760, s.story.year - 5)),
    "street": lambda s: f"{s.rng.choice(L.SURNAMES)} {s.rng.choice(L.STREET_KINDS)}",
}


def _capitalize(text: str) -> str:
    i = 1 if text[:1] == '"' else 0
    return text[:i] + text[i : i + 1].upper() + text[i + 1 :]


def _paragraph(story: _Story) -> tuple[str, list[Mention]]:
    """One paragraph: its text and its person mentions (character spans)."""
    rng = story.rng
    new = rng.random() < 0.12
    a = story.add_person() if new else story.pick()
    roles = {"A": a, "B": story.pick(avoid=(a,))}
    groups = [T.INTRO] if new else []
    groups += [rng.choice(_TEMPLATE_GROUPS) for _ in range(rng.randint(2, 6))]
    mentions: list[Mention] = []
    named: set[int] = set()
    text = ""
    for group in groups:
        s = _Sentence(story, roles, named)
        sentence = _capitalize(s.fill(rng.choice(group)))
        base = len(text) + (1 if text else 0)
        text += (" " if text else "") + sentence
        mentions.extend((base + cs, base + ce, who) for cs, ce, who in s.mentions)
    return text, mentions


def _tokenize(text: str, mentions: list[Mention]) -> tuple[list[str], list[int], list[tuple[int, int, int]]]:
    """Words, sentence ends and mentions as inclusive token spans."""
    matches = list(_WORD.finditer(text))
    starts = {m.start(): i for i, m in enumerate(matches)}
    ends = {m.end(): i for i, m in enumerate(matches)}
    spans = []
    for cs, ce, who in mentions:
        if cs not in starts or ce not in ends:
            raise DataError(f"synthetic mention {text[cs:ce]!r} does not align with word boundaries")
        spans.append((starts[cs], ends[ce], who))
    words = [m.group() for m in matches]
    sentence_ends = [i + 1 for i, w in enumerate(words) if w in ".!?" and (i + 1 == len(words) or words[i + 1] != '"')]
    sentence_ends += [i + 1 for i, w in enumerate(words) if w == '"' and i and words[i - 1] in ".!?,"]
    return words, sorted(set(sentence_ends) | {len(words)}), spans


def synthetic_document(target: int, seed: int, tokenizer: Tokenizer | None = None, name: str = "") -> LongDoc:
    """A narrative of at most `target` tokens (words when no tokenizer) with its person clusters as gold."""
    if isinstance(target, bool) or not isinstance(target, int) or target < 16:
        raise ConfigError(f"target: expected an integer >= 16 tokens, got {target!r}")
    story = _Story(random.Random(f"coref-synthetic-v{GENERATOR_VERSION}-{seed}"))
    paragraphs: list[tuple[list[str], list[int], list[tuple[int, int, int]]]] = []
    total = 0
    while total < target:
        words, ends, spans = _tokenize(*_paragraph(story))
        paragraphs.append((words, ends, spans))
        total += len(words) if tokenizer is None else tokenizer.count(render(words, ends)[0]) + 1
    name = name or f"synthetic-{seed}-{target}"
    while len(paragraphs) > 1:
        long = _build(paragraphs, name)
        if _length(long, tokenizer) <= target:
            return long
        paragraphs.pop()
    words, ends, spans = paragraphs[0]
    for cut in reversed(ends):  # one paragraph too long: keep the longest run of whole sentences that fits
        part = (words[:cut], [e for e in ends if e <= cut], [m for m in spans if m[1] < cut])
        long = _build([part], name)
        if _length(long, tokenizer) <= target:
            return long
    raise DataError(f"target {target} is shorter than the first synthetic sentence")


def _length(long: LongDoc, tokenizer: Tokenizer | None) -> int:
    if tokenizer is None:
        return len(long.doc.tokens)
    return tokenizer.count(render(long.doc.tokens, long.doc.sentence_ends, long.paragraph_ends)[0])


def _build(paragraphs: list, name: str) -> LongDoc:
    tokens: list[str] = []
    sentence_ends: list[int] = []
    paragraph_ends: list[int] = []
    clusters: dict[int, list[tuple[int, int]]] = {}
    for words, ends, spans in paragraphs:
        base = len(tokens)
        tokens.extend(words)
        sentence_ends.extend(base + e for e in ends)
        paragraph_ends.append(len(tokens))
        for s, e, who in spans:
            clusters.setdefault(who, []).append((base + s, base + e))
    ordered = sorted(clusters.values(), key=lambda c: c[0])
    doc = CorefDocument(name=f"({name}); part 000", tokens=tuple(tokens), sentence_ends=tuple(sentence_ends),
                        clusters=tuple(tuple(c) for c in ordered), path="synthetic")  # fmt: skip
    return LongDoc(doc, tuple(paragraph_ends), (), len(tokens), tuple(range(len(tokens))))
