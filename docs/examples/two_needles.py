"""Two needles: two access codes at different depths of one exact-length haystack; the model must find both."""

import random

from data_builders import get_source, insert_sentences
from data_builders.haystack.prompt_budget import context_tokens
from longctx_eval import (
    Hit,
    Prediction,
    Request,
    RetrievalParams,
    Sample,
    Score,
    Task,
    any_of,
    is_empty,
    mean,
    rate,
    ratio,
    task,
)

from ._find_both import found_needles

VAULTS = ("amber", "basalt", "cedar", "dune", "ember", "fjord", "garnet", "harbor")
RETRIEVAL = RetrievalParams(chunk_tokens=128, chunk_overlap=16, k=10)


def oracle(sample: Sample) -> Prediction:
    """A perfect answer: both codes as text, both needle spans as the top hits."""
    hits = tuple(Hit(start, end, 1.0) for start, end in sample.gold["spans"])
    return Prediction(text=" and ".join(sample.gold["codes"]), hits=hits)


@task(
    name="two_needles",
    version="2",
    requires=any_of("generate", "retrieve"),
    default_lengths=[512, 1024],
    description="Two access codes at different depths; find both (generation or retrieval)",
)
def two_needles(lengths, seed=0, tokenizer=None, per_length=3, source="synthetic", found_at=5):
    def samples():
        haystack = get_source(source)
        for length in lengths:
            for i in range(per_length):
                rng = random.Random(f"{seed}-{length}-{i}")
                vaults = rng.sample(VAULTS, 2)
                codes = [f"{rng.randrange(10**6):06d}" for _ in vaults]
                depths = [rng.uniform(0.05, 0.45), rng.uniform(0.55, 0.95)]  # one in each half
                sentences = [
                    (f"The access code of the {vault} vault is {code}.", depth)
                    for vault, code, depth in zip(vaults, codes, depths, strict=True)
                ]
                n = context_tokens(length)  # the length is the whole prompt budget: context = length - 192
                doc = insert_sentences(haystack, tokenizer, n, sentences, seed=rng.getrandbits(32))
                yield Sample(
                    id=f"{length}-{i}",
                    context=doc.context,
                    question=f"What are the access codes of the {vaults[0]} vault and of the {vaults[1]} vault?",
                    gold={"codes": codes, "spans": [[s.char_start, s.char_end] for s in doc.spans]},
                    metadata={"target_tokens": length, "context_tokens": n, "seed": seed, "source": haystack.name},
                )

    def prompt(sample):
        text = f"{sample.context}\n\n{sample.question} Answer with the two codes only."
        return Request(sample.id, text, sample.context, sample.question, max_new_tokens=24, retrieval=RETRIEVAL)

    def score(sample, prediction):
        found = found_needles(sample, prediction, found_at)
        values = {"both": float(all(found)), "found": float(sum(found)), "needles": float(len(found))}
        if prediction.text is not None:  # only a generated answer can be empty
            values["empty"] = float(is_empty(prediction.text))
        return Score(values)

    return Task(
        dataset=samples,
        prompt=prompt,
        scorer=score,
        metrics=[mean("both"), ratio("found", "needles", name="needle_recall"), rate("empty")],
        oracle=oracle,
    )
