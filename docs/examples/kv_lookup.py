"""Key-value lookup: find the value of one key among many random `key: value` lines."""

import random

from longctx_eval import Request, Sample, Score, Task, any_of, contains_answer, mean, task


@task(
    name="kv_lookup",
    version="1",
    requires=any_of("generate"),
    default_lengths=[256, 512],
    description="Find one value among random hexadecimal key: value lines",
)
def kv_lookup(lengths, seed=0, tokenizer=None, per_length=3):
    def samples():
        for length in lengths:
            for i in range(per_length):
                rng = random.Random(f"{seed}-{length}-{i}")
                lines = []
                while True:  # grow until one more line would pass the target length
                    line = f"{rng.randrange(16**8):08x}: {rng.randrange(16**8):08x}"
                    if tokenizer.count("\n".join([*lines, line])) > length:
                        break
                    lines.append(line)
                key, value = rng.choice(lines).split(": ")
                yield Sample(
                    id=f"{length}-{i}",
                    context="\n".join(lines),
                    question=f"What is the value of key {key}?",
                    gold={"answers": [value]},
                    metadata={"target_tokens": length, "seed": seed},
                )

    def prompt(sample):
        text = f"{sample.context}\n\n{sample.question} Answer with the value only."
        return Request(sample.id, text, sample.context, sample.question, max_new_tokens=16)

    def score(sample, prediction):
        return Score({"score": float(contains_answer(prediction.text or "", sample.gold["answers"][0]))})

    return Task(dataset=samples, prompt=prompt, scorer=score, metrics=[mean("score")])
