"""The exact GPT-2 tokenizer offline: tiktoken's r50k_base file (from the openai-whisper sdist) and its HF twin."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from longctx_eval.models.assets import cache_dir
from longctx_eval.text import Tokenizer

WHISPER_SDIST = "openai-whisper==20250625"
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# tiktoken caches a downloaded file under the sha1 of its URL; this is the one of r50k_base's URL.
R50K_CACHE_KEY = "0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4"


def gpt2_dir() -> Path:
    """Folder holding the tiktoken cache file and the converted tokenizer.json."""
    return cache_dir() / "bench" / "gpt2"


def ensure_gpt2() -> Path:
    """Fetch gpt2.tiktoken once (a PyPI download of an 800 KB sdist) and convert it to tokenizer.json."""
    folder = gpt2_dir()
    bpe = folder / R50K_CACHE_KEY
    if not bpe.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        data = _from_whisper_sdist()
        if hashlib.sha256(data).hexdigest() != GPT2_TIKTOKEN_SHA256:
            raise RuntimeError(f"gpt2.tiktoken from {WHISPER_SDIST} has an unexpected sha256")
        tmp = bpe.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.rename(bpe)
    tokenizer_json = folder / "tokenizer.json"
    if not tokenizer_json.is_file():
        _convert(bpe, tokenizer_json)
    return folder


def _from_whisper_sdist() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*cmd, "--no-deps", "--no-binary", ":all:", WHISPER_SDIST, "-d", tmp], check=True)
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("whisper/assets/gpt2.tiktoken"))
            fh = tar.extractfile(member)
            assert fh is not None
            return fh.read()


def _convert(bpe: Path, out: Path) -> None:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    # The split pattern must be r50k's own (the converter's default is cl100k's), or ids would differ.
    converted = TikTokenConverter(vocab_file=str(bpe), pattern=tiktoken_r50k()._pat_str).converted()
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    converted.save(str(tmp))
    tmp.rename(out)


def tiktoken_r50k() -> Any:
    """tiktoken's r50k_base (= GPT-2) encoding, loaded offline from the cached file."""
    os.environ["TIKTOKEN_CACHE_DIR"] = str(gpt2_dir())
    import tiktoken

    return tiktoken.get_encoding("r50k_base")


def gpt2_tokenizer() -> Tokenizer:
    """GPT-2 as our HF-backed `Tokenizer` (the converted tokenizer.json); its ids equal tiktoken's."""
    return Tokenizer.from_file(gpt2_dir() / "tokenizer.json", name="gpt2")


def gpt2_tiktoken_tokenizer() -> Tokenizer:
    """GPT-2 as our tiktoken-backed `Tokenizer` (`load_tokenizer("tiktoken:r50k_base")`), the peers' tokenizer."""
    from longctx_eval.text import TiktokenTokenizer

    return TiktokenTokenizer(tiktoken_r50k())


def our_tokenizer(backend: str) -> Tokenizer:
    """GPT-2 through `backend`: "tiktoken" or "hf" (same ids and offsets, different speed)."""
    return gpt2_tiktoken_tokenizer() if backend == "tiktoken" else gpt2_tokenizer()
