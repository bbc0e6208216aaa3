"""Damaged run files read by `compare`, `score` and the leaderboard (issue 39, causes 2 and 3; notes C8, C9).

A real bm25 run (needle and cross_paragraph, 1024 tokens, 4 samples each) is copied and damaged: a torn scores
line, garbage, a string score, invalid UTF-8, NaN, null scores, a damaged samples line. Each is one line naming
the file and line, exit 2, and no other result is lost. Hypothesis mutates the per-sample lines and run.json and
calls the readers directly: every outcome is a result or a one-line LongctxError, never another exception.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from compare_cli import compare_cli as _compare  # tests/ is on sys.path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longctx_eval.cli import main
from longctx_eval.errors import LongctxError, RunFileError
from longctx_eval.scoring.comparison import compare_runs, to_text
from longctx_eval.scoring.paired_scores import read_sample_scores, sample_scores
from longctx_eval.scoring.score import score_run_dir

REPO = Path(__file__).resolve().parents[2]
SCORES = Path("scores") / "needle.jsonl"
SAMPLES = Path("samples") / "needle.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("damaged") / "runs"
    args = ["--tasks", "needle,cross_paragraph", "--lengths", "1024", "--limit", "4", "--out", str(out)]
    assert main(["run", "--model", "bm25", *args]) == 0
    return out / "bm25"


def _copy(run: Path, dest: Path, rel: Path, edit: Any) -> Path:
    """A copy of `run` whose file `rel` is `edit(its bytes)`."""
    shutil.copytree(run, dest)
    (dest / rel).write_bytes(edit((run / rel).read_bytes()))
    return dest


def _replace_first(old: bytes, new: bytes) -> Any:
    return lambda data: data.replace(old, new, 1)


def _every(old: bytes, new: bytes) -> Any:
    return lambda data: data.replace(old, new)


@pytest.mark.parametrize(
    ("edit", "line", "expect"),
    [
        (lambda data: data[:700], 2, "not valid JSON at column "),  # C5: line 2 torn (the line lengths are this run's)
        (lambda data: data + b"garbage{\n", 5, "not valid JSON at column 1: expecting value"),  # C6
        (_replace_first(b'"recall@1": 1.0', b'"recall@1": "high"'), 1, "field 'scores'.'recall@1': expected a number"),
        (lambda data: data + b"\xff\xfe\n", 5, "not UTF-8 at byte 0 (torn line)"),  # C8: the line is named
        (_every(b'"recall@1": 1.0', b'"recall@1": NaN'), 1, "not valid JSON: NaN is not JSON"),  # C9 as written
    ],
    ids=["torn", "garbage", "string-score", "invalid-utf8", "nan"],
)
def test_a_damaged_scores_line_is_one_line_naming_file_and_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, line: int, expect: str
) -> None:
    damaged = _copy(run, tmp_path / "b", SCORES, edit)
    rc, out, err = _compare(capsys, str(run), str(damaged), "--task", "needle")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, err
    assert f"{damaged / SCORES}:{line}: {expect}" in err, err
    assert "expected one JSON object per line with id, status, metadata and scores" in err
    assert f"`longctx-eval score {damaged}` rewrites it" in err


def test_a_damaged_samples_line_is_named_by_compare_and_by_score(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = _copy(run, tmp_path / "b", SAMPLES, lambda data: data.replace(b'"keys": [', b'"keys": 5, "k": [', 1))
    rc, _, err = _compare(capsys, str(run), str(damaged), "--task", "needle")
    assert rc == 2 and f"{damaged / SAMPLES}:1: field 'keys': expected a list of prediction keys" in err, err
    before = json.loads((damaged / "run.json").read_text())
    assert main(["score", str(damaged)]) == 2
    err = capsys.readouterr().err
    assert f"error needle: {damaged / SAMPLES}:1: field 'keys'" in err and "its earlier result is kept" in err, err
    after = json.loads((damaged / "run.json").read_text())
    assert [t["results"] for t in after["tasks"]] == [t["results"] for t in before["tasks"]]  # nothing lost


def test_every_score_null_says_why_nothing_pairs(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """C9 with the file as `score` writes a non-finite value (null): the ids are shared, the values are not."""
    damaged = _copy(run, tmp_path / "b", SCORES, _every(b'"recall@1": 1.0', b'"recall@1": null'))
    rc, _, err = _compare(capsys, str(run), str(damaged), "--task", "needle")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "no shared samples (4 sample id(s) in common, but none has a finite recall@1 in both runs" in err, err
    assert f"{run}: 4 of them, {damaged}: 0" in err and "no sample id in common" not in err


def test_a_damaged_task_loses_no_other_result(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two tasks, one damaged: the other is compared and printed, then one error line and exit 2."""
    damaged = _copy(run, tmp_path / "b", SCORES, lambda data: data[:700])
    out_json = tmp_path / "cmp.json"
    rc, out, err = _compare(capsys, str(run), str(damaged), "--json", str(out_json))
    assert rc == 2
    assert "cross_paragraph (retrieve)" in out and f"not compared: needle: {damaged / SCORES}:2:" in out
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"{damaged / SCORES}:2: not valid JSON" in line and "(the other tasks are compared above)" in line
    assert [t["task"] for t in json.loads(out_json.read_text())["tasks"]] == ["cross_paragraph"]


