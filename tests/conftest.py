"""Shared fixtures: real tokenizers and a real (random-weight) transformers model, each built once a session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Built samples are not shared between tests (a test may patch a builder): no disk level, memory cleared per test.
os.environ.setdefault("LONGCTX_EVAL_SAMPLE_CACHE", "off")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_sample_cache():
    """Each test starts with an empty in-process sample cache (`longctx_eval/run/sample_cache.py`)."""
    from longctx_eval.run.sample_cache import clear_memory

    clear_memory()
    yield


@pytest.fixture(scope="session")
def minilm_tokenizer():
    from longctx_eval.models.assets import load_tokenizer

    return load_tokenizer("minilm")


def _train_bpe(vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=7)
    corpus = [next(paragraphs) for _ in range(300)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


@pytest.fixture(scope="session")
def bpe_tokenizer():
    """A byte-level BPE trained in the test on synthetic prose (lossless, unlike MiniLM's WordPiece)."""
    from longctx_eval.text.tokenizer import Tokenizer

    return Tokenizer(_train_bpe(), name="test-bpe")


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A real LlamaForCausalLM with random weights and a 512-token window, saved as a local folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny-llama")
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=_train_bpe(), bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    hf_tok.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(hf_tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=hf_tok.bos_token_id,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


# Real OpenAI-compatible servers on loopback (our `serve`, llama.cpp's server, the fault proxy): tests/servers.py.
from servers import fault_proxy, llama_cpp_server, serve_hf  # noqa: E402, F401  (tests/ is on sys.path)

# A real vLLM (`make test-vllm`): the `hf:` reference grid and `vllm serve` on loopback: tests/vllm_runs.py.
from vllm_runs import hf_grid, vllm_server  # noqa: E402, F401
