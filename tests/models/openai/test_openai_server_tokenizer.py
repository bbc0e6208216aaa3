"""Without `?tokenizer=`, an `openai:` model builds and counts contexts in the server's own tokenizer when the server
names one that loads here and agrees with its /tokenize (`longctx-eval serve` on loopback); otherwise (llama.cpp's
server names none) MiniLM, with a warning that says so and measures the gap on the server's tokenize endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from servers import LLAMA_MODEL, SERVE_MODEL
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.models.loader import load_model
from longctx_eval.models.model_source import hf_tokenizer_pair
from longctx_eval.models.openai.server_tokenizer import PROBE, probe_server
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run


def test_serve_names_its_tokenizer_and_contexts_are_exact_in_it(serve_hf: str, tmp_path: Path, capsys):
    hf_tok, smollm2 = hf_tokenizer_pair(parse_spec("smollm2-135m"))
    probe = probe_server(serve_hf, SERVE_MODEL, "OPENAI_API_KEY")
    assert probe.root == "smollm2-135m" and probe.ids == hf_tok(PROBE, add_special_tokens=False)["input_ids"]
    spec = f"openai:{SERVE_MODEL}@{serve_hf}?name=server-tokenizer"
    argv = ["run", "--model", spec, *tiny_needle("256"), "--limit", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "MiniLM" not in capsys.readouterr().err  # no approximate fallback, no warning
    run = read_run(tmp_path / "server-tokenizer" / "run.json")
    assert run.model.tokenizer_sha256 == smollm2.sha256 and run.model.settings["tokenizer_from"] == "server"
    preds = [json.loads(x) for x in (tmp_path / "server-tokenizer" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 1
    for pred in preds:  # the server saw exactly the tokens measured here, in its own tokenizer
        check = pred["data"]["length_check"]
        assert check["source"] == "usage" and check["delta"] == 0, check
    samples = (tmp_path / "server-tokenizer" / "samples" / "needle.jsonl").read_text().splitlines()
    assert {json.loads(x)["metadata"]["tokenizer"] for x in samples} == {"smollm2-135m"}  # built in its tokens


def test_llama_cpp_names_no_tokenizer_and_the_fallback_says_how_far_off_it_is(llama_cpp_server: str, capsys):
    hf_tok, _ = hf_tokenizer_pair(parse_spec("smollm2-135m"))
    adapter = load_model(parse_spec(f"openai:{LLAMA_MODEL}@{llama_cpp_server}?endpoint=completions"))
    try:
        assert adapter.meta.settings["tokenizer_from"] == "minilm" and adapter.count_mode == "server"
    finally:
        adapter.close()
    err = " ".join(capsys.readouterr().err.split())
    true_count = len(hf_tok(PROBE, add_special_tokens=False)["input_ids"])
    assert "contexts are built in the MiniLM tokenizer" in err and "names no model folder or hub id" in err
    assert f"the server counts {true_count} tokens where MiniLM counts {adapter.tokenizer.count(PROBE)}" in err
    assert "prompts are counted by the server's tokenize endpoint" in err and "?tokenizer=" in err
