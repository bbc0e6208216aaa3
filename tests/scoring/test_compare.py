"""`longctx-eval compare RUN_A RUN_B` end to end on real run folders.

bm25 and the oracle run retrieval (2K, 8K, synthetic source); a third bm25 run reads another haystack source
(same sample ids, other contexts: every pair refused); a copy of bm25's folder claims other haystacks for its
8K samples and another question for one 2K sample (those pairs refused, the rest paired).
Every number `compare` prints is recomputed here from the folders' own scores files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from compare_cli import compare_cli as _compare  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.scoring.paired_scores import REFUSED_CONTEXT, REFUSED_DESIGN
from longctx_eval.scoring.paired_tests import holm, sign_flip

RUN = ["--lengths", "2048,8192", "--seed", "3", "--task-arg", "retrieval.topics=10"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compare") / "runs"
    synthetic = ["--task-arg", "retrieval.source=synthetic"]
    for model in ("bm25", "oracle"):
        assert main(["run", "--model", model, "--tasks", "retrieval", *RUN, *synthetic, "--out", str(out)]) == 0
    assert main(["run", "--model", "bm25?name=bm25-austen", "--tasks", "retrieval", *RUN, "--out", str(out)]) == 0
    moved = out / "bm25-moved"
    shutil.copytree(out / "bm25", moved)
    lines = []
    for n, line in enumerate((moved / "samples" / "retrieval.jsonl").read_text().splitlines()):
        rec = json.loads(line)
        if rec["id"].startswith("L8192-"):
            rec["context_sha256"] = "0" * 64
        elif n == 0:
            rec["question"] += " (reworded)"
        lines.append(json.dumps(rec))
    (moved / "samples" / "retrieval.jsonl").write_text("\n".join(lines) + "\n")
    # the oracle's folder with another primary metric (its recall@1 rows listed first)
    other = out / "oracle-r1"
    shutil.copytree(out / "oracle", other)
    run = json.loads((other / "run.json").read_text())
    rows = run["tasks"][0]["results"]
    run["tasks"][0]["results"] = [r for r in rows if r["metric"] == "recall@1"] + [
        r for r in rows if r["metric"] != "recall@1"
    ]
    (other / "run.json").write_text(json.dumps(run))
    return out


def _scores(run: Path, task: str, field: str) -> dict[str, tuple[int, float]]:
    recs = map(json.loads, (run / "scores" / f"{task}.jsonl").read_text().splitlines())
    return {r["id"]: (r["metadata"]["target_tokens"], r["scores"][field]) for r in recs if r["status"] == "ok"}


def _clusters(run: Path, task: str) -> dict[str, str]:
    """Each scored sample's cluster as its scores file records it (metadata `cluster`: its document)."""
    recs = map(json.loads, (run / "scores" / f"{task}.jsonl").read_text().splitlines())
    return {r["id"]: r["metadata"]["cluster"] for r in recs}


def test_compare_real_runs_text_and_json(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp.json"
    rc, text, _ = _compare(capsys, str(runs / "bm25"), str(runs / "oracle"), "--json", str(out))
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["holm_family"] == 3 and data["a"]["model"] == "bm25" and data["b"]["model"] == "oracle"
    (task,) = data["tasks"]
    assert task["task"] == "retrieval" and task["metric"] == "recall@5"
    assert task["pairs"] == 60 and task["refused"] == {} and task["only_a"] == task["only_b"] == 0
    assert data["skipped"] == []
    a, b = _scores(runs / "bm25", "retrieval", "recall@5"), _scores(runs / "oracle", "retrieval", "recall@5")
    assert a.keys() == b.keys()
    # the 30 queries of a length ask one document: the pairs are tested per document, never as 30 units
    docs = _clusters(runs / "bm25", "retrieval")
    assert task["tests"] == ["cluster-sign-flip"] and task["cluster_noun"] == "documents"
    p_values = []
    for row in task["rows"]:
        ids = [i for i in a if row["length"] in (None, a[i][0])]
        va, vb = np.array([a[i][1] for i in ids]), np.array([b[i][1] for i in ids])
        assert row["n"] == len(ids) and row["mean_a"] == pytest.approx(va.mean())
        assert row["difference"] == pytest.approx((va - vb).mean()) and row["mean_b"] == 1.0
        names = sorted({docs[i] for i in ids})
        sums = [sum(va[k] - vb[k] for k, i in enumerate(ids) if docs[i] == name) for name in names]
        assert row["clusters"] == len(names) and row["test"] == "cluster-sign-flip"
        assert row["p_value"] == pytest.approx(sign_flip(np.array(sums), seed=0))
        assert row["b_better"] == int((vb > va).sum())
        if len(names) < 2:  # one document: no interval, and no p below 1
            assert row["ci95"] is None and row["p_value"] == 1.0
        else:
            lo, hi = row["ci95"]
            assert lo <= row["difference"] <= hi
        p_values.append(row["p_value"])
    assert [r["length"] for r in task["rows"]] == [2048, 8192, None]
    np.testing.assert_allclose([r["p_holm"] for r in task["rows"]], holm(p_values))
    assert [r["significant"] for r in task["rows"]] == [p < 0.05 for p in holm(p_values)]
    # the text table says the same, one row per length and pooled
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines() if ln.split()[:1] in (["2K"], ["8K"], ["all"])}
    assert set(rows) == {"2K", "8K", "all"} and rows["all"][1] == "60"
    assert rows["all"][2] == "2" and rows["2K"][2] == "1"  # the documents column
    assert rows["all"][5] == f"{task['rows'][-1]['difference']:+.3f}" and rows["all"][-1] in ("yes", "no")
    assert "n=30 over 1 document, no interval (< 2 documents)" in text
    assert "retrieval (retrieve) · recall@5 · cluster-sign-flip · 60 pairs over 2 documents; 0 refused" in text
    assert "Holm-adjusted over 3 test(s)" in text
    # seeded: the same seed gives the same intervals, another seed may move them, never the point values
    again = tmp_path / "again.json"
    assert _compare(capsys, str(runs / "bm25"), str(runs / "oracle"), "--json", str(again))[0] == 0
    assert json.loads(again.read_text()) == data


