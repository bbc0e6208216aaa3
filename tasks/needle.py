"""Needle recall: one needle sentence with a random value at a chosen depth of a haystack of exact length."""

from __future__ import annotations

import random
from collections.abc import Iterator

from data_builders import build_needle_doc, get_source, needle_question
from data_builders.needle_dataset import depth_grid, haystack_seed
from longctx_eval import (
    Prediction,
    Request,
    RetrievalParams,
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
    sha256_json,
    task,
)

RETRIEVAL = RetrievalParams(chunk_tokens=128, chunk_overlap=16, k=10)
KS = (1, 3, 5)


def question_after_context(sample: Sample) -> Request:
    """The document first, then the question; retrievers get the document and the question as query."""
    prompt = (
        f"Read the following text and answer the question after it.\n\n{sample.context}\n\nQuestion: {sample.question}"
    )
    return Request(sample.id, prompt, sample.context, sample.question, max_new_tokens=32, retrieval=RETRIEVAL)


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
        for length in lengths:
            for depth in depth_grid(depths):
                for rep in range(per_cell):
                    rng = random.Random(sha256_json([seed, length, depth, rep]))
                    # every depth of one (length, repetition) shares one haystack, as the built dataset does
                    hseed = haystack_seed(seed, length, rep)
                    doc = build_needle_doc(src, tokenizer, length, depth, rng, haystack_seed=hseed)
                    yield Sample(
                        id=f"L{length}-d{depth:.2f}-r{rep}",
                        context=doc.context,
                        question=needle_question(doc),
                        gold={"answers": [doc.value], "span": [doc.needle_start, doc.needle_end]},
                        metadata={
                            "target_tokens": length,
                            "depth": depth,
                            "actual_depth": round(doc.actual_depth, 4),
                            "seed": seed,
                            "source": src.name,
                            "source_sha256": src.sha256,
                            "tokenizer": tokenizer.name,
                        },
                    )

    return Task(
        dataset=samples,
        prompt=question_after_context,
        scorer=needle_score,
        metrics=[mean("score"), rate("empty"), *(mean(f"recall@{k}") for k in KS), mean("mrr")],
    )
