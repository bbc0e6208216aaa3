"""Where a spec's weights and tokenizer come from: embedded names, local folders, cached hub ids.

Checking a target and loading a tokenizer import no torch and read no weights; transformers is imported
only inside the tokenizer loaders.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from longctx_eval.errors import ConfigError, ModelFileError, NotInstalled, PrerequisiteError
from longctx_eval.models.assets import (
    EMBEDDED_GGUF,
    GEMMA3,
    GEMMA3_INSTALL,
    converted_dir,
    gemma3_installed,
    load_tokenizer,
    minilm_path,
)
from longctx_eval.models.options import HFOptions
from longctx_eval.models.references import REFERENCE_MODELS, reference_dir
from longctx_eval.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from longctx_eval.models.model_spec import ModelSpec

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
EMBEDDED_HF = (*EMBEDDED_GGUF, *REFERENCE_MODELS)
FOLDER_FORM = "a local model folder (config.json + weights) or a hub id org/name"


def check_opt_in(name: str, raw: str) -> None:
    """NotInstalled when `name` (a target or a `tokenizer=` value) is an opt-in embedded model whose package is not
    installed (the line names the make target)."""
    if name == GEMMA3.name and not gemma3_installed():
        raise NotInstalled(f"model spec {raw!r}: {GEMMA3_INSTALL}")


def check_target(target: str, raw: str) -> None:
    """An embedded name, an existing folder or a hub id; a path that does not exist is a ConfigError, and so is
    an opt-in embedded model whose package is not installed (`check_opt_in`)."""
    check_opt_in(target, raw)
    if target in (*EMBEDDED_HF, "minilm"):
        return
    path = Path(target).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"model spec {raw!r}: {target} is a file; expected {FOLDER_FORM}")
        return
    if target.startswith(("/", ".", "~")) or not HUB_ID.match(target):
        raise ConfigError(f"model spec {raw!r}: no such folder {target}; expected {FOLDER_FORM}")


def offline() -> bool:
    """Whether the Hugging Face hub must not be contacted (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set)."""
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hf_source(target: str, revision: str | None = None) -> Path | str:
    """The folder of an embedded name or local path, else the hub id (which must be cached when offline)."""
    if target in EMBEDDED_GGUF:
        return converted_dir(EMBEDDED_GGUF[target])
    if target in REFERENCE_MODELS:
        return reference_dir(target)
    if Path(target).expanduser().is_dir():
        return Path(target).expanduser()
    if offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(target, "config.json", revision=revision), str):
            raise PrerequisiteError(
                f"model {target!r} is not in the local Hugging Face cache and the hub is offline (HF_HUB_OFFLINE=1): "
                f"download it where there is network (`hf download {target}`) or pass a local folder, "
                "e.g. hf:/path/to/model"
            )
    return target


def load_error(target: str, exc: Exception) -> ModelFileError:
    """A one-line error for a model or tokenizer that transformers could not load."""
    return ModelFileError(
        f"model {target!r} cannot be loaded: {str(exc).strip().splitlines()[0]}; expected {FOLDER_FORM}"
    )


def hf_tokenizer_pair(spec: ModelSpec) -> tuple[Any, Tokenizer]:
    """The transformers tokenizer of an `hf:` spec and our Tokenizer over it (named as the run file records it)."""
    from transformers import AutoTokenizer

    o = cast("HFOptions", spec.options)
    source = hf_source(spec.target, o.revision)
    kwargs = {k: v for k, v in (("revision", o.revision), ("gguf_file", o.gguf_file)) if v is not None}
    try:
        hf_tok = AutoTokenizer.from_pretrained(str(source), **kwargs)
    except (OSError, ValueError) as exc:
        raise load_error(spec.target, exc) from exc
    name = spec.target if spec.target in EMBEDDED_HF else getattr(hf_tok, "name_or_path", spec.target)
    return hf_tok, Tokenizer.from_transformers(hf_tok, name=name)


def hf_tokenizer(spec: ModelSpec) -> Tokenizer:
    """The tokenizer an `hf:` model measures lengths in, without loading its weights."""
    return hf_tokenizer_pair(spec)[1]


def retriever_source(target: str) -> Path | str:
    """The folder of `minilm` or a local sentence-transformers model, else the (cached) hub id."""
    return minilm_path() if target == "minilm" else hf_source(target)


def retriever_tokenizer(spec: ModelSpec) -> Tokenizer:
    """The tokenizer a dense retriever chunks with, without loading its weights."""
    if spec.target == "minilm":
        return load_tokenizer("minilm")
    from transformers import AutoTokenizer

    source = retriever_source(spec.target)
    try:
        return Tokenizer.from_transformers(AutoTokenizer.from_pretrained(str(source)), name=spec.target)
    except (OSError, ValueError) as exc:
        raise load_error(spec.target, exc) from exc


def minilm_tokenizer(spec: ModelSpec) -> Tokenizer:
    """The MiniLM tokenizer that bm25, the oracle and the coref baseline measure lengths in."""
    return load_tokenizer("minilm")
