"""The needle family (needle v5, multikey, multivalue, multiquery, lowlex): determinism, oracle 100%, a wrong
system 0, every needle mapped back exactly (chars and tokens), overlap metadata, prompts with answer prefixes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from longctx_eval import Hit, Prediction
from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.run.sampling import dataset_hash
from longctx_eval.scoring.score import score_one

VARIANTS = ("needle", "needle_multikey", "needle_multivalue", "needle_multiquery", "needle_lowlex")
LENGTHS = [512, 1024]
ARGS = {
    "needle": {"depths": 3},
    "needle_multikey": {"depths": 3},
    "needle_multivalue": {"per_length": 3, "reserve": 192},  # the test BPE spends 172 tokens on the 4 needles
    "needle_multiquery": {"per_length": 3},
    "needle_lowlex": {"depths": 3},
}


def _reserve(name):
    """The prompt reserve the module's samples of `name` were built with (the context is length - reserve)."""
    return ARGS[name].get("reserve", discover().get(name).arguments["reserve"])


def _task(name, tokenizer, **kw):
    args = {**ARGS[name], "source": "synthetic", **kw}
    return discover().get(name).build(args, lengths=LENGTHS, seed=1, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def built(bpe_tokenizer):
    """name -> (task, samples), each built once for the module."""
    out = {}
    for name in VARIANTS:
        task = _task(name, bpe_tokenizer)
        out[name] = (task, list(task.samples()))
    return out


def _needles(sample):
    """Every inserted needle of a sample as (text, start, end, token_start, token_end)."""
    g = sample.gold
    if "needles" in g:
        return [(n["text"], n["start"], n["end"], n["token_start"], n["token_end"]) for n in g["needles"]]
    return []  # the classic needle: checked through its doc in test_builders


def _primary(task, capability=None):
    return task.primary_metric(capability)


@pytest.mark.parametrize("name", VARIANTS)
def test_samples_are_deterministic_and_exact(built, bpe_tokenizer, name):
    task, samples = built[name]
    again = list(_task(name, bpe_tokenizer).samples())
    assert dataset_hash(again) == dataset_hash(samples)
    assert len({s.id for s in samples}) == len(samples)
    for s in samples:
        assert bpe_tokenizer.count(s.context) == s.metadata["context_tokens"]
        assert s.metadata["context_tokens"] == s.metadata["target_tokens"] - _reserve(name)
        enc = bpe_tokenizer.encode(s.context)
        for text, start, end, tok_start, tok_end in _needles(s):
            assert s.context[start:end] == text  # the offset index maps every needle back exactly
            assert enc.offsets[tok_end - 1][1] == end
            assert enc.offsets[tok_start][1] > start >= enc.offsets[tok_start][0] - 1
        for (start, end), value in zip(s.gold.get("spans", [s.gold.get("span")]), s.gold["answers"], strict=False):
            assert value in s.context[start:end]
        m = s.metadata
        assert m["overlap_bucket"] in ("none", "low", "high")
        assert isinstance(m["overlap_bm25"], float) and -1.0 <= m["overlap_cosine"] <= 1.0


@pytest.mark.parametrize("name", VARIANTS)
def test_oracle_scores_100_and_a_wrong_system_0(built, name):
    task, samples = built[name]
    for capability in ("generate", "retrieve"):
        metric = _primary(task, capability)
        right, wrong = [], []
        for s in samples:
            gold = task.oracle(s)
            if capability == "retrieve":
                gold = _as_retrieval(gold)
            right.append(score_one(task.scorer, s, gold))
            wrong.append(score_one(task.scorer, s, _wrong(gold, s)))
        for scores, expected in ((right, 1.0), (wrong, 0.0)):
            rows = [[sc.values[f] for f in metric.fields] for sc in scores]
            assert len(rows) == len(samples)
            assert metric.compute(rows)[0] == pytest.approx(expected), (name, capability, expected)


def _as_retrieval(pred: Prediction) -> Prediction:
    if pred.parts:
        return replace(pred, parts=tuple(_as_retrieval(p) for p in pred.parts))
    return replace(pred, text=None)


def _wrong(pred: Prediction, sample) -> Prediction:
    """A system that answers something else: another text, hits that cover no needle."""
    if pred.parts:
        return replace(pred, parts=tuple(_wrong(p, sample) for p in pred.parts))
    return replace(pred, text=None if pred.text is None else "I could not find it.", hits=(Hit(0, 3, 1.0),))


def test_classic_needle_spreads_value_kinds_over_every_length(built):
    task, samples = built["needle"]
    assert (
        discover().get("needle").version == "5"
    )  # v5: the length is the whole prompt budget (context = length - reserve)
    for length in LENGTHS:
        kinds = [s.metadata["value_kind"] for s in samples if s.metadata["target_tokens"] == length]
        assert kinds == ["number", "word", "uuid"]  # 3 depths: one of each
    req = task.requests(samples[0])[0]
    assert req.answer_prefix.startswith("The special magic number for ") and req.answer_prefix.endswith(" is")
    assert req.max_new_tokens < 32
    assert "value_kind" in task.slices and "overlap_bucket" in task.slices
    uuid_sample = next(s for s in samples if s.metadata["value_kind"] == "uuid")
    assert task.requests(uuid_sample)[0].max_new_tokens > req.max_new_tokens  # budgets follow the value


def test_multikey_reports_answers_that_name_a_distractor(built):
    task, samples = built["needle_multikey"]
    s = samples[0]
    roles = [n["role"] for n in s.gold["needles"]]
    assert roles == ["target", "distractor", "distractor", "distractor"]
    keys = [n["key"] for n in s.gold["needles"]]
    assert len(set(keys)) == 4 and keys[0].split()[1] == keys[1].split()[1] and keys[0].split()[2] == keys[2].split()[2]
    fooled = score_one(task.scorer, s, Prediction(text=f"It is {s.gold['distractors'][0]}."))
    assert fooled.values["score"] == 0.0 and fooled.values["distractor"] == 1.0
    right = task.scorer(s, Prediction(text=f" {s.gold['answers'][0]}."))
    assert right.values["score"] == 1.0 and right.values["distractor"] == 0.0 and right.parsed
    assert "distractor_rate" in [m.name for m in task.metrics]


def test_multivalue_gives_partial_credit(built):
    task, samples = built["needle_multivalue"]
    s = next(s for s in samples if s.metadata["value_kind"] == "number")
    values = s.gold["answers"]
    assert len(values) == 4 and len(set(values)) == 4
    depths = [n["depth"] for n in s.gold["needles"]]
    assert [int(d * 4) for d in depths] == [0, 1, 2, 3]  # one value in each quarter
    assert "all the special magic numbers" in s.question
    half = task.scorer(s, Prediction(text=f"{values[0]}, {values[2]} and 1234567."))
    assert half.values["score"] == 0.5 and half.values["all_found"] == 0.0
    assert half.parsed == f"{values[0]}; {values[2]}; 1234567"
    hits = (Hit(*s.gold["spans"][1], 1.0), Hit(0, 3, 0.5))
    assert task.scorer(s, Prediction(hits=hits)).values["recall@1"] == 0.25


def test_multiquery_sends_one_request_per_question_on_one_context(built):
    task, samples = built["needle_multiquery"]
    s = samples[0]
    reqs = task.requests(s)
    assert len(reqs) == 4 and [r.part for r in reqs] == [0, 1, 2, 3]
    assert len({r.context for r in reqs}) == 1 and len({r.query for r in reqs}) == 4
    prefix = reqs[0].prompt[: reqs[0].prompt.index("Question:")]
    assert all(r.prompt.startswith(prefix) for r in reqs)  # a shared prompt prefix (KV cache reuse)
    answers = [p["answers"][0] for p in s.gold["parts"]]
    parts = (Prediction(text=answers[0]), Prediction(text="no idea"), Prediction(text=answers[2]), Prediction(text=""))
    got = task.scorer(s, Prediction(parts=parts))
    assert got.values["score"] == 0.5 and got.values["empty"] == 0.25 and got.values["all_found"] == 0.0
    assert got.parsed.count(" | ") == 3


def test_lowlex_questions_share_no_content_word_with_their_needle(built):
    from data_builders.needle.lexical_overlap import shared_content_words

    task, samples = built["needle_lowlex"]
    for s in samples:
        (needle,) = s.gold["needles"]
        assert not shared_content_words(s.question, needle["text"]), (s.question, needle["text"])
        assert s.metadata["overlap_bm25"] == 0.0 and s.metadata["overlap_bucket"] == "none"
        assert s.gold["answers"] == [needle["value"]] and needle["value"] in needle["text"]
    _, magic = built["needle"]
    assert all(s.metadata["overlap_bucket"] == "high" for s in magic)


def test_oracle_run_through_the_cli_answers_every_part(tmp_path):
    """The oracle adapter routes each part of a multi-question sample; the run scores 1.0."""
    out = tmp_path / "out"
    argv = ["run", "--model", "oracle", "--tasks", "needle_multiquery", "--lengths", "512", "--limit", "2"]
    argv += ["--task-arg", "needle_multiquery.source=synthetic", "--out", str(out)]
    assert main(argv) == 0
    run = json.loads((out / "oracle" / "run.json").read_text())
    pooled = {r["metric"]: r["value"] for r in run["tasks"][0]["results"] if r["length"] is None and r["depth"] is None}
    assert pooled["score"] == 1.0 and pooled["all_found"] == 1.0
    preds = [json.loads(x) for x in (out / "oracle" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 8 and sorted({p["part"] for p in preds}) == [0, 1, 2, 3]
