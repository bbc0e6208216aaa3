"""The `vllm` bench part's prefix accounting on made-up passes: the whole-pass, prefill and cache figures, the
prefill cost model and the compute bound follow from the stored rows, and an older result without them shows only
what it holds."""

from __future__ import annotations

import pytest

from benchmarks.vllm_prefix_accounting import account, accounting_table, prefill_cost, prefill_cost_model

BOUND = 1.43
MODEL = {"c": 0.05, "a": 1.0, "b": 0.3}
"""The made-up prefill cost (seconds, n in thousands of tokens) the timed rows below are drawn from."""


def _pass(key: str, per_sample: float, ttft: float | None, batch: int = 1, cached: int | None = None) -> dict:
    rows = [
        {"length": 1024 * (1 + i % 2), "ttft_s": ttft, "cached_tokens": cached, "prompt_tokens": 1000} for i in range(4)
    ]
    per_length = {"1024": per_sample * 0.5, "2048": per_sample * 1.5} if batch == 1 else {}
    return {"key": key, "batch": batch, "seconds_per_sample": per_sample, "per_length_s": per_length, "rows": rows}


def _results() -> dict:
    return {
        "hf": {
            "passes": [_pass("ours", 1.0, 0.4), _pass("no_prefix", 1.3, 0.7)],
            "prefix_cache": {"reused_tokens": 900, "ideal_cached_tokens": 1000, "prompt_tokens": 4000},
        },
        "vllm": {
            "passes": [_pass("ours", 2.0, None, batch=4, cached=256), _pass("no_prefix", 2.4, None, batch=4, cached=0)],
            "engine": {"ideal_cached_tokens": 1024, "prompt_tokens": 4000},
        },
        "served": {"passes": [_pass("ours", 0.9, 0.3, batch=8), _pass("no_batching", 1.0, 0.3)]},
    }


GRID = [(1000, 0), (1000, 500), (2000, 0), (2000, 1500), (4000, 0), (4000, 3000), (8000, 0), (8000, 6000)]
"""(prompt tokens, tokens a reuse pass found cached) of a made-up grid over four lengths."""


def _timed(key: str, reuse: bool, ids: bool = True, own_counts: bool = True) -> dict:
    """A batch-1 pass whose times to first token follow MODEL exactly, 0.5 s of decode per request."""
    rows = []
    for i, (n, p) in enumerate(GRID):
        cached = p if reuse else 0
        rows.append(
            {
                "id": f"s{i}",
                "length": n,
                "prompt_tokens": n,
                "ttft_s": prefill_cost(MODEL, n, cached),
                "cached_tokens": (cached if reuse else None) if own_counts else None,
            }
        )
    total = sum(r["ttft_s"] + 0.5 for r in rows)
    return {"key": key, "batch": 1, "seconds_per_sample": total / len(rows), "rows": rows}


def test_prefill_share_follows_from_times_to_first_token_and_two_lengths_fit_no_cost_model() -> None:
    acc = account(_results(), BOUND)
    hf = acc["hf"]
    assert hf["whole_pass_bought"] == 1.3 and hf["share_of_bound"] == round(1.3 / BOUND, 3)
    assert hf["prefill_fraction"] == round(4 * 0.7 / (1.3 * 4), 3)
    assert hf["prefill_bought"] == pytest.approx(1.75, abs=1e-3)
    assert "compute" not in hf and "attainable" not in hf  # 1024 and 2048: three terms, two lengths
    assert hf["cache"]["share_of_ideal"] == 0.9 and hf["cache"]["token_bound"] == round(4000 / 3000, 3)
    assert hf["per_length_bought"] == {"1024": 1.3, "2048": 1.3}


