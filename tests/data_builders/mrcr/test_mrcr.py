"""The MRCR-style task and its builder: conversations built to the whole-prompt budget in SmolLM2's chat-rendered
tokens, gold read back from the transcript alone, OpenAI MRCR's grade, the parquet export, and runs end to end."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher

import datasets
import pytest
from transformers import AutoTokenizer

from data_builders import get_source
from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from data_builders.mrcr.builder import ROW_FEATURES
from data_builders.mrcr.grading import mrcr_grade
from data_builders.mrcr.grid import DEFAULT_ANSWER_TOKENS, DEFAULT_RESERVE, PROMPT_TEMPLATE, mrcr_cells, row_sample
from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.models.assets import load_tokenizer, minilm_path, smollm2_dir
from longctx_eval.models.hf.adapter import render_ids
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.sample_cache import SampleCache
from longctx_eval.run.sampling import choose_samples
from longctx_eval.sample import Prediction
from longctx_eval.text.tokenizer import Tokenizer

LENGTHS = [2048, 4096]
QUESTION = re.compile(
    r"Prepend ([A-Za-z0-9]{10}) to the (\d+)(?:st|nd|rd|th) \(1 indexed\) (.+)\. "
    r"Do not include any other text in your response\."
)


@pytest.fixture(scope="module")
def smol() -> Tokenizer:
    return load_tokenizer("smollm2-135m")


def _task(**kwargs):
    return discover().get("mrcr").factory(**{"source": "synthetic", **kwargs})


@pytest.fixture(scope="module")
def samples(smol):
    """Two conversations per length at 2K and 4K on the synthetic narrative: 12 questions."""
    return list(_task(lengths=LENGTHS, tokenizer=smol, per_cell=2).samples())


@pytest.fixture(scope="module")
def task():
    return _task(lengths=LENGTHS)


def _turns(context: str) -> list[tuple[str, str]]:
    """(request, answer) pairs parsed back from a transcript, independently of the builder's records."""
    pairs = []
    for block in context.split("\n\nUser: "):
        request, _, answer = block.removeprefix("User: ").partition("\n\nAssistant: ")
        pairs.append((request, answer))
    return pairs


def test_grid_asks_each_lookalike_group_of_each_conversation(samples):
    assert len(samples) == 12 and len({s.id for s in samples}) == 12
    by_conversation: dict[str, list] = {}
    for s in samples:
        by_conversation.setdefault(s.metadata["cluster"], []).append(s)
    assert len(by_conversation) == 4  # 2 lengths x 2 repetitions
    for group in by_conversation.values():
        assert sorted(s.metadata["needles"] for s in group) == [2, 4, 8] and len({s.context for s in group}) == 1
    for n in (2, 4, 8):  # positions cycle over the repetitions: two different ones per length
        for length in LENGTHS:
            got = {
                s.metadata["position"]
                for s in samples
                if s.metadata["needles"] == n and s.metadata["target_tokens"] == length
            }
            assert len(got) == 2 and got <= set(range(1, n + 1))


@pytest.mark.parametrize("limit", [1, 3, 4])
def test_a_limited_plan_builds_exactly_what_the_whole_grid_would(samples, smol, limit):
    """`--limit` applies to the plan and spreads over the look-alike counts; the chosen samples are built exactly
    as the whole grid builds them (only their conversations)."""
    info, args = discover().get("mrcr"), {"per_cell": 2, "source": "synthetic"}
    got = plan_samples(TaskPlan(info, tuple(LENGTHS), limit, args), 0, smol, SampleCache(None, 0)).samples
    assert got == choose_samples(info, samples, limit).samples
    for length in LENGTHS:  # a limit of 3 or more per length asks every look-alike count
        counts = {s.metadata["needles"] for s in got if s.metadata["target_tokens"] == length}
        assert len(counts) == min(limit, 3)


def test_gold_is_the_ith_answer_to_the_repeated_request_in_the_transcript(samples):
    for s in samples:
        prefix, position, obj = QUESTION.fullmatch(s.question).groups()
        turns = _turns(s.context)
        assert len(turns) == s.metadata["turns"]
        form_topic = f"Write {'an' if obj[0] in 'aeiou' else 'a'} {obj}."
        answers = [a for r, a in turns if r == form_topic]
        assert len(answers) == s.metadata["needles"]  # exactly n look-alikes; no distractor has their request
        assert s.gold["answers"] == [prefix + answers[int(position) - 1]] and s.gold["prefix"] == prefix
        assert s.gold["lookalikes"] == answers
        assert len({a for _, a in turns}) == len(turns)  # every answer distinct
        form, topic = obj.split(" about ")
        near = [r for r, _ in turns if r != form_topic and (f" {form} about " in r or r.endswith(f" about {topic}."))]
        assert near  # hard distractors: the same form or the same topic
        assert (
            int(position) == s.metadata["position"] and answers[int(position) - 1].strip() == answers[int(position) - 1]
        )


