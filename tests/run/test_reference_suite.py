"""The reference suite: n per cell as planned, parts of a suite, published per-sample scores that `compare` reads.

Sample counts are counted on the tasks' own generators where that is cheap (no haystack built); the parts and
the published scores are exercised on real runs of `bm25` and the oracle on small needle grids.
"""

from __future__ import annotations

import gzip
import json
import random

import pytest

from data_builders import get_source
from data_builders.cross_paragraph.grid import grid_size
from data_builders.needle.multivalue import multivalue_cells
from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.models.spec import parse_spec
from longctx_eval.run.suite import load_suite
from longctx_eval.run.suite_parts import part_names, select_parts

RETRIEVERS = ("bm25", "minilm", "hybrid", "minilm?rerank=maxsim")


@pytest.fixture(scope="module")
def reference():
    return {spec: {p.info.name: p for p in plans} for spec, plans in load_suite("reference", discover()).items()}


def _n_per_length(plan, length: int | None = None) -> int:
    """Samples per length the plan asks for at `length`, from its arguments there (the generators' own counts)."""
    args, name = {**plan.args, **plan.length_args.get(length, {})}, plan.info.name
    if name in ("needle", "needle_multikey", "needle_lowlex"):
        return args["depths"] * args["per_cell"]
    if name in ("needle_multivalue", "needle_multiquery"):
        return args["per_length"]
    if name == "retrieval":
        return 24 * args["docs_per_length"]
    raise AssertionError(name)


def test_every_retriever_cell_has_at_least_100_samples_and_50_at_1m(reference):
    for spec in RETRIEVERS:
        tasks = reference[spec]
        assert set(tasks) == {
            "needle",
            "needle_multikey",
            "needle_multivalue",
            "needle_multiquery",
            "needle_lowlex",
            "cross_paragraph",
            "retrieval",
        }
        for name, plan in tasks.items():
            assert plan.lengths == (8192, 32768, 131072, 1048576) and plan.limit is None, (spec, name)
            assert set(plan.length_args) == {1048576}, (spec, name)  # 8K-128K: the base arguments
            for n in plan.lengths:
                least = 50 if n == 1048576 else 100
                if name == "cross_paragraph":
                    per_cell = {**plan.args, **plan.length_args.get(n, {})}["per_cell"]
                    assert grid_size([n], [2, 3, 4], per_cell) >= least, (spec, n)
                else:
                    assert _n_per_length(plan, n) >= least, (spec, name, n)
            assert len(plan.groups()) == 2 and plan.groups()[0][0] == [8192, 32768, 131072]


def test_smollm2_and_rag_cells(reference):
    smol = reference["smollm2-135m"]
    assert smol["needle"].lengths == (1024, 2048, 4096) and _n_per_length(smol["needle"]) >= 100
    cross = smol["cross_paragraph"]
    assert cross.limit == 100 and all(grid_size([n], [2, 3, 4], cross.args["per_cell"]) >= 100 for n in cross.lengths)
    for name in ("needle_multikey", "needle_multivalue", "needle_multiquery", "needle_lowlex"):
        assert smol[name].lengths == (1024, 2048) and _n_per_length(smol[name]) >= 50, name
    for spec in ("rag:bm25+smollm2-135m", "rag:bm25+smollm2-135m?iterative=true&hops=2"):
        plan = reference[spec]["cross_paragraph"]
        assert plan.lengths == (32768, 131072)
        assert all(grid_size([n], [2, 3, 4], plan.args["per_cell"]) >= 100 for n in plan.lengths)
    baseline = reference["coref:baseline?tokenizer=smollm2-135m"]
    assert set(baseline) == {"coref_ontogum", "coref_litbank", "coref_synthetic", "coref_ontonotes"}
    for name in ("coref_ontogum", "coref_litbank", "coref_synthetic"):  # the LM's documents: they pair one for one
        assert (baseline[name].lengths, baseline[name].args) == (smol[name].lengths, smol[name].args), name


SPREAD_TASKS = (
    "needle",
    "needle_multikey",
    "needle_multivalue",
    "needle_multiquery",
    "needle_lowlex",
    "cross_paragraph",
)


