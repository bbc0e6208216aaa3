"""MRCR-style multi-round coreference: reproduce the i-th of several identical requests' answers in a long
conversation, prefixed with a random string.

A user asks an assistant for pieces of writing ("Write a letter about lighthouses."); one request kind recurs
2, 4 or 8 times among distractor requests, each answered with distinct prose of the haystack source; the last
user turn asks: "Prepend aYooSG8CQg to the 2nd (1 indexed) letter about lighthouses. Do not include any other
text in your response." Scored by OpenAI MRCR's rule (prefix, then difflib's sequence ratio). See docs/mrcr.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from data_builders import get_source
from data_builders.mrcr.grading import content_ratio, mrcr_grade, picked_instance
from data_builders.mrcr.grid import (
    DEFAULT_ANSWER_TOKENS,
    DEFAULT_RESERVE,
    PROMPT_TEMPLATE,
    mrcr_cells,
    mrcr_plan,
    needle_sizes,
)
from longctx_eval import Prediction, Request, Sample, Score, Task, Tokenizer, any_of, between, mean, rate, task
from longctx_eval.sample_plan import Planned, PlannedDataset


def ask(sample: Sample) -> Request:
    """The conversation and the question as one user turn; the budget is the gold reply's tokens plus 16."""
    text = PROMPT_TEMPLATE.format(context=sample.context, question=sample.question)
    return Request(
        sample.id, text, sample.context, sample.question, max_new_tokens=int(sample.metadata["max_new_tokens"])
    )


def score(sample: Sample, prediction: Prediction) -> Score:
    """MRCR's grade (`mrcr_ratio`), prefix compliance, exact match, the ratio regardless of the prefix, and
    whether the reply reproduces another look-alike's answer. No text (over length) scores 0."""
    gold = sample.gold
    reply = (prediction.text or "").strip()
    prefix, answer = gold["prefix"], gold["answers"][0]
    picked = picked_instance(reply, gold["lookalikes"], prefix)
    position = int(sample.metadata["position"])
    values = {
        "mrcr_ratio": mrcr_grade(reply, answer, prefix),
        "prefix_ok": float(reply.startswith(prefix)),
        "exact": float(reply == answer),
        "content_ratio": content_ratio(reply, gold["answer"], prefix) if reply else 0.0,
        "other_instance": float(picked is not None and picked != position),
    }
    return Score(values, parsed={"prefix_ok": reply.startswith(prefix), "picked": picked})


@task(
    name="mrcr",
    version="1",
    requires=any_of("generate"),
    default_lengths=[4096, 8192],
    description="MRCR-style multi-round coreference: the i-th of 2/4/8 identical requests' answers, with a prefix",
    bounds={"per_cell": between(1, 1000), "reserve": between(0, None), "answer_tokens": between(16, 1024)},
    cache_samples=True,  # requests and scores read each Sample alone
)
def mrcr(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    needles: str = "2,4,8",
    per_cell: int = 1,
    reserve: int = DEFAULT_RESERVE,
    answer_tokens: int = DEFAULT_ANSWER_TOKENS,
    source: str = "austen",
) -> Task:
    """`needles`: look-alike group sizes; each conversation holds one group of each size and is asked one
    question per group (`per_cell` conversations per length); `reserve`: tokens of each length left for the
    instructions, question, chat template and reply (the conversation is at most length - reserve tokens);
    `answer_tokens`: the longest answer; `source`: the haystack source the answers are cut from."""
    sizes = needle_sizes(needles, "mrcr.needles")

    def build(chosen: Sequence[Planned]) -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError("mrcr samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        ids = {p.id for p in chosen}
        # The `mrcr` dataset builder uses the same cells: a built dataset holds exactly these samples.
        for cell in mrcr_cells(src, tokenizer, lengths, sizes, per_cell, seed, reserve, answer_tokens, only=ids):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return Task(
        dataset=PlannedDataset(lambda: mrcr_plan(lengths, sizes, per_cell, seed, reserve), build),
        prompt=ask,
        scorer=score,
        metrics=[
            mean("mrcr_ratio"),
            rate("prefix_ok"),
            rate("exact"),
            mean("content_ratio"),
            rate("other_instance"),
        ],
        slices=("needles", "position", "depth_bucket"),
        cluster_noun="conversations",
    )
