"""The probe through the real CLI on the committed reference models: 1x accuracy and a CI-sized 1x/4x/16x run."""

from __future__ import annotations

import json

import pytest

from longctx_eval.cli import main
from longctx_eval.cli.posprobe import markdown_table, plot_probe, probe_rows
from longctx_eval.models.references import REFERENCE_ROOT

pytestmark = pytest.mark.skipif(
    not (REFERENCE_ROOT / "tiny-rope" / "model.safetensors").is_file(),
    reason="reference weights not built (make reference-models)",
)


def _pooled(run_file, metric: str) -> dict[int, float]:
    run = json.loads(run_file.read_text())
    task = next(t for t in run["tasks"] if t["name"] == "posprobe")
    return {r["length"]: r["value"] for r in task["results"] if r["metric"] == metric and r["depth"] is None}


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """tiny-rope with RoPE unscaled and with YaRN, 12 needles at 1x / 4x / 16x, through `longctx-eval run`."""
    out = tmp_path_factory.mktemp("posprobe-ci")
    args = ["run", "--model", "tiny-rope,tiny-rope-yarn", "--tasks", "posprobe", "--lengths", "128,512,2048"]
    assert main([*args, "--limit", "12", "--out", str(out)]) == 0
    return out


def test_ci_sized_run_separates_rope_from_yarn_at_16x(ci_run):
    out = ci_run
    none, yarn = out / "tiny-rope" / "run.json", out / "tiny-rope-yarn" / "run.json"
    em_none, em_yarn = _pooled(none, "passkey_em"), _pooled(yarn, "passkey_em")
    assert em_none[128] == em_yarn[128] == 1.0  # identical below the training length
    assert em_none[2048] < em_yarn[2048]
    assert em_none[2048] <= 0.25 and em_yarn[2048] >= 0.5
    assert _pooled(none, "npb")[2048] > _pooled(yarn, "npb")[2048]
    assert _pooled(none, "rho")[2048] > _pooled(yarn, "rho")[2048]
    assert set(_pooled(none, "passkey_em")) == {None, 128, 512, 2048}
    assert _pooled(none, "l_over_ltrain") == {None: pytest.approx(7.0), 128: 1.0, 512: 4.0, 2048: 16.0}


def test_depth_quintiles_and_frozen_heads_are_recorded(ci_run):
    out = ci_run
    run = json.loads((out / "tiny-rope" / "run.json").read_text())
    depths = {r["depth"] for r in run["tasks"][0]["results"] if r["metric"] == "passkey_em" and r["length"] == 128}
    assert depths == {None, 0.1, 0.3, 0.5, 0.7, 0.9}
    heads = set()
    for run_dir in ("tiny-rope", "tiny-rope-yarn"):
        records = [json.loads(line) for line in (out / run_dir / "predictions.jsonl").read_text().splitlines()]
        probes = [r["data"] for r in records if "calibration" in r["data"]]
        texts = [r["data"] for r in records if "text_tokens" in r["data"]]
        assert len(probes) == 36 and len(texts) == 9  # 12 needles x 3 lengths; every 5th needle index has a text
        for d in probes:
            heads.add(json.dumps(d["calibration"]["heads"]))
            assert d["rope"]["variant"] == ("none" if run_dir == "tiny-rope" else "yarn")
    assert len(heads) == 1  # one head set for every length and variant of the same weights
    assert 1 <= len(json.loads(heads.pop())) <= 4


def test_report_table_and_plots(ci_run, tmp_path):
    out = ci_run
    rows = probe_rows([out])
    assert {r["model"] for r in rows} == {"tiny-rope", "tiny-rope-yarn"}
    table = markdown_table(rows)
    assert "| tiny-rope-yarn | 2048 | 16.000 |" in table
    pngs = plot_probe(rows, tmp_path)
    assert [p.name for p in pngs] == ["posprobe_passkey_em.png", "posprobe_npb.png", "posprobe_lae.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)


@pytest.mark.parametrize("name", ["tiny-rope", "tiny-alibi"])
def test_committed_references_pass_the_passkey_bar_at_1x(tmp_path, name):
    assert main(["run", "--model", name, "--tasks", "posprobe", "--lengths", "128", "--out", str(tmp_path)]) == 0
    run_file = tmp_path / name / "run.json"
    assert _pooled(run_file, "passkey_em")[128] >= 0.95
    assert _pooled(run_file, "npb_hit")[128] >= 0.9
    run = json.loads(run_file.read_text())
    assert run["model"]["capabilities"] == ["attention"] and run["tasks"][0]["n_samples"] == 60
