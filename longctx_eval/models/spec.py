"""The model-spec grammar `KIND[:TARGET][?key=value&...]`, the embedded short names and `default`.

    hf:<folder-or-hub-id>[?dtype=float32&max_length=8192&chat=auto&revision=main&gguf_file=F&batch_size=1]
    vllm:<folder-or-hub-id>[?max_model_len=8192&tensor_parallel_size=1&enable_prefix_caching=true&rope=yarn...]
    retriever:<sentence-transformers folder | minilm>[?batch_size=64&device=cpu]
    bm25[?k1=1.5&b=0.75]
    hybrid[?alpha=0.5&fusion=rrf|minmax]
    (retriever, bm25 and hybrid also take rerank=maxsim&rerank_depth=20: a second-stage reranker)
    oracle
    coref:baseline[?window=40]
    rag:<retriever>+<generator>[?k=5&iterative=false&hops=2&chunk_tokens=N&chunk_overlap=N&retriever.K=V&generator.K=V]
    openai:<model>@<base_url>[?endpoint=chat|completions&tokenizer=T&max_length=N&max_in_flight=8&...]
Every kind also takes `name=` (display and run-folder name). Short names: smollm2-135m, gemma3-270m (opt-in, after
`make gemma3`), minilm, bm25, oracle, and the position-encoding references tiny-rope,
tiny-rope-{linear,dynamic,ntk,yarn,yarn-notemp}, tiny-alibi, tiny-learned; `default` = minilm,bm25,smollm2-135m.
Parsing is a leaf: it imports no adapter module and no torch.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from longctx_eval.errors import ConfigError, NotInstalled, did_you_mean
from longctx_eval.models.kinds import MODEL_KINDS, AdapterKind
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import parse_options

EMBEDDED = {
    "smollm2-135m": "hf:smollm2-135m",
    "gemma3-270m": "hf:gemma3-270m",  # opt-in (`make gemma3`), never in `default`
    "minilm": "retriever:minilm",
    "bm25": "bm25",
    "oracle": "oracle",
    # Position-encoding references (reference_models/): probed far past their 128-token training window,
    # hence the large max_length; each RoPE variant is its own name so runs and leaderboard rows stay apart.
    "tiny-rope": "hf:tiny-rope?max_length=65536",
    "tiny-rope-linear": "hf:tiny-rope?rope=linear&max_length=65536",
    "tiny-rope-dynamic": "hf:tiny-rope?rope=dynamic&max_length=65536",
    "tiny-rope-ntk": "hf:tiny-rope?rope=ntk&max_length=65536",
    "tiny-rope-yarn": "hf:tiny-rope?rope=yarn&max_length=65536",
    "tiny-rope-yarn-notemp": "hf:tiny-rope?rope=yarn_notemp&max_length=65536",
    "tiny-alibi": "hf:tiny-alibi?max_length=65536",
    "tiny-learned": "hf:tiny-learned?max_length=65536",
}
DEFAULT_MODELS = ("minilm", "bm25", "smollm2-135m")


def known_forms() -> str:
    """One line listing every adapter form and short name, for error messages."""
    forms = [MODEL_KINDS.get(k).example for k in MODEL_KINDS.names()]
    return f"known adapters: {', '.join(forms)}; short names: {', '.join(EMBEDDED)}"


def _pairs(query: str, raw: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigError(f"model spec {raw!r}: malformed options {query!r}; expected key=value&key=value") from None
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ConfigError(f"model spec {raw!r}: option {repeated[0]!r} is given twice; expected each key once")
    return dict(pairs)


def parse_spec(raw: str) -> ModelSpec:
    """Parse and check one spec (kind, target, every option's value); errors are one-line ConfigErrors."""
    text = raw.strip()
    if not text:
        raise ConfigError(f"empty model spec; {known_forms()}")
    head, _, user_query = text.partition("?")
    short = head if head in EMBEDDED else None
    body, _, base_query = (EMBEDDED[short] if short else head).partition("?")
    kind, sep, target = body.partition(":")
    if kind not in MODEL_KINDS:
        raise ConfigError(f"unknown model spec {raw!r}.{did_you_mean(kind, [*MODEL_KINDS, *EMBEDDED])} {known_forms()}")
    adapter = MODEL_KINDS.get(kind)
    if adapter.needs_target and not target:
        raise ConfigError(f"model spec {raw!r} lacks a target; expected {adapter.example}")
    if not adapter.needs_target and sep:
        raise ConfigError(f"model spec {raw!r}: {kind!r} takes no ':target'; expected {adapter.example}")
    values = {**_pairs(base_query, raw), **_pairs(user_query, raw)}  # the user's options override a short name's
    if adapter.parse is not None:  # a composite kind (`rag`): its target is specs, its query carries theirs too
        return adapter.parse_composite(text, target, values)
    options = parse_options(adapter.options, values, kind, text)
    name = options.name or _default_name(short, adapter, target)
    chunking = getattr(options, "chunking", "greedy")
    if chunking != "greedy" and not options.name:  # minilm?chunking=resync
        name = f"{name}-{chunking}"  # -> minilm-resync: other chunks, another system
    rerank = getattr(options, "rerank", None)
    if rerank and not options.name:  # a reranked retriever is another system: `minilm?rerank=maxsim` -> minilm-maxsim
        name = f"{name}-{rerank}"
    try:
        adapter.check(target, text)
        tokenizer = getattr(options, "tokenizer", None)
        if isinstance(tokenizer, str):  # `coref:baseline?tokenizer=gemma3-270m` needs Gemma's package as its target
            from longctx_eval.models.model_source import check_opt_in

            check_opt_in(tokenizer, text)
    except NotInstalled as exc:  # a suite names the part it skips by the model's name
        exc.name = name
        raise
    return ModelSpec(raw=text, kind=kind, target=target, options=options, name=name)


def _default_name(short: str | None, adapter: AdapterKind, target: str) -> str:
    if short:
        return short
    if adapter.default_name is not None:  # the kind names its models (e.g. a path's last component)
        return adapter.name_for(target)
    return f"{adapter.name}-{target}" if target else adapter.name


def name_from_path(target: str) -> str:
    """A path or hub id's last component, which names its model (`hf:`, `retriever:`)."""
    return target.rstrip("/").rsplit("/", 1)[-1]


def expand_models(arg: str) -> list[str]:
    """Split a comma-separated --model argument (a comma before http:// or https:// continues an `openai:` spec's
    list of servers); `default` expands to the embedded default systems."""
    out: list[str] = []
    for s in (s.strip() for s in re.split(r",(?!\s*https?://)", arg)):
        if s:
            out.extend(DEFAULT_MODELS if s == "default" else [s])
    if not out:
        raise ConfigError(f"--model is empty; {known_forms()}")
    return out


def slug(name: str) -> str:
    """The file-name-safe form of a model name: its run folder's name, a single path component that cannot be
    `.`, `..` or hidden (`..` from `openai:..@URL` or `hf:DIR/sub/..` becomes `model`)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")
    return re.sub(r"^[._]+", "", safe) or "model"


def _folder_key(name: str) -> str:
    """What two names must not share: their folder name, case-folded (one run folder per model)."""
    return slug(name).casefold()


def check_distinct_names(specs: list[ModelSpec]) -> None:
    """Two different specs must not share a display name (they would share a run folder and a leaderboard row)."""
    seen: dict[str, ModelSpec] = {}
    for spec in specs:
        other = seen.setdefault(_folder_key(spec.name), spec)
        if other.raw != spec.raw:
            raise ConfigError(
                f"models {other.raw!r} and {spec.raw!r} would both be named {spec.name!r} (one run folder, one "
                f"leaderboard row); name them apart with ?name=, e.g. {renamed(spec)!r}"
            )


def _suggest(spec: ModelSpec) -> str:
    parts = [p for p in spec.target.rstrip("/").split("/") if p]
    base = f"{parts[-2]}-{parts[-1]}" if len(parts) >= 2 else f"{spec.name}-2"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-._")[:100] or "model-2"


def renamed(spec: ModelSpec) -> str:
    """`spec` with a suggested ?name= that sets it apart (from the path's last two components)."""
    return f"{spec.raw}{'&' if '?' in spec.raw else '?'}name={_suggest(spec)}"
