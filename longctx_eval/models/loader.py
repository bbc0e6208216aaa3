"""Loading what a parsed spec names: the adapter (weights and all) or only its tokenizer.

Whatever a model's files make the loading libraries raise (a config transformers rejects, a truncated GGUF,
a pickle torch refuses to unpickle) is one line naming the model, never a traceback.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from typing import TypeVar

from longctx_eval.errors import LongctxError, ModelFileError
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.text.tokenizer import Tokenizer

T = TypeVar("T")


def load_model(spec: ModelSpec) -> ModelAdapter:
    """Load the adapter of a parsed spec (imports its kind's module now)."""
    return _loading(spec, lambda: MODEL_KINDS.get(spec.kind).load(spec))


def load_tokenizer_of(spec: ModelSpec) -> Tokenizer:
    """The tokenizer the spec's model measures lengths in, loaded without its weights."""
    return _loading(spec, lambda: MODEL_KINDS.get(spec.kind).load_tokenizer(spec))


def unloadable(spec: ModelSpec, exc: Exception) -> ModelFileError:
    """The one-line error for a model whose files the loading libraries rejected with `exc`."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
        why = (
            "its weights are a pickle (pytorch_model.bin) that torch refuses to unpickle safely (weights_only); "
            "nothing in it was run. Expected safetensors weights (model.safetensors)"
        )
    else:
        detail = next((line for line in lines if "error" in line.lower() and line != lines[0]), None)
        name = type(exc).__name__
        kind = name if name[:1].isupper() else f"{type(exc).__module__}.{name}"  # struct.error, not error
        why = f"{kind}: {lines[0] if lines else 'no message'}" + (f" ({detail})" if detail else "")
    return ModelFileError(f"model {spec.raw!r} cannot be loaded: {why}")


def _loading(spec: ModelSpec, load: Callable[[], T]) -> T:
    try:
        with warnings.catch_warnings():  # torch's note on a pickle's protocol, printed before it refuses the pickle
            warnings.filterwarnings("ignore", module=r"torch\._weights_only_unpickler")
            return load()
    except LongctxError:
        raise
    except Exception as exc:  # the model's own files are input: whatever their loader raises is reported as such
        raise unloadable(spec, exc) from exc
