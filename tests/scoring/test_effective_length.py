"""Effective length: the definition on constructed per-length scores, its interval, the window flag, the
threshold options, and the run-file field, through `run` and `score` on real files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.metrics.aggregate import mean, ratio
from longctx_eval.results import Coverage
from longctx_eval.scoring.effective_length import EffectiveLengthConfig, effective_lengths, longest_holding
from longctx_eval.scoring.labels import effective_sentence, format_effective
from tests.scoring.test_breakdowns import write_probe

LENGTHS = (1024, 2048, 4096, 8192)


def _scores(*shares: float, n: int = 20) -> dict[int, np.ndarray]:
    """Per length, n 0/1 scores with the given share of ones (exactly)."""
    return {
        length: np.array([[1.0]] * round(share * n) + [[0.0]] * (n - round(share * n)))
        for length, share in zip(LENGTHS, shares, strict=False)
    }


def _by_kind(per_length, config=None, coverage=()):
    config = config or EffectiveLengthConfig()
    return {e.kind: e for e in effective_lengths(per_length, mean("score"), config, coverage)}


def test_all_above_threshold_gives_the_longest_length():
    got = _by_kind(_scores(1.0, 0.95, 0.9, 0.9))
    assert got["absolute"].value == 8192 and got["absolute"].threshold == 0.856
    assert got["absolute"].lengths == list(LENGTHS) and not got["absolute"].limited_by_window
    assert got["relative"].value == 8192


def test_a_dip_in_the_middle_stops_before_it():
    got = _by_kind(_scores(0.95, 0.9, 0.5, 1.0))
    assert got["absolute"].value == 2048  # 8K is back above, but 4K fell short
    assert got["relative"].value == 2048


def test_below_at_the_shortest_length_is_zero_shown_as_below_it():
    got = _by_kind(_scores(0.8, 0.9, 0.9))
    assert got["absolute"].value == 0
    assert format_effective(got["absolute"]).startswith("<1K [<1K, ")
    assert got["relative"].value == 4096  # 0.85 x 0.8 = 0.68: the model holds its own level


def test_relative_threshold_is_a_share_of_the_shortest_lengths_score():
    got = _by_kind(_scores(0.6, 0.55, 0.4, 0.6))
    rel = got["relative"]
    assert rel.base_length == 1024 and rel.base_value == 0.6 and rel.fraction == 0.85
    assert rel.threshold == pytest.approx(0.51)
    assert rel.value == 2048 and got["absolute"].value == 0
    assert "score >= 0.51 = 85% of 0.6 at 1K" in effective_sentence(rel)
    # a model scoring 0 at its shortest length keeps nothing: 0, not "every length"
    assert _by_kind(_scores(0.0, 0.0))["relative"].value == 0


def test_score_equal_to_the_threshold_holds():
    got = _by_kind(_scores(1.0, 0.85), EffectiveLengthConfig(threshold=0.85, fraction=0.85))
    assert got["absolute"].value == 2048 and got["relative"].value == 2048


def test_interval_is_made_of_evaluated_lengths_and_brackets_the_value():
    certain = _by_kind(_scores(1.0, 1.0, 1.0))["absolute"]
    assert certain.ci95 == (4096, 4096)
    shaky = _by_kind(_scores(0.95, 0.9, 0.85, 0.8))["absolute"]
    assert shaky.ci95[0] <= shaky.value <= shaky.ci95[1]
    assert set(shaky.ci95) <= {0, *LENGTHS} and shaky.ci95[0] < shaky.ci95[1]
    assert _by_kind(_scores(0.95, 0.9, 0.85, 0.8)) == _by_kind(_scores(0.95, 0.9, 0.85, 0.8))  # seeded


def test_window_flag_only_when_the_window_ended_the_measurement():
    over = [Coverage(length=8192, depth=None, planned=20, evaluated=0, over_length=20)]
    held = _by_kind(_scores(1.0, 0.9), coverage=over)
    assert held["absolute"].value == 2048 and held["absolute"].limited_by_window
    assert held["absolute"].over_window_lengths == [8192]
    assert format_effective(held["absolute"]).endswith(" (window)")
    assert "limited by the model's window (8K over it)" in effective_sentence(held["absolute"])
    dipped = _by_kind(_scores(1.0, 0.5), coverage=over)
    assert dipped["absolute"].value == 1024 and not dipped["absolute"].limited_by_window


def test_not_computed_for_one_length_or_a_metric_off_the_unit_scale():
    assert effective_lengths(_scores(1.0), mean("score"), EffectiveLengthConfig()) == []
    perplexity = {n: np.array([[12.5], [30.0]]) for n in LENGTHS[:2]}
    assert effective_lengths(perplexity, mean("ppl"), EffectiveLengthConfig()) == []


def test_any_metric_reduce_works():
    found = {n: np.array([[1.0, 1.0], [1.0, 2.0]]) for n in LENGTHS[:2]}  # 2 of 3 needles found
    got = effective_lengths(found, ratio("found", "needles", "recall"), EffectiveLengthConfig(threshold=0.6))
    assert got[0].metric == "recall" and got[0].value == 2048


def test_longest_holding_per_row():
    scores = np.array([[0.9, 0.9, 0.9], [0.9, 0.1, 0.9], [0.1, 0.9, 0.9]])
    assert list(longest_holding(scores, np.array([0.5, 0.5, 0.5]), [1, 2, 3])) == [3, 1, 0]


@pytest.mark.parametrize(
    ("value", "message"),
    [(85.6, "give 0.856 for 85.6%"), (0.0, "expected a fraction in (0, 1]"), (250.0, "e.g. 0.856 for 85.6%")],
)
def test_thresholds_are_fractions(value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        EffectiveLengthConfig(threshold=value)
    with pytest.raises(ConfigError, match="--effective-relative"):
        EffectiveLengthConfig(fraction=value)


def _task(run_dir: Path) -> dict:
    return next(t for t in json.loads((run_dir / "run.json").read_text())["tasks"] if t["name"] == "probe")


def test_threshold_flags_on_run_and_score(tmp_path, capsys):
    plugins = write_probe(tmp_path / "plugins")
    out = tmp_path / "out"
    common = ["--tasks", "probe", "--include-path", str(plugins)]
    assert main(["run", "--model", "oracle", *common, "--effective-threshold", "0.7", "--out", str(out)]) == 0
    got = {e["kind"]: e for e in _task(out / "oracle")["effective_length"]}
    # per-length scores 0.75, 0.5, 1.0: 64 holds, the dip at 128 ends it although 256 is back at 1.0
    assert got["absolute"]["threshold"] == 0.7 and got["absolute"]["value"] == 64
    assert got["absolute"]["lengths"] == [64, 128, 256]
    assert got["relative"]["value"] == 64 and got["relative"]["base_value"] == 0.75

    run_dir = str(out / "oracle")
    assert main(["score", run_dir, "--include-path", str(plugins), "--effective-relative", "0.5"]) == 0
    got = {e["kind"]: e for e in _task(out / "oracle")["effective_length"]}
    assert got["absolute"]["threshold"] == 0.856 and got["absolute"]["value"] == 0  # the default again
    assert got["relative"]["fraction"] == 0.5 and got["relative"]["value"] == 256  # 0.5 x 0.75 = 0.375
    capsys.readouterr()
    assert main(["score", run_dir, "--include-path", str(plugins), "--effective-threshold", "85.6"]) == 2
    assert "give 0.856 for 85.6%" in capsys.readouterr().err
    assert main(["run", "--model", "oracle", *common, "--effective-relative", "85", "--out", str(out)]) == 2


def test_window_limited_model_is_flagged_end_to_end(tmp_path, tiny_llama_dir):
    """A real 512-token model: 1024-token samples are over its window, so its effective length says so."""
    plugins = write_probe(tmp_path / "plugins")
    args = ["run", "--model", f"hf:{tiny_llama_dir}", "--tasks", "probe", "--lengths", "16,32,1024"]
    assert main([*args, "--include-path", str(plugins), "--out", str(tmp_path)]) == 0
    task = _task(tmp_path / tiny_llama_dir.name)
    absolute = next(e for e in task["effective_length"] if e["kind"] == "absolute")
    assert absolute["lengths"] == [16, 32] and absolute["over_window_lengths"] == [1024]
    assert absolute["value"] == 32 and absolute["limited_by_window"] is True
    assert task["throughput"]["output_tokens_per_s"] > 0