GEMMA = {4096: (100, 20), 8192: (30, 20), 16384: (5, 4), 32768: (5, 4)}
"""Gemma 3 270M's cells, length -> (n, haystacks) at least: issue 37's n >= 100 at 4K, >= 30 at 8K, >= 5 beyond."""


def test_every_needle_and_cross_paragraph_cell_reads_at_least_20_haystacks(reference):
    """Counted on the plans (no haystack built), after the suite's limit: n as before, >= 20 distinct haystacks
    (`metadata["cluster"]`) per cell at every length, 1M included (Gemma 3 past 4K: GEMMA), and every depth of a
    depth grid present."""
    from longctx_eval.run.sampling import choose

    checked = 0
    for spec, tasks in reference.items():
        for name in SPREAD_TASKS:
            plan = tasks.get(name)
            if plan is None:
                continue
            for lengths, args in plan.groups():
                task = plan.info.build(args, lengths=lengths, seed=0, tokenizer=None)
                chosen, _ = choose(plan.info, list(task.dataset.plan()), plan.limit)
                for n in lengths:
                    cell = [p.metadata for p in chosen if p.metadata["target_tokens"] == n]
                    want_n, want_h = (50 if n == 1048576 else 100 if spec != "smollm2-135m" else 50), 20
                    if spec == "gemma3-270m":  # a slow model: the n per length, low n past 8K
                        want_n, want_h = GEMMA[n]
                    assert len(cell) >= want_n, (spec, name, n)
                    assert len({m["cluster"] for m in cell}) >= want_h, (spec, name, n)
                    if "depths" in args:
                        assert len({m["depth"] for m in cell}) == args["depths"], (spec, name, n)
                    checked += 1
    # retrievers, SmolLM2's needle and cross, its variants, RAG, Gemma 3's needle and cross
    assert checked == 4 * 6 * 4 + 3 + 3 + 4 * 2 + 2 * 2 + 2 * 4


def test_shared_haystacks_keep_each_samples_needles(minilm_tokenizer):
    """`haystacks=h`: sample i reads the haystack of rep i % h; its key, values and depths are unchanged."""
    src = get_source("synthetic")
    alone = [c.sample() for c in multivalue_cells(src, minilm_tokenizer, [512], 3, 0)]
    shared = [c.sample() for c in multivalue_cells(src, minilm_tokenizer, [512], 3, 0, haystacks=2)]

    def needles(sample):
        return [(n["text"], n["key"], n["value"]) for n in sample.gold["needles"]]

    for a, b in zip(alone, shared, strict=True):
        assert (a.id, a.question, needles(a)) == (b.id, b.question, needles(b))
    assert [s.context for s in shared[:2]] == [s.context for s in alone[:2]]  # reps 0 and 1: their own haystacks
    assert shared[2].context != alone[2].context  # sample 2 now reads rep 0's haystack
    words = [set(s.context.split()) for s in shared]
    assert len(words[0] & words[2]) > len(words[0] & words[1])


def _plans(spec_tasks: dict[str, list[str]]):
    from longctx_eval.run.config import TaskPlan

    registry = discover()
    return [(parse_spec(s), [TaskPlan(registry.get(t)) for t in ts]) for s, ts in spec_tasks.items()]


def test_parts_pick_a_model_a_task_or_a_pair():
    plans = _plans({"bm25": ["needle", "retrieval"], "minilm?rerank=maxsim": ["retrieval"]})
    assert part_names(plans) == ["bm25", "minilm-maxsim", "needle", "retrieval"]
    names = lambda ps: [(s.name, [p.info.name for p in t]) for s, t in ps]  # noqa: E731
    assert names(select_parts(plans, ["bm25"])) == [("bm25", ["needle", "retrieval"])]
    assert names(select_parts(plans, ["retrieval"])) == [("bm25", ["retrieval"]), ("minilm-maxsim", ["retrieval"])]
    assert names(select_parts(plans, ["minilm-maxsim:retrieval", "bm25:needle"])) == [
        ("bm25", ["needle"]),
        ("minilm-maxsim", ["retrieval"]),
    ]
    with pytest.raises(ConfigError, match="--part 'bm52'.*Did you mean 'bm25'"):
        select_parts(plans, ["bm52"])


