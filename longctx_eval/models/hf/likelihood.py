"""Choices scored by log-likelihood after a prompt on a local causal LM (`hf:`; `longctx-eval serve`'s echo): the
prompt is prefilled once (its prefix shared with the previous request reused from the PrefixCache), then each
choice costs only its own tokens against that cache, which is cut back to the prompt after it.

Tokenization at the prompt/choice boundary, as lm-eval does: a choice's tokens are those of (rendered prompt text +
choice) after the prompt's own ids, when that tokenization begins with them; where the two merge across the
boundary (a choice without its leading space after a prompt ending in a word), the choice is tokenized alone, so the
scored ids always decode to prompt + choice (such choices are listed in `data.choice_tokenized_alone`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longctx_eval.models.attention_layout import FULL, SLIDING, layer_types, text_config

CHOICE_CACHE = 64
"""Requests whose choice tokenizations are kept: the runner measures a batch's requests, then sends them."""


@dataclass(frozen=True)
class ChoiceIds:
    """The token ids of each choice as scored after the prompt, and which were tokenized alone (see module doc)."""

    ids: tuple[tuple[int, ...], ...]
    alone: tuple[int, ...] = ()


def choice_ids(
    hf_tok: Any, text: str, add_special_tokens: bool, prompt_ids: Sequence[int], choice: str
) -> tuple[list[int], bool]:
    """One choice's ids after `prompt_ids` (the tokenization of `text`), and whether they were taken in context."""
    whole = hf_tok(text + choice, add_special_tokens=add_special_tokens)["input_ids"]
    n = len(prompt_ids)
    if whole[:n] == list(prompt_ids):
        return list(whole[n:]), True
    return list(hf_tok(choice, add_special_tokens=False)["input_ids"]), False


def all_choice_ids(
    hf_tok: Any, text: str, add_special_tokens: bool, prompt_ids: Sequence[int], choices: Sequence[str]
) -> ChoiceIds:
    """Every choice's ids after the prompt (see `choice_ids`), each tokenized with the prompt's tail only where the
    prompt has a word boundary that tokenizes the same alone (`tail_split`)."""
    split = tail_split(hf_tok, text, prompt_ids) if len(choices) > 1 else None
    if split is None:
        pairs = [choice_ids(hf_tok, text, add_special_tokens, prompt_ids, c) for c in choices]
    else:
        pairs = [_tail_choice_ids(hf_tok, text, prompt_ids, split, c) for c in choices]
    return ChoiceIds(tuple(tuple(ids) for ids, _ in pairs), tuple(i for i, (_, ok) in enumerate(pairs) if not ok))


TAIL_TOKENS = 24
"""How far back from the prompt's end `tail_split` looks for a word boundary: past any merge with a choice."""


def tail_split(hf_tok: Any, text: str, prompt_ids: Sequence[int]) -> tuple[int, int] | None:
    """`(j, c)`: prompt token `j` starts at character `c` of `text`, where a word ends and a space-led word begins
    (a pre-tokenizer split that appending cannot move), and `text[c:]` tokenized alone gives `prompt_ids[j:]`
    exactly; None where no such point is found (slow tokenizer, short prompt, special tokens at the end).

    Tokenizing `text[c:] + choice` then gives what `text + choice` gives after `prompt_ids[:j]`, so a choice costs
    its tail instead of the whole document (a document's 40 choices at 8K were 40 full tokenizations)."""
    if not getattr(hf_tok, "is_fast", False) or len(prompt_ids) < 4 * TAIL_TOKENS:
        return None
    enc = hf_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    lead = len(prompt_ids) - len(ids)
    if lead < 0 or list(prompt_ids[lead:]) != ids:
        return None
    for k in range(len(ids) - TAIL_TOKENS, len(ids) - 3 * TAIL_TOKENS, -1):
        for c in (offsets[k][0], offsets[k][0] - 1):  # a space-led token's offset may or may not include its space
            if _word_start(text, c) and hf_tok(text[c:], add_special_tokens=False)["input_ids"] == ids[k:]:
                return lead + k, c
    return None


