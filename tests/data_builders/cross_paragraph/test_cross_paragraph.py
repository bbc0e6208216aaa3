"""The cross_paragraph task: fact chains, exact spans and distances, same vs cross placement, scoring, runs."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import replace

import datasets
import pytest

from data_builders import get_source
from data_builders.cross_paragraph.builder import ROW_FEATURES
from data_builders.cross_paragraph.facts import RELATIONS, Fact, check_unambiguous, make_chain, resolve
from data_builders.cross_paragraph.grid import MAX_NEW_TOKENS, PROMPT_TEMPLATE, cross_cells, distances_for, row_sample
from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.metrics.aggregate import mean
from longctx_eval.models.assets import load_tokenizer
from longctx_eval.run.sampling import build_samples
from longctx_eval.sample import Hit, Prediction, Request, Score
from longctx_eval.task import Task
from longctx_eval.text.tokenizer import Tokenizer

LENGTHS = [1024, 2048]


@pytest.fixture(scope="module")
def smol() -> Tokenizer:
    return load_tokenizer("smollm2-135m")


def _task(**kwargs):
    return discover().get("cross_paragraph").factory(**kwargs)


@pytest.fixture(scope="module")
def samples(smol):
    """The default grid at 1K and 2K on the austen haystack, in SmolLM2's tokens (18 samples)."""
    return list(_task(lengths=LENGTHS, tokenizer=smol).samples())


@pytest.fixture(scope="module")
def task():
    return _task(lengths=LENGTHS)


def task_prompt(sample) -> Request:
    return Request(sample.id, "", "", "")


def task_score(sample, prediction) -> Score:
    return Score({"x": 0.0})


def _by_pair(samples):
    pairs: dict[str, dict] = {}
    for s in samples:
        pairs.setdefault(s.metadata["pair"], {})[s.metadata["placement"]] = s
    return pairs


def test_grid_covers_hops_placements_and_fitting_distances(samples):
    assert distances_for(1024, 4) == [128] and distances_for(2048, 4) == [128, 256]
    assert distances_for(8192, 4) == [128, 256, 512, 1024]
    cells = {(s.metadata["target_tokens"], s.metadata["hops"], s.metadata["target_distance"]) for s in samples}
    assert cells == {(n, h, d) for n in LENGTHS for h in (2, 3, 4) for d in distances_for(n, 4)}
    assert all(len(p) == 2 for p in _by_pair(samples).values())  # every cross sample has its control
    assert {s.metadata["distance_bucket"] for s in samples if s.metadata["placement"] == "same"} == {0}
    assert len({s.metadata["stratum"] for s in samples if s.metadata["target_tokens"] == 2048}) == 12
    assert len({s.id for s in samples}) == len(samples)


@pytest.mark.parametrize("limit", [1, 2, 4, 6, 8, 12])
def test_limit_keeps_cross_samples_with_their_controls(samples, limit):
    """`--limit` spreads over hops x distance x placement and picks a cross cell together with its control."""
    info = discover().get("cross_paragraph")
    chosen = build_samples(info, Task(samples, task_prompt, task_score, [mean("x")]), limit).samples
    for length in LENGTHS:
        picked = [s for s in chosen if s.metadata["target_tokens"] == length]
        assert len(picked) == min(limit, sum(s.metadata["target_tokens"] == length for s in samples))
        cells = {
            p: {(s.metadata["hops"], s.metadata["target_distance"]) for s in picked if s.metadata["placement"] == p}
            for p in ("same", "cross")
        }
        if len(picked) > 1:
            assert cells["same"] == cells["cross"]


def test_same_seed_same_samples_other_seed_other(samples, smol):
    again = list(_task(lengths=LENGTHS, tokenizer=smol).samples())
    assert again == samples
    other = list(_task(lengths=[1024], tokenizer=smol, seed=1).samples())
    assert [s.context for s in other] != [s.context for s in samples[: len(other)]]


