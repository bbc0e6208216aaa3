"""Opt-in (`pytest -m slow`, ~25-45 CPU-minutes): retrain the three references from the script and re-probe them.

The default suite checks the recipe quickly (tests/models/test_reference_training.py: varied lengths, padding,
a short schedule resumed bit for bit); this one reruns the full schedule against the committed weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.models.references import REFERENCE_ROOT

EXPECTED = REFERENCE_ROOT / "expected_metrics.json"
TOLERANCE = {"passkey_em": 0.15, "npb": 0.1, "lae": 0.5}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_retrained_references_reproduce_the_committed_metrics(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(REFERENCE_ROOT / "train.py"), "--model", "all", "--out", str(tmp_path), "--no-cache"]
    subprocess.run(["nice", "-n", "10", *cmd], check=True, env=env)  # exits 1 if a model misses the 0.95 bar
    expected = json.loads(EXPECTED.read_text())
    lengths = sorted({int(k) for per_model in expected.values() for k in per_model})
    for name, per_length in expected.items():
        folder, variant = (name.rsplit("-yarn", 1)[0], "yarn") if name.endswith("-yarn") else (name, "none")
        meta = json.loads((tmp_path / folder / "reference.json").read_text())
        assert meta["passkey_accuracy_1x"] >= 0.95
        same = _sha(tmp_path / folder / "model.safetensors") == _sha(REFERENCE_ROOT / folder / "model.safetensors")
        if not same:  # expected on another CPU or library build; the metrics below are the contract
            warnings.warn(f"{folder}: retrained weights differ bitwise from the committed ones", stacklevel=1)
        spec = f"hf:{tmp_path / folder}?max_length=65536" + ("&rope=yarn" if variant == "yarn" else "")
        out = tmp_path / f"probe-{name}"
        args = ["run", "--model", spec, "--tasks", "posprobe", "--lengths", ",".join(map(str, lengths))]
        assert main([*args, "--out", str(out)]) == 0
        run = json.loads(next(out.rglob("run.json")).read_text())
        got = {(r["metric"], r["length"]): r["value"] for r in run["tasks"][0]["results"] if r["depth"] is None}
        for length, metrics in per_length.items():
            for metric, value in metrics.items():
                assert got[(metric, int(length))] == pytest.approx(value, abs=TOLERANCE[metric]), (name, length, metric)
