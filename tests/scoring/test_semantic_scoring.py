"""Semantic fidelity end to end: a real task and model carry BERTScore and embedding similarity per sample and in
the run file; two systems on a text-gold plugin task get a board table, a drift plot and a paired `compare`; the
runner numbers its batches across a resume; the composite's fidelity is the named metric."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from longctx_eval.cli import main
from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.metrics.bertscore import bertscore
from longctx_eval.metrics.embedding_similarity import embedding_similarity
from longctx_eval.models.assets import MINILM_SHA256
from longctx_eval.models.layer_encoder import layer_encoder
from longctx_eval.results import MetricResult, TaskResult, read_run
from longctx_eval.sample import Sample
from longctx_eval.scoring.composite import with_composite
from longctx_eval.scoring.semantic import MIN_POINT, drift_points, sentence_embedder

FIELDS = ("bertscore_p", "bertscore_r", "bertscore_f1", "embedding_similarity")

QA = textwrap.dedent(
    '''
    """Short text answers (an MRCR-style task in miniature); `drift` > 0 makes the oracle's answers worse the
    later they are served, so a second system drifts."""

    from longctx_eval import Prediction, Request, Sample, Score, Task, any_of, mean, task
    from longctx_eval.metrics.semantic import semantic_metrics

    CITIES = ["Caldhaven", "Marrowick", "Ostervale", "Brindlemoor", "Quellport", "Harrowgate"]


    @task(name="qa_text", version="1", requires=any_of("generate"), default_lengths=[64],
          description="the city a person lives in, answered as text")
    def qa_text(lengths, seed=0, tokenizer=None, drift=0):
        def samples():
            for length in lengths:
                for i in range(30):
                    city = CITIES[i % len(CITIES)]
                    yield Sample(id=f"{length}-{i:02d}", context=f"context {i:02d}: person {i} lives in {city}.",
                                 question="Where does the person live?", gold={"answers": [f"in {city}"]},
                                 metadata={"target_tokens": length, "cluster": f"doc-{i // 3}"})

        def prompt(sample):
            return Request(sample.id, sample.context + " " + sample.question, sample.context, sample.question,
                           max_new_tokens=8)

        def oracle(sample):
            i = int(sample.id.split("-")[1])
            city = sample.gold["answers"][0]
            if drift and i >= 10:
                return Prediction(text=["The person lives somewhere else.", "No idea, sorry."][i % 2])
            return Prediction(text=city)

        def score(sample, prediction):
            return Score({"score": float(sample.gold["answers"][0] in (prediction.text or ""))})

        return Task(dataset=samples, prompt=prompt, scorer=score, metrics=[mean("score"), *semantic_metrics()],
                    oracle=oracle)
    '''
)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("qa_plugin")
    (folder / "qa_text.py").write_text(QA)
    return folder


def _run(out: Path, plugin: Path, model: str, *extra: str) -> None:
    args = ["run", "--model", model, "--tasks", "qa_text", "--include-path", str(plugin), "--out", str(out)]
    assert main([*args, *extra]) == 0


def _scores(run_dir: Path, task: str) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "scores" / f"{task}.jsonl").read_text().splitlines()]


def _pooled(task: TaskResult, metric: str) -> MetricResult:
    return next(r for r in task.results if r.metric == metric and r.length is None and r.depth is None)


def test_smollm2_on_cross_paragraph_carries_the_semantic_fields(tmp_path):
    args = ["run", "--model", "smollm2-135m", "--tasks", "cross_paragraph", "--lengths", "1024", "--limit", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    run_dir = tmp_path / "smollm2-135m"
    task = read_run(run_dir / "run.json").tasks[0]
    section = task.semantic
    assert section is not None and section.answers == 3 and section.batches == "runner"
    b = section.bertscore
    assert (b.model, b.name, b.sha256, b.layer, b.layers, b.idf, b.baseline, b.max_tokens) == (
        "minilm", "all-MiniLM-L6-v2", MINILM_SHA256, 5, 6, False, None, 512,
    )  # fmt: skip
    assert (section.embedding.name, section.embedding.sha256, section.embedding.max_tokens) == (
        "all-MiniLM-L6-v2", MINILM_SHA256, 256,
    )  # fmt: skip
    records = _scores(run_dir, "cross_paragraph")
    assert all(set(FIELDS) <= set(r["scores"]) for r in records)
    # the per-sample values are BERTScore and the cosine of the answers as generated, against the gold
    samples = [json.loads(x) for x in (run_dir / "samples" / "cross_paragraph.jsonl").read_text().splitlines()]
    gold = {s["id"]: ", ".join(s["gold"]["answers"]) for s in samples}
    answers, refs = [r["answer"] for r in records], [gold[r["id"]] for r in records]
    prf = bertscore(answers, refs, layer_encoder("minilm", 5))
    sim = embedding_similarity(answers, refs, sentence_embedder("minilm")[0])
    got = np.array([[r["scores"][f] for f in FIELDS] for r in records])
    assert np.abs(got - np.column_stack([prf, sim])).max() < 1e-6
    assert _pooled(task, "bertscore_f1").value == pytest.approx(prf[:, 2].mean(), abs=1e-6)
    batches = [json.loads(x)["batch"] for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted(batches) == [0, 1, 2]  # SmolLM2 on the CPU: batch size 1


def test_two_systems_get_a_table_a_drift_plot_and_a_paired_comparison(tmp_path, plugin):
    _run(tmp_path, plugin, "oracle")
    _run(tmp_path, plugin, "oracle?name=drifting", "--task-arg", "qa_text.drift=1")
    good, bad = (read_run(tmp_path / m / "run.json").tasks[0] for m in ("oracle", "drifting"))
    assert _pooled(good, "bertscore_f1").value == pytest.approx(1.0, abs=1e-6)
    f1 = _pooled(bad, "bertscore_f1")
    assert f1.value < 0.9 and f1.clusters == 10 and f1.n == 30
    drift = bad.semantic.drift
    assert [(p.first_batch, p.last_batch, p.n) for p in drift] == [(0, 9, 10), (10, 19, 10), (20, 29, 10)]
    assert drift[0].bertscore_f1 == pytest.approx(1.0, abs=1e-6) and drift[0].delta_f1 > 0 > drift[1].delta_f1
    assert drift[1].ci95[1] < f1.value and drift[2].ci95[1] < f1.value  # drops outside the groups' intervals

    board = tmp_path / "board"
    update_leaderboard([tmp_path / "oracle", tmp_path / "drifting"], board, site=tmp_path / "site")
    page = (board / "LEADERBOARD.md").read_text()
    table = page[page.index("Semantic fidelity") :]
    assert "| model | BERTScore F1 | P | R | embedding similarity |" in table
    assert "| **drifting** | " in table and "| **oracle** | " in table
    assert "all-MiniLM-L6-v2 (53aa5117) layer 5 of 6, no idf, raw; embedder all-MiniLM-L6-v2" in table
    assert f"2 / 1 of 3 groups (min {MIN_POINT}), " in table  # drifting: two groups below its mean, one above
    plot = board / "plots" / "qa_text.semantic-drift.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "(plots/qa_text.semantic-drift.png)" in page
    site = next((tmp_path / "site").glob("task-*.html")).read_text()
    assert "Semantic fidelity" in site and "qa_text.semantic-drift.png" in site

    out = tmp_path / "compare.json"
    args = ["compare", str(tmp_path / "oracle"), str(tmp_path / "drifting"), "--metric", "bertscore_f1"]
    assert main([*args, "--json", str(out)]) == 0
    (task,) = json.loads(out.read_text())["tasks"]
    pooled = next(r for r in task["rows"] if r["length"] is None)
    assert task["metric"] == "bertscore_f1" and pooled["n"] == 30 and pooled["clusters"] == 10
    assert pooled["difference"] == pytest.approx(1.0 - f1.value, abs=1e-6)
    assert pooled["ci95"][0] > 0 and pooled["p_value"] < 0.05


def test_batches_are_numbered_on_across_a_resume(tmp_path, plugin):
    _run(tmp_path, plugin, "oracle", "--limit", "12")
    _run(tmp_path, plugin, "oracle")
    records = [json.loads(x) for x in (tmp_path / "oracle" / "predictions.jsonl").read_text().splitlines()]
    assert [r["batch"] for r in records] == list(range(30))  # the oracle serves one request per batch
    task = read_run(tmp_path / "oracle" / "run.json").tasks[0]
    assert [(p.first_batch, p.last_batch) for p in task.semantic.drift] == [(0, 9), (10, 19), (20, 29)]


def test_drift_without_recorded_batches_runs_in_serving_order():
    served = [(None, n) for n in range(25)]
    f1 = np.r_[np.ones(10), np.zeros(15)]
    mode, points = drift_points(served, f1, f1, [str(n) for n in range(25)])
    assert mode == "order" and [(p.first_batch, p.last_batch, p.n) for p in points] == [(0, 0, 10), (1, 2, 15)]
    assert points[0].delta_f1 == pytest.approx(1 - 10 / 25)


def test_the_composite_averages_the_named_similarity(tmp_path, plugin):
    _run(tmp_path, plugin, "oracle?name=drifting", "--task-arg", "qa_text.drift=1")
    task = read_run(tmp_path / "drifting" / "run.json").tasks[0]
    records = _scores(tmp_path / "drifting", "qa_text")
    records[0] = {**records[0], "status": "error", "scores": {}}  # a failed request counts 0
    samples = [Sample(r["id"], "", "", {"answers": ["x"]}, r["metadata"]) for r in records]
    serving = {"throughput": {"output_tokens_per_s": 100.0}, "ttft_s": {"p95": 0.1}}
    result = with_composite(task.model_copy(update={"serving": serving}), "score", samples, records)
    c = result.composite
    sims = [0.0] + [min(1.0, max(0.0, r["scores"]["embedding_similarity"])) for r in records[1:]]
    assert c.fidelity == pytest.approx(float(np.mean(sims))) and c.failed_as_zero == 1
    assert c.fidelity_metric == f"embedding_similarity (all-MiniLM-L6-v2, sha256 {MINILM_SHA256[:8]})"