def test_leaderboard_keeps_the_board_and_names_the_damage(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = _copy(run, tmp_path / "b", SCORES, lambda data: data[:700])
    assert sample_scores(damaged, "needle") == {}  # no paired test from it; the board itself is built
    assert f"warning {damaged / SCORES}:2: not valid JSON" in capsys.readouterr().err
    with pytest.raises(RunFileError, match="scores/needle.jsonl:2: "):
        read_sample_scores(damaged, "needle")


def test_negative_seed_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _compare(capsys, str(run), str(run), "--seed", "-1")
    assert (
        rc == 2 and out == "" and err == "error: --seed: expected a non-negative integer (the resamples' seed), got -1"
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "import sys; from longctx_eval.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_end_to_end_torn_scores_file_and_negative_seed(run: Path, tmp_path: Path) -> None:
    """The fault campaign's reproductions through the installed CLI: exit 2, one line, no traceback."""
    damaged = _copy(run, tmp_path / "b", SCORES, lambda data: data[:700])
    for args, expect in [
        ((str(run), str(damaged), "--task", "needle"), f"{damaged / SCORES}:2: not valid JSON at column "),
        ((str(run), str(run), "--seed", "-1"), "--seed: expected a non-negative integer"),
    ]:
        done = _cli("compare", *args)
        assert done.returncode == 2 and done.stdout == "", done
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert expect in done.stderr


# --- hypothesis: mutated lines and run files through the readers -------------------------------------------------

JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=5,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed JSON value (the value itself first)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [prefix, *(p for k, v in items for p in _paths(v, (*prefix, k)))]


@st.composite
def _mutated(draw: st.DrawFn, data: bytes, document: bool) -> bytes:
    """`data` with one line (or, for a JSON document, the whole file) cut, spliced with bytes, replaced, or with
    one value replaced or removed."""
    lines = [data] if document else data.splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["cut", "bytes", "line", "value", "drop"]))
    raw = lines[i]
    if kind == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif kind == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=6)).replace(b"\n", b"") + raw[at:]
    elif kind == "line":
        raw = draw(st.one_of(st.binary(max_size=20), JSON.map(lambda v: json.dumps(v).encode()))).replace(b"\n", b"")
    else:
        rec = json.loads(raw)
        path = draw(st.sampled_from(_paths(rec)[1:] if kind == "drop" else _paths(rec)))
        if not path:
            rec = draw(JSON)
        else:
            parent = rec
            for key in path[:-1]:
                parent = parent[key]
            if kind == "drop":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(JSON)
        raw = json.dumps(rec, indent=2 if document else None).encode()
    lines[i] = raw
    return raw if document else b"\n".join(lines) + b"\n"


def _one_line(exc: LongctxError) -> None:
    text = str(exc)
    assert text.strip() and len(text.splitlines()) == 1, repr(text)


def _through_compare(run: Path, damaged: Path) -> None:
    try:
        to_text(compare_runs(run, damaged))
        to_text(compare_runs(damaged, damaged, ["needle"]))
    except LongctxError as exc:
        _one_line(exc)


def _through_score(_: Path, damaged: Path) -> None:
    try:
        report = score_run_dir(damaged, echo=False)
    except LongctxError as exc:
        _one_line(exc)
        return
    for text in [*report.errors, *report.warnings]:
        assert len(text.splitlines()) == 1, text


FUZZ = [  # (file, reader, examples): a rescore costs about 10 times a comparison
    (SCORES, _through_compare, 80),
    (SAMPLES, _through_compare, 60),
    (SAMPLES, _through_score, 25),
    (Path("predictions.jsonl"), _through_score, 30),
    (Path("run.json"), _through_compare, 40),
    (Path("run.json"), _through_score, 25),
]


@pytest.mark.parametrize(("rel", "reader", "examples"), FUZZ, ids=[f"{r}-{f.__name__[9:]}" for r, f, _ in FUZZ])
def test_mutated_run_files_give_a_result_or_one_line(
    run: Path, tmp_path: Path, rel: Path, reader: Any, examples: int
) -> None:
    data = (run / rel).read_bytes()
    folders = itertools.count()

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def mutated(draw: st.DataObject) -> None:
        damaged = tmp_path / f"r{next(folders)}"
        shutil.copytree(run, damaged)
        (damaged / rel).write_bytes(draw.draw(_mutated(data, rel.suffix == ".json"), label=str(rel)))
        reader(run, damaged)
        shutil.rmtree(damaged)

    mutated()
