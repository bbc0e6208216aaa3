"""Needle recall: one needle sentence with a random value at a chosen depth of a haystack of exact length."""

from __future__ import annotations

from collections.abc import Iterator

from data_builders import get_source
from data_builders.needle_grid import MAX_NEW_TOKENS, PROMPT_TEMPLATE, RECALL_KS, RETRIEVAL, needle_cells
from longctx_eval import (
    Prediction,
    Request,
    Sample,
    Score,
    Task,
    Tokenizer,
    any_of,
    contains_answer,
    is_empty,
    mean,
    rate,
    recall_at,
    task,
)

KS = RECALL_KS


def question_after_context(sample: Sample) -> Request:
    """The document first, then the question; retrievers get the document and the question as query."""
    prompt = PROMPT_TEMPLATE.format(context=sample.context, question=sample.question)
    return Request(
        sample.id, prompt, sample.context, sample.question, max_new_tokens=MAX_NEW_TOKENS, retrieval=RETRIEVAL
    )


def needle_score(sample: Sample, pred: Prediction) -> Score:
    """Generated text: normalized containment of the value; retrieval: the needle span covered at K."""
    if pred.text is None and pred.status == "ok":
        start, end = sample.gold["span"]
        return Score(recall_at(pred.hits, start, end, KS))
    text = pred.text or ""
    return Score(
        {
            "score": float(contains_answer(text, sample.gold["answers"][0])),
            "empty": float(pred.status == "ok" and is_empty(text)),
        }
    )


@task(
    name="needle",
    version="3",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Single needle with a random value, length x depth grid; containment or recall@k",
)
def needle(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    depths: int = 5,
    per_cell: int = 1,
    source: str = "austen",
) -> Task:
    def samples() -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError("needle samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        # The `needle` dataset builder uses the same cells: a built dataset holds exactly these samples.
        for cell in needle_cells(src, tokenizer, lengths, depths, per_cell, seed):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return Task(
        dataset=samples,
        prompt=question_after_context,
        scorer=needle_score,
        metrics=[mean("score"), rate("empty"), *(mean(f"recall@{k}") for k in KS), mean("mrr")],
        primary={"retrieve": "recall@1"},
    )
