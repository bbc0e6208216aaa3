"""Plugins: the README's worked example, --include-path, the entry-point group and `validate-task`."""

from __future__ import annotations

import json
import re

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from tests.conftest import REPO


def _readme_example() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Add your own task", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_is_discovered_run_and_scored(tmp_path, capsys):
    plugins = tmp_path / "my_tasks"
    plugins.mkdir()
    (plugins / "kv_lookup.py").write_text(_readme_example())
    inc = ["--include-path", str(plugins)]

    assert main(["tasks", *inc]) == 0
    listing = capsys.readouterr().out
    assert "kv_lookup" in listing and "needle" in listing

    assert main(["validate-task", "kv_lookup", *inc]) == 0
    checks = capsys.readouterr().err
    assert checks.count("ok") >= 3 and "FAIL" not in checks

    out = tmp_path / "results"
    assert main(["run", "--model", "oracle,bm25", "--tasks", "kv_lookup", *inc, "--out", str(out)]) == 0
    run = json.loads((out / "oracle" / "run.json").read_text())
    pooled = {r["metric"]: r["value"] for r in run["tasks"][0]["results"] if r["length"] is None}
    assert pooled["score"] == 1.0 and run["tasks"][0]["n_samples"] == 6
    bm25 = json.loads((out / "bm25" / "run.json").read_text())
    assert bm25["tasks"] == [] and bm25["skipped"][0]["task"] == "kv_lookup"
    assert "lacks capability 'generate'" in bm25["skipped"][0]["reason"]

    (out / "oracle" / "run.json").unlink()
    assert main(["score", str(out / "oracle"), *inc]) == 0
    assert json.loads((out / "oracle" / "run.json").read_text())["tasks"] == run["tasks"]


def test_entry_point_group_registers_a_task(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "ep_tasks").mkdir(parents=True)
    (site / "ep_tasks" / "__init__.py").write_text("")
    (site / "ep_tasks" / "kv.py").write_text(_readme_example().replace('name="kv_lookup"', 'name="kv_ep"'))
    dist = site / "ep_tasks-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-tasks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[longctx_eval.tasks]\nkv_ep = ep_tasks.kv\n")
    monkeypatch.syspath_prepend(str(site))
    registry = discover()
    assert "kv_ep" in registry and "needle" in registry
    assert registry["kv_ep"].source.endswith("kv.py")


def test_validate_task_catches_nondeterminism_and_a_scorer_the_oracle_cannot_pass(tmp_path, capsys):
    plugins = tmp_path / "p"
    plugins.mkdir()
    src = _readme_example()
    flaky = src.replace('random.Random(f"{seed}-{length}-{i}")', "random.Random()").replace("kv_lookup", "flaky")
    (plugins / "flaky.py").write_text(flaky)
    harsh = src.replace("kv_lookup", "harsh").replace("float(contains_answer(", "0.0 * float(contains_answer(")
    (plugins / "harsh.py").write_text(harsh)
    assert main(["validate-task", "flaky", "--include-path", str(plugins)]) == 1
    assert "FAIL deterministic" in capsys.readouterr().err
    assert main(["validate-task", "harsh", "--include-path", str(plugins)]) == 1
    assert "FAIL oracle scores 100%" in capsys.readouterr().err


def test_readme_example_is_the_documented_example_file():
    """The README's task and docs/examples/kv_lookup.py (shown in docs/plugins.md) never drift apart."""
    assert _readme_example() == (REPO / "docs" / "examples" / "kv_lookup.py").read_text()
