"""`loglikelihood` on SmolLM2-135M (`hf:`): each choice's summed log-probability equals a plain forward of prompt +
choice to 1e-4, the document is prefilled once per sample (the next request reuses its KV cache), and the window
check counts the prompt plus the longest choice. Choices are packed into one forward (a 4D mask), which these
reference comparisons cover."""

from __future__ import annotations

import math

import pytest

from longctx_eval.capability import Capability
from longctx_eval.models.hf.likelihood import score_full
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

CHOICES = (" Mary", " the gardener", " Tom")


@pytest.fixture(scope="module")
def smollm2():
    model = load_model(parse_spec("smollm2-135m"))
    yield model
    model.close()


def _document(tokens: int, seed: int = 3) -> str:
    from data_builders import get_source
    from longctx_eval.models.assets import load_tokenizer

    tok = load_tokenizer("minilm")
    paragraphs = get_source("synthetic").paragraphs(seed=seed)
    parts = ["Mary gave the gardener a key. Tom watched her from the gate."]
    while tok.count("\n\n".join(parts)) < tokens:
        parts.append(next(paragraphs))
    return "\n\n".join(parts)


def _ask(doc: str, question: str, part: int, choices: tuple[str, ...] = CHOICES) -> Request:
    prompt = f"{doc}\n\nQuestion: {question}"
    return Request("s", prompt, doc, question, part=part, answer_prefix="Answer:", choices=choices)


def _reference(model, request: Request) -> list[float]:
    """A plain full forward of prompt + choice for each choice (no cache)."""
    import torch

    prompt = model.render(request)
    with torch.no_grad():
        return score_full(model.model, prompt, model._choice_ids(request).ids).logprobs


def test_choices_equal_a_plain_forward_and_share_one_prefill(smollm2):
    doc = _document(300)  # just over the prefix cache's 256-token floor: a test of seconds on a shared CPU
    asks = [_ask(doc, q, i) for i, q in enumerate(["Who gave the key?", "Who watched?"])]
    assert Capability.LOGLIKELIHOOD in smollm2.capabilities
    assert smollm2._pack_choices  # full attention under sdpa: a request's choices share one forward (score_packed)
    before = smollm2.prefix_cache.stats.reused
    preds = smollm2.serve(Capability.LOGLIKELIHOOD, asks)
    worst = 0.0
    for ask, pred in zip(asks, preds, strict=True):
        assert pred.status == "ok" and pred.completion_tokens == 0
        assert pred.prompt_tokens == len(smollm2.render(ask))
        data = pred.data
        assert len(data["logprobs"]) == len(data["choice_tokens"]) == len(data["greedy"]) == len(CHOICES)
        assert all(isinstance(g, bool) for g in data["greedy"]) and all(lp < 0 for lp in data["logprobs"])
        worst = max(worst, *(abs(a - b) for a, b in zip(data["logprobs"], _reference(smollm2, ask), strict=True)))
    assert worst < 1e-4, worst
    # one prefill of the document: every later request reused the previous one's cache for its shared prefix
    assert smollm2.prefix_cache.stats.reused - before == len(asks) - 1
    assert preds[0].data["cached_tokens"] == 0 and preds[1].data["cached_tokens"] > 256
    # " the gardener" is two tokens in context; greedy flags say whether every token was the argmax
    assert preds[0].data["choice_tokens"][1] == len(smollm2._choice_ids(asks[0]).ids[1]) >= 2


def test_choice_tokens_are_taken_in_context(smollm2):
    """After a prompt ending in "Answer:", " Mary" is the tokens of prompt + " Mary" after the prompt's; a choice that
    merges with the prompt's last token ("s" after "Answer:" does not) would be tokenized alone and recorded."""
    ask = _ask("Mary gave Tom a key.", "Who gave the key?", 0, choices=(" Mary", "Mary"))
    text_ids = smollm2.hf_tok(" Mary", add_special_tokens=False)["input_ids"]
    ids = smollm2._choice_ids(ask)
    assert list(ids.ids[0]) == text_ids
    pred = smollm2.loglikelihood([ask])[0]
    assert pred.status == "ok" and pred.data["choice_tokens"][0] == len(text_ids)
    assert math.isfinite(pred.data["logprobs"][1])


def test_window_counts_the_longest_choice_and_failures_are_errors(smollm2):
    ask = _ask("Mary gave Tom a key.", "Who?", 0, choices=(" Mary", " the old gardener by the gate"))
    n = smollm2.prompt_tokens(ask)
    longest = smollm2.choice_tokens(ask)
    assert longest == len(smollm2._choice_ids(ask).ids[1]) > 1
    window = smollm2.meta.context_window
    assert smollm2.fits(ask, window - longest) and not smollm2.fits(ask, window - longest + 1)
    assert n < window
    empty = smollm2.loglikelihood([_ask("x", "y", 0, choices=(" a", ""))])[0]
    assert empty.status == "error" and "choice 1 has no tokens" in (empty.error or "")
    none = smollm2.loglikelihood([_ask("x", "y", 0, choices=())])[0]
    assert none.status == "error" and "no choices" in (none.error or "")