def test_part_without_a_suite_and_an_unknown_part_exit_2(tmp_path, capsys):
    assert main(["run", "--model", "bm25", "--tasks", "needle", "--part", "bm25", "--out", str(tmp_path)]) == 2
    assert "give --suite too" in capsys.readouterr().err
    assert main(["run", "--suite", "reference", "--part", "nope", "--dry-run", "--out", str(tmp_path)]) == 2
    assert "not a model, task or MODEL:TASK" in capsys.readouterr().err


def test_parts_add_up_and_published_scores_pair_with_compare(tmp_path, capsys):
    """Two parts of a small suite into one folder, published with --per-sample, then compared from the board."""
    suite = tmp_path / "small.toml"
    suite.write_text(
        "[bm25]\nneedle = { lengths = [512], args = { depths = 3 } }\nretrieval = { lengths = [1024] }\n"
        '["bm25?k1=0.5&name=bm25-k05"]\nneedle = { lengths = [512], args = { depths = 3 } }\n'
    )
    out, board = tmp_path / "runs", tmp_path / "board"
    assert main(["run", "--suite", str(suite), "--part", "bm25:needle,bm25-k05", "--out", str(out)]) == 0
    run = json.loads((out / "bm25" / "run.json").read_text())
    assert [t["name"] for t in run["tasks"]] == ["needle"]
    assert main(["run", "--suite", str(suite), "--part", "retrieval", "--out", str(out)]) == 0
    run = json.loads((out / "bm25" / "run.json").read_text())
    assert sorted(t["name"] for t in run["tasks"]) == ["needle", "retrieval"]  # the second part added its task
    capsys.readouterr()
    assert main(["leaderboard", str(out), "--out", str(board), "--per-sample"]) == 0
    published = board / "per-sample" / "bm25"
    for kind in ("samples", "scores"):
        for task in ("needle", "retrieval"):
            packed = published / kind / f"{task}.jsonl.gz"
            assert gzip.decompress(packed.read_bytes()) == (out / "bm25" / kind / f"{task}.jsonl").read_bytes()
            assert packed.read_bytes()[4:8] == b"\0\0\0\0"  # no time stamp: the same scores, the same bytes
    assert not list(published.glob("*/*.jsonl"))  # only the compressed copies
    # compare reads the published copy as a run folder, against the live one and against the oracle's.
    same = tmp_path / "same.json"
    assert main(["compare", str(published), str(out / "bm25"), "--task", "needle", "--json", str(same)]) == 0
    (row,) = json.loads(same.read_text())["tasks"]
    assert row["pairs"] == 3 and row["refused"] == {} and row["rows"][-1]["difference"] == 0.0
    against = tmp_path / "against.json"
    assert main(["compare", str(published), str(board / "per-sample" / "bm25-k05"), "--json", str(against)]) == 0
    (row,) = json.loads(against.read_text())["tasks"]  # retrieval: only bm25 ran it (skipped, said)
    assert row["task"] == "needle" and row["pairs"] == 3 and row["refused"] == {}


