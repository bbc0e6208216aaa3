"""The adapter kinds (`hf`, `vllm`, `retriever`, `bm25`, `hybrid`, `oracle`, `coref`, `rag`, `openai`) in the registry.

A kind names its options model, its adapter class and its tokenizer loader as lazy "module:attribute"
references, so looking a kind up imports no adapter. Third-party kinds register an `AdapterKind` under the
entry-point group `longctx_eval.model_kinds`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from longctx_eval.capability import ALL_CAPABILITIES, Capability
from longctx_eval.errors import ConfigError, TaskDefinitionError
from longctx_eval.models import options as opt
from longctx_eval.registry import Registry

if TYPE_CHECKING:
    from longctx_eval.models.base import ModelAdapter
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class AdapterKind:
    """One adapter family: its options, whether it takes a `:target`, and lazy references to what loads it."""

    name: str
    options: type[opt.KindOptions]
    needs_target: bool
    adapter: str
    """"module:Class" of the ModelAdapter, called with the ModelSpec."""
    tokenizer: str
    """"module:function" returning the kind's Tokenizer for a ModelSpec without loading weights."""
    example: str
    check_target: Callable[[str, str], None] | str | None = None
    """Checks a target before anything loads (e.g. that a local folder exists): (target, raw spec) -> None; a
    callable or a lazy "module:function" reference."""
    serves: frozenset[Capability] | None = None
    """What the kind's adapters serve, declared without loading them (None: known only once loaded). A composite
    kind (`rag`) checks its parts against it before anything loads; the adapter's own `capabilities` still rule."""
    default_name: str | None = None
    """"module:function" (target) -> the display name of a spec without `?name=` (None: `kind-target`, or `kind`)."""
    served_model: str | None = None
    """"module:function" (ModelSpec) -> the served model it sends requests to, for kinds that call a server that
    may bill them (run/cost.py prices those); None: the kind runs locally, at cost 0."""
    parse: str | None = None
    """"module:function" (raw, target, query values) -> ModelSpec, for a composite kind whose target is itself
    specs (`rag`); None: the generic parser (models/spec.py) parses the kind's options."""

    def check(self, target: str, raw: str) -> None:
        """Run the kind's target check, if it declares one (one-line ConfigError or PrerequisiteError)."""
        check = self.check_target
        if isinstance(check, str):
            check = _resolve(check, self.name)
        if check is not None:
            check(target, raw)

    @property
    def served(self) -> bool:
        """Whether the kind's models send requests to a server that may bill them."""
        return self.served_model is not None

    def name_for(self, target: str) -> str:
        """The display name of a spec of this kind without `?name=` (needs `default_name`)."""
        assert self.default_name is not None
        return _resolve(self.default_name, self.name)(target)

    def served_model_of(self, spec: ModelSpec) -> str:
        """The served model a spec of this kind sends requests to (needs `served_model`)."""
        assert self.served_model is not None
        return _resolve(self.served_model, self.name)(spec)

    def parse_composite(self, raw: str, target: str, values: dict[str, str]) -> ModelSpec:
        """Parse a composite kind's spec with its own hook (needs `parse`)."""
        assert self.parse is not None
        return _resolve(self.parse, self.name)(raw, target, values)

    def load(self, spec: ModelSpec) -> ModelAdapter:
        """Import the adapter class and build it."""
        return _resolve(self.adapter, self.name)(spec)

    def load_tokenizer(self, spec: ModelSpec) -> Tokenizer:
        """Import the tokenizer loader and call it (no weights)."""
        return _resolve(self.tokenizer, self.name)(spec)


def _resolve(ref: str, kind: str) -> Any:
    module, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except AttributeError as exc:
        raise TaskDefinitionError(f"model kind {kind!r}: {ref} cannot be loaded: {exc}") from exc


def _check(name: str, obj: object) -> AdapterKind:
    if not isinstance(obj, AdapterKind):
        raise TaskDefinitionError(f"model kind {name!r} is a {type(obj).__name__}; expected an AdapterKind")
    return obj


def _check_local_target(target: str, raw: str) -> None:
    from longctx_eval.models.model_source import check_target

    check_target(target, raw)


def _check_coref_target(target: str, raw: str) -> None:
    if target != "baseline":
        raise ConfigError(f"model spec {raw!r}: unknown coref system {target!r}; expected coref:baseline")


MODEL_KINDS: Registry[AdapterKind] = Registry("model kind", entry_point_group="longctx_eval.model_kinds", check=_check)

