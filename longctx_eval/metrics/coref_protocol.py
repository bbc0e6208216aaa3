"""The antecedent-selection protocol's scoring side: parse a model's answers robustly, close them into clusters.

A generative model sees the document with every gold mention marked `[N text]` (N = 1, 2, ... in document
order) and, for a batch of mentions, answers one line per mention, `N: M` with M the closest earlier
mention of the same entity, or `N: 0` for a new entity. Parsing accepts common variants (`N -> M`,
`N = M`, `mention N: mention M`, `N: none`); an asked mention with no usable answer (missing, unparsable,
pointing to itself, a later or unknown mention) counts as no link and is counted as malformed. Links are
closed transitively (union-find) into clusters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_ANSWER = re.compile(
    r"(?:mention\s*)?#?(\d+)\s*(?::|=|->|=>|→|–|-|\brefers to\b|\bis\b)\s*(?:mention\s*)?#?(\d+|none|new|null|n/?a)\b",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^\s*#?(\d+|none|new|null|n/?a)\b(?!\s*(?::|=|->|=>|→))", re.IGNORECASE)
_NEW = frozenset({"0", "none", "new", "null", "na", "n/a"})


def parse_answers(text: str | None, asked: Sequence[int]) -> tuple[dict[int, int | None], int]:
    """Antecedent per asked mention id (None = new entity) and the number of malformed answers.

    The prompt ends with the first asked id and a colon, so a bare leading answer ("5" or "none") is taken
    as that mention's antecedent when the text does not answer it explicitly.
    """
    wanted = set(asked)
    found: dict[int, str] = {}
    for m in _ANSWER.finditer(text or ""):
        i = int(m.group(1))
        if i in wanted and i not in found:  # the first answer for a mention counts
            found[i] = m.group(2).lower()
    lead = _LEADING.match(text or "")
    if asked and asked[0] not in found and lead:
        found[asked[0]] = lead.group(1).lower()
    links: dict[int, int | None] = {}
    malformed = 0
    for i in asked:
        answer = found.get(i)
        if answer is None:
            malformed += 1
            continue
        if answer in _NEW:
            links[i] = None
            continue
        j = int(answer)
        if 1 <= j < i:
            links[i] = j
        else:
            malformed += 1  # itself, a later mention or one that does not exist: no link
    return links, malformed


def close_links(n_mentions: int, links: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Clusters (lists of 1-based mention ids, singletons included) from antecedent links, transitively."""
    parent = list(range(n_mentions + 1))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in links:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(1, n_mentions + 1):
        groups.setdefault(find(i), []).append(i)
    return [groups[k] for k in sorted(groups)]


def batches(n_mentions: int, size: int) -> list[list[int]]:
    """Mention ids asked per prompt: 2..n (the first mention has no antecedent) in batches of `size`."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    ids = list(range(2, n_mentions + 1))
    return [ids[k : k + size] for k in range(0, len(ids), size)]