def _word_start(text: str, c: int) -> bool:
    """Whether `text[c]` is a single space between a word's end and the next word's start."""
    return 0 < c < len(text) - 1 and text[c] == " " and not text[c - 1].isspace() and not text[c + 1].isspace()


def _tail_choice_ids(
    hf_tok: Any, text: str, prompt_ids: Sequence[int], split: tuple[int, int], choice: str
) -> tuple[list[int], bool]:
    """`choice_ids` through the prompt's tail from `split` (see `tail_split`)."""
    j, c = split
    tail = list(prompt_ids[j:])
    whole = hf_tok(text[c:] + choice, add_special_tokens=False)["input_ids"]
    if whole[: len(tail)] == tail:
        return list(whole[len(tail) :]), True
    return list(hf_tok(choice, add_special_tokens=False)["input_ids"]), False


@dataclass(frozen=True)
class Scores:
    """Per choice: the summed log-probability of its tokens and whether every token was the argmax."""

    logprobs: list[float]
    greedy: list[bool]


def prefill_last(model: Any, ids: Sequence[int], cache: Any, held: int, chunk: int | None) -> Any:
    """Prefill `ids[held:]` into `cache` (which holds `ids[:held]`), in steps of `chunk` tokens when given; the
    float32 log-probabilities at the last position (the distribution of the first token after `ids`)."""
    import torch

    device = _device(model)
    start, n = held, len(ids)
    step = chunk or (n - held)
    logits = None
    while start < n:
        end = min(n, start + step)
        x = torch.tensor([list(ids[start:end])], device=device)
        out = model(input_ids=x, **{_cache_kw(model): cache}, use_cache=True, logits_to_keep=1)
        logits = out.logits[0, -1]
        start = end
    assert logits is not None, "prefill_last needs at least one token to prefill"
    return torch.log_softmax(logits.float(), dim=-1)


def score_after_prefill(model: Any, last: Any, prompt_len: int, choices: Sequence[Sequence[int]], cache: Any) -> Scores:
    """Each choice scored against `cache` holding the prompt (`last`: log-probabilities after it); the cache is cut
    back to the prompt after every choice."""
    import torch

    device = _device(model)
    logprobs: list[float] = []
    greedy: list[bool] = []
    top = int(last.argmax())
    for ids in choices:
        total = float(last[ids[0]])
        best = top == ids[0]
        if len(ids) > 1:
            x = torch.tensor([list(ids[:-1])], device=device)
            out = model(input_ids=x, **{_cache_kw(model): cache}, use_cache=True)
            logp = torch.log_softmax(out.logits[0].float(), dim=-1)
            target = torch.tensor(list(ids[1:]), device=device)
            total += float(logp.gather(1, target[:, None]).sum())
            best = best and bool((logp.argmax(-1) == target).all())
            cache.crop(prompt_len - cache.get_seq_length())  # this transformers' crop takes minus the tokens to drop
        logprobs.append(total)
        greedy.append(best)
    return Scores(logprobs, greedy)


PACKED_ATTENTION = frozenset({"sdpa", "eager"})
"""Attention implementations that take a custom 4D mask as given, so every choice can be scored in one forward."""


LEAD_TOKENS = 256
"""Most prompt tokens `score_packed` takes into its forward beside the choices (the rest is prefilled before it)."""


