"""The antecedent-selection protocol's scoring side: parse or choose each asked mention's answer, close them into
clusters, and count the asked mentions' links.

A language model sees the document with every gold mention marked `[N text]` (N = 1, 2, ... in document order)
and gives one answer per asked mention: an earlier mention of the same entity, or none (new entity). Generated
answers are `N: M` lines, parsed robustly (`N -> M`, `N = M`, `mention N: mention M`, `N: none`); chosen answers
are the candidate with the highest summed log-probability (`choose`). A coreference system's answer is the closest
earlier mention of its cluster (`cluster_answers`). An asked mention with no usable answer (missing, unparsable,
pointing to itself, a later or unknown mention, a failed request) counts as no link and as malformed. Links are
closed transitively (union-find) into clusters; with sampled mentions, `asked_graphs` and `asked_link_counts`
score only the asked mentions' links (docs/coref.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from longctx_eval.metrics.span_em import GoldLink, bucket_of

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


def choose(logprobs: Sequence[float] | None, options: Sequence[int]) -> int | None | bool:
    """The option with the highest summed log-probability (0 = new entity -> None); False when unusable.

    Sums are not length-normalised: after a choice's number its text is a copy of the marked mention, nearly
    free, so normalising by length would favour long mentions. A tie goes to the first option in order.
    """
    if logprobs is None or len(logprobs) != len(options) or not options:
        return False
    values = [float(x) for x in logprobs]
    if any(v != v for v in values):  # NaN: the adapter could not score
        return False
    best = options[max(range(len(values)), key=lambda k: (values[k], -k))]
    return None if best == 0 else best


def cluster_answers(
    clusters: Iterable[Iterable[Sequence[int]]], mentions: Sequence[tuple[int, int]], asked: Iterable[int]
) -> dict[int, int | None]:
    """A coreference system's answer per asked mention id: the closest earlier mention of its cluster (None: first)."""
    index = {m: k for k, m in enumerate(mentions, 1)}
    answers: dict[int, int | None] = dict.fromkeys(asked)
    for cluster in clusters:
        ids = sorted(index[(int(m[0]), int(m[1]))] for m in cluster if (int(m[0]), int(m[1])) in index)
        for prev, cur in zip(ids, ids[1:], strict=False):
            if cur in answers and answers[cur] is None:
                answers[cur] = prev
    return answers


def asked_graphs(
    answers: dict[int, int | None], key_antecedent: dict[int, int | None], same_entity: Callable[[int, int], bool]
) -> tuple[list[list[int]], list[list[int]]]:
    """Key and response clusters of the asked mentions' links, over the mentions those links touch.

    The key links each asked mention to its gold antecedent (none for a first mention); the response links it
    to its answer, an answer of the right entity standing for the gold antecedent. Every touched mention is in
    both sides (a singleton where it is not linked), so key and response get the same singleton treatment.
    """
    key = [(a, b) for a, b in key_antecedent.items() if b is not None]
    response = []
    for a, b in answers.items():
        if b is None:
            continue
        gold = key_antecedent.get(a)
        response.append((a, gold if gold is not None and same_entity(a, b) else b))
    touched = sorted({m for pair in key + response for m in pair} | set(answers))
    return _closure(touched, key), _closure(touched, response)


def _closure(ids: Sequence[int], links: Iterable[tuple[int, int]]) -> list[list[int]]:
    """`close_links` over the given mention ids only (each one a cluster of its own where unlinked)."""
    pos = {m: k for k, m in enumerate(ids, 1)}
    groups = close_links(len(ids), [(pos[a], pos[b]) for a, b in links])
    return [[ids[k - 1] for k in g] for g in groups]


def asked_link_counts(
    links: Iterable[tuple[GoldLink, int, int]],
    answers: dict[int, int | None],
    entity: dict[int, int | None],
    response: Sequence[Sequence[int]],
) -> dict[str, float]:
    """Span-EM and link recall over the asked anaphors, overall and per distance bucket and window side.

    `links` holds each asked anaphor's gold link with the mention ids of its two ends. Span-EM: the answer is a
    mention of the anaphor's gold entity. Link recall: the response's clusters (of mention ids) join the anaphor
    and its gold antecedent. Group fields appear only where a link of that group was asked, as in `span_em.link_counts`.
    """
    cluster = {m: n for n, c in enumerate(response) for m in c}
    out = {"span_em_n": 0.0, "span_em_d": 0.0, "link_recall_n": 0.0, "link_recall_d": 0.0}
    for link, i, j in links:
        answer = answers.get(i)
        em = answer is not None and entity.get(answer) is not None and entity.get(answer) == entity.get(i)
        linked = i in cluster and cluster.get(i) == cluster.get(j)
        for group in ("", bucket_of(link.distance), "intra" if link.intra_window else "cross"):
            for name, hit in (("span_em", em), ("link_recall", linked)):
                key = f"{name}@{group}" if group else name
                out[f"{key}_n"] = out.get(f"{key}_n", 0.0) + hit
                out[f"{key}_d"] = out.get(f"{key}_d", 0.0) + 1
    return out


def antecedent_counts(
    asked: Sequence[int],
    options: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[float] | None],
    same_entity: Callable[[int, int], bool],
) -> dict[str, float]:
    """Choice mode's ranking of the entities offered, apart from the `[0 new]` option: over the asked mentions whose
    own entity is among their candidates, how many score that candidate highest among the candidates that name an
    earlier mention (`antecedent_n` of `antecedent_d`), and the chance of that (`antecedent_chance_n`: one over the
    number of such candidates, summed). A question without usable log-probabilities counts in the denominator, as
    a miss. Empty when no asked mention's own entity is offered (nothing to rank)."""
    hit = total = chance = 0.0
    for i, opts, values in zip(asked, options, logprobs, strict=True):
        named = [k for k, j in enumerate(opts) if j]
        gold = next((k for k in named if same_entity(i, opts[k])), None)
        if gold is None:
            continue
        total += 1
        chance += 1 / len(named)
        if values is None or len(values) != len(opts) or any(float(values[k]) != float(values[k]) for k in named):
            continue
        best = max(named, key=lambda k: (float(values[k]), -k))  # a tie goes to the first, as `choose`
        hit += best == gold
    if not total:
        return {}
    return {"antecedent_n": hit, "antecedent_d": total, "antecedent_chance_n": chance}