def test_same_seed_same_samples_other_seed_other(samples, smol):
    again = list(_task(lengths=LENGTHS, tokenizer=smol, per_cell=2).samples())
    assert again == samples
    other = list(_task(lengths=[2048], tokenizer=smol, per_cell=2, seed=1).samples())
    assert {s.context for s in other}.isdisjoint({s.context for s in samples})
    alone = list(_task(lengths=[4096], tokenizer=smol, per_cell=2).samples())  # a length never depends on the others
    assert alone == [s for s in samples if s.metadata["target_tokens"] == 4096]


@pytest.mark.parametrize(
    ("name", "folder", "chat"), [("smollm2-135m", smollm2_dir, True), ("minilm", minilm_path, False)]
)
def test_whole_prompt_and_budget_fit_the_length(samples, task, name, folder, chat):
    """The transcript is at most L - reserve tokens (and fills it to within one turn); the prompt as the hf adapter
    renders it (SmolLM2's chat template; MiniLM as plain text) plus the generation budget is at most L."""
    tok, hf_tok = load_tokenizer(name), AutoTokenizer.from_pretrained(str(folder()))
    if name != "smollm2-135m":  # the module's samples are SmolLM2's; MiniLM's own, one conversation per length
        samples = list(_task(lengths=LENGTHS, tokenizer=tok).samples())
    for s in samples:
        length = s.metadata["target_tokens"]
        assert s.metadata["context_tokens"] == tok.count(s.context) and s.metadata["tokenizer"] == name
        budget = length - DEFAULT_RESERVE
        assert budget - DEFAULT_ANSWER_TOKENS - 40 <= s.metadata["context_tokens"] <= budget
        request = task.prompt(s)
        assert request.prompt.count(s.context) == 1 and request.max_new_tokens == s.metadata["max_new_tokens"]
        assert len(render_ids(hf_tok, chat, request)) + request.max_new_tokens <= length, s.id
        assert tok.count(s.gold["answers"][0]) < request.max_new_tokens


def _pred(text):
    return Prediction(text=text)


def test_scores_follow_mrcr_and_the_diagnostics(samples, task):
    s = next(x for x in samples if x.metadata["needles"] == 4)
    prefix, gold, others = s.gold["prefix"], s.gold["answers"][0], s.gold["lookalikes"]
    oracle = task.scorer(s, _pred(gold)).values
    assert oracle == {"mrcr_ratio": 1.0, "prefix_ok": 1.0, "exact": 1.0, "content_ratio": 1.0, "other_instance": 0.0}
    assert task.scorer(s, _pred("\n " + gold + "\n")).values["exact"] == 1.0  # surrounding whitespace is stripped
    no_prefix = task.scorer(s, _pred(s.gold["answer"])).values
    assert no_prefix["mrcr_ratio"] == 0.0 and no_prefix["prefix_ok"] == 0.0 and no_prefix["content_ratio"] == 1.0
    wrong = others[s.metadata["position"] % 4]  # another look-alike's answer, correctly prefixed
    swapped = task.scorer(s, _pred(prefix + wrong)).values
    assert swapped["other_instance"] == 1.0 and swapped["prefix_ok"] == 1.0 and swapped["mrcr_ratio"] < 1.0
    assert swapped["mrcr_ratio"] == SequenceMatcher(None, wrong, s.gold["answer"]).ratio()
    for empty in (_pred(""), Prediction(text=None, status="over_length")):
        assert task.scorer(s, empty).values == {
            "mrcr_ratio": 0.0,
            "prefix_ok": 0.0,
            "exact": 0.0,
            "content_ratio": 0.0,
            "other_instance": 0.0,
        }