def test_pairs_of_another_design_are_refused_and_counted(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, _ = _compare(capsys, str(runs / "bm25"), str(runs / "bm25-moved"), "--task", "retrieval")
    assert rc == 0
    assert f"29 pairs over 1 document; 30 refused: {REFUSED_CONTEXT}, 1 refused: {REFUSED_DESIGN}" in text
    lengths = [ln.split()[0] for ln in text.splitlines() if ln.split()[:1] in (["2K"], ["8K"], ["all"])]
    assert lengths == ["2K", "all"]  # the 8K samples are other haystacks: nothing paired there
    assert "* one length" in text  # the pooled row is the 2K cell, tested once


def test_another_haystack_source_shares_no_sample(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two real runs whose contexts differ for the same ids: compare refuses every pair and says so."""
    rc, _, err = _compare(capsys, str(runs / "bm25"), str(runs / "bm25-austen"), "--task", "retrieval")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "no shared samples (60 refused: same id, another context" in err


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["{runs}/nowhere", "{runs}/oracle"], "nowhere: not a run folder"),
        (["{runs}", "{runs}/oracle"], "not a run folder: it holds no run.json"),
        (["{runs}/bm25", "{runs}/bm25-austen", "--task", "needle"], "task 'needle' is not in"),
        (["{runs}/bm25", "{runs}/oracle-r1", "--task", "retrieval"], "the primary metrics differ (recall@5 "),
        (["{runs}/bm25", "{runs}/oracle-r1"], "nothing to compare between"),
        (["{runs}/bm25", "{runs}/oracle", "--task", "nope"], "task 'nope' is not in"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    runs: Path, capsys: pytest.CaptureFixture[str], args: list[str], expect: str
) -> None:
    rc, out, err = _compare(capsys, *(a.format(runs=runs) for a in args))
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and expect in err, err


def test_run_folder_without_per_sample_scores(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(runs / "oracle", bare)
    shutil.rmtree(bare / "scores")
    rc, _, err = _compare(capsys, str(runs / "bm25"), str(bare), "--task", "retrieval")
    assert rc == 2 and "has no per-sample scores" in err


def test_leaderboard_says_whether_the_leader_is_significantly_ahead(runs: Path, tmp_path: Path) -> None:
    """From run folders: the retrieval board's leader (the oracle) against the runner-up (bm25), paired on
    every shared sample, with the p-value recomputed here; from run copies alone: not testable."""
    from longctx_eval.leaderboard.build import update_leaderboard

    inputs = [runs / "bm25", runs / "oracle"]
    update_leaderboard(inputs, tmp_path / "board", site=tmp_path / "site")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    section = page.split("## retrieval", 1)[1].split("\n## ", 1)[0]
    a, b = _scores(runs / "oracle", "retrieval", "recall@5"), _scores(runs / "bm25", "retrieval", "recall@5")
    va, vb = np.array([a[i][1] for i in sorted(a)]), np.array([b[i][1] for i in sorted(a)])
    # the 60 queries ask 2 documents: the test flips the signs of the 2 per-document sums
    docs = _clusters(runs / "oracle", "retrieval")
    names = sorted({docs[i] for i in a})
    sums = np.array([sum(va[k] - vb[k] for k, i in enumerate(sorted(a)) if docs[i] == name) for name in names])
    p = sign_flip(sums, seed=0)
    assert p == 0.5  # two documents can never show significance, however many queries they hold
    verdict = "Yes" if (va - vb).mean() > 0 and p < 0.05 else "No"
    assert f"Is oracle significantly ahead of the runner-up bm25? {verdict}: {(va - vb).mean():+.3f} [" in section
    assert "on 60 shared samples over 2 documents (2K, 8K)" in section and f"p = {p:.3f}" in section
    assert "sign-flip test of per-cluster sums" in section
    site = (tmp_path / "site" / "task-retrieval.html").read_text()
    assert "Is oracle significantly ahead of the runner-up bm25?" in site
    # the same board rebuilt from its run copies only: no per-sample scores, said so
    copies = tmp_path / "copies"
    update_leaderboard([tmp_path / "board" / "runs"], copies)
    again = (copies / "LEADERBOARD.md").read_text().split("## retrieval", 1)[1].split("\n## ", 1)[0]
    assert "Is oracle significantly ahead of the runner-up bm25? Not testable: no per-sample scores" in again


def test_leader_test_refuses_other_designs(runs: Path) -> None:
    """bm25 against its copy whose 8K samples name other haystacks: at 8K nothing is testable, at 2K the 29
    pairs of one design are (the reworded question refused)."""
    from longctx_eval.leaderboard.significance import leader_test
    from longctx_eval.results import read_run
    from longctx_eval.scoring.paired_scores import sample_scores

    ranked = [read_run(runs / name / "run.json") for name in ("bm25", "bm25-moved")]
    ranked[1] = ranked[1].model_copy(update={"model": ranked[1].model.model_copy(update={"name": "moved"})})
    samples = {
        "bm25": {"retrieval": sample_scores(runs / "bm25", "retrieval")},
        "moved": {"retrieval": sample_scores(runs / "bm25-moved", "retrieval")},
    }
    at_8k = leader_test("retrieval", ranked, "recall@5", samples, [8192])
    assert at_8k is not None and "no shared samples at the ranking lengths (31 refused" in at_8k.sentence()
    both = leader_test("retrieval", ranked, "recall@5", samples)
    assert both is not None and both.n == 29 and both.refused == 31 and both.difference == 0 and not both.ahead
    assert "No: +0.000" in both.sentence() and "31 pair(s) of another design refused" in both.sentence()


def test_other_seed_moves_only_the_resampled_numbers(runs: Path, tmp_path: Path) -> None:
    from longctx_eval.scoring.comparison import compare_runs, to_json

    zero = to_json(compare_runs(runs / "bm25", runs / "oracle", ["retrieval"], seed=0))
    one = to_json(compare_runs(runs / "bm25", runs / "oracle", ["retrieval"], seed=1))
    assert one["seed"] == 1
    for r0, r1 in zip(zero["tasks"][0]["rows"], one["tasks"][0]["rows"], strict=True):
        assert {k: v for k, v in r0.items() if k != "ci95"} == {k: v for k, v in r1.items() if k != "ci95"}


def _simulated_folder(template: Path, out: Path, correct: np.ndarray) -> Path:
    """`template`'s run folder with its retrieval samples and scores replaced by len(correct) simulated 0/1
    recall@5 values at 8K (the same simulated contexts in every folder made from it)."""
    shutil.copytree(template, out)
    samples, scores = [], []
    for i, value in enumerate(correct):
        sid = f"L8192-sim{i:03d}"
        samples.append({"id": sid, "question": f"q{i}", "gold": {"i": i}, "context_sha256": f"{i:064x}"})
        meta = {"target_tokens": 8192}
        scores.append({"id": sid, "status": "ok", "metadata": meta, "scores": {"recall@5": float(value)}})
    (out / "samples" / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    (out / "scores" / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    return out


def test_compare_on_simulated_runs_with_a_known_effect(runs: Path, tmp_path: Path) -> None:
    """The `compare` path on folders of simulated scores (accuracy 0.6 vs 0.5 at n=200, paired as in
    test_paired_tests.py's 500-simulation power test): its p is McNemar's exact p of the same discordant
    pairs, and across 20 simulated pairs it detects the effect about as often as that test's power says."""
    from longctx_eval.scoring.comparison import compare_runs
    from longctx_eval.scoring.paired_tests import mcnemar_exact

    rng = np.random.default_rng(5)
    detected = 0
    for sim in range(20):
        u, own_a, own_b = rng.random(200), rng.random(200), rng.random(200)
        shared = rng.random(200) < 0.7
        a = (np.where(shared, u, own_a) < 0.6).astype(float)
        b = (np.where(shared, u, own_b) < 0.5).astype(float)
        fa = _simulated_folder(runs / "bm25", tmp_path / f"a{sim}", a)
        fb = _simulated_folder(runs / "bm25", tmp_path / f"b{sim}", b)
        (task,) = compare_runs(fa, fb, ["retrieval"]).tasks
        row = task.rows[0]
        assert task.tests == ["mcnemar-exact"] and row.n == 200 and len(task.joined.pairs) == 200
        want = mcnemar_exact(int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum()))
        assert row.p_value == pytest.approx(want) and task.holm[0] == pytest.approx(want)
        detected += task.holm[0] < 0.05
    assert detected >= 13  # power ~0.84: 20 draws fall below 13 with probability < 1%
