"""`gemma3-270m` is an opt-in short name: never in the default suite, installed by `make gemma3` (the pin of
models/assets.py), and without its package one line naming that target, exit 2, before anything loads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.models import model_source
from longctx_eval.models.assets import GEMMA3_PACKAGE
from longctx_eval.models.spec import DEFAULT_MODELS, parse_spec

ROOT = Path(__file__).resolve().parents[2]


def test_short_name_expands_and_stays_out_of_the_defaults(monkeypatch):
    monkeypatch.setattr(model_source, "gemma3_installed", lambda: True)
    spec = parse_spec("gemma3-270m?max_length=8192")
    assert (spec.kind, spec.target, spec.name) == ("hf", "gemma3-270m", "gemma3-270m")
    assert "gemma3-270m" not in DEFAULT_MODELS
    assert "gemma3" not in (ROOT / "longctx_eval" / "suites" / "default.toml").read_text()


def test_without_the_package_one_line_names_the_make_target(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(model_source, "gemma3_installed", lambda: False)
    rc = main(["run", "--model", "gemma3-270m", "--tasks", "needle", "--lengths", "1k", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "`make gemma3`" in err and GEMMA3_PACKAGE in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # refused at parse time: no run folder


@pytest.mark.skipif(subprocess.run(["which", "make"], capture_output=True).returncode != 0, reason="no make")
def test_make_target_installs_the_pinned_package():
    out = subprocess.run(["make", "-n", "gemma3"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"pip install --quiet --disable-pip-version-check '{GEMMA3_PACKAGE}'" in out