def test_the_cost_model_is_recovered_and_the_compute_bound_counts_attention_to_the_cached_prefix() -> None:
    without, with_ = _timed("no_prefix", False), _timed("ours", True)
    fit = prefill_cost_model(without["rows"])
    assert fit is not None and fit["r2"] == pytest.approx(1.0)
    assert (fit["c"], fit["a"], fit["b"]) == pytest.approx((0.05, 1.0, 0.3), abs=1e-9)
    hf = account({"hf": {"passes": [with_, without]}}, BOUND)["hf"]
    fresh = sum(prefill_cost(MODEL, n) for n, _ in GRID)
    left = sum(prefill_cost(MODEL, n, p) for n, p in GRID)
    assert hf["compute"]["bound"] == round(fresh / left, 3)
    assert hf["compute"]["cached_from"] == "own"
    # the suffix still attends to the prefix: the compute bound is under the share of tokens left to prefill
    tokens = sum(n for n, _ in GRID) / sum(n - p for n, p in GRID)
    assert hf["compute"]["bound"] < tokens
    assert hf["prefill_bought"] == pytest.approx(fresh / left, abs=1e-3)
    assert hf["prefill_share_of_compute"] == pytest.approx(1.0, abs=2e-3)
    fraction = fresh / (fresh + 0.5 * len(GRID))
    attainable = 1 / (fraction / hf["compute"]["bound"] + 1 - fraction)
    assert hf["attainable"] == round(attainable, 3) and hf["share_of_attainable"] == pytest.approx(1.0, abs=2e-3)


def test_a_negative_term_is_dropped_rather_than_fitted() -> None:
    rows = [{"length": n, "prompt_tokens": n, "ttft_s": 0.1 + 2.0 * n / 1000} for n in (1000, 2000, 4000, 8000)]
    rows[0]["ttft_s"] += 0.05  # noise that would pull the n^2 term below zero in a free fit
    fit = prefill_cost_model(rows)
    assert fit is not None and fit["a"] > 0 and fit["b"] >= 0


def test_the_server_takes_the_cached_counts_of_the_in_process_engine_for_the_same_samples() -> None:
    results = {
        "vllm": {"passes": [_timed("ours", True)]},
        "served": {"passes": [_timed("no_batching", True, own_counts=False), _timed("no_prefix_one", False)]},
    }
    served = account(results, BOUND)["served"]
    assert served["compute"]["cached_from"] == "vllm" and served["prefill_share_of_compute"] == pytest.approx(
        1, abs=2e-3
    )
    del results["vllm"]
    assert "compute" not in account(results, BOUND)["served"]


def test_one_engine_call_gives_cache_counts_but_no_prefill_times() -> None:
    vllm = account(_results(), BOUND)["vllm"]
    assert vllm["cache"]["cached_tokens"] == 4 * 256 and vllm["cache"]["share_of_ideal"] == 1.0
    assert "prefill_bought" not in vllm and "per_length_bought" not in vllm


def test_a_backend_missing_its_no_reuse_pass_is_left_out_and_the_table_says_what_it_has() -> None:
    results = _results()
    acc = account(results, BOUND)
    assert "served" not in acc  # its pass without reuse did not run
    text = accounting_table({"prefix_bound": BOUND, "grid": {"lengths": [1024, 2048]}, "backends": results})
    assert "| ours `hf:` | 900 / 1,000 of 4,000 | 1.33x | 1.30x | 91% |" in text
    assert "openai:" not in text.split("\n\n")[0]
    assert "prefill cost model" not in text  # nothing fitted from two lengths
    old = {"hf": {"passes": [_pass("ours", 1.0, None), _pass("no_prefix", 1.2, None)]}}
    assert "| ours `hf:` |  |  | 1.20x | 84% |  |  |  |  |  |  |  | 1.20x |" in accounting_table(
        {"prefix_bound": BOUND, "grid": {"lengths": [1024]}, "backends": old}
    )


def test_the_table_shows_the_compute_bound_and_the_fitted_model() -> None:
    results = {"hf": {"passes": [_timed("ours", True), _timed("no_prefix", False)]}}
    text = accounting_table({"prefix_bound": BOUND, "grid": {"lengths": [1000, 2000, 4000, 8000]}, "backends": results})
    hf = account(results, BOUND)["hf"]
    assert f"| {hf['compute']['bound']:.2f}x | 100% | {hf['attainable']:.2f}x | 100% |" in text
    assert "prefill cost model (pass without reuse, n in thousands of tokens): 0.050 + 1.000 n + 0.3000 n^2 s" in text
