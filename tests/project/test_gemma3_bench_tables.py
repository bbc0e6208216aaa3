"""The Gemma 3 bench parts without the model: their tables and ratios from given rows, the README section of a
skipped part, the llama.cpp recipe, and that `make bench` runs them only when named."""

from __future__ import annotations

from pathlib import Path


def _row(prefill_s: float, decode_s: float, tokens: int, steps: int, reply: str) -> dict:
    from benchmarks.gemma3_speed import _rates

    return _rates(
        {
            "prompt_tokens": tokens,
            "prefill_s": prefill_s,
            "decode_s": decode_s,
            "decode_steps": steps,
            "reply": reply,
            "load": 1.0,
        }
    )


def test_speed_table_divides_ours_by_llama_cpp():
    from benchmarks.gemma3_speed import table

    hf = _row(10.0, 2.0, 4000, 10, " 42.")
    llama = _row(20.0, 1.0, 4000, 10, "42.")
    assert hf["prefill_tok_s"] == 400.0 and hf["decode_s_per_token"] == 0.2
    text = table({"threads": 1, "rows": [{"length": 4096, "hf": hf, "llama_cpp": llama}]})
    assert "| 4096 | 4000 / 4000 | 400.0 | 200.0 | 2.00x | 0.2 | 0.1 | 2.00x |" in text
    assert "| yes |" in text  # replies equal up to surrounding space
    assert table({"skipped": "not installed"}) == "Not measured: not installed.\n"


def test_prefix_table_states_reuse_against_the_bound():
    from benchmarks.gemma3_prefix import table

    lane = {"seconds": 1.0, "prefill_s": 1.0, "cached_tokens": 0, "reply": "a", "load": 1.0}
    result = {
        "rows": [{"depth": 0.0, "prompt_tokens": 100, "on": lane, "off": lane}],
        "cached_tokens": 850,
        "bound_tokens": 1000,
        "tokens_of_bound": 0.85,
        "prefill_saved_s": 9.0,
        "bound_saved_s": 10.0,
        "time_of_bound": 0.9,
        "prefill_speedup": 1.3,
        "bound_speedup": 1.4,
        "replies_equal": 1,
        "threads": 1,
    }
    text = table(result)
    assert "850 of the bound's 1,000 (**85%**)" in text and "(**90%**)" in text


def test_bound_counts_every_shared_leading_token_but_the_last():
    from benchmarks.prefix_order import prefilled

    ids = [[1, 2, 3, 4, 5], [1, 2, 3, 9], [1, 2, 3, 9]]
    # the second shares 3 leading ids, the third all but its last (always prefilled)
    assert sum(map(len, ids)) - prefilled(ids, min_tokens=0) == 3 + 3


def test_llama_cpp_recipe_and_opt_in_parts():
    from benchmarks.__main__ import OPT_IN, parse_args
    from benchmarks.llama_cpp_server import server_command
    from benchmarks.results_readme import _gemma3_lines

    cmd = server_command(Path("g.gguf"), 8000, 16384, 1)
    assert cmd[cmd.index("--logits_all") + 1] == "False" and cmd[cmd.index("--flash_attn") + 1] == "True"
    assert cmd[cmd.index("--n_ctx") + 1] == "16384"
    default = parse_args([]).parts.split(",")
    assert {"gemma3_prefix", "gemma3_speed"} == OPT_IN and not OPT_IN & set(default)
    lines = _gemma3_lines({"gemma3_speed": {"skipped": "Gemma 3 270M is not installed (`make gemma3`)"}})
    assert lines[-1] == "Not measured: Gemma 3 270M is not installed (`make gemma3`).\n"
