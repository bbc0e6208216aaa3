"""The `rag:<retriever>+<generator>` spec: two inner specs split at a '+', checked by their kinds' declared
capabilities before anything loads (a leaf like spec.py: no adapter, no torch).

The inner specs' own options ride in the rag query with a side prefix, e.g.
`rag:bm25+smollm2-135m?k=8&retriever.k1=1.2&generator.max_length=4096`; every other key is the rag kind's.
"""

from __future__ import annotations

from urllib.parse import urlencode

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import RagOptions, parse_options
from longctx_eval.models.spec import parse_spec

FORM = "rag:<retriever>+<generator> (e.g. rag:bm25+smollm2-135m)"
ROLES = {"retriever": Capability.RETRIEVE, "generator": Capability.GENERATE}
NOT_A_PART = {
    "oracle": "it answers from the gold, not from what was retrieved",
    "rag": "a rag model cannot be a part of another",
}
INNER_OPTIONS = "inner options go in the rag query as retriever.KEY=V and generator.KEY=V"


def parse_rag(raw: str, target: str, values: dict[str, str]) -> ModelSpec:
    """Parse a `rag:` spec whose query `values` are already split from its `target`; one-line ConfigErrors."""
    if "+" not in target:
        raise ConfigError(
            f"model spec {raw!r}: expected {FORM}, a retriever spec, '+', a generator spec; {INNER_OPTIONS}"
        )
    own, inner = _split_values(values, raw)
    options = parse_options(RagOptions, own, "rag", raw)
    _check_options(options, raw)
    retriever, generator = _parts(target, inner, raw)
    name = options.name or default_name(retriever, generator, options)
    return ModelSpec(raw=raw, kind="rag", target=target, options=options, name=name, parts=(retriever, generator))


def default_name(retriever: ModelSpec, generator: ModelSpec, options: RagOptions) -> str:
    """`rag-<retriever>-<generator>`, plus `-kN` when k is set and `-hopsN` when iterative."""
    name = f"rag-{retriever.name}-{generator.name}"
    if "k" in options.model_fields_set:
        name += f"-k{options.k}"
    if options.iterative:
        name += f"-hops{options.hops}"
    return name


def _split_values(values: dict[str, str], raw: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    own: dict[str, str] = {}
    inner: dict[str, dict[str, str]] = {role: {} for role in ROLES}
    for key, value in values.items():
        role, dot, sub = key.partition(".")
        if not dot:
            own[key] = value
        elif role in inner and sub:
            inner[role][sub] = value
        else:
            raise ConfigError(
                f"model spec {raw!r}: option {key!r} names no part; expected retriever.KEY=V or generator.KEY=V"
            )
    return own, inner


def _check_options(options: RagOptions, raw: str) -> None:
    if "hops" in options.model_fields_set and not options.iterative:
        raise ConfigError(f"model spec {raw!r}: option hops={options.hops} needs iterative=true")
    tokens, overlap = options.chunk_tokens, options.chunk_overlap
    if tokens is not None and overlap is not None and overlap >= tokens:
        raise ConfigError(
            f"model spec {raw!r}: option chunk_overlap={overlap} is invalid; expected an integer below "
            f"chunk_tokens={tokens}"
        )


def _parts(target: str, inner: dict[str, dict[str, str]], raw: str) -> tuple[ModelSpec, ModelSpec]:
    """Split at the first '+' whose two sides parse as a retriever and a generator (a path may hold a '+')."""
    first: ConfigError | None = None
    for i, char in enumerate(target):
        if char != "+":
            continue
        try:
            return _part(target[:i], "retriever", inner, raw), _part(target[i + 1 :], "generator", inner, raw)
        except ConfigError as exc:
            first = first or exc
    assert first is not None  # the caller checked that the target holds a '+'
    raise first


def _part(text: str, role: str, inner: dict[str, dict[str, str]], raw: str) -> ModelSpec:
    side = "left" if role == "retriever" else "right"
    if not text.strip():
        raise ConfigError(f"model spec {raw!r}: the {role} ({side} of '+') is empty; expected {FORM}")
    part_raw = f"{text}?{urlencode(inner[role])}" if inner[role] else text
    try:
        spec = parse_spec(part_raw)
    except ConfigError as exc:
        raise ConfigError(f"model spec {raw!r}: its {role} {part_raw!r} is invalid: {exc}") from None
    if spec.kind in NOT_A_PART:
        raise ConfigError(f"model spec {raw!r}: {text!r} cannot be its {role}: {NOT_A_PART[spec.kind]}")
    serves = MODEL_KINDS.get(spec.kind).serves
    capability = ROLES[role]
    if serves is not None and capability not in serves:
        raise ConfigError(
            f"model spec {raw!r}: {text!r} is a {spec.kind!r} model, which does not {capability.value}; expected "
            f"{_kinds_serving(capability)} {side} of '+' in {FORM}"
        )
    return spec


def _kinds_serving(capability: Capability) -> str:
    """E.g. "a retriever (kind bm25 or retriever)" from the kinds that declare `capability`."""
    kinds = [
        k
        for k in MODEL_KINDS.names()
        if k not in NOT_A_PART and capability in (MODEL_KINDS.get(k).serves or {capability})
    ]
    role = next(r for r, c in ROLES.items() if c == capability)
    return f"a {role} (kind {' or '.join(kinds)})"
