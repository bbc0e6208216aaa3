"""What a local model will hold in memory before it runs: its weights at the chosen dtype and the KV cache of a
batch of its longest sequences, from config.json alone (no weight is read), and the memory it would run in.

Estimates, labelled so wherever they are printed: weights = parameters x dtype bytes (activations, the CUDA
context and the allocator's slack come on top); KV cache = 2 (keys, values) x KV heads x head size x dtype bytes
per token and layer, a sliding-window layer holding at most its window. The parameter count comes from the
safetensors headers where the folder has them, else from the config's shapes (an empty model built on the meta
device, or the decoder formula where transformers does not know the architecture).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from longctx_eval.errors import ConfigError
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import HFOptions, VLLMOptions

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
"""Bytes per element of the dtypes a config names (torch's names)."""
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4}
SAFETENSORS_BYTES |= {"I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
HEADER_LIMIT = 100 * 2**20
"""Largest safetensors header read (bytes); a longer length field means the file is not safetensors."""
GB = 10**9
UNITS = {"GiB": 2**30, "GB": 10**9, "MiB": 2**20, "MB": 10**6}
SLIDING = "sliding_attention"
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.h5", "*.msgpack")


def gigabytes(n: int | None) -> str:
    """`16.06 GB` (10^9 bytes), or `unknown`."""
    return "unknown" if n is None else f"{n / GB:,.2f} GB"


# -- the config -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttentionShape:
    """What one token costs in the KV cache: layers, KV heads, head size, and the sliding-window layers."""

    layers: int
    kv_heads: int
    head_dim: int
    sliding_layers: int = 0
    sliding_window: int | None = None

    def kv_bytes(self, tokens: int, dtype_bytes: int, batch: int = 1) -> int:
        """Keys and values of `batch` sequences of `tokens`: a full-attention layer holds every token, a
        sliding-window layer at most its window."""
        window = min(tokens, self.sliding_window) if self.sliding_window else tokens
        held = (self.layers - self.sliding_layers) * tokens + self.sliding_layers * window
        return batch * held * 2 * self.kv_heads * self.head_dim * dtype_bytes

    def describe(self, dtype: str) -> str:
        """`2 x 32 layers x 8 KV heads x 128 x 2 bytes (bfloat16)`, and the sliding-window layers where there are."""
        size = f"{DTYPE_BYTES[dtype]} bytes ({dtype})"
        text = f"2 x {self.layers} layers x {self.kv_heads} KV heads x {self.head_dim} x {size}"
        if self.sliding_layers:
            text += (
                f", of which {self.sliding_layers} sliding-window layers hold at most {self.sliding_window:,} tokens "
                f"({self.layers - self.sliding_layers} full-attention layers hold all)"
            )
        return text


@dataclass(frozen=True)
class ModelConfig:
    """A model folder's config.json read for its memory: the attention shape, the shapes the parameter count
    needs, the dtype it names, and where each came from."""

    path: Path
    raw: Mapping[str, Any]
    text: Any
    """The text model's config: transformers' object where it parses the file, else the raw (text_config) dict."""
    prefix: str
    """`text_config.` when the text model's fields sit under it, else empty (field names in errors)."""
    attention: AttentionShape
    config_dtype: str | None
    quantized: bool
    transformers_config: Any | None


def _get(text: Any, key: str) -> Any:
    return text.get(key) if isinstance(text, Mapping) else getattr(text, key, None)


def _positive(cfg_path: Path, prefix: str, text: Any, key: str, default: int | None = None) -> int:
    value = _get(text, key)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{cfg_path}: {prefix}{key} = {value!r}; expected a positive integer")
    return value


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file; a one-line ConfigError naming the file where it is missing or not an object."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text at byte {exc.start}") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _transformers_config(folder: Path) -> Any | None:
    """transformers' parse of the folder's config (its defaults filled in), or None where it cannot parse it."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(str(folder))
    except Exception:  # an architecture transformers does not know, or values it refuses: the raw file is read
        return None


def _sliding_layers(cfg_path: Path, prefix: str, text: Any, layers: int) -> tuple[int, int | None]:
    """(sliding-window layers, their window): `layer_types` where given, else `sliding_window_pattern` (every
    N-th layer global, as Gemma 2/3), else every layer when `sliding_window` is set and not switched off."""
    window = _get(text, "sliding_window")
    if window is None:
        return 0, None
    window = _positive(cfg_path, prefix, text, "sliding_window")
    types = _get(text, "layer_types")
    if types is not None:
        if not isinstance(types, list | tuple) or len(types) != layers or not all(isinstance(t, str) for t in types):
            raise ConfigError(
                f"{cfg_path}: {prefix}layer_types = {types!r}; expected {layers} attention types, one per layer"
            )
        return sum(t == SLIDING for t in types), window
    pattern = _get(text, "sliding_window_pattern")
    if pattern is not None:
        every = _positive(cfg_path, prefix, text, "sliding_window_pattern")
        return layers - layers // every, window
    if _get(text, "use_sliding_window") is False:
        return 0, None
    return layers, window


def read_model_config(folder: Path) -> ModelConfig:
    """The folder's config.json read for its memory (no weight read); one-line ConfigError naming the file and
    field for a value that cannot be a model's."""
    path = folder / "config.json"
    raw = read_json(path)
    nested = raw.get("text_config")
    prefix = "text_config." if isinstance(nested, dict) else ""
    parsed = _transformers_config(folder)
    if parsed is not None:
        text = parsed.get_text_config() if hasattr(parsed, "get_text_config") else parsed
    else:
        text = nested if isinstance(nested, dict) else raw
    layers = _positive(path, prefix, text, "num_hidden_layers")
    heads = _positive(path, prefix, text, "num_attention_heads")
    hidden = _positive(path, prefix, text, "hidden_size")
    kv_heads = _positive(path, prefix, text, "num_key_value_heads", default=heads)
    head_dim = _positive(path, prefix, text, "head_dim", default=max(1, hidden // heads))
    sliding, window = _sliding_layers(path, prefix, text, layers)
    dtype = None
    for source in (parsed, text, raw, nested if isinstance(nested, dict) else {}):
        value = None if source is None else (_get(source, "dtype") or _get(source, "torch_dtype"))
        if value is not None:
            dtype = str(value).removeprefix("torch.")
            if dtype not in DTYPE_BYTES:
                raise ConfigError(f"{path}: torch_dtype = {value!r}; expected one of {', '.join(DTYPE_BYTES)}")
            break
    return ModelConfig(
        path=path,
        raw=raw,
        text=text,
        prefix=prefix,
        attention=AttentionShape(layers, kv_heads, head_dim, sliding, window),
        config_dtype=dtype,
        quantized=isinstance(raw.get("quantization_config"), dict),
        transformers_config=parsed,
    )


# -- the parameter count ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model, the bytes they are stored in (safetensors only), and where the count came from."""

    params: int
    source: str
    stored_bytes: int | None = None


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (its first 8 + N bytes; no tensor is read)."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConfigError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
            (size,) = struct.unpack("<Q", head)
            if size > HEADER_LIMIT:
                raise ConfigError(f"{path}: not a safetensors file (header length {size:,} bytes)")
            body = f.read(size)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    try:
        header = json.loads(body)
    except ValueError as exc:
        raise ConfigError(f"{path}: the safetensors header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ConfigError(f"{path}: the safetensors header is not a JSON object")
    return header


def _safetensors_count(files: Sequence[Path]) -> ParameterCount:
    params = stored = 0
    for path in files:
        for name, entry in safetensors_header(path).items():
            if name == "__metadata__":
                continue
            shape = entry.get("shape") if isinstance(entry, dict) else None
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ConfigError(f"{path}: tensor {name!r} has no valid shape in the safetensors header")
            n = 1
            for d in shape:
                n *= d
            params += n
            stored += n * SAFETENSORS_BYTES.get(str(entry.get("dtype")), 4)
    where = files[0].name if len(files) == 1 else f"{len(files)} files"
    return ParameterCount(params, f"the safetensors headers ({where}; no tensor read)", stored)


def _meta_count(config: Any) -> int | None:
    """Parameters of an empty model built from the config on the meta device (no memory, no weights)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception:  # an architecture transformers cannot build from its config alone
        return None
    return sum(p.numel() for p in model.parameters())


def _formula_count(cfg: ModelConfig) -> int:
    """A decoder's parameters from its shapes: embeddings (+ an untied output layer), per layer q/k/v/o, a gated
    MLP and two norms, and the final norm (biases and extra norms left out)."""
    text, path, prefix = cfg.text, cfg.path, cfg.prefix
    hidden = _positive(path, prefix, text, "hidden_size")
    heads = _positive(path, prefix, text, "num_attention_heads")
    vocab = _positive(path, prefix, text, "vocab_size")
    inter = _positive(path, prefix, text, "intermediate_size", default=4 * hidden)
    a = cfg.attention
    attention = hidden * heads * a.head_dim * 2 + hidden * a.kv_heads * a.head_dim * 2
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    tied = bool(_get(text, "tie_word_embeddings") or cfg.raw.get("tie_word_embeddings"))
    return vocab * hidden * (1 if tied else 2) + a.layers * per_layer + hidden


def parameter_count(folder: Path, cfg: ModelConfig) -> ParameterCount:
    """The folder's parameters without loading a weight: safetensors headers, else the config's shapes."""
    files = sorted(folder.glob("*.safetensors"))
    if files:
        return _safetensors_count(files)
    if cfg.transformers_config is not None:
        n = _meta_count(cfg.transformers_config)
        if n is not None:
            return ParameterCount(n, "config.json's shapes (an empty model on the meta device; no weights)")
    return ParameterCount(_formula_count(cfg), "config.json's shapes (the decoder formula; no weights)")


def has_weights(folder: Path) -> bool:
    """Whether a model folder holds weight files (else it is config-only: a dry run can size it, not run it)."""
    return (folder / "longctx_source.json").is_file() or any(any(folder.glob(g)) for g in WEIGHT_GLOBS)


# -- where it runs ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """The memory a model would run in: bytes (None: unknown), what they are, and why it cannot run at all."""

    bytes: int | None
    label: str
    cuda: bool
    shortfall: str | None = None


def cuda_memory() -> list[tuple[str, int]]:
    """(name, total bytes) of every CUDA device torch sees; empty without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    return [(p.name, int(p.total_memory)) for p in props]


def machine_ram() -> tuple[int, str]:
    """This machine's RAM in bytes (its cgroup's limit where that is lower) and what the figure is."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        limit = "max"
    if limit.isdigit() and int(limit) < total:
        return int(limit), "this machine's RAM (its cgroup's memory.max)"
    return total, "this machine's RAM (total)"


def _device_list(gpus: Sequence[tuple[str, int]], indexes: Sequence[int]) -> str:
    names = sorted({gpus[i][0] for i in indexes})
    return f"{len(indexes)} x {', '.join(names)}" if len(indexes) > 1 else f"cuda:{indexes[0]} {names[0]}"


def _max_memory_bytes(text: str) -> int:
    total = 0
    for item in text.split(","):
        _, _, amount = item.partition(":")
        unit = next(u for u in UNITS if amount.endswith(u))
        total += int(float(amount.removesuffix(unit)) * UNITS[unit])
    return total


def placement(spec: ModelSpec, gpus: Sequence[tuple[str, int]] | None = None) -> Placement:
    """Where an `hf:` or `vllm:` model would run and how much memory that is: the CUDA devices torch sees (those
    the spec would use), else this machine's RAM."""
    gpus = cuda_memory() if gpus is None else gpus
    if isinstance(spec.options, VLLMOptions):
        return _vllm_placement(spec.options, gpus)
    o = cast("HFOptions", spec.options)
    if o.device == "cpu" or not gpus:
        ram, label = machine_ram()
        why = "device=cpu" if o.device == "cpu" else "torch sees no CUDA device"
        return Placement(ram, f"{label}, {gibibytes(ram)} ({why})", cuda=False)
    if o.device_map is not None:
        if o.max_memory is not None:
            return Placement(_max_memory_bytes(o.max_memory), f"max_memory={o.max_memory} (device_map)", cuda=True)
        everything = list(range(len(gpus)))
        total = sum(m for _, m in gpus)
        return Placement(total, f"{_device_list(gpus, everything)}, {gibibytes(total)} (device_map)", cuda=True)
    index = int(o.device.partition(":")[2] or 0)
    total = gpus[index][1]
    return Placement(total, f"{_device_list(gpus, [index])}, {gibibytes(total)}", cuda=True)


def _vllm_placement(o: VLLMOptions, gpus: Sequence[tuple[str, int]]) -> Placement:
    share = o.gpu_memory_utilization
    of = f"gpu_memory_utilization={share:g} of " if share is not None else ""
    if not gpus:
        ram, label = machine_ram()
        usable = int(ram * (share or 1.0))
        return Placement(usable, f"{of}{label}, {gibibytes(ram)} (torch sees no CUDA device)", cuda=False)
    wanted = o.tensor_parallel_size * o.pipeline_parallel_size
    used = list(range(min(wanted, len(gpus))))
    total = sum(gpus[i][1] for i in used)
    usable = int(total * (share or 1.0))
    short = None
    if wanted > len(gpus):
        short = f"tensor x pipeline parallel = {wanted} GPUs, torch sees {len(gpus)}"
    note = "" if share is not None else " (vLLM reserves its gpu_memory_utilization share of it)"
    return Placement(usable, f"{of}{_device_list(gpus, used)}, {gibibytes(total)}{note}", cuda=True, shortfall=short)


def gibibytes(n: int) -> str:
    """`85.03 GB = 79.2 GiB`: a memory size in both units (device memory is sold in one, reported in the other)."""
    return f"{n / GB:,.2f} GB = {n / 2**30:,.1f} GiB"


# -- the model's footprint --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryRow:
    """One model at one length: the weights, the KV cache of `batch` sequences of `longest` tokens, and whether
    they fit its placement."""

    length: int
    requests: int
    longest: int
    batch: int
    weights_bytes: int | None
    kv_bytes: int

    @property
    def total_bytes(self) -> int | None:
        return None if self.weights_bytes is None else self.weights_bytes + self.kv_bytes


@dataclass(frozen=True)
class Batching:
    """How many sequences one batch holds: at most `most`, and where packed by tokens at most `tokens` prompt +
    generation tokens (the runner's and adapter's rule, stated in `rule`)."""

    rule: str
    most: int = 1
    tokens: int | None = None

    def size(self, requests: int, longest: int) -> int:
        """Sequences of `longest` tokens in the largest batch of `requests` requests."""
        batch = min(self.most, max(1, requests))
        if self.tokens is not None:
            batch = max(1, min(batch, self.tokens // max(1, longest)))
        return batch


@dataclass(frozen=True)
class Footprint:
    """A local model's memory, estimated from its config: parameters, dtype, attention shape, placement."""

    model: str
    params: ParameterCount
    dtype: str
    dtype_source: str
    weights_bytes: int | None
    weights_source: str
    attention: AttentionShape
    placement: Placement

    def row(self, length: int, requests: int, longest: int, batching: Batching) -> MemoryRow:
        """The memory at one length where `requests` are sent, the longest of `longest` tokens (prompt + budget),
        batched as `batching` says."""
        batch = batching.size(requests, longest)
        kv = self.attention.kv_bytes(longest, DTYPE_BYTES[self.dtype], batch)
        return MemoryRow(length, requests, longest, batch, self.weights_bytes, kv)

    def fits(self, row: MemoryRow) -> str:
        """`yes` / `no` against the placement (or why it cannot be said)."""
        if self.placement.shortfall is not None:
            return "no"
        if row.total_bytes is None or self.placement.bytes is None:
            return "unknown"
        return "yes" if row.total_bytes <= self.placement.bytes else "no"


def model_folder(spec: ModelSpec) -> Path | None:
    """The local folder holding the spec's config.json (a hub id: its cached snapshot), or None."""
    from longctx_eval.models.model_source import hf_source

    revision = getattr(spec.options, "revision", None)
    source = hf_source(spec.target, revision)
    if isinstance(source, Path):
        return source if (source / "config.json").is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(source, "config.json", revision=revision)
    except Exception:  # a hub id the cache cannot answer for
        return None
    return Path(found).parent if isinstance(found, str) else None


def _dtype(spec: ModelSpec, cfg: ModelConfig) -> tuple[str, str]:
    option = cast("HFOptions | VLLMOptions", spec.options).dtype
    if option != "auto":
        if "dtype" in spec.options.model_fields_set:
            return option, "the dtype option"
        other = cfg.config_dtype if cfg.config_dtype not in (None, option) else None
        return option, "the default" + (f"; ?dtype=auto would load config.json's {other}" if other else "")
    if cfg.config_dtype is not None:
        return cfg.config_dtype, "dtype=auto: config.json's torch_dtype"
    return "float32", "dtype=auto, and config.json names no dtype: float32"


def footprint(spec: ModelSpec, gpus: Sequence[tuple[str, int]] | None = None) -> Footprint | None:
    """The memory estimate of an `hf:` or `vllm:` model from its folder's config.json (no weight is read), or
    None for other kinds and for models whose config is not on this machine."""
    if not isinstance(spec.options, HFOptions | VLLMOptions) or getattr(spec.options, "gguf_file", None):
        return None
    folder = model_folder(spec)
    if folder is None:
        return None
    cfg = read_model_config(folder)
    params = parameter_count(folder, cfg)
    dtype, dtype_source = _dtype(spec, cfg)
    quantization = getattr(spec.options, "quantization", None)
    if cfg.quantized or quantization:
        what = f"quantization={quantization}" if quantization else "config.json's quantization_config"
        weights = params.stored_bytes
        weights_source = f"as stored ({what})" if weights is not None else f"unknown: {what}, no safetensors here"
    else:
        weights = params.params * DTYPE_BYTES[dtype]
        weights_source = f"{params.params:,} parameters x {DTYPE_BYTES[dtype]} bytes ({dtype})"
    return Footprint(
        model=spec.name,
        params=params,
        dtype=dtype,
        dtype_source=dtype_source,
        weights_bytes=weights,
        weights_source=weights_source,
        attention=cfg.attention,
        placement=placement(spec, gpus),
    )
