"""How a RAG prompt is made: retrieved chunks put back in document order, overlapping ones merged, joined by a
marker, and substituted for the context inside the task's own prompt; plus the iterative note request.

Contract: a generate request's prompt contains its context verbatim exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from longctx_eval.errors import ConfigError
from longctx_eval.sample import Hit, Request

PASSAGE_SEPARATOR = "\n\n[...]\n\n"
"""Between two passages that are not contiguous in the document: marks the text left out."""
NOTE_PROMPT = (
    "Passages from a long document:\n\n{passages}\n\nQuestion: {question}\n\n"
    "Do not answer the question. In one short sentence, write down the names, places and facts from these "
    "passages that the question depends on, so the document can be searched again for what is still missing."
)
"""The iterative-retrieval instruction: the generator's note after a round, added to the next round's query."""
NOTE_ANSWER_PREFIX = "Facts found:"
NOTE_TOKENS = 32
"""Generation budget of a note (new tokens)."""


def merge_spans(hits: Iterable[Hit]) -> list[tuple[int, int]]:
    """Chunk spans in document order, overlapping or touching ones merged, so each character appears once."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((h.char_start, h.char_end) for h in hits):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def passages_text(context: str, spans: Iterable[tuple[int, int]]) -> str:
    """The context's text at `spans` (document order, merged), joined by PASSAGE_SEPARATOR."""
    return PASSAGE_SEPARATOR.join(context[start:end] for start, end in spans)


def substitute_context(request: Request, text: str) -> Request:
    """`request` with `text` in place of its context, in the prompt and as its context; the rest unchanged."""
    at = request.prompt.find(request.context)
    if at < 0 or request.prompt.find(request.context, at + 1) >= 0:
        found = "does not contain its context" if at < 0 else "contains its context more than once"
        raise ConfigError(
            f"request {request.sample_id!r} (part {request.part}): its prompt {found}; a rag model "
            "needs the context verbatim exactly once in a generate request's prompt, to put the passages there"
        )
    prompt = request.prompt[:at] + text + request.prompt[at + len(request.context) :]
    return replace(request, prompt=prompt, context=text)


def note_request(request: Request, text: str) -> Request:
    """The generator's iterative-retrieval step: read passages `text`, write a short note for the next query."""
    return Request(
        sample_id=request.sample_id,
        prompt=NOTE_PROMPT.format(passages=text, question=request.query),
        context=text,
        query=request.query,
        max_new_tokens=NOTE_TOKENS,
        part=request.part,
        answer_prefix=NOTE_ANSWER_PREFIX,
    )


def next_query(question: str, note: str) -> str:
    """The next round's query: the question, then the note."""
    return f"{question} {note}".strip()
