"""coref_ontonotes: skipped with the reason when no OntoNotes path is given; reads a user's CoNLL-2012 tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_builders.coref.splits import ontonotes, ontonotes_paths
from longctx_eval.discovery import discover
from longctx_eval.errors import DataError, TaskUnavailable

# OntoNotes CoNLL-2012 *_gold_conll: the number of predicate-argument columns changes from sentence to sentence.
PART0 = """#begin document (bc/cctv/00/cctv_0001); part 000
bc/cctv/00/cctv_0001\t0\t0\tJohn\tNNP\t(TOP(S(NP*)\t-\t-\t-\tSpeaker#1\t(PERSON)\t(ARG0*)\t(0)
bc/cctv/00/cctv_0001\t0\t1\tsaw\tVBD\t(VP*\tsee\t01\t1\tSpeaker#1\t*\t(V*)\t-
bc/cctv/00/cctv_0001\t0\t2\tthe\tDT\t(NP*\t-\t-\t-\tSpeaker#1\t*\t(ARG1*\t(1
bc/cctv/00/cctv_0001\t0\t3\tdog\tNN\t*))\t-\t-\t-\tSpeaker#1\t*\t*)\t1)
bc/cctv/00/cctv_0001\t0\t4\t.\t.\t*))\t-\t-\t-\tSpeaker#1\t*\t*\t-

bc/cctv/00/cctv_0001\t0\t0\tHe\tPRP\t(TOP(S(NP*)\t-\t-\t-\tSpeaker#1\t*\t(0)
bc/cctv/00/cctv_0001\t0\t1\tpetted\tVBD\t(VP*\t-\t-\t-\tSpeaker#1\t*\t-
bc/cctv/00/cctv_0001\t0\t2\tit\tPRP\t(NP*))\t-\t-\t-\tSpeaker#1\t*\t(1)
bc/cctv/00/cctv_0001\t0\t3\t.\t.\t*))\t-\t-\t-\tSpeaker#1\t*\t-

#end document
"""
PART1 = """#begin document (bc/cctv/00/cctv_0001); part 001
bc/cctv/00/cctv_0001\t1\t0\tMary\tNNP\t(TOP(S(NP*)\t-\t-\t-\tSpeaker#2\t(PERSON)\t(0)
bc/cctv/00/cctv_0001\t1\t1\tsmiled\tVBD\t(VP*)\t-\t-\t-\tSpeaker#2\t*\t-
bc/cctv/00/cctv_0001\t1\t2\t.\t.\t*))\t-\t-\t-\tSpeaker#2\t*\t-

bc/cctv/00/cctv_0001\t1\t0\tShe\tPRP\t(TOP(S(NP*)\t-\t-\t-\tSpeaker#2\t*\t(0)
bc/cctv/00/cctv_0001\t1\t1\tleft\tVBD\t(VP*)\t-\t-\t-\tSpeaker#2\t*\t-
bc/cctv/00/cctv_0001\t1\t2\t.\t.\t*))\t-\t-\t-\tSpeaker#2\t*\t-

#end document
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A miniature conll-2012/v4/data tree: english gold (two parts) plus an auto file and a chinese file."""
    data = tmp_path / "conll-2012" / "v4" / "data"
    english = data / "test" / "data" / "english" / "annotations" / "bc" / "cctv" / "00"
    english.mkdir(parents=True)
    (english / "cctv_0001.v4_gold_conll").write_text(PART0 + PART1)
    (english / "cctv_0001.v4_auto_conll").write_text("not read: auto annotation\n")
    chinese = data / "test" / "data" / "chinese" / "annotations" / "bc"
    chinese.mkdir(parents=True)
    (chinese / "x.v4_gold_conll").write_text("not read: another language\n")
    (data / "train").mkdir()
    return data


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGCTX_ONTONOTES", raising=False)


def test_without_a_path_the_task_is_unavailable_with_the_reason(no_env: None) -> None:
    info = discover().get("coref_ontonotes")
    with pytest.raises(TaskUnavailable, match=r"licensed by the LDC.*coref_ontonotes\.path=.*\$LONGCTX_ONTONOTES"):
        info.build(lengths=[256], seed=0, tokenizer=None)


def test_finds_the_split_gold_files_of_one_language(tree: Path) -> None:
    (gold,) = ontonotes_paths(str(tree))
    assert gold.name == "cctv_0001.v4_gold_conll"
    assert ontonotes_paths(str(tree / "test")) == [gold] == ontonotes_paths(str(tree.parent.parent))
    assert ontonotes_paths(str(gold)) == [gold]
    assert ontonotes_paths(str(tree / "test" / "**" / "english" / "**" / "*gold_conll")) == [gold]
    with pytest.raises(DataError, match="no CoNLL-2012 file found"):
        ontonotes_paths(str(tree), split="train")
    with pytest.raises(DataError, match="no such file or folder"):
        ontonotes_paths(str(tree / "nope"))


def test_corpus_keeps_parts_apart(tree: Path) -> None:
    corpus = ontonotes(str(tree))
    assert [d.name for d in corpus.documents] == [
        "(bc/cctv/00/cctv_0001); part 000",
        "(bc/cctv/00/cctv_0001); part 001",
    ]
    first = corpus.documents[0]
    assert first.tokens[:4] == ("John", "saw", "the", "dog") and first.sentence_ends == (5, 9)
    assert first.clusters == (((0, 0), (5, 5)), ((2, 3), (7, 7)))
    assert not corpus.singletons


@pytest.mark.parametrize("via", ["arg", "env"])
def test_task_builds_and_scores_samples_from_the_users_files(
    tree: Path, via: str, no_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = discover().get("coref_ontonotes")
    args = {"path": str(tree)} if via == "arg" else {}
    if via == "env":
        monkeypatch.setenv("LONGCTX_ONTONOTES", str(tree))
    task = info.build(args, lengths=[256], seed=0, tokenizer=None)
    samples = list(task.samples())
    assert [s.id for s in samples] == ["bc/cctv/00/cctv_0001@256", "bc/cctv/00/cctv_0001-p001@256"]
    assert all(s.metadata["corpus"] == "ontonotes" and s.metadata["split"] == "test" for s in samples)
    for s in samples:
        assert task.scorer(s, task.oracle(s))["conll_doc"] == 1.0
        words = s.context.split()
        assert len(words) >= 9 and s.gold["singletons"] is False


def test_run_records_the_skip_and_runs_with_task_arg(tree: Path, tmp_path: Path, no_env: None) -> None:
    import json

    from longctx_eval.cli import main

    out = tmp_path / "runs"
    base = ["run", "--model", "oracle", "--tasks", "coref_ontonotes", "--lengths", "256", "--out", str(out)]
    assert main(base) == 0
    run = json.loads((out / "oracle" / "run.json").read_text())
    (skip,) = run["skipped"]
    assert skip["task"] == "coref_ontonotes" and skip["kind"] == "missing_data" and "LDC" in skip["reason"]
    assert main([*base, "--task-arg", f"coref_ontonotes.path={tree}"]) == 0
    run = json.loads((out / "oracle" / "run.json").read_text())
    (result,) = [t for t in run["tasks"] if t["name"] == "coref_ontonotes"]
    pooled = {r["metric"]: r["value"] for r in result["results"] if r["length"] is None}
    assert pooled["conll_f1"] == 1.0 and result["args"] == {"path": str(tree)}
