"""`longctx-eval compare` called as a user would, for the tests of tests/scoring: exit code, stdout, stderr."""

from __future__ import annotations

import pytest

from longctx_eval.cli import main


def compare_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `compare ARGS`; (exit code, stdout, stripped stderr), asserting no traceback reached the user."""
    capsys.readouterr()
    rc = main(["compare", *args])
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    return rc, got.out, got.err.strip()
