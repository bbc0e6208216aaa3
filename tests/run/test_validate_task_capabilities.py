"""`validate-task` checks every capability a task serves, with the oracle and with a wrong answer (campaign 11).

The task is the docs' second worked example (`two_needles`, generate or retrieve), copied into a plugin folder
and broken one way at a time: a retrieval scorer that always gives 0 (used to pass: only the first capability
was checked), and a scorer that gives 1 whatever the answer (a scorer that cannot fail).
"""

from __future__ import annotations

import shutil

import pytest

from longctx_eval.cli import main
from tests.conftest import REPO

EXAMPLES = REPO / "docs" / "examples"
SCORE_LINE = "        found = found_needles(sample, prediction, found_at)\n"


def _plugin(tmp_path, name: str, replacement: str | None):
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(EXAMPLES / "_find_both.py", folder / "_find_both.py")
    src = (EXAMPLES / "two_needles.py").read_text().replace('"two_needles"', f'"{name}"')
    assert SCORE_LINE in src
    if replacement is not None:
        src = src.replace(SCORE_LINE, replacement)
    (folder / f"{name}.py").write_text(src)
    return folder


def _validate(folder, name: str, capsys) -> tuple[int, str]:
    rc = main(["validate-task", name, "--include-path", str(folder), "--lengths", "512", "--limit", "2"])
    return rc, capsys.readouterr().err


def test_the_example_passes_through_both_capabilities(tmp_path, capsys):
    rc, err = _validate(_plugin(tmp_path, "two_ok", None), "two_ok", capsys)
    assert rc == 0, err
    for cap in ("generate", "retrieve"):
        assert f"ok oracle scores 100% through {cap}" in err
        assert f"ok a wrong (empty) answer scores below 100% through {cap}" in err


def test_a_retrieval_scorer_that_always_fails_is_caught(tmp_path, capsys):
    broken = (
        SCORE_LINE + "        if prediction.text is None:  # retrieval: always 0\n"
        "            found = [False for _ in found]\n"
    )
    rc, err = _validate(_plugin(tmp_path, "two_bad_retrieval", broken), "two_bad_retrieval", capsys)
    assert rc == 1
    assert "ok oracle scores 100% through generate" in err
    assert "FAIL oracle scores 100% through retrieve: both = 0.0" in err


@pytest.mark.parametrize("cap", ["generate", "retrieve"])
def test_a_scorer_that_cannot_fail_is_caught(tmp_path, capsys, cap):
    test = "is not None" if cap == "generate" else "is None"
    lenient = SCORE_LINE + f"        if prediction.text {test}:\n            found = [True, True]\n"
    rc, err = _validate(_plugin(tmp_path, f"two_lenient_{cap}", lenient), f"two_lenient_{cap}", capsys)
    assert rc == 1
    assert f"FAIL a wrong (empty) answer scores below 100% through {cap}: both = 1.0" in err
    other = "retrieve" if cap == "generate" else "generate"
    assert f"ok a wrong (empty) answer scores below 100% through {other}" in err
