"""`compare --metric NAME` and cluster-level comparison on real run folders made by the CLI.

bm25 and minilm run retrieval at 2K on four documents of nine queries each (36 samples, 4 clusters): every
number `compare` prints is recomputed here from the folders' scores files, at the document level.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from compare_cli import compare_cli as _compare  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.scoring.paired_scores import paired_differences, read_sample_scores
from longctx_eval.scoring.paired_tests import sign_flip

RUN = ["--tasks", "retrieval", "--lengths", "2048", "--seed", "1"]
ARGS = ["--task-arg", "retrieval.docs_per_length=4", "--task-arg", "retrieval.topics=3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compare_metric") / "runs"
    for model in ("bm25", "minilm"):
        assert main(["run", "--model", model, *RUN, *ARGS, "--out", str(out)]) == 0
    return out


def _records(run: Path) -> dict[str, dict]:
    recs = map(json.loads, (run / "scores" / "retrieval.jsonl").read_text().splitlines())
    return {r["id"]: r for r in recs if r["status"] == "ok"}


@pytest.mark.parametrize("metric", ["mrr", "ndcg@10", "recall@5", None])
def test_compare_on_any_metric_at_the_document_level(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str | None
) -> None:
    out = tmp_path / "cmp.json"
    extra = [] if metric is None else ["--metric", metric]
    rc, text, _ = _compare(capsys, str(runs / "bm25"), str(runs / "minilm"), *extra, "--json", str(out))
    assert rc == 0
    data = json.loads(out.read_text())
    (task,) = data["tasks"]
    field = metric or "recall@5"  # the default is the task's primary metric
    assert data["metric"] == metric and task["metric"] == field
    a, b = _records(runs / "bm25"), _records(runs / "minilm")
    ids = sorted(a)
    va = np.array([a[i]["scores"][field] for i in ids])
    vb = np.array([b[i]["scores"][field] for i in ids])
    docs = [a[i]["metadata"]["cluster"] for i in ids]
    assert len(set(docs)) == 4 and task["cluster_noun"] == "documents"
    sums = np.array([sum(d for d, c in zip(va - vb, docs, strict=True) if c == name) for name in sorted(set(docs))])
    for row in task["rows"]:
        assert row["n"] == 36 and row["clusters"] == 4 and row["test"] == "cluster-sign-flip"
        assert row["difference"] == pytest.approx((va - vb).mean())
        assert row["p_value"] == pytest.approx(sign_flip(sums, seed=0))
        lo, hi = row["ci95"]
        assert lo <= row["difference"] <= hi
    assert f"retrieval (retrieve) · {field} · cluster-sign-flip · 36 pairs over 4 documents" in text
    body = [ln.split() for ln in text.splitlines() if ln.split()[:1] in (["2K"], ["all"])]
    assert [ln[2] for ln in body] == ["4", "4"] and all("cluster-sign-flip" in ln for ln in body)


def test_unknown_metric_lists_the_metrics_available(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _compare(capsys, str(runs / "bm25"), str(runs / "minilm"), "--metric", "ndcg@11")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "--metric 'ndcg@11'" in err and "recall@5" in err and "mrr" in err and "ndcg@10" in err
    assert "over_length_rate" not in err  # the request rates are not compared
    rc, _, err = _compare(capsys, str(runs / "bm25"), str(runs / "minilm"), "--task", "retrieval", "--metric", "x")
    assert rc == 2 and len(err.splitlines()) == 1 and "metrics both runs report: retrieval: recall@5, " in err


def _simulated(template: Path, out: Path, rows: list[tuple[int, float, str | None]]) -> Path:
    """`template`'s folder with its retrieval samples and scores replaced: one sample per (length, recall@5,
    cluster or None)."""
    shutil.copytree(template, out)
    samples, scores = [], []
    for i, (length, value, cluster) in enumerate(rows):
        sid = f"L{length}-sim{i:03d}"
        samples.append({"id": sid, "question": f"q{i}", "gold": {"i": i}, "context_sha256": f"{i:064x}"})
        meta = {"target_tokens": length} | ({} if cluster is None else {"cluster": cluster})
        scores.append({"id": sid, "status": "ok", "metadata": meta, "scores": {"recall@5": value}})
    (out / "samples" / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    (out / "scores" / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    return out


def test_each_length_is_labelled_with_the_test_it_used(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2K: independent 0/1 scores (McNemar); 4K: independent fractions (sign-flip); 8K: 0/1 scores from three
    haystacks (the per-haystack sign-flip). The pooled row pools clusters, so it is tested per cluster too."""
    rng = np.random.default_rng(3)

    def rows(shift: float) -> list[tuple[int, float, str | None]]:
        out: list[tuple[int, float, str | None]] = []
        out += [(2048, float(rng.random() < 0.5 + shift), None) for _ in range(12)]
        out += [(4096, round(float(rng.random()), 3), None) for _ in range(12)]
        out += [(8192, float(rng.random() < 0.5 + shift), f"haystack-{k % 3}") for k in range(12)]
        return out

    fa = _simulated(runs / "bm25", tmp_path / "a", rows(0.3))
    fb = _simulated(runs / "bm25", tmp_path / "b", rows(0.0))
    rc, text, _ = _compare(capsys, str(fa), str(fb), "--json", str(tmp_path / "c.json"))
    assert rc == 0
    (task,) = json.loads((tmp_path / "c.json").read_text())["tasks"]
    tests = {r["length"]: r["test"] for r in task["rows"]}
    assert tests == {2048: "mcnemar-exact", 4096: "sign-flip", 8192: "cluster-sign-flip", None: "cluster-sign-flip"}
    assert task["tests"] == ["mcnemar-exact", "sign-flip", "cluster-sign-flip"]
    assert {r["length"]: r["clusters"] for r in task["rows"]} == {2048: 12, 4096: 12, 8192: 3, None: 27}
    labelled = {ln.split()[0]: ln for ln in text.splitlines() if ln.split()[:1] in (["2K"], ["4K"], ["8K"], ["all"])}
    assert "mcnemar-exact" in labelled["2K"] and " sign-flip " in labelled["4K"]
    assert "cluster-sign-flip" in labelled["8K"] and "cluster-sign-flip" in labelled["all"]