def score_packed(model: Any, prompt: Sequence[int], start: int, choices: Sequence[Sequence[int]], cache: Any) -> Scores:
    """The prompt's last tokens (`prompt[start:]`, after the `start` that `cache` holds) and every choice in one
    forward: each choice's tokens see the whole prompt and their own choice's earlier tokens only, side by side after
    the prompt (positions restart at the prompt's end for each), under an explicit mask. The same numbers as a
    forward for the tail, then one per choice (`score_after_prefill`), in one forward instead of 1 + one per choice (a
    coreference question has 5, after a question of about 40 tokens). A model with sliding-window layers
    (`packable_layers`) gets one mask per layer type, its sliding layers' also hiding the keys a token's window has
    passed. Logits are computed for the rows read only; the cache is cut back to the prompt after it."""
    import torch

    device = _device(model)
    n = len(prompt)
    assert 0 <= start < n, (start, n)
    inputs = list(prompt[start:])
    positions = list(range(start, n))
    group = [-1] * len(inputs)  # -1: the prompt's tail; j: choice j
    reads = [len(inputs) - 1]  # the rows whose log-probabilities are read: after the prompt, then each choice's
    for j, ids in enumerate(choices):
        reads.extend(range(len(inputs), len(inputs) + len(ids) - 1))
        inputs.extend(ids[:-1])  # the last token's own prediction is never needed
        positions.extend(range(n, n + len(ids) - 1))
        group.extend([j] * (len(ids) - 1))
    dtype = model.get_input_embeddings().weight.dtype
    pos = torch.tensor(positions, device=device)
    allowed = _packed_allowed(pos, torch.tensor(group, device=device), start, None)
    mask: Any = _additive(allowed, dtype)[None, None]
    window = _sliding_window(model)
    if window is not None:
        sliding = _packed_allowed(pos, torch.tensor(group, device=device), start, window)
        mask = {FULL: mask, SLIDING: _additive(sliding, dtype)[None, None]}
    base = model.base_model
    out = base(
        input_ids=torch.tensor([inputs], device=device),
        position_ids=pos[None],
        attention_mask=mask,
        **{_cache_kw(base): cache},
        use_cache=True,
    )
    hidden = out.last_hidden_state[0, reads]
    rows = torch.log_softmax(_logits(model, model.get_output_embeddings(), hidden).float(), dim=-1)
    cache.crop(n - cache.get_seq_length())  # this transformers' crop takes minus the tokens to drop
    last = rows[0]
    top = int(last.argmax())
    logprobs: list[float] = []
    greedy: list[bool] = []
    at = 1
    for ids in choices:
        total = float(last[ids[0]])
        best = top == ids[0]
        if len(ids) > 1:
            logp = rows[at : at + len(ids) - 1]
            target = torch.tensor(list(ids[1:]), device=device)
            total += float(logp.gather(1, target[:, None]).sum())
            best = best and bool((logp.argmax(-1) == target).all())
            at += len(ids) - 1
        logprobs.append(total)
        greedy.append(best)
    return Scores(logprobs, greedy)


def _packed_allowed(positions: Any, group: Any, held: int, window: int | None) -> Any:
    """What each packed token may attend to (queries x keys, bool): the `held` cached prompt keys, then the packed
    tokens; the prompt's tail (group -1) causally, a choice's token the whole tail and its own choice's earlier
    tokens. With a `window` (a sliding layer): its cache shows only the last `window - 1` held keys (transformers'
    `DynamicSlidingWindowLayer.update`), and a key counts where it does in transformers' own sliding mask, at a
    position > the query's position - window."""
    import torch

    device = positions.device
    order = torch.arange(len(positions), device=device)
    among = (order[None, :] <= order[:, None]) & ((group[None, :] == -1) | (group[None, :] == group[:, None]))
    if window is None:
        return torch.cat([torch.ones(len(positions), held, dtype=torch.bool, device=device), among], dim=1)
    shown = min(held, window - 1)
    keys = torch.arange(held - shown, held, device=device)
    near_held = keys[None, :] > positions[:, None] - window
    near_new = positions[None, :] > positions[:, None] - window
    return torch.cat([near_held, among & near_new], dim=1)


