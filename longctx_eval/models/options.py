"""Each adapter kind's options, declared once as a typed model: spec query values are converted and checked here.

Nothing here imports torch or an adapter module, so a spec can be checked before any model loads. Every kind
accepts `name` (the display name and run-folder name); the other fields are the kind's own.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from longctx_eval.errors import ConfigError, did_you_mean

RopeVariant = Literal["none", "linear", "dynamic", "ntk", "yarn", "yarn_notemp"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
DEVICE_PATTERN = r"^(auto|cpu|cuda(:[0-9]+)?)$"
"""`device=`: auto (CUDA when there is one, else the CPU), cpu, cuda or cuda:N (models/devices.py)."""
MEMORY_PATTERN = r"^(([0-9]+|cpu):[0-9]+(\.[0-9]+)?(GiB|GB|MiB|MB))(,([0-9]+|cpu):[0-9]+(\.[0-9]+)?(GiB|GB|MiB|MB))*$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
HF_BATCH_SIZE = 1
"""`hf` generation batch on the CPU (what `batch_size=auto`, the default, means there). SmolLM2 on 2 CPU cores
(benchmarks/batching.py): batch 4 is 2.2x faster at ~1K tokens but 0.64x at ~4K (padded attention), and the
suite's long prompts dominate, so 1 it is. On CUDA, auto packs requests by a token budget (models/hf/batching.py)."""
PRONOUN_WINDOW = 40
"""Default `coref:baseline` look-back: earlier mentions a pronoun considers."""


