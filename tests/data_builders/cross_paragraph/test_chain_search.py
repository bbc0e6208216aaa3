"""Where the first fact's nearest boundaries start no chain, the search goes on to the next nearest ones."""

from __future__ import annotations

import pytest

from data_builders.cross_paragraph.docs import FIRST_FACT_TRIES, Boundary, plan
from longctx_eval.errors import DataError


def _boundaries(short_until: int, hay_tokens: int) -> list[Boundary]:
    """A sentence end every 10 tokens; paragraphs of 5 sentences up to `short_until`, then one long paragraph."""
    out = []
    for k, token in enumerate(range(10, hay_tokens, 10)):
        paragraph = k // 5 if token <= short_until else short_until // 50 + 1
        out.append(Boundary(char=token * 4, token=token, paragraph=paragraph))
    return out


def test_a_chain_is_found_past_the_first_tries_when_they_all_end_in_one_long_paragraph():
    """The real case: SmolLM2's 4K cross_paragraph (17 repetitions) stopped with 'no 4 sentence ends in
    successive paragraphs' before; the samples that built before are unchanged (dataset hashes equal)."""
    hay = 4000
    cands = _boundaries(short_until=2000, hay_tokens=hay)
    near_target = [b for b in cands if b.token > 2000]
    assert len(near_target) > FIRST_FACT_TRIES  # every one of the first tries is in the long paragraph
    chain, others = plan(cands, hay, [10, 10, 10, 10], [], 128, 1.0, [])
    assert others == [] and len(chain) == 4
    assert len({b.paragraph for b in chain}) == 4 and chain[0].token < 2000
    assert [b.token for b in chain] == sorted(b.token for b in chain)


def test_no_chain_anywhere_is_still_one_clear_error():
    cands = _boundaries(short_until=0, hay_tokens=4000)  # one paragraph: no two facts in different ones
    with pytest.raises(DataError, match="no 4 sentence ends in successive paragraphs"):
        plan(cands, 4000, [10, 10, 10, 10], [], 128, 1.0, [])
