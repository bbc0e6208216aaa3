"""What the user asks for in an MRCR-style conversation: a form of writing about a topic, and the final question.

A request kind is a (form, topic) pair, "Write a letter about lighthouses."; look-alike requests repeat one kind
word for word. Ten forms (as OpenAI's MRCR has ten formats) and 48 topics give 480 kinds.
"""

from __future__ import annotations

import random
import string

FORMS = (
    "short passage",
    "letter",
    "diary entry",
    "scene",
    "essay",
    "story opening",
    "character sketch",
    "monologue",
    "blog post",
    "speech",
)
TOPICS = (
    "lighthouses",
    "winter mornings",
    "old friendships",
    "country dances",
    "sea voyages",
    "inheritances",
    "garden walls",
    "rainy afternoons",
    "family quarrels",
    "unsent letters",
    "harbour towns",
    "first impressions",
    "proposals of marriage",
    "whaling ships",
    "long journeys",
    "village gossip",
    "pride",
    "second chances",
    "card games",
    "summer balls",
    "storms at sea",
    "clergymen",
    "sisters",
    "debts",
    "parsonages",
    "carriages",
    "secrets",
    "misunderstandings",
    "harpoons",
    "sailors",
    "portraits",
    "libraries",
    "country houses",
    "ambition",
    "patience",
    "bad weather",
    "walks by the shore",
    "old promises",
    "dinner parties",
    "strangers in town",
    "roadside inns",
    "music lessons",
    "kitchen gardens",
    "farewells",
    "the moon",
    "bakeries",
    "chess",
    "railway stations",
)
PREFIX_CHARS = string.ascii_letters + string.digits
PREFIX_LENGTH = 10  # as OpenAI's MRCR: ten alphanumeric characters, e.g. "aYooSG8CQg"

Kind = tuple[str, str]
"""A request kind: (form, topic)."""


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def request_text(kind: Kind) -> str:
    """The user's request for `kind`: "Write a letter about lighthouses."."""
    form, topic = kind
    return f"Write {_article(form)} {form} about {topic}."


def object_text(kind: Kind) -> str:
    """What the final question names: "letter about lighthouses"."""
    form, topic = kind
    return f"{form} about {topic}"


def ordinal(i: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


def question_text(prefix: str, position: int, kind: Kind) -> str:
    """OpenAI MRCR's final question, word for word: prepend the prefix to the i-th (1 indexed) answer of a kind."""
    return (
        f"Prepend {prefix} to the {ordinal(position)} (1 indexed) {object_text(kind)}. "
        "Do not include any other text in your response."
    )


def random_prefix(rng: random.Random) -> str:
    """A fresh ten-character alphanumeric string the reply must start with."""
    return "".join(rng.choice(PREFIX_CHARS) for _ in range(PREFIX_LENGTH))


def lookalike_kinds(rng: random.Random, count: int) -> list[Kind]:
    """`count` kinds for the look-alike groups, no two sharing a form or a topic."""
    return list(zip(rng.sample(FORMS, count), rng.sample(TOPICS, count), strict=True))


def distractor_kind(rng: random.Random, lookalikes: list[Kind]) -> Kind:
    """A kind that is none of the look-alike kinds; a quarter share the topic of one of them (another form), a
    quarter its form (another topic), as MRCR's hard distractors ("a short story about tapirs, a poem about
    frogs"); the rest are any other kind."""
    while True:
        form, topic = rng.choice(lookalikes)
        roll = rng.random()
        if roll < 1 / 4:
            kind = (rng.choice(FORMS), topic)
        elif roll < 1 / 2:
            kind = (form, rng.choice(TOPICS))
        else:
            kind = (rng.choice(FORMS), rng.choice(TOPICS))
        if kind not in lookalikes:
            return kind