def test_every_fact_maps_back_exactly_in_chars_and_tokens(samples, smol):
    for s in samples:
        enc = smol.encode(s.context)
        n = s.metadata["context_tokens"]
        assert len(enc.ids) == n == s.metadata["target_tokens"] - 192
        starts = [a for a, _ in enc.offsets]
        ends = [b for _, b in enc.offsets]
        for (cs, ce), (ts, te), sentence, depth in zip(
            s.gold["facts"], s.gold["fact_tokens"], s.gold["fact_sentences"], s.metadata["fact_depths"], strict=True
        ):
            assert s.context[cs:ce] == sentence
            # token ts is the first token ending inside the fact; te the first starting at or after its end
            assert ends[ts] > cs and (ts == 0 or ends[ts - 1] <= cs)
            assert starts[te - 1] < ce and (te == n or starts[te] >= ce)
            assert smol.decode(enc.ids[ts:te]).strip().endswith(sentence[-12:])
            assert depth == round(ts / n, 4)


def test_recorded_distances_are_the_measured_ones(samples):
    errors = []
    for s in samples:
        m, tokens = s.metadata, s.gold["fact_tokens"]
        gaps = [b[0] - a[1] for a, b in zip(tokens, tokens[1:], strict=False)]
        assert m["gaps"] == gaps and m["first_to_last"] == tokens[-1][0] - tokens[0][1]
        assert len(tokens) == m["hops"]
        if m["placement"] == "cross":
            assert m["distance_bucket"] == m["target_distance"]
            errors += [abs(g - m["target_distance"]) for g in gaps]
            assert all(abs(g - m["target_distance"]) <= m["target_distance"] // 2 for g in gaps), (s.id, gaps)
    assert statistics.mean(errors) <= 12  # consecutive facts land within a sentence of the target distance


def test_same_facts_share_one_paragraph_cross_facts_do_not(samples):
    for pair in _by_pair(samples).values():
        same, cross = pair["same"], pair["cross"]
        assert len(set(same.metadata["fact_paragraphs"])) == 1
        assert sorted(set(cross.metadata["fact_paragraphs"])) == cross.metadata["fact_paragraphs"]
        assert len(set(cross.metadata["fact_paragraphs"])) == cross.metadata["hops"]
        for s in (same, cross):  # the recorded paragraph is the blank-line separated one of the context
            starts = [a for a, _ in s.gold["facts"]]
            assert [s.context.count("\n\n", 0, a) for a in starts] == s.metadata["fact_paragraphs"]
        facts = same.gold["facts"]
        assert all(same.context[a[1] : b[0]] == " " for a, b in zip(facts, facts[1:], strict=False))  # adjacent
        # the control sits where the cross chain starts, on the same haystack with the same distractors
        assert same.gold["facts"][0] == cross.gold["facts"][0]
        assert same.metadata["first_depth"] == cross.metadata["first_depth"]
        assert same.question == cross.question and same.gold["answers"] == cross.gold["answers"]
        a, b = sorted((_without_facts(same), _without_facts(cross)), key=len)
        assert b.startswith(a[: len(a) - 64])  # haystack and distractors identical (the cut may differ a little)


def _without_facts(sample) -> str:
    """The context with the chain's facts (and each one's joining space) taken out."""
    text = sample.context
    for start, end in sorted(sample.gold["facts"], reverse=True):
        text = text[: start - 1] + text[end:] if start else text[end + 1 :]
    return text


def test_answer_is_unique_given_the_document(samples):
    for s in samples:
        person = s.gold["person"]
        assert person in s.question and s.context.count(person) == 1  # only in the chain's first fact
        fact_text = " ".join(s.context[a:b] for a, b in s.gold["facts"])
        for name in [s.gold["answers"][0], *s.gold["intermediates"]]:
            assert s.context.count(name) == fact_text.count(name) >= 1  # named only by the chain's facts
        assert not any(n in s.question for n in [s.gold["answers"][0], *s.gold["intermediates"]])
        first, *_ = s.gold["distractor_spans"]  # the look-alike person's first fact: "Dalia Farrow works for ..."
        look_alike = s.context[first[0] : first[1]].split(" ")[:2]
        assert look_alike[0] == person.split(" ")[0] and " ".join(look_alike) != person
        assert sum(a != b for a, b in zip(look_alike[1], person.split(" ")[1], strict=True)) == 1


def test_a_distractor_that_makes_the_answer_ambiguous_is_refused():
    for hops in (2, 3, 4):
        for seed in range(30):
            chain = make_chain(random.Random(seed), hops)
            reached = resolve((*chain.facts, *chain.distractors), chain.person, RELATIONS[:hops])
            assert all(len(r) == 1 for r in reached)
    chain = make_chain(random.Random(0), 2)
    second_job = Fact(f"{chain.person} works for Elsewhere Holdings.", chain.person, "member", "Elsewhere Holdings")
    with pytest.raises(DataError, match="hop 1 reaches"):
        check_unambiguous(replace(chain, distractors=(*chain.distractors, second_job)))
    other_city = Fact("x", chain.intermediates[0], "located", chain.distractor_entities[-1])
    with pytest.raises(DataError, match="hop 2 reaches"):
        check_unambiguous(replace(chain, distractors=(*chain.distractors, other_city)))


def _wrong(sample) -> Prediction:
    """A deliberately wrong system: names the first intermediate entity; retrieves only distractor sentences."""
    hits = tuple(Hit(a, b, 1.0) for a, b in sample.gold["distractor_spans"])
    return Prediction(text=sample.gold["intermediates"][0], hits=hits)


def test_oracle_scores_100_and_a_wrong_system_0(samples, task):
    for s in samples:
        gold = task.scorer(s, task.oracle(s)).values
        assert gold["score"] == gold["exact"] == 1.0 and gold["intermediate"] == gold["empty"] == 0.0
        bucket = f"recall_d{s.metadata['distance_bucket']}"
        assert gold[bucket] == 1.0
        hits = task.scorer(s, replace(task.oracle(s), text=None)).values
        assert all(hits[f"{m}@{k}"] == 1.0 for m in ("all_facts", "fact_recall") for k in (1, 3, 5, 10))
        bad = task.scorer(s, _wrong(s)).values
        assert bad["score"] == bad["exact"] == bad[bucket] == 0.0 and bad["intermediate"] == 1.0
        bad = task.scorer(s, replace(_wrong(s), text=None)).values
        assert all(bad[f"{m}@{k}"] == 0.0 for m in ("all_facts", "fact_recall") for k in (1, 3, 5, 10))
        assert task.scorer(s, Prediction(text="", status="ok")).values["empty"] == 1.0


def test_replies_are_parsed_and_diagnosed(samples, task):
    s = next(x for x in samples if x.metadata["hops"] == 3)
    answer, city = s.gold["answers"][0], s.gold["intermediates"][1]
    score = task.scorer(s, Prediction(text=f" {answer}, a region in the north.\nMore text."))
    assert score.values["score"] == score.values["exact"] == 1.0 and score.parsed == answer.lower()
    score = task.scorer(s, Prediction(text=f" the region around {answer}"))
    assert score.values["score"] == 1.0 and score.values["exact"] == 0.0
    assert task.scorer(s, Prediction(text=f" {city}.")).values["intermediate"] == 1.0
    assert task.scorer(s, Prediction(text=f" {s.gold['distractor_answers'][0]}.")).values["distractor"] == 1.0
    assert task.scorer(s, Prediction(text=f" {city} in {answer}.")).values["intermediate"] == 0.0


def test_task_declares_slices_contrast_curve_and_prompt(samples, task):
    assert tuple(task.slices) == ("hops", "distance_bucket", "placement")
    drop = task.contrasts[0]
    assert (drop.name, drop.metric, drop.key, drop.a, drop.b) == (
        "cross_paragraph_drop",
        "score",
        "placement",
        "same",
        "cross",
    )
    assert task.primary == {"retrieve": "all_facts@5"} and task.metrics[0].name == "score"
    assert task.curves[0].x == (0.0, 128.0, 256.0)
    req = task.prompt(samples[0])
    assert req.prompt == PROMPT_TEMPLATE.format(context=samples[0].context, question=samples[0].question)
    assert req.answer_prefix == samples[0].metadata["answer_prefix"] and req.max_new_tokens == MAX_NEW_TOKENS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"hops": "2,5"}, "hops: expected an integer from 2 to 4"),
        ({"distances": "a lot"}, "comma-separated integers"),
        ({"lengths": [300]}, "expected a length of at least 448"),
    ],
)
def test_bad_arguments_are_named(smol, args, message):
    with pytest.raises(ConfigError, match=message):
        list(_task(**{"lengths": [1024], "tokenizer": smol, **args}).samples())


