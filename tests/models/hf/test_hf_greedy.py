"""Greedy is greedy (issue 17): whatever sampling and penalty fields a checkpoint's generation_config.json ships,
`hf` generation is the argmax of the logits at every step, and the run file records the effective settings and
each value it neutralised."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

SHIPPED = {
    "do_sample": True,
    "temperature": 0.3,
    "top_k": 3,
    "top_p": 0.5,
    "repetition_penalty": 5.0,
    "no_repeat_ngram_size": 1,
    "min_new_tokens": 8,
    "length_penalty": 2.0,
    "num_beams": 1,
}


def _shipping(src: Path, dst: Path, eos: int, vocab: int) -> Path:
    """A copy of `src` whose generation_config.json turns on sampling, penalties and token bans."""
    shutil.copytree(src, dst)
    gen = json.loads((dst / "generation_config.json").read_text())
    gen.update(SHIPPED, suppress_tokens=[vocab - 1], bad_words_ids=[[vocab - 2]], eos_token_id=eos)
    (dst / "generation_config.json").write_text(json.dumps(gen))
    return dst


def _argmax_decode(model, ids: list[int], steps: int, eos: set[int]) -> list[int]:
    """Greedy by hand: the argmax of a full forward's last logits, token by token (no cache, no processors)."""
    out: list[int] = []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([ids + out])).logits[0, -1]
            out.append(int(logits.argmax()))
            if out[-1] in eos:
                break
    return out


def test_shipped_sampling_and_penalties_do_not_apply(tmp_path, tiny_llama_dir):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_hf_rope_generation import generated_ids

    base = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    folder = _shipping(tiny_llama_dir, tmp_path / "shipping", base.eos_ids[0], base.model.config.vocab_size)
    model = load_model(parse_spec(f"hf:{folder}"))
    reqs = [
        Request(f"g{i}", "Read this and repeat after me: " + "abc " * (3 + i), "", "q", max_new_tokens=12)
        for i in range(3)
    ]
    got = generated_ids(model, reqs)
    want = [_argmax_decode(model.model, model.render(r), 12, set(model.eos_ids)) for r in reqs]
    assert got == want  # the logits' argmax, every step: no penalty, ban or sampling touched them
    record = model.meta.runtime["generation"]
    assert record["settings"]["repetition_penalty"] == 1.0 and record["settings"]["no_repeat_ngram_size"] == 0
    assert record["settings"]["do_sample"] is False and record["settings"]["min_new_tokens"] is None
    shipped = record["neutralised_from_model"]
    assert shipped["repetition_penalty"] == 5.0 and shipped["no_repeat_ngram_size"] == 1
    assert shipped["min_new_tokens"] == 8 and shipped["do_sample"] is True and shipped["temperature"] == 0.3
    assert shipped["suppress_tokens"] == [model.model.config.vocab_size - 1]
    assert model.eos_ids == base.eos_ids  # the special token ids are what is kept
    assert generated_ids(base, reqs) == got  # the same weights without the shipped file: the same tokens


def test_the_run_file_records_the_effective_generation_settings(tmp_path, tiny_llama_dir):
    base = load_model(parse_spec(f"hf:{tiny_llama_dir}"))
    folder = _shipping(tiny_llama_dir, tmp_path / "m", base.eos_ids[0], base.model.config.vocab_size)
    args = ["run", "--model", f"hf:{folder}", *tiny_needle("128"), "--limit", "1"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    run = json.loads((tmp_path / "out" / "m" / "run.json").read_text())
    gen = run["model"]["runtime"]["generation"]
    assert gen["decoding"] == "greedy" and gen["settings"]["repetition_penalty"] == 1.0
    assert gen["neutralised_from_model"]["repetition_penalty"] == 5.0
