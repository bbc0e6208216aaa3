"""Seeded synthetic narrative: an unlimited, deterministic stream of varied English prose paragraphs.

A small world (people with genders and jobs, towns, organisations, events) grows as the text goes on;
each paragraph is a scene, a dialogue, a description, a bit of local history, a reflection or a short
transition, built from templates whose slots are drawn from `narrative_lexicon`. Unlike RULER's
repeated filler, 100K tokens of it read as different sentences throughout, so a needle is not the only
salient thing in the context and prefix caches see no repeated blocks.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator

from data_builders.haystack import narrative_lexicon as L
from data_builders.haystack import narrative_templates as T

# Bump when the generator's logic changes the text for a given seed (lexicon edits are hashed anyway).
GENERATOR_VERSION = "1"

_PRONOUNS = {"f": ("she", "her", "her", "herself"), "m": ("he", "him", "his", "himself")}
_INITIAL_CAST = 10
_MAX_CAST = 400
_FOCUS = 12  # most recent arrivals are the likeliest protagonists, so people recur as in a story

_POOLS: dict[str, tuple[str, ...]] = {
    "adj": L.ADJECTIVES,
    "adj2": L.ADJECTIVES,
    "color": L.COLORS,
    "material": L.MATERIALS,
    "obj": L.OBJECTS,
    "obj2": L.OBJECTS,
    "feature": L.FEATURES,
    "weather": L.WEATHER,
    "time": L.TIMES,
    "season": L.SEASONS,
    "month": L.MONTHS,
    "day": L.WEEKDAYS,
    "n": L.NUMBER_WORDS,
    "food": L.FOODS,
    "drink": L.DRINKS,
    "emotion": L.EMOTIONS,
    "animal": L.ANIMALS,
    "sound": L.SOUNDS,
    "sound2": L.SOUNDS,
    "smell": L.SMELLS,
    "moved": L.MOVES,
    "said": L.SAYS,
    "asked": L.ASKS,
    "manner": L.MANNERS,
    "room": L.ROOMS,
    "river": L.RIVERS,
    "tree": L.TREES,
    "E": L.EVENTS,
}


def _article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _capitalize(sentence: str) -> str:
    if sentence[0] == '"':
        return '"' + sentence[1].upper() + sentence[2:]
    return sentence[0].upper() + sentence[1:]


class _World:
    """The cast, towns and organisations a narrative draws on; grows as paragraphs are written."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.year = rng.randint(1880, 2015)
        self.towns: list[str] = []
        self.orgs: list[str] = []
        self.people: list[tuple[dict[str, str], dict[str, str]]] = []
        self._names: set[str] = set()
        for _ in range(4):
            self.add_town()
        for _ in range(5):
            self.add_org()
        for _ in range(_INITIAL_CAST):
            self.add_person()

    def add_town(self) -> str:
        name = self.rng.choice(L.TOWN_HEADS) + self.rng.choice(L.TOWN_TAILS)
        self.towns.append(name)
        return name

    def add_org(self) -> str:
        rng, kind = self.rng, self.rng.choice(L.ORG_KINDS)
        r = rng.random()
        if r < 0.45:
            name = f"the {rng.choice(self.towns)} {kind}"
        elif r < 0.8:
            name = f"the {rng.choice(L.SURNAMES)} {kind}"
        else:
            name = f"{rng.choice(L.SURNAMES)} and {rng.choice(L.SURNAMES)}"
        self.orgs.append(name)
        return name

    def add_person(self) -> tuple[dict[str, str], dict[str, str]]:
        """Create a new person; returns their slots in the A role and in the B role."""
        rng = self.rng
        while True:
            gender = rng.choice("fm")
            first = rng.choice(L.FEMALE_NAMES if gender == "f" else L.MALE_NAMES)
            last = rng.choice(L.SURNAMES)
            if f"{first} {last}" not in self._names:
                break
        self._names.add(f"{first} {last}")
        he, him, his, self_ = _PRONOUNS[gender]
        title = rng.choice(L.TITLES_F if gender == "f" else L.TITLES_M)
        base = {
            "": f"{first} {last}",
            "f": first,
            "l": last,
            "t": f"{title} {last}",
            "he": he,
            "him": him,
            "his": his,
            "self": self_,
            "job": rng.choice(L.OCCUPATIONS),
            "trait": rng.choice(L.TRAITS),
            "home": rng.choice(self.towns) if rng.random() < 0.5 else self.add_town(),
            "age": rng.choice(L.AGES),
            "org": rng.choice(self.orgs),
        }
        roles = ({"A" + k: v for k, v in base.items()}, {"B" + k: v for k, v in base.items()})
        self.people.append(roles)
        if len(self.people) > _MAX_CAST:
            # Drop someone from the older part of the cast so memory stays bounded on endless streams.
            self.people.pop(rng.randrange(len(self.people) - _FOCUS))
        return roles

    def pick_person(self, avoid: int = -1) -> int:
        n = len(self.people)
        while True:
            if self.rng.random() < 0.7:
                i = self.rng.randrange(max(0, n - _FOCUS), n)
            else:
                i = self.rng.randrange(n)
            if i != avoid:
                return i


class _Slots(dict):
    """Template slots, drawn lazily: a key is filled from the lexicon the first time a template asks."""

    __slots__ = ("world", "rng")
    world: _World
    rng: random.Random

    def __missing__(self, key: str) -> str:
        pool = _POOLS.get(key)
        if pool is not None:
            value = self.rng.choice(pool)
        elif key.startswith("a_"):
            value = _article(self[key[2:]])  # {a_obj} is the same object as {obj}, with its article
        else:
            derive = _DERIVED.get(key)
            if derive is None:
                raise KeyError(key)
            value = derive(self)
        self[key] = value
        return value