def _openai_grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The grader of the openai/mrcr dataset card, as published."""
    if not response.startswith(random_string_to_prepend):
        return 0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


@pytest.mark.parametrize(
    "response", ["aYooSG8CQgThe poem.", "aYooSG8CQg The poem", "The poem.", "aYooSG8CQg", "aYooSG8CQgA poem, twice."]
)
def test_grade_is_openais(response):
    assert mrcr_grade(response, "aYooSG8CQgThe poem.", "aYooSG8CQg") == _openai_grade(
        response, "aYooSG8CQgThe poem.", "aYooSG8CQg"
    )


def test_task_declares_slices_clusters_and_metrics(task):
    assert task.slices == ("needles", "position", "depth_bucket") and task.cluster_noun == "conversations"
    assert [m.name for m in task.metrics] == [
        "mrcr_ratio",
        "prefix_ok_rate",
        "exact_rate",
        "content_ratio",
        "other_instance_rate",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"needles": "2,2"}, "mrcr.needles='2,2': expected distinct look-alike counts"),
        ({"needles": "0"}, "mrcr.needles='0'"),
        ({"lengths": [600]}, "length 600: .*expected a length of at least 768"),
        ({"lengths": [1024]}, "length 1024: a conversation of 768 tokens holds 14 look-alike turns"),
        ({"reserve": 100}, "expected a `reserve` of at least"),
    ],
)
def test_bad_arguments_are_named(smol, args, message):
    with pytest.raises(ConfigError, match=message):
        list(_task(**{"lengths": [2048], "tokenizer": smol, **args}).samples())


def test_built_rows_are_the_task_samples_and_load_with_datasets(smol, tmp_path):
    config = BuildConfig(lengths=(2048,), per_cell=2, seed=3, source="synthetic", options={"needles": "2,4"})
    report = build_dataset("mrcr", config, tmp_path / "ds", smol)
    assert [e.name for e in report.configs] == ["mrcr_2048"]
    assert "## Scoring" in report.card and "SequenceMatcher" in report.card
    files = str(report.out / "data" / "mrcr_2048.parquet")
    rows = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "c"))
    assert rows.features == ROW_FEATURES and len(rows) == 4
    again = datasets.load_dataset(str(report.out), "mrcr_2048", split="test", cache_dir=str(tmp_path / "c"))
    assert again["id"] == rows["id"]
    task = _task(lengths=[2048], seed=3, tokenizer=smol, needles="2,4", per_cell=2)
    samples = list(task.samples())
    src = get_source("synthetic")
    meta = {"source": src.name, "source_sha256": src.sha256, "tokenizer": smol.name}
    for sample, row in zip(samples, rows, strict=True):
        assert row_sample(row, **meta) == sample
        assert row["prompt"] == PROMPT_TEMPLATE.format(**row) == task.prompt(sample).prompt
        messages = row["messages"]  # OpenAI MRCR's shape: alternating turns, the question last
        assert [m["role"] for m in messages] == ["user", "assistant"] * row["turns"] + ["user"]
        assert messages[-1]["content"] == row["question"] and row["total_messages"] == len(messages)
        assert row["random_string_to_prepend"] + messages[row["desired_msg_index"]]["content"] == row["answer"]
        assert [messages[i]["content"] for i in row["lookalike_msg_indices"]] == row["lookalike_answers"]
    cells = mrcr_cells(src, smol, [2048], (2, 4), 2, 3, DEFAULT_RESERVE, DEFAULT_ANSWER_TOKENS)
    assert [c.row() for c in cells] == list(rows)


def test_oracle_runs_end_to_end_and_validates(tmp_path):
    args = ["run", "--model", "oracle", "--tasks", "mrcr", "--lengths", "2048", "--limit", "3", "--out", str(tmp_path)]
    assert main([*args, "--task-arg", "mrcr.source=synthetic"]) == 0
    entry = json.loads((tmp_path / "oracle" / "run.json").read_text())["tasks"][0]
    pooled = {r["metric"]: r["value"] for r in entry["results"] if r["length"] is None}
    assert pooled["mrcr_ratio"] == 1.0 and pooled["prefix_ok_rate"] == 1.0 and entry["n_samples"] == 3
    sliced = {tuple(r["slice"].items()) for r in entry["slices"] if r["metric"] == "mrcr_ratio" and r["length"] is None}
    assert {(("needles", 2),), (("needles", 4),), (("needles", 8),)} <= sliced
    assert main(["validate-task", "mrcr", "--lengths", "2048", "--task-arg", "mrcr.source=synthetic"]) == 0


@pytest.mark.slow
def test_smollm2_answers_a_2k_question_within_the_length(tmp_path):
    """A real SmolLM2 run of one question at 2K: sent whole (never over its window), scored, its prompt + budget
    within 2048 as the adapter measured it."""
    args = ["run", "--model", "smollm2-135m", "--tasks", "mrcr", "--lengths", "2048", "--limit", "1"]
    assert main([*args, "--task-arg", "mrcr.source=synthetic", "--out", str(tmp_path)]) == 0
    pred = json.loads((tmp_path / "smollm2-135m" / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["status"] == "ok" and pred["text"] is not None
    assert pred["prompt_tokens"] + pred["max_new_tokens"] <= 2048
    entry = json.loads((tmp_path / "smollm2-135m" / "run.json").read_text())["tasks"][0]
    assert {r["metric"] for r in entry["results"]} >= {"mrcr_ratio", "prefix_ok_rate", "content_ratio"}
