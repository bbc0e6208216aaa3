"""Prefix KV-cache reuse in the hf adapter: the same greedy text as without it, reuse only on a shared prefix."""

from __future__ import annotations

import pytest

from longctx_eval.models.hf.prefix_cache import (
    PREFIX_MIN_TOKENS,
    SUFFIX_CHUNK_MAX,
    SUFFIX_CHUNK_MIN,
    shared_prefix,
    suffix_chunk,
)
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request


def _document(tokenizer, tokens: int, seed: int, fact: str) -> str:
    """Synthetic prose of about `tokens` tokens with `fact` in the middle."""
    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=seed)
    parts: list[str] = []
    while tokenizer.count("\n\n".join(parts)) < tokens:
        parts.append(next(paragraphs))
    parts.insert(len(parts) // 2, fact)
    return "\n\n".join(parts)


def _ask(doc: str, question: str, sid: str, max_new_tokens: int = 16) -> Request:
    prompt = f"Read the text and answer the question after it.\n\n{doc}\n\nQuestion: {question}"
    return Request(sid, prompt, doc, question, max_new_tokens=max_new_tokens)


def test_shared_prefix_counts_leading_equal_ids():
    assert shared_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert shared_prefix([], [1]) == 0 and shared_prefix([5, 6], [5, 6, 7]) == 2


def test_suffix_chunks_only_where_the_kernel_computes_a_rectangle():
    """sdpa and eager get steps (at least the minimum, at most the maximum, about a 16th of the suffix); flash
    kernels and suffixes of one step get none."""
    assert suffix_chunk(6157, "sdpa") == SUFFIX_CHUNK_MIN and suffix_chunk(6157, "eager") == SUFFIX_CHUNK_MIN
    assert suffix_chunk(16 * 1000, "sdpa") == 1000
    assert suffix_chunk(750_000, "sdpa") == SUFFIX_CHUNK_MAX
    assert suffix_chunk(SUFFIX_CHUNK_MIN, "sdpa") is None and suffix_chunk(40, "eager") is None
    assert suffix_chunk(6157, "flash_attention_2") is None and suffix_chunk(6157, None) is None


def test_option_is_recorded_only_when_set(tiny_llama_dir):
    default = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    off = load_model(parse_spec(f"hf:{tiny_llama_dir}?prefix_cache=false"))
    assert "prefix_cache" not in default.identity and default.prefix_cache is not None
    assert off.identity["prefix_cache"] is False and off.prefix_cache is None


def test_tiny_model_reuses_only_a_long_enough_prefix(tiny_llama_dir, bpe_tokenizer):
    """Random-weight Llama, 512-token window: identical texts, reuse at >= PREFIX_MIN_TOKENS shared tokens only."""
    on = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    off = load_model(parse_spec(f"hf:{tiny_llama_dir}?prefix_cache=false"))
    doc = _document(bpe_tokenizer, 300, seed=1, fact="The key is 42.")
    short = _document(bpe_tokenizer, 120, seed=1, fact="The key is 42.")
    requests = [
        _ask(doc, "What is the key?", "a"),
        _ask(doc, "Where is the key?", "b"),  # same document: reuses it
        _ask(short, "What is the key?", "c"),  # shares under PREFIX_MIN_TOKENS tokens with "b": no reuse
        _ask(doc, "What is the key?", "d"),  # again under the threshold against "c"
    ]
    got = [on.generate([r])[0] for r in requests]
    want = [off.generate([r])[0] for r in requests]
    assert [(p.text, p.completion_tokens) for p in got] == [(p.text, p.completion_tokens) for p in want]
    assert shared_prefix(on.render(requests[1]), on.render(requests[2])) < PREFIX_MIN_TOKENS
    stats = on.prefix_cache.stats
    assert (stats.requests, stats.reused) == (4, 1)
    assert stats.reused_tokens == shared_prefix(on.render(requests[0]), on.render(requests[1]))
    assert [p.data["cached_tokens"] for p in got] == [0, stats.reused_tokens, 0, 0]  # kept per prediction
    assert all("cached_tokens" not in p.data for p in want)  # no prefix cache: nothing claimed


def test_batches_of_several_do_not_reuse(tiny_llama_dir, bpe_tokenizer):
    model = load_model(parse_spec(f"hf:{tiny_llama_dir}?batch_size=2"))
    doc = _document(bpe_tokenizer, 300, seed=2, fact="The key is 7.")
    preds = model.generate([_ask(doc, "What is the key?", "a"), _ask(doc, "Which key?", "b")])
    assert all(p.status == "ok" for p in preds) and model.prefix_cache.stats.requests == 0


@pytest.fixture(scope="module")
def smollm2():
    return load_model(parse_spec("smollm2-135m")), load_model(parse_spec("smollm2-135m?prefix_cache=false"))


def test_smollm2_two_questions_on_one_document_match_no_reuse(smollm2):
    """SmolLM2, ~1K-token document: the second question reuses the document's cache; texts and counts agree."""
    on, off = smollm2
    facts = "The special magic number for the blue door is 482193. The code word of the garden is marble."
    doc = _document(on.tokenizer, 1000, seed=3, fact=facts)
    other = _document(on.tokenizer, 1000, seed=4, fact=facts)
    first = _ask(doc, "What is the special magic number for the blue door?", "a", 32)
    second = _ask(doc, "What is the code word of the garden?", "b", 32)
    third = _ask(other, "What is the special magic number for the blue door?", "c", 32)
    got = [on.generate([r])[0] for r in (first, second, third)]
    stats = on.prefix_cache.stats
    assert (stats.requests, stats.reused) == (3, 1)  # the other document started afresh
    assert stats.reused_tokens > 900
    want = off.generate([second])[0]  # "first" and "third" ran without reuse in `on` too
    assert (got[1].text, got[1].completion_tokens, got[1].prompt_tokens) == (
        want.text,
        want.completion_tokens,
        want.prompt_tokens,
    )
    assert "482193" in got[0].text and "marble" in got[1].text.lower() and "482193" in got[2].text
    for p in got:  # stopped by its end token: the text's tokens plus that token
        assert p.completion_tokens < 32
        assert p.completion_tokens == len(on.hf_tok(p.text, add_special_tokens=False)["input_ids"]) + 1


def test_smollm2_long_suffix_after_a_cached_prefix_is_prefilled_in_steps(smollm2):
    """Two prompts sharing a ~400-token opening, then ~1.2K tokens apart: the second reuses the opening and
    prefills the rest in steps (recorded per prediction); text and counts equal a fresh prefill's."""
    on, off = smollm2
    opening = _document(on.tokenizer, 400, seed=5, fact="The meeting is on the third floor.")
    facts = "The special magic number for the red door is 730261."
    first = _ask(opening + "\n\n" + _document(on.tokenizer, 1200, seed=6, fact=facts), "Which number?", "a", 24)
    second = _ask(opening + "\n\n" + _document(on.tokenizer, 1200, seed=7, fact=facts), "Which number?", "b", 24)
    got = [on.generate([r])[0] for r in (first, second)]
    cached = got[1].data["cached_tokens"]
    assert 400 <= cached < 600 and got[1].prompt_tokens - cached > SUFFIX_CHUNK_MIN
    assert got[1].data["prefill_chunk"] == SUFFIX_CHUNK_MIN and "prefill_chunk" not in got[0].data
    want = off.generate([second])[0]
    assert "prefill_chunk" not in want.data
    assert (got[1].text, got[1].completion_tokens, got[1].prompt_tokens) == (
        want.text,
        want.completion_tokens,
        want.prompt_tokens,
    )
    assert "730261" in got[1].text