def test_a_part_run_elsewhere_adds_to_the_published_copy(tmp_path, capsys):
    """A model's parts run into two folders (two machines or days): publishing the second keeps the first's tasks
    in the copy, so a board built from the per-sample copies alone still shows both (it once lost the first)."""
    suite = tmp_path / "small.toml"
    suite.write_text("[bm25]\nneedle = { lengths = [512], args = { depths = 3 } }\nretrieval = { lengths = [1024] }\n")
    first, second, board = tmp_path / "night", tmp_path / "day", tmp_path / "board"
    assert main(["run", "--suite", str(suite), "--part", "needle", "--out", str(first)]) == 0
    assert main(["leaderboard", str(first), "--out", str(board), "--per-sample"]) == 0
    assert main(["run", "--suite", str(suite), "--part", "retrieval", "--out", str(second)]) == 0
    copies = board / "per-sample"
    assert main(["leaderboard", str(second), str(copies), "--out", str(board), "--per-sample"]) == 0
    published = json.loads((copies / "bm25" / "run.json").read_text())
    assert [t["name"] for t in published["tasks"]] == ["retrieval", "needle"]
    assert published["started"] == json.loads((second / "bm25" / "run.json").read_text())["started"]
    for task in ("needle", "retrieval"):
        assert (copies / "bm25" / "scores" / f"{task}.jsonl.gz").is_file()
    again = tmp_path / "again"
    capsys.readouterr()
    assert main(["leaderboard", str(copies), "--out", str(again)]) == 0
    board_json = json.loads((again / "leaderboard.json").read_text())
    assert "needle" in json.dumps(board_json) and "retrieval" in json.dumps(board_json)
    text = (again / "LEADERBOARD.md").read_text()
    assert "## needle" in text and "## retrieval" in text


def test_a_corrupt_published_file_is_no_scores(tmp_path):
    from longctx_eval.scoring.paired_scores import sample_scores

    folder = tmp_path / "bm25"
    (folder / "samples").mkdir(parents=True)
    (folder / "scores").mkdir()
    (folder / "samples" / "needle.jsonl.gz").write_bytes(random.Random(0).randbytes(64))
    (folder / "scores" / "needle.jsonl.gz").write_bytes(gzip.compress(b"{}\n")[:-6])
    assert sample_scores(folder, "needle") == {}


@pytest.mark.slow
def test_every_smollm2_and_rag_cell_builds_with_its_planned_n(reference):
    """Build (not count) the samples of every SmolLM2 and RAG plan in SmolLM2's tokenizer, as `run` does: the
    4K cross_paragraph cells once stopped with a DataError that counting could not see (10.4 min beside a run)."""
    from longctx_eval.models.model_source import hf_tokenizer_pair
    from longctx_eval.run.plan_samples import plan_samples

    _, tokenizer = hf_tokenizer_pair(parse_spec("smollm2-135m"))
    for spec in ("smollm2-135m", "rag:bm25+smollm2-135m"):
        for name, plan in reference[spec].items():
            if name.startswith("coref"):
                continue
            built = plan_samples(plan, 0, tokenizer)
            per_length = {n: sum(s.metadata["target_tokens"] == n for s in built.samples) for n in plan.lengths}
            least = 100 if spec != "smollm2-135m" or name in ("needle", "cross_paragraph") else 50
            assert min(per_length.values()) >= least, (spec, name, per_length)


def test_gemma3_reads_coreference_to_its_window(reference):
    """Issue 37's coref cells: 100 synthetic narratives at 4K and a few to 32K (low n, shown as such), LitBank and
    OntoGUM as SmolLM2's, MRCR-style at 4K (102) and 16K/32K (6 each)."""
    gemma, smol = reference["gemma3-270m"], reference["smollm2-135m"]
    synthetic = gemma["coref_synthetic"]
    per_length = {n: {**synthetic.args, **synthetic.length_args.get(n, {})}["per_length"] for n in synthetic.lengths}
    assert per_length == {4096: 100, 8192: 20, 16384: 5, 32768: 5}
    for name in ("coref_litbank", "coref_ontogum"):
        assert (gemma[name].lengths, gemma[name].args) == (smol[name].lengths, smol[name].args), name
    baseline = reference["coref:baseline?tokenizer=gemma3-270m&name=coref-baseline-gemma3"]
    for name, plan in baseline.items():  # Gemma's documents: they pair one for one
        assert (plan.lengths, plan.args, plan.length_args) == (
            gemma[name].lengths,
            gemma[name].args,
            gemma[name].length_args,
        )
    assert set(baseline) == {"coref_synthetic", "coref_litbank", "coref_ontogum"}
    mrcr = gemma["mrcr"]
    conversations = {n: {**mrcr.args, **mrcr.length_args.get(n, {})}["per_cell"] for n in mrcr.lengths}
    assert conversations == {4096: 34, 16384: 2, 32768: 2}  # 3 questions each (2, 4 and 8 look-alikes)
