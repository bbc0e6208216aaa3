"""The exact text a language model reads in the coreference tasks, both modes: the document first, then a question.

Every request of a document starts with the same prefix (the instruction line and the marked document), so a
model with a prefix cache reads the document once; the question, the answer prefix and the choices (choice
mode) or the answer list (generate mode) follow it. docs/coref.md shows these strings, written by a test.
"""

from __future__ import annotations

from collections.abc import Sequence

HEADER = "Every mention of a person or thing in the document below is marked [N text], numbered in order.\n\n"
NEW_CHOICE = " [0 new]"


def document_prefix(marked: str) -> str:
    """The shared prefix of every request of one document: the instruction line and the marked document."""
    return f"{HEADER}Document:\n{marked}\n\n"


def mark(i: int, text: str) -> str:
    """Mention `i` as the document marks it."""
    return f"[{i} {text}]"


def choice_question(i: int, text: str) -> tuple[str, str]:
    """Choice mode: the question after the document, and the answer prefix the choices continue."""
    asked = mark(i, text)
    question = (
        f"Question: which earlier mention refers to the same person or thing as {asked}? Answer with that mention "
        "as it is marked in the document, or [0 new] if this is the first mention of it."
    )
    return question, f"{asked} refers to"


def choice_option(j: int, text: str) -> str:
    """One choice: an earlier mention as the document marks it (0: a new entity)."""
    return NEW_CHOICE if j == 0 else f" {mark(j, text)}"


def generate_question(asked: Sequence[int], texts: Sequence[str]) -> str:
    """Generate mode: the instruction and the listed mentions after the document; the reply starts after `N:`."""
    listing = "\n".join(f"{i}: {t}" for i, t in zip(asked, texts, strict=True))
    return (
        "For each mention listed below, give the number of the closest earlier mention that refers to the same "
        "person or thing, or 0 if it is the first mention of it. Answer one line per mention as 'N: M', "
        "for example '7: 3'.\n\n"
        f"Mentions:\n{listing}\n\nAnswers:\n{asked[0] if asked else ''}:"
    )
