"""benchmarks/prefix_order.py: the prefix-cache rule it counts by, and the two orders on real samples."""

from __future__ import annotations


def test_prefix_order_counts_what_the_hf_prefix_cache_spares() -> None:
    """The count follows the prefix cache's rule (>= 256 shared ids with the previous prompt, its last token always
    prefilled) and, on two haystacks of five depths, the runner's order spares prefill where depth order did not."""
    from benchmarks.prefix_order import count_plan, prefilled
    from longctx_eval.discovery import discover
    from longctx_eval.models.model_source import hf_tokenizer_pair
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.config import TaskPlan

    shared = [7] * 300
    assert prefilled([shared + [1], shared + [2], [9] * 10]) == 301 + 1 + 10
    assert prefilled([[7] * 200 + [1], [7] * 200 + [2]]) == 402  # under 256 shared: no reuse
    hf_tok, tok = hf_tokenizer_pair(parse_spec("smollm2-135m"))
    plan = TaskPlan(discover()["needle"], (1024,), None, {"depths": 5, "per_cell": 2})
    (row,) = count_plan(plan, 0, tok, hf_tok)
    assert (row["requests"], row["contexts"]) == (10, 10)
    assert row["prefilled_depth_order"] == row["prompt_tokens"]  # each request followed another haystack's
    assert row["saved_runner"] > 0.2  # per haystack all but the deepest share up to their needle: 1.5 of 5 contexts
