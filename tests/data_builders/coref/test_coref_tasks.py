"""The antecedent-selection protocol, the coref tasks' samples and scores, coref:baseline, and the CLIs."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from coref_doc import DOC  # tests/ is on sys.path (conftest)

from data_builders.coref.conll import parse_conll, read_conll, write_conll
from data_builders.coref.haystack import as_long
from data_builders.coref.score_command import cmd_coref_score, score_files
from data_builders.coref.synthetic import synthetic_document
from longctx_eval import Prediction
from longctx_eval.discovery import discover
from longctx_eval.metrics.coref import score_clusters
from longctx_eval.metrics.coref_protocol import batches, close_links, parse_answers
from longctx_eval.models.coref_baseline import resolve
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec


def _doc():  # noqa: ANN202
    return parse_conll(DOC.splitlines())[0]


@pytest.fixture(scope="module")
def coref() -> ModuleType:
    """tasks/_coref.py as the coref tasks import it (a helper module of the discovered plugin package)."""
    package = discover().get("coref_synthetic").factory.__module__.rpartition(".")[0]
    return importlib.import_module(f"{package}._coref")


@pytest.mark.parametrize(
    ("text", "links", "malformed"),
    [
        ("12: 5\n13: 0\n14: 12", {12: 5, 13: None, 14: 12}, 0),
        ("12 -> 5, 13 = none; mention 14: mention 2", {12: 5, 13: None, 14: 2}, 0),
        (" 5\n13: new\n14: 3", {12: 5, 13: None, 14: 3}, 0),  # the prompt ends with "12:"
        ("12: 12\n13: 99\nbanana", {}, 3),  # itself, a later mention, no answer
        ("12: 4\n12: 7\n14: 1", {12: 4, 14: 1}, 1),  # the first answer counts; 13 is missing
        (None, {}, 3),
    ],
)
def test_parse_answers(text: str | None, links: dict, malformed: int) -> None:
    assert parse_answers(text, [12, 13, 14]) == (links, malformed)


def test_close_links_is_transitive_and_keeps_singletons() -> None:
    assert close_links(6, [(3, 1), (5, 3), (6, 2)]) == [[1, 3, 5], [2, 6], [4]]
    assert batches(5, 2) == [[2, 3], [4, 5]] and batches(1, 3) == []


def test_mark_mentions_nests(coref: ModuleType) -> None:
    text = "his father came"
    assert coref.mark_mentions(text, [(0, 10), (0, 3)]) == "[1 [2 his] father] came"


def test_kit_prompt_oracle_and_generative_scoring(coref: ModuleType) -> None:
    kit = coref.CorefKit(coref.CorefConfig(batch=2, mode="generate"))
    sample = kit.sample(as_long(_doc()), "t@1", singletons=False, metadata={"target_tokens": 100})
    requests = kit.prompt(sample)
    assert len(requests) == 3  # 7 mentions, ids 2..7 asked in batches of 2
    assert sample.gold["asked"] == [2, 3, 4, 5, 6, 7] and not sample.gold["sampled"]
    assert "[1 Mary Jones] met [2 Mr Brown]. [3 She] thanked [4 him]" in requests[0].prompt
    assert requests[0].prompt.endswith("Answers:\n2:") and "\n2: Mr Brown\n3: She\n" in requests[0].prompt
    assert len({r.prompt[: r.prompt.index("For each mention")] for r in requests}) == 1  # one shared prefix
    oracle = kit.scorer(sample, kit.oracle(sample))
    assert oracle["conll_doc"] == 1.0 and oracle["span_em_n"] == oracle["span_em_d"] == 4
    # A generative model answering every mention right, in three parts.
    mentions = coref.sorted_mentions(sample.gold["clusters"])
    assert mentions == [(0, 1), (3, 4), (6, 6), (8, 8), (10, 11), (13, 13), (15, 15)]
    answers = ["0\n3: 1", "4: 2\n5: 0", "6: 5\n7: 3"]
    pred = Prediction(parts=tuple(Prediction(text=a) for a in answers))
    good = kit.scorer(sample, pred)
    assert good["conll_doc"] == 1.0 and good["malformed_n"] == 0 and good["asked_d"] == 6
    # A failed (over-length) part answers nothing and stays in the denominator, as malformed answers do.
    bad = Prediction(
        parts=(Prediction(text="2: 2\n3: 9"), Prediction(status="over_length"), Prediction(text="6: 1\n7: 3"))
    )
    score = kit.scorer(sample, bad)
    # Clusters {1, 6} and {3, 7}: only "Mary" (7 -> 3, "She") gets an antecedent of its gold entity.
    assert score["malformed_n"] == 4 and score["asked_d"] == 6 and score["span_em_n"] == 1


def test_kit_measures_links_in_model_tokens(coref: ModuleType, minilm_tokenizer) -> None:  # noqa: ANN001
    kit = coref.CorefKit(coref.CorefConfig(window=8, stride=4), minilm_tokenizer)
    sample = kit.sample(as_long(_doc()), "t", singletons=True, metadata={"target_tokens": 64})
    assert sample.metadata["context_tokens"] == minilm_tokenizer.count(sample.context)
    links = sample.gold["links"]
    assert len(links) == 4 and all(d >= 0 for *_, d, _ in links)
    assert {intra for *_, intra in links} == {0, 1}


def test_baseline_resolves_names_and_pronouns() -> None:
    d = _doc()
    mentions = [m for c in d.clusters for m in c]
    got = resolve(d.tokens, mentions, singletons=True)
    assert sorted(map(sorted, got)) == sorted(sorted([list(m) for m in c]) for c in d.clusters)
    assert resolve(d.tokens, mentions) == got  # deterministic


def test_baseline_adapter_serves_coref(coref: ModuleType) -> None:
    adapter = load_model(parse_spec("coref:baseline?window=20"))
    kit = coref.CorefKit()
    sample = kit.sample(synthetic_document(300, seed=2), "s", singletons=True, metadata={"target_tokens": 300})
    (pred,) = adapter.predict_clusters([kit.system_request(sample)])  # one request per document
    assert kit.scorer(sample, Prediction(parts=(pred,)))["conll_doc"] > 0.5
    with pytest.raises(Exception, match="expected coref:baseline"):
        parse_spec("coref:maverick")


def test_runner_end_to_end_and_rescore(tmp_path: Path) -> None:
    from longctx_eval.cli import main

    out = tmp_path / "runs"
    for model in ("coref:baseline", "oracle"):
        assert main(["run", "--model", model, "--tasks", "coref_synthetic", "--lengths", "512", "--limit", "1",
                     "--out", str(out)]) == 0  # fmt: skip
    runs = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/run.json")}
    oracle = {r["metric"]: r["value"] for r in runs["oracle"]["tasks"][0]["results"] if r["length"] is None}
    assert oracle["conll_f1"] == 1.0 and oracle["span_em"] == 1.0 and oracle["lea_f1"] == 1.0
    base_dir = out / "coref-baseline"
    before = json.loads((base_dir / "run.json").read_text())["tasks"]
    assert main(["score", str(base_dir)]) == 0
    assert json.loads((base_dir / "run.json").read_text())["tasks"] == before


def test_coref_score_cli_on_real_files(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from data_builders.coref.splits import data_root

    key = data_root() / "litbank" / "coref" / "conll" / "1023_bleak_house_brat.conll"
    (doc,) = read_conll(key)
    system = resolve(doc.tokens, [m for c in doc.clusters for m in c])
    response = tmp_path / "resp.conll"
    write_conll(response, [doc], [[[tuple(m) for m in c] for c in system]])
    args = argparse.Namespace(key=key, response=response, json=True, strict_repeats=False)
    assert cmd_coref_score(args) == 0
    out = json.loads(capsys.readouterr().out)
    want = score_clusters(
        [[(doc.name, *m) for m in c] for c in doc.clusters], [[(doc.name, *m) for m in c] for c in system]
    )
    assert out["metrics"]["conll"]["f1"] == pytest.approx(want["conll"][2])
    assert out["documents"] == 1 and out["missing_in_response"] == []
    same = score_files(key, key)["scores"]
    assert all(v == pytest.approx((1, 1, 1)) for v in same.values())
    args.json = False
    cmd_coref_score(args)
    assert "CoNLL F1" in capsys.readouterr().out


def test_coref_score_rejects_a_different_tokenization(tmp_path: Path) -> None:
    from longctx_eval.errors import LongctxError

    key, resp = tmp_path / "k.conll", tmp_path / "r.conll"
    key.write_text(DOC)
    resp.write_text(DOC.replace("t\t0\t5\t.\t-\n#end", "#end"))
    with pytest.raises(LongctxError, match="tokens but the key"):
        score_files(key, resp)


def test_evaluate_module_loads_by_path() -> None:
    evaluate = pytest.importorskip("evaluate")
    path = Path(__file__).resolve().parents[3] / "longctx_eval" / "metrics" / "coref_evaluate"
    metric = evaluate.load(str(path))
    out = metric.compute(predictions=[[[[0, 1], [3, 4]]]], references=[[[[0, 1], [3, 4]], [[6, 6], [8, 9]]]])
    assert out["muc_f1"] == pytest.approx(2 / 3) and out["blanc_f1"] == pytest.approx(1 / 3)


def test_coref_score_names_a_non_integer_cluster_id(tmp_path: Path) -> None:
    from longctx_eval.errors import DataError

    key = tmp_path / "k.conll"
    key.write_text(DOC.replace("t\t0\t2\thim\t(1)", "t\t0\t2\thim\t(1.5)"))
    with pytest.raises(
        DataError, match=r"k\.conll:11: coreference field '\(1\.5\)': cluster id '1\.5' is not an integer"
    ):
        score_files(key, key)


def test_coref_score_command_registers_and_runs_standalone(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from data_builders.coref.score_command import add_parser, main

    parser = argparse.ArgumentParser(prog="longctx-eval")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    key = tmp_path / "k.conll"
    key.write_text(DOC)
    args = parser.parse_args(["coref-score", str(key), str(key), "--json"])
    assert args.func is cmd_coref_score and args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["conll"]["f1"] == 1.0
    bad = tmp_path / "bad.conll"
    bad.write_text(DOC.replace("(2)", "(2.0)"))
    assert main([str(key), str(bad)]) == 2
    assert "cluster id '2.0' is not an integer" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "length", "corpus"), [("coref_litbank", 4096, "litbank"), ("coref_ontogum", 2048, "ontogum")]
)
def test_shipped_corpus_tasks_build_samples(name: str, length: int, corpus: str) -> None:
    task = discover().get(name).build(lengths=[length], seed=0, tokenizer=None)
    samples = list(task.samples())
    assert samples and all(s.metadata["corpus"] == corpus and s.metadata["target_tokens"] == length for s in samples)
    first = samples[0]
    assert first.id == f"{first.metadata['doc']}@{length}" and first.gold["clusters"]
    assert task.scorer(first, task.oracle(first))["conll_doc"] == 1.0
