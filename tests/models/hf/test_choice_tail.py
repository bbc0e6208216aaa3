"""A choice tokenized through the prompt's tail (`tail_split`) gets exactly the ids it gets after the whole prompt,
with SmolLM2's real tokenizer (and Gemma 3's where installed), on long real prose with the endings and choices
coreference and multiple-choice prompts have, including choices that merge with the prompt's last word."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from longctx_eval.models.assets import gemma3_dir, gemma3_installed, smollm2_dir
from longctx_eval.models.hf.likelihood import all_choice_ids, choice_ids, tail_split

ENDINGS = (
    "\n\nQuestion: who is 'she' in [12]?\nAnswer:",
    "\n\nAnswer: the",
    "\n\nAnswer: [3",
    " The answer is",
    "\nAnswer:\n",
    "\n\nThe next word is un",
)
CHOICES = (" Mary", "Mary", " [0 new]", " [12] she", "s", "ed by", "\n\nTom", " 1999.", " über", ",", "  two", " 42")


def _tokenizers() -> list[tuple[str, object]]:
    out = [("smollm2", AutoTokenizer.from_pretrained(str(smollm2_dir())))]
    if gemma3_installed():
        out.append(("gemma3", AutoTokenizer.from_pretrained(str(gemma3_dir()))))
    return out


def _prose(words: int, seed: int) -> str:
    from data_builders import get_source

    paragraphs, parts, n = get_source("synthetic").paragraphs(seed=seed), [], 0
    while n < words:
        parts.append(next(paragraphs))
        n += len(parts[-1].split())
    return "\n\n".join(parts)


@pytest.mark.parametrize(("name", "hf_tok"), _tokenizers())
def test_tail_ids_equal_whole_prompt_ids(name, hf_tok):
    taken = 0
    for seed, ending in enumerate(ENDINGS):
        text = _prose(600, seed) + ending
        for special in (True, False):
            prompt = hf_tok(text, add_special_tokens=special)["input_ids"]
            split = tail_split(hf_tok, text, prompt)
            taken += split is not None
            fast = all_choice_ids(hf_tok, text, special, prompt, CHOICES)
            slow = [choice_ids(hf_tok, text, special, prompt, c) for c in CHOICES]
            assert fast.ids == tuple(tuple(ids) for ids, _ in slow), (name, ending, special)
            assert fast.alone == tuple(i for i, (_, ok) in enumerate(slow) if not ok), (name, ending, special)
    assert taken == 2 * len(ENDINGS), f"{name}: the tail path was not taken on every long prompt"


def test_short_prompt_or_slow_tokenizer_takes_the_whole_prompt():
    hf_tok = AutoTokenizer.from_pretrained(str(smollm2_dir()))
    text = "Mary met Tom. Answer:"
    assert tail_split(hf_tok, text, hf_tok(text)["input_ids"]) is None