class KindOptions(BaseModel):
    """Base of every kind's options: unknown keys are refused, NaN and infinities too; `name` is common."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
    )

    def given(self) -> dict[str, Any]:
        """The options the spec set explicitly (defaults left out)."""
        return {k: getattr(self, k) for k in sorted(self.model_fields_set)}

    def check_host(self, raw: str) -> None:
        """Checks against this machine that need no model (a CUDA device asked for where there is none); a kind
        overrides it. Raises a one-line ConfigError naming `raw`; nothing loads."""


class HFOptions(KindOptions):
    """`hf:` causal LMs: loading and placement, window, decoding and the RoPE variant (generation and the probe)."""

    dtype: Dtype = Field(default="float32", description="one of float32, bfloat16, float16 or auto (the config's)")
    device: str = Field(
        default="auto", pattern=DEVICE_PATTERN, description="auto (CUDA when there is one), cpu, cuda or cuda:N"
    )
    device_map: Literal["auto", "balanced", "sequential"] | None = Field(
        default=None, description="auto, balanced or sequential (spread the layers over the GPUs)"
    )
    max_memory: str | None = Field(
        default=None,
        pattern=MEMORY_PATTERN,
        description="per-device limits for device_map, e.g. 0:70GiB,1:70GiB,cpu:100GiB",
    )
    attn_implementation: Literal["sdpa", "flash_attention_2", "eager"] | None = Field(
        default=None, description="sdpa, flash_attention_2 or eager (default: transformers' choice, sdpa)"
    )
    max_length: int | None = Field(default=None, gt=0, description="a positive integer (context window in tokens)")
    chat: Literal["auto", "true", "false"] = Field(default="auto", description="auto, true or false")
    revision: str | None = Field(default=None, min_length=1, description="a hub revision (branch, tag or commit)")
    gguf_file: str | None = Field(default=None, min_length=1, description="a GGUF file name inside the folder")
    batch_size: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        default="auto",
        description="a positive integer (prompts per forward) or auto (1 on the CPU, packed by max_batch_tokens "
        "on CUDA)",
    )
    max_batch_tokens: int | None = Field(
        default=None, gt=0, description="a positive integer (prompt + generation tokens per packed batch)"
    )
    rope: RopeVariant = Field(default="none", description="one of none, linear, dynamic, ntk, yarn, yarn_notemp")
    rope_factor: float | None = Field(default=None, ge=1.0, description="a finite number >= 1")
    train_length: int | None = Field(default=None, gt=0, description="a positive integer (training window)")
    prefix_cache: Literal["true", "false"] = Field(
        default="true", description="true or false (reuse the KV cache of a shared prompt prefix at batch_size=1)"
    )

    def check_host(self, raw: str) -> None:
        from longctx_eval.models.devices import check_device

        if self.max_memory is not None and self.device_map is None:
            raise ConfigError(
                f"model spec {raw!r}: max_memory={self.max_memory} limits what device_map puts on each device; "
                "add device_map=auto (or balanced, sequential)"
            )
        if self.device_map is not None and self.device not in ("auto", "cuda"):
            raise ConfigError(
                f"model spec {raw!r}: device_map={self.device_map} spreads the model over the GPUs by itself; "
                f"drop device={self.device} (or use device=auto)"
            )
        check_device(self.device, raw)
        if self.attn_implementation == "flash_attention_2":
            import importlib.util

            if importlib.util.find_spec("flash_attn") is None:
                raise ConfigError(
                    f"model spec {raw!r}: attn_implementation=flash_attention_2 needs the flash-attn package, which "
                    "is not installed here (pip install flash-attn --no-build-isolation); use attn_implementation=sdpa"
                )


RERANK_DEPTH = 20
"""Default candidates a second-stage reranker rescores (models/rerankers.py)."""


class RerankOptions(KindOptions):
    """Options every retriever kind shares: the chunk boundary rule and an optional second-stage reranker over
    its top `rerank_depth` chunks."""

    rerank: str | None = Field(default=None, min_length=1, description="a registered reranker name (built in: maxsim)")
    rerank_depth: int = Field(default=RERANK_DEPTH, gt=0, description="a positive integer (chunks rescored)")
    chunking: Literal["greedy", "resync"] = Field(
        default="greedy",
        description="greedy or resync (chunk boundaries that fall back into step after an insertion; text/chunking.py)",
    )

    @field_validator("rerank")
    @classmethod
    def _known_reranker(cls, value: str | None) -> str | None:
        if value is not None:
            from longctx_eval.models.rerankers import reranker_names  # a light registry module: no model loads

            if value not in reranker_names():
                raise ValueError(f"unknown reranker {value!r}")
        return value


class RetrieverOptions(RerankOptions):
    """`retriever:` sentence-transformers bi-encoders."""

    batch_size: int = Field(default=64, gt=0, description="a positive integer (texts per encoder batch)")
    device: str = Field(
        default="auto", pattern=DEVICE_PATTERN, description="auto (CUDA when there is one), cpu, cuda or cuda:N"
    )

    def check_host(self, raw: str) -> None:
        from longctx_eval.models.devices import check_device

        check_device(self.device, raw)


class BM25Options(RerankOptions):
    """`bm25`: Okapi BM25 parameters."""

    k1: float = Field(default=1.5, gt=0, description="a finite number > 0")
    b: float = Field(default=0.75, ge=0, le=1, description="a number in [0, 1]")
    device: str = Field(
        default="auto", pattern=DEVICE_PATTERN, description="auto, cpu, cuda or cuda:N (the reranker's encoder)"
    )

    def check_host(self, raw: str) -> None:
        from longctx_eval.models.devices import check_device

        check_device(self.device, raw)


class HybridOptions(RerankOptions):
    """`hybrid`: MiniLM dense + BM25, fused by weighted reciprocal rank (`rrf`) or min-max scores (`minmax`)."""

    alpha: float = Field(default=0.5, ge=0, le=1, description="a number in [0, 1] (weight of the dense side)")
    fusion: Literal["rrf", "minmax"] = Field(default="rrf", description="rrf or minmax")
    rrf_k: int = Field(default=60, gt=0, description="a positive integer (reciprocal-rank constant)")
    k1: float = Field(default=1.5, gt=0, description="a finite number > 0")
    b: float = Field(default=0.75, ge=0, le=1, description="a number in [0, 1]")
    batch_size: int = Field(default=64, gt=0, description="a positive integer (texts per encoder batch)")
    device: str = Field(
        default="auto", pattern=DEVICE_PATTERN, description="auto (CUDA when there is one), cpu, cuda or cuda:N"
    )

    def check_host(self, raw: str) -> None:
        from longctx_eval.models.devices import check_device

        check_device(self.device, raw)


class OracleOptions(KindOptions):
    """`oracle`: takes only `name`."""


class CorefOptions(KindOptions):
    """`coref:baseline`: the pronoun look-back window, and the tokenizer a length is counted in."""

    window: int = Field(default=PRONOUN_WINDOW, gt=0, description="a positive integer (mentions)")
    tokenizer: str = Field(
        default="minilm",
        min_length=1,
        description="the tokenizer lengths are counted in (minilm, smollm2-135m, a tokenizer.json or folder): a "
        "language model's, to build the very documents its cells read",
    )


RAG_K = 5
"""Default chunks a `rag:` model retrieves per round (128-token chunks: ~640 tokens of passages)."""


class RagOptions(KindOptions):
    """`rag:<retriever>+<generator>`: chunks per round, chunk size, iterative rounds. The inner specs' own
    options ride along as `retriever.KEY=V` / `generator.KEY=V` (models/rag/spec.py strips them first)."""

    k: int = Field(default=RAG_K, gt=0, description="a positive integer (chunks retrieved per round)")
    iterative: bool = Field(default=False, description="true or false")
    hops: int = Field(default=2, ge=2, description="an integer >= 2 (retrieval rounds; needs iterative=true)")
    chunk_tokens: int | None = Field(default=None, gt=0, description="a positive integer (retriever tokens)")
    chunk_overlap: int | None = Field(
        default=None, ge=0, description="an integer >= 0 and below chunk_tokens (retriever tokens)"
    )


class OpenAIOptions(KindOptions):
    """`openai:<model>@<base_url>`: an OpenAI-compatible endpoint (models/openai/adapter.py; docs/served.md)."""

    endpoint: Literal["chat", "completions"] = Field(default="chat", description="chat or completions")
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="the NAME of an environment variable holding the key (never the key itself)",
    )
    max_length: int | None = Field(default=None, gt=0, description="a positive integer (context window in tokens)")
    tokenizer: str | None = Field(
        default=None, min_length=1, description="an HF tokenizer (hub id, folder, smollm2-135m) or tiktoken:<encoding>"
    )
    count: Literal["auto", "local", "server"] = Field(default="auto", description="auto, local or server")
    chat: Literal["auto", "true", "false"] = Field(default="auto", description="auto, true or false")
    prefill: Literal["auto", "continue", "none"] = Field(default="auto", description="auto, continue or none")
    decoding: Literal["greedy", "default"] = Field(default="greedy", description="greedy or default")
    neutral: Literal["auto", "standard", "all"] = Field(
        default="auto",
        description="auto, standard or all (greedy: which neutral penalty fields are sent; models/openai/sampling.py)",
    )
    seed: int = Field(default=0, ge=0, description="an integer >= 0 (sent as the request seed)")
    max_in_flight: int = Field(default=8, gt=0, description="a positive integer (requests in flight)")
    batch_size: int | None = Field(default=None, gt=0, description="a positive integer (requests per runner batch)")
    rpm: float | None = Field(default=None, ge=1, description="a number >= 1 (requests per minute)")
    tpm: float | None = Field(default=None, gt=0, description="a number > 0 (tokens per minute)")
    timeout: float = Field(default=600.0, gt=0, description="a number > 0 (seconds per attempt)")
    max_attempts: int = Field(default=6, ge=1, description="a positive integer (attempts per request)")
    backoff_base: float = Field(default=0.5, ge=0, description="a number >= 0 (seconds)")
    backoff_cap: float = Field(default=30.0, ge=0, description="a number >= 0 (seconds)")
    retry_seed: int = Field(default=0, ge=0, description="an integer >= 0 (seeds the retry jitter)")
    stream: bool = Field(default=True, description="true or false")
    thinking_tokens: int = Field(default=0, ge=0, description="an integer >= 0 (reasoning budget in tokens)")
    thinking: Literal["auto", "off"] = Field(default="auto", description="auto or off")
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        default=None, description="minimal, low, medium or high"
    )
    length_tolerance: float = Field(
        default=0.02, ge=0, description="a number >= 0 (fraction of the prompt; at least 2 tokens)"
    )


OptionsT = TypeVar("OptionsT", bound="KindOptions")


def parse_options(cls: type[OptionsT], values: dict[str, str], kind: str, raw: str) -> OptionsT:
    """Convert and check `values` (strings from the spec); one-line ConfigError naming spec, key and expected form."""
    for key in values:
        if key not in cls.model_fields:
            hint = did_you_mean(key, cls.model_fields)
            raise ConfigError(f"model spec {raw!r}: unknown option {key!r} for {kind!r}.{hint}")
    try:
        options = cls.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        field = cls.model_fields.get(key)
        expected = field.description if field is not None and field.description else err["msg"]
        raise ConfigError(
            f"model spec {raw!r}: option {key}={values.get(key)!r} is invalid; expected {expected}"
        ) from None
    options.check_host(raw)
    return options


VLLMRope = Literal["none", "linear", "dynamic", "ntk", "yarn", "yarn_notemp"]


class VLLMOptions(KindOptions):
    """`vllm:<folder-or-hub-id>`: vLLM's offline engine in process (models/vllm/engine.py; the `vllm` extra).

    Unset engine options keep vLLM's defaults and are not recorded; prompts are the token ids `hf:` renders."""

    dtype: Dtype = Field(default="float32", description="one of float32, bfloat16, float16 or auto (the config's)")
    chat: Literal["auto", "true", "false"] = Field(default="auto", description="auto, true or false")
    revision: str | None = Field(default=None, min_length=1, description="a hub revision (branch, tag or commit)")
    max_model_len: int | None = Field(default=None, gt=0, description="a positive integer (context window in tokens)")
    tensor_parallel_size: int = Field(default=1, gt=0, description="a positive integer (GPUs per model replica)")
    pipeline_parallel_size: int = Field(default=1, gt=0, description="a positive integer (pipeline stages)")
    data_parallel_size: int = Field(
        default=1,
        ge=1,
        le=1,
        description="1: vLLM's offline engine runs one replica per process; for N replicas run N shards "
        "(`longctx-eval run --shard I/N`, one per device) or serve the model (`vllm serve MODEL "
        "--data-parallel-size N`) and evaluate `openai:MODEL@http://HOST:PORT/v1`",
    )
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="a number in (0, 1] (share of GPU memory vLLM may take)"
    )
    enable_prefix_caching: bool = Field(default=True, description="true or false (vLLM's automatic prefix cache)")
    enforce_eager: bool | None = Field(default=None, description="true or false (skip torch.compile/graph capture)")
    quantization: str | None = Field(
        default=None, pattern=r"^[a-z0-9_]{1,40}$", description="a vLLM quantization method such as fp8 or awq"
    )
    rope: VLLMRope = Field(default="none", description="one of none, linear, dynamic, ntk, yarn, yarn_notemp")
    rope_factor: float | None = Field(default=None, ge=1.0, description="a finite number >= 1")
    train_length: int | None = Field(default=None, gt=0, description="a positive integer (training window)")
    batch_size: int | None = Field(
        default=None, gt=0, description="a positive integer (requests per engine call; default: the whole task)"
    )

    @property
    def gguf_file(self) -> None:
        """vLLM loads the folder's safetensors (the tokenizer loader shared with `hf:` asks for this)."""
        return None