def test_built_rows_are_the_task_samples_and_load_with_datasets(smol, tmp_path):
    config = BuildConfig(lengths=(1024,), per_cell=2, seed=3, source="synthetic", options={"hops": "2,3"})
    report = build_dataset("cross_paragraph", config, tmp_path / "ds", smol)
    assert [e.name for e in report.configs] == ["cross_paragraph_1024"]
    assert "## Scoring" in report.card and "all_facts@k" in report.card and "answer_prefix" in report.card
    files = str(report.out / "data" / "cross_paragraph_1024.parquet")
    rows = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "c"))
    assert rows.features == ROW_FEATURES
    again = datasets.load_dataset(str(report.out), "cross_paragraph_1024", split="test", cache_dir=str(tmp_path / "c"))
    assert again["id"] == rows["id"]
    task = _task(lengths=[1024], seed=3, tokenizer=smol, hops="2,3", per_cell=2, source="synthetic")
    samples = list(task.samples())
    assert [s.id for s in samples] == rows["id"] and len(
        samples
    ) == 2 * 2 * 2 * 2  # reps x distances x hops x placement
    src = get_source("synthetic")
    meta = {"source": src.name, "source_sha256": src.sha256, "tokenizer": smol.name}
    for sample, row in zip(samples, rows, strict=True):
        assert row_sample(row, **meta) == sample
        assert PROMPT_TEMPLATE.format(**row) == task.prompt(sample).prompt
    cells = list(cross_cells(src, smol, [1024], (2, 3), 2, 3))
    assert [c.row() for c in cells] == list(rows)