_BUILTIN = (
    AdapterKind(
        name="hf",
        options=opt.HFOptions,
        needs_target=True,
        adapter="longctx_eval.models.hf.adapter:HFCausalLM",
        tokenizer="longctx_eval.models.model_source:hf_tokenizer",
        example="hf:<folder-or-hub-id>[?dtype=float32|bfloat16|float16|auto&device=auto|cpu|cuda:N"
        "&device_map=auto&max_memory=0:70GiB,1:70GiB&attn_implementation=sdpa|flash_attention_2|eager&max_length=N"
        "&chat=auto&revision=R&gguf_file=F&batch_size=auto|N&max_batch_tokens=N"
        "&rope=none|linear|dynamic|ntk|yarn|yarn_notemp&rope_factor=F&train_length=N&prefix_cache=true&name=N]",
        check_target=_check_local_target,
        serves=frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD, Capability.ATTENTION}),
        default_name="longctx_eval.models.spec:name_from_path",
    ),
    AdapterKind(
        name="vllm",
        options=opt.VLLMOptions,
        needs_target=True,
        adapter="longctx_eval.models.vllm.engine:VLLMEngine",
        tokenizer="longctx_eval.models.model_source:hf_tokenizer",
        example="vllm:<folder-or-hub-id>[?dtype=float32&max_model_len=N&chat=auto&revision=R&tensor_parallel_size=1"
        "&pipeline_parallel_size=1&data_parallel_size=1&gpu_memory_utilization=F&enable_prefix_caching=true"
        "&enforce_eager=false&quantization=Q&rope=none|linear|dynamic|ntk|yarn|yarn_notemp&rope_factor=F"
        "&train_length=N&batch_size=N&name=N]",
        check_target="longctx_eval.models.vllm.settings:check_target",
        serves=frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD}),
    ),
    AdapterKind(
        name="retriever",
        options=opt.RetrieverOptions,
        needs_target=True,
        adapter="longctx_eval.models.retrieval.dense:DenseRetriever",
        tokenizer="longctx_eval.models.model_source:retriever_tokenizer",
        example="retriever:<sentence-transformers folder|minilm>[?batch_size=64&device=auto&chunking=greedy|resync"
        "&rerank=maxsim&rerank_depth=20&name=N]",
        check_target=_check_local_target,
        serves=frozenset({Capability.RETRIEVE}),
        default_name="longctx_eval.models.spec:name_from_path",
    ),
    AdapterKind(
        name="bm25",
        options=opt.BM25Options,
        needs_target=False,
        adapter="longctx_eval.models.retrieval.bm25:BM25Retriever",
        tokenizer="longctx_eval.models.model_source:minilm_tokenizer",
        example="bm25[?k1=1.5&b=0.75&chunking=greedy|resync&rerank=maxsim&rerank_depth=20&name=N]",
        serves=frozenset({Capability.RETRIEVE}),
    ),
    AdapterKind(
        name="hybrid",
        options=opt.HybridOptions,
        needs_target=False,
        adapter="longctx_eval.models.retrieval.hybrid:HybridRetriever",
        tokenizer="longctx_eval.models.model_source:minilm_tokenizer",
        example="hybrid[?alpha=0.5&fusion=rrf|minmax&rrf_k=60&k1=1.5&b=0.75&chunking=greedy|resync&rerank=maxsim"
        "&rerank_depth=20&name=N]",
        serves=frozenset({Capability.RETRIEVE}),
    ),
    AdapterKind(
        name="oracle",
        options=opt.OracleOptions,
        needs_target=False,
        adapter="longctx_eval.models.oracle:OracleAdapter",
        tokenizer="longctx_eval.models.model_source:minilm_tokenizer",
        example="oracle[?name=N]",
        serves=ALL_CAPABILITIES,
    ),
    AdapterKind(
        name="coref",
        options=opt.CorefOptions,
        needs_target=True,
        adapter="longctx_eval.models.coref_baseline:CorefBaseline",
        tokenizer="longctx_eval.models.model_source:minilm_tokenizer",
        example="coref:baseline[?window=40&name=N]",
        check_target=_check_coref_target,
        serves=frozenset({Capability.COREF}),
    ),
    AdapterKind(
        name="rag",
        options=opt.RagOptions,
        needs_target=True,
        adapter="longctx_eval.models.rag.adapter:RagModel",
        tokenizer="longctx_eval.models.rag.adapter:rag_tokenizer",
        example="rag:<retriever>+<generator>[?k=5&iterative=false&hops=2&chunk_tokens=N&chunk_overlap=N"
        "&retriever.KEY=V&generator.KEY=V&name=N]",
        serves=frozenset({Capability.GENERATE}),
        parse="longctx_eval.models.rag.spec:parse_rag",
    ),
    AdapterKind(
        name="openai",
        options=opt.OpenAIOptions,
        needs_target=True,
        adapter="longctx_eval.models.openai.adapter:OpenAIModel",
        tokenizer="longctx_eval.models.openai.prompt:served_tokenizer",
        example="openai:<model>@<base_url>[,<base_url>...][?endpoint=chat|completions&api_key_env=OPENAI_API_KEY"
        "&max_length=N&tokenizer=T&count=auto|local|server&decoding=greedy|default&neutral=auto|standard|all"
        "&max_in_flight=8&rpm=R&tpm=T&timeout=600&max_attempts=6&thinking_tokens=N&name=N]",
        check_target="longctx_eval.models.openai.target:check_target",
        serves=frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD}),
        default_name="longctx_eval.models.openai.target:default_name",
        served_model="longctx_eval.models.openai.target:served_model",
    ),
)
for _kind in _BUILTIN:
    MODEL_KINDS.register(_kind.name, _kind, source=__name__)