def _street(s: _Slots) -> str:
    rng = s.rng
    head = rng.choice(L.SURNAMES) if rng.random() < 0.6 else rng.choice(L.TREES).capitalize()
    return f"{head} {rng.choice(L.STREET_KINDS)}"


def _other_person(s: _Slots) -> str:
    people = s.world.people
    return people[s.rng.randrange(len(people))][0]["A"]


def _fill_line(pool: tuple[str, ...]) -> Callable[[_Slots], str]:
    return lambda s: s.rng.choice(pool).format_map(s)


_DERIVED: dict[str, Callable[[_Slots], str]] = {
    "street": _street,
    "T2": lambda s: s.rng.choice(s.world.towns),
    "O2": lambda s: s.rng.choice(s.world.orgs),
    "C": _other_person,
    "Cf": lambda s: _other_person(s).split(" ")[0],
    "old_year": lambda s: str(s.rng.randint(1760, s.world.year - 5)),
    "line": _fill_line(L.LINES),
    "question": _fill_line(L.QUESTIONS),
}


class _Writer:
    """Writes one paragraph at a time from a world and a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.world = _World(rng)
        self.base: dict[str, str] = {}
        self.used: set[str] = set()

    def sentence(self, templates: tuple[str, ...]) -> str:
        s = _Slots(self.base)
        s.world, s.rng = self.world, self.rng
        template = self.rng.choice(templates)
        for _ in range(3):  # a template used twice in one paragraph reads as a glitch; redraw
            if template not in self.used:
                break
            template = self.rng.choice(templates)
        self.used.add(template)
        return _capitalize(template.format_map(s))

    def utterance(self, who: str) -> str:
        """One line of dialogue by person `who` ("A" or "B"), with a varied attribution."""
        rng = self.rng
        s = _Slots(self.base)
        s.world, s.rng = self.world, rng
        name = s[who + rng.choice(("f", "f", "t", "he"))]
        if rng.random() < 0.3:
            q, asked = s["question"], s["asked"]
            form = rng.randrange(3)
            if form == 0:
                return _capitalize(f'"{q}?" {name} {asked}.')
            return f'"{q}?"' if form == 1 else _capitalize(f'{name} {asked}, "{q}?"')
        line, said = s["line"], s["said"]
        form = rng.randrange(6)
        if form == 0:
            return _capitalize(f'"{line}," {name} {said}.')
        if form == 1:
            return _capitalize(f'"{line}," {name} {said}, {s["manner"]}.')
        if form == 2:
            return _capitalize(f'{name} {said}, "{line}."')
        if form == 3 and name not in ("he", "she"):
            return f'"{line}," {said} {name}.'
        if form == 4:
            more = rng.choice(L.LINES).format_map(s)
            return _capitalize(f'"{line}," {name} {said}. "{more}."')
        return f'"{line}."'

    def paragraph(self) -> str:
        rng, world = self.rng, self.world
        if rng.random() < 0.02:
            world.year += 1
        if rng.random() < 0.04:
            world.add_org()
        out: list[str] = []
        self.used.clear()
        if rng.random() < 0.1:
            world.add_person()
            a = len(world.people) - 1
        else:
            a = world.pick_person()
        b = world.pick_person(avoid=a)
        self.base = {
            **world.people[a][0],
            **world.people[b][1],
            "T": rng.choice(world.towns),
            "V": rng.choice(L.VENUES),
            "O": rng.choice(world.orgs),
            "year": str(world.year),
        }
        if a == len(world.people) - 1 and rng.random() < 0.8:
            out.append(self.sentence(T.INTRO))
        kind = rng.random()
        if kind < 0.33:
            out.append(self.sentence(T.SETTING))
            for _ in range(rng.randint(2, 6)):
                out.append(self.sentence(rng.choice((T.ACTION, T.ACTION, T.DESCRIBE, T.INNER))))
        elif kind < 0.6:
            if rng.random() < 0.6:
                out.append(self.sentence(rng.choice((T.SETTING, T.ACTION))))
            for i in range(rng.randint(2, 7)):
                out.append(self.utterance("AB"[i % 2]))
                if rng.random() < 0.25:
                    out.append(self.sentence(T.BEATS))
        elif kind < 0.72:
            for _ in range(rng.randint(2, 5)):
                out.append(self.sentence(T.DESCRIBE))
        elif kind < 0.82:
            for _ in range(rng.randint(1, 4)):
                out.append(self.sentence(rng.choice((T.HISTORY, T.HISTORY, T.DESCRIBE))))
        elif kind < 0.93:
            for _ in range(rng.randint(2, 4)):
                out.append(self.sentence(rng.choice((T.INNER, T.INNER, T.ACTION))))
        else:
            out.append(self.sentence(T.TRANSITION))
        return " ".join(out)


def narrative_paragraphs(seed: int) -> Iterator[str]:
    """Yield synthetic prose paragraphs forever; the same seed always yields the same text."""
    writer = _Writer(random.Random(seed))
    while True:
        yield writer.paragraph()


def narrative_sha256() -> str:
    """Hash of the generator's version, word lists, templates and a sample of its output."""
    h = hashlib.sha256(f"synthetic-narrative v{GENERATOR_VERSION}\n".encode())
    for module in (L, T):
        for name in sorted(vars(module)):
            value = getattr(module, name)
            if name.isupper() and isinstance(value, tuple):
                h.update(f"{name}={value!r}\n".encode())
    sample = narrative_paragraphs(0)
    for _ in range(50):
        h.update(next(sample).encode())
    return h.hexdigest()