def packable_layers(config: Any) -> bool:
    """Whether `score_packed` can mask every layer of a model with this config: all full attention, or full and
    sliding-window layers named per layer in the config (`layer_types`: Gemma 2/3, GPT-OSS), whose models take one
    mask per layer type. A model that slides without per-layer types (Mistral-style) takes one mask for all."""
    kinds = set(layer_types(config))
    return kinds == {FULL} or (kinds <= {FULL, SLIDING} and bool(getattr(text_config(config), "layer_types", None)))


def _sliding_window(model: Any) -> int | None:
    """The sliding layers' window when the model has any, else None."""
    config = model.config
    if SLIDING not in set(layer_types(config)):
        return None
    return int(text_config(config).sliding_window)


def _additive(allowed: Any, dtype: Any) -> Any:
    """An additive attention mask: 0 where `allowed`, the dtype's lowest value elsewhere."""
    import torch

    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def score_full(model: Any, prompt_ids: Sequence[int], choices: Sequence[Sequence[int]]) -> Scores:
    """Each choice scored by one plain forward of prompt + choice (no cache): the reference the cached path equals,
    and the path for models whose cache cannot be cut back to the prompt."""
    import torch

    device = _device(model)
    n = len(prompt_ids)
    logprobs: list[float] = []
    greedy: list[bool] = []
    for ids in choices:
        x = torch.tensor([list(prompt_ids) + list(ids)], device=device)
        out = model(input_ids=x, logits_to_keep=len(ids) + 1)
        logp = torch.log_softmax(out.logits[0, :-1].float(), dim=-1)  # positions n-1 .. n+len-2
        target = torch.tensor(list(ids), device=device)
        logprobs.append(float(logp.gather(1, target[:, None]).sum()))
        greedy.append(bool((logp.argmax(-1) == target).all()))
        assert logp.shape[0] == len(ids), (n, len(ids))
    return Scores(logprobs, greedy)


def prompt_token_logprobs(
    model: Any, ids: Sequence[int], cache: Any, held: int, top_n: int, rows: int = 512
) -> tuple[list[float], list[list[tuple[int, float]]], Any]:
    """For `longctx-eval serve`'s echo: the log-probability of each of `ids[held+1:]` given what precedes it, the
    `top_n` most likely ids at each of those positions, and the log-probabilities after the last id. The hidden
    states of `ids[held:]` are computed into `cache` once; the vocabulary projection runs `rows` positions at a time,
    so a long prompt never holds its full logits."""
    import torch

    device = _device(model)
    x = torch.tensor([list(ids[held:])], device=device)
    out = model.base_model(input_ids=x, **{_cache_kw(model.base_model): cache}, use_cache=True)
    hidden = out.last_hidden_state[0]
    head = model.get_output_embeddings()
    targets = torch.tensor(list(ids[held + 1 :]) + [0], device=device)
    logprobs: list[float] = []
    tops: list[list[tuple[int, float]]] = []
    last = None
    for start in range(0, hidden.shape[0], rows):
        logp = torch.log_softmax(_logits(model, head, hidden[start : start + rows]).float(), dim=-1)
        got = logp.gather(1, targets[start : start + rows, None])[:, 0]
        logprobs.extend(got.tolist())
        if top_n > 0:
            vals, idx = logp.topk(top_n, dim=-1)
            tops.extend([list(zip(i, v, strict=True)) for i, v in zip(idx.tolist(), vals.tolist(), strict=True)])
        else:
            tops.extend([] for _ in range(got.shape[0]))
        last = logp[-1]
    return logprobs[:-1], tops[:-1], last


def _logits(model: Any, head: Any, hidden: Any) -> Any:
    """The model's logits of `hidden` (its final soft-capping applied where its config has one)."""
    import torch

    logits = head(hidden)
    cap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _cache_kw(module: Any) -> str:
    """The name a forward takes its KV cache under: `cache` (transformers 5.2x), `past_key_values` before (5.19)."""
    import inspect

    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


def _device(model: Any) -> Any:
    return model.get_input_embeddings().weight.device