def _run(out, model, length, limit):
    args = ["run", "--model", model, "--tasks", "cross_paragraph", "--lengths", str(length), "--out", str(out)]
    assert main([*args, "--limit", str(limit)]) == 0
    return json.loads((out / model / "run.json").read_text())["tasks"][0]


def test_oracle_and_bm25_run_end_to_end(tmp_path):
    oracle = _run(tmp_path, "oracle", 1024, 6)
    pooled = {r["metric"]: r["value"] for r in oracle["results"] if r["length"] is None}
    assert pooled["score"] == 1.0 and pooled["exact"] == 1.0 and oracle["n_samples"] == 6
    bm25 = _run(tmp_path, "bm25", 1024, 2)
    assert bm25["capability"] == "retrieve" and bm25["n_samples"] == 2
    pooled = {r["metric"]: r["value"] for r in bm25["results"] if r["length"] is None}
    assert {"all_facts@5", "fact_recall@10"} <= set(pooled) and "score" not in pooled
    assert 0.0 <= pooled["all_facts@5"] <= pooled["fact_recall@5"] <= 1.0
    samples = [
        json.loads(x) for x in (tmp_path / "bm25" / "samples" / "cross_paragraph.jsonl").read_text().split("\n") if x
    ]
    assert {s["metadata"]["placement"] for s in samples} == {"same", "cross"}  # --limit spreads over placements


def test_smollm2_answers_a_2k_sample_and_fits_its_window_at_8k(tmp_path, smol):
    run = _run(tmp_path, "smollm2-135m", 2048, 1)
    pred = json.loads((tmp_path / "smollm2-135m" / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["status"] == "ok" and pred["text"] is not None and pred["prompt_tokens"] <= 2048 - MAX_NEW_TOKENS
    assert {r["metric"] for r in run["results"]} >= {"score", "exact", "intermediate_rate", "distractor_rate"}
    # At 8K the longest question still fits SmolLM2's 8192-token window with the generation budget.
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    model = load_model(parse_spec("smollm2-135m"))
    task = _task(lengths=[8192], tokenizer=smol, hops="4", distances="1024")
    longest = max((task.prompt(s) for s in task.samples()), key=lambda r: len(r.prompt))
    assert model.prompt_tokens(longest) + MAX_NEW_TOKENS <= model.meta.context_window == 8192
