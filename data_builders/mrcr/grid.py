"""The MRCR-style grid: per length and repetition one conversation holding a look-alike group of each size
(2, 4, 8), and one question per group; the task and the `mrcr` dataset builder both read these cells.

A length L is the whole prompt budget in the evaluated model's tokenizer: the conversation is at most
`L - reserve` tokens (it fills that to within one turn), and the question, the instructions, a chat
template's tokens and the generation budget fit in the reserve (checked per sample).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.prompt_budget import context_tokens
from data_builders.mrcr.conversation import Conversation, build_conversation
from data_builders.mrcr.requests import question_text, random_prefix
from longctx_eval.errors import ConfigError
from longctx_eval.sample import Sample
from longctx_eval.sample_plan import Planned
from longctx_eval.text.tokenizer import Tokenizer

PROMPT_TEMPLATE = (
    "Below is a conversation between a user and an assistant. Reply to the user's last message as the "
    "assistant.\n\n{context}\n\nUser: {question}"
)
"""The generation prompt (one user turn; the chat template, where the model has one, wraps it)."""
DEFAULT_NEEDLES = (2, 4, 8)
DEFAULT_RESERVE = 256
DEFAULT_ANSWER_TOKENS = 64
ANSWER_MARGIN = 16
"""Generation budget beyond the gold reply (prefix + answer) in the evaluated model's tokens."""
CHAT_ALLOWANCE = 48
"""Tokens of the reserve kept for a chat template's markup around the prompt (SmolLM2's, with its default system
prompt, adds 30; tests/data_builders/mrcr checks the rendered prompt on the real template)."""
MIN_CONTEXT = 512
MAX_NEEDLES = 64


def needle_sizes(text: str | Sequence[int], name: str = "needles") -> tuple[int, ...]:
    """Look-alike group sizes from "2,4,8"; ConfigError naming `name` unless distinct counts from 1 to 64."""
    raw = text.split(",") if isinstance(text, str) else [str(x) for x in text]
    try:
        sizes = tuple(int(x) for x in raw if str(x).strip())
    except ValueError:
        sizes = ()
    if not sizes or len(set(sizes)) != len(sizes) or any(not 1 <= n <= MAX_NEEDLES for n in sizes):
        raise ConfigError(f"{name}={text!r}: expected distinct look-alike counts from 1 to {MAX_NEEDLES}, e.g. 2,4,8")
    return sizes