def test_one_pair_or_one_haystack_never_shows_an_interval(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A length of one pair and a length of six pairs from one haystack: neither gets an interval (the site's
    comparison page once showed [-1, -1] from one pair)."""
    fa = _simulated(runs / "bm25", tmp_path / "a", [(2048, 1.0, None), *[(4096, 1.0, "haystack-0")] * 6])
    fb = _simulated(runs / "bm25", tmp_path / "b", [(2048, 0.0, None), *[(4096, 0.0, "haystack-0")] * 6])
    rc, text, _ = _compare(capsys, str(fa), str(fb), "--json", str(tmp_path / "c.json"))
    assert rc == 0
    (task,) = json.loads((tmp_path / "c.json").read_text())["tasks"]
    by_length = {r["length"]: r for r in task["rows"]}
    assert by_length[2048]["ci95"] is None and by_length[4096]["ci95"] is None
    assert by_length[None]["ci95"] is not None  # pooled: 7 pairs from 2 clusters
    assert "n=1, no interval (n < 5)" in text and "n=6 over 1 document, no interval (< 2 documents)" in text
    assert "[-1" not in text
    # the site's comparison page renders the same rows (`paired_differences`, `interval_text`)
    sa, sb = read_sample_scores(fa, "retrieval"), read_sample_scores(fb, "retrieval")
    shown = [r.interval_text() for r in paired_differences(sa, sb, "recall@5")]
    assert shown[:2] == ["n=1, no interval (n < 5)", "n=6 over 1 cluster, no interval (< 2 clusters)"]


def test_the_board_and_run_file_show_clusters_and_n_eff(runs: Path, tmp_path: Path) -> None:
    from longctx_eval.leaderboard.build import update_leaderboard
    from longctx_eval.results import read_run
    from longctx_eval.scoring.labels import summary_value

    run = read_run(runs / "bm25" / "run.json")
    (task,) = run.tasks
    pooled = next(r for r in task.results if r.length is None and r.metric == "recall@5")
    assert task.cluster_noun == "documents" and pooled.n == 36 and pooled.clusters == 4
    assert pooled.n_eff is not None and 4 <= pooled.n_eff <= 36
    assert "(n=36 over 4 documents, n_eff " in summary_value(pooled, task.cluster_noun, counted=True)
    update_leaderboard([runs / "bm25", runs / "minilm"], tmp_path / "board", site=tmp_path / "site")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "n=36 over 4 documents, n_eff " in page
    site = (tmp_path / "site" / "task-retrieval.html").read_text()
    assert "n=36 over 4 documents, n_eff " in site