def conversation_seed(seed: int, length: int, rep: int) -> int:
    """The seed of the conversation of (length, repetition): 32 bits of blake2b, independent of other lengths."""
    digest = hashlib.blake2b(f"mrcr|{seed}|{length}|{rep}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def conversation_cluster(conv_seed: int) -> str:
    """The cluster of the samples asked about one conversation, e.g. "conversation-1a2b3c4d"."""
    return f"conversation-{conv_seed:08x}"


def asked_position(seed: int, length: int, rep: int, size: int) -> int:
    """Which answer (1-based) a group of `size` look-alikes is asked for: cycles through 1..size over the
    repetitions from a seeded start, so `per_cell` >= size asks every position equally often."""
    offset = random.Random(f"mrcr-position|{seed}|{length}|{size}").randrange(size)
    return (offset + rep) % size + 1


def sample_id(length: int, rep: int, size: int) -> str:
    return f"L{length}-r{rep}-n{size}"


def depth_bucket(depth: float) -> str:
    """Quintile of where the asked answer sits: "0-20%", ..., "80-100%"."""
    k = min(4, int(depth * 5))
    return f"{20 * k}-{20 * (k + 1)}%"


def mrcr_plan(lengths: Sequence[int], sizes: Sequence[int], per_cell: int, seed: int, reserve: int) -> list[Planned]:
    """Every sample of the grid, cheaply: id, length, stratum (the look-alike count) and conversation cluster."""
    out = []
    for length in lengths:
        context_tokens(length, reserve, MIN_CONTEXT)  # a length too short for any conversation: ConfigError
        for rep in range(per_cell):
            cluster = conversation_cluster(conversation_seed(seed, length, rep))
            for size in sizes:
                meta = {"target_tokens": length, "stratum": size, "cluster": cluster}
                out.append(Planned(sample_id(length, rep, size), meta))
    return out


def grid_size(lengths: Sequence[int], sizes: Sequence[int], per_cell: int) -> int:
    return len(lengths) * per_cell * len(sizes)


@dataclass(frozen=True)
class MrcrCell:
    """One question about one conversation, with everything its Sample and its dataset row hold."""

    length: int
    rep: int
    size: int  # look-alikes of the asked kind
    position: int  # the asked answer, 1-based
    seed: int
    conversation_seed: int
    reserve: int
    conversation: Conversation
    group: int
    prefix: str
    question: str
    max_new_tokens: int

    @property
    def turn_indices(self) -> list[int]:
        return self.conversation.occurrences(self.group)

    @property
    def asked_turn(self) -> int:
        return self.turn_indices[self.position - 1]

    @property
    def answer(self) -> str:
        return self.conversation.turns[self.asked_turn].answer

    def row(self) -> dict[str, Any]:
        """The dataset row: OpenAI MRCR's fields (`messages` as its `prompt`, `answer` with the prefix,
        `random_string_to_prepend`, `n_needles`, `desired_msg_index`, `total_messages`) and ours."""
        conv = self.conversation
        messages = []
        for t in conv.turns:
            messages += [{"role": "user", "content": t.request}, {"role": "assistant", "content": t.answer}]
        messages.append({"role": "user", "content": self.question})
        context = conv.transcript()
        depth = conv.depth_of(self.asked_turn)
        return {
            "id": sample_id(self.length, self.rep, self.size),
            "conversation": conversation_cluster(self.conversation_seed),
            "messages": messages,
            "context": context,
            "question": self.question,
            "prompt": PROMPT_TEMPLATE.format(context=context, question=self.question),
            "random_string_to_prepend": self.prefix,
            "answer": self.prefix + self.answer,
            "n_needles": self.size,
            "position": self.position,
            "desired_msg_index": 2 * self.asked_turn + 1,
            "total_messages": len(messages),
            "lookalike_request": conv.turns[self.asked_turn].request,
            "lookalike_msg_indices": [2 * i + 1 for i in self.turn_indices],
            "lookalike_answers": [conv.turns[i].answer for i in self.turn_indices],
            "turns": len(conv.turns),
            "asked_turn": self.asked_turn,
            "asked_depth": round(depth, 4),
            "depth_bucket": depth_bucket(depth),
            "max_new_tokens": self.max_new_tokens,
            "target_tokens": self.length,
            "context_tokens": conv.tokens,
            "reserve": self.reserve,
            "rep": self.rep,
            "seed": self.seed,
            "conversation_seed": self.conversation_seed,
            "stratum": self.size,
        }

    def sample(self, **metadata: Any) -> Sample:
        return row_sample(self.row(), **metadata)


def row_sample(row: Mapping[str, Any], **metadata: Any) -> Sample:
    """The task's Sample of a dataset row (`metadata`: source, source_sha256, tokenizer)."""
    prefix = row["random_string_to_prepend"]
    return Sample(
        id=row["id"],
        context=row["context"],
        question=row["question"],
        gold={
            "answers": [row["answer"]],
            "prefix": prefix,
            "answer": row["answer"].removeprefix(prefix),
            "lookalikes": list(row["lookalike_answers"]),
        },
        metadata={
            "target_tokens": row["target_tokens"],
            "context_tokens": row["context_tokens"],
            "stratum": row["stratum"],
            "cluster": row["conversation"],
            "needles": row["n_needles"],
            "position": row["position"],
            "depth_bucket": row["depth_bucket"],
            "asked_depth": row["asked_depth"],
            "asked_turn": row["asked_turn"],
            "turns": row["turns"],
            "max_new_tokens": row["max_new_tokens"],
            "reserve": row["reserve"],
            "rep": row["rep"],
            "seed": row["seed"],
            "conversation_seed": row["conversation_seed"],
            **metadata,
        },
    )


def mrcr_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    sizes: Sequence[int],
    per_cell: int,
    seed: int,
    reserve: int,
    answer_tokens: int,
    only: set[str] | None = None,
) -> Iterator[MrcrCell]:
    """The grid's cells in plan order; `only` (sample ids) builds just the conversations those ids need."""
    for length in lengths:
        budget = context_tokens(length, reserve, MIN_CONTEXT)
        for rep in range(per_cell):
            ids = [sample_id(length, rep, size) for size in sizes]
            if only is not None and not only.intersection(ids):
                continue
            conv_seed = conversation_seed(seed, length, rep)
            try:
                conv = build_conversation(source, tokenizer, budget, sizes, conv_seed, answer_tokens)
            except ConfigError as e:
                raise ConfigError(f"length {length}: {e}") from None
            rng = random.Random(f"mrcr-prefix|{conv_seed}")
            for group, size in enumerate(sizes):
                prefix = random_prefix(rng)
                if only is not None and ids[group] not in only:
                    continue
                position = asked_position(seed, length, rep, size)
                question = question_text(prefix, position, conv.kinds[group])
                answer = conv.turns[conv.occurrences(group)[position - 1]].answer
                budget_new = tokenizer.count(prefix + answer) + ANSWER_MARGIN
                around = tokenizer.count(PROMPT_TEMPLATE.format(context="", question=question))
                if around + budget_new + CHAT_ALLOWANCE > reserve:
                    raise ConfigError(
                        f"length {length}: the question, instructions and a {budget_new}-token answer budget need "
                        f"{around + budget_new + CHAT_ALLOWANCE} tokens beside the conversation (with {CHAT_ALLOWANCE} "
                        f"for a chat template); expected a `reserve` of at least that, got {reserve} (or a smaller "
                        "`answer_tokens`)"
                    )
                yield MrcrCell(
                    length, rep, size, position, seed, conv_seed, reserve, conv, group, prefix, question, budget_new
                )


SCORING = """\
A reply is first stripped of surrounding whitespace. `mrcr_ratio` is OpenAI MRCR's grade: 0 unless the reply
starts with `random_string_to_prepend`; otherwise `difflib.SequenceMatcher(None, reply, answer).ratio()` with
the prefix removed from both (`answer` holds the prefix). Beside it: `prefix_ok` (the reply starts with the
prefix), `exact` (the reply equals `answer`), `content_ratio` (the same ratio with the prefix removed where
present, whether or not it was), and `other_instance` (the reply matches another look-alike answer of
`lookalike_answers` best, at a ratio of at least 0.5: the model resolved to the wrong occurrence). Group by
`n_needles`, `position` and `depth_bucket`.
"""
