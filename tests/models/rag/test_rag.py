"""RAG mode (`rag:<retriever>+<generator>`): spec parsing, the prompt built from retrieved chunks, iterative rounds,
end to end through the runner on real models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.models.loader import load_model, load_tokenizer_of
from longctx_eval.models.rag.prompt import (
    PASSAGE_SEPARATOR,
    merge_spans,
    note_request,
    passages_text,
    substitute_context,
)
from longctx_eval.models.spec import check_distinct_names, parse_spec
from longctx_eval.run.sampling import build_samples
from longctx_eval.sample import Hit, Request

# --- spec parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parts", "name"),
    [
        ("rag:bm25+smollm2-135m", ("bm25", "smollm2-135m"), "rag-bm25-smollm2-135m"),
        ("rag:minilm+smollm2-135m?k=8", ("minilm", "smollm2-135m"), "rag-minilm-smollm2-135m-k8"),
        ("rag:retriever:minilm+hf:smollm2-135m", ("retriever:minilm", "hf:smollm2-135m"), "rag-minilm-smollm2-135m"),
        (
            "rag:bm25+smollm2-135m?iterative=true&hops=3&retriever.k1=1.2&generator.max_length=4096",
            ("bm25?k1=1.2", "smollm2-135m?max_length=4096"),
            "rag-bm25-smollm2-135m-hops3",
        ),
        ("rag:bm25+smollm2-135m?k=3&name=my-rag", ("bm25", "smollm2-135m"), "my-rag"),
        ("rag:hybrid+smollm2-135m", ("hybrid", "smollm2-135m"), "rag-hybrid-smollm2-135m"),
    ],
)
def test_valid_specs_parse_into_two_checked_parts(raw, parts, name):
    spec = parse_spec(raw)
    assert (spec.kind, spec.name, tuple(p.raw for p in spec.parts)) == ("rag", name, parts)
    assert spec.parts[0].kind in ("bm25", "retriever", "hybrid")
    assert spec.parts[1].kind == "hf"


def test_options_are_typed_and_inner_options_reach_their_part():
    spec = parse_spec("rag:bm25+smollm2-135m?k=8&iterative=true&chunk_tokens=64&chunk_overlap=8&retriever.b=0.5")
    o = spec.options
    assert (o.k, o.iterative, o.hops, o.chunk_tokens, o.chunk_overlap) == (8, True, 2, 64, 8)
    assert spec.parts[0].options.b == 0.5
    assert parse_spec("rag:bm25+smollm2-135m").options.iterative is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("rag:bm25", "expected rag:<retriever>+<generator>"),
        ("rag:bm25?k1=1.2+smollm2-135m", "retriever.KEY=V and generator.KEY=V"),
        ("rag:+smollm2-135m", "the retriever (left of '+') is empty"),
        ("rag:bm25+", "the generator (right of '+') is empty"),
        ("rag:smollm2-135m+bm25", "'smollm2-135m' is a 'hf' model, which does not retrieve; expected a retriever"),
        ("rag:bm25+minilm", "'minilm' is a 'retriever' model, which does not generate; expected a generator"),
        ("rag:bm25+coref:baseline", "which does not generate"),
        ("rag:bm25+oracle", "'oracle' cannot be its generator"),
        ("rag:bm25+rag:bm25+smollm2-135m", "cannot be its generator: a rag model cannot be a part of another"),
        ("rag:bm2+smollm2-135m", "its retriever 'bm2' is invalid: unknown model spec 'bm2'. Did you mean 'bm25'?"),
        ("rag:bm25+hf:/no/such/model", "its generator 'hf:/no/such/model' is invalid"),
        ("rag:bm25+smollm2-135m?k=0", "option k='0' is invalid; expected a positive integer"),
        ("rag:bm25+smollm2-135m?iterative=maybe", "option iterative='maybe' is invalid; expected true or false"),
        ("rag:bm25+smollm2-135m?hops=3", "option hops=3 needs iterative=true"),
        ("rag:bm25+smollm2-135m?iterative=true&hops=1", "expected an integer >= 2"),
        ("rag:bm25+smollm2-135m?chunk_tokens=16&chunk_overlap=16", "expected an integer below chunk_tokens=16"),
        ("rag:bm25+smollm2-135m?kk=3", "unknown option 'kk' for 'rag'. Did you mean 'k'?"),
        ("rag:bm25+smollm2-135m?retriver.k1=2", "option 'retriver.k1' names no part"),
        ("rag:bm25+smollm2-135m?retriever.k1=-1", "its retriever 'bm25?k1=-1' is invalid"),
    ],
)
def test_bad_specs_are_one_line_errors_naming_the_spec(raw, expected):
    with pytest.raises(ConfigError) as exc:
        parse_spec(raw)
    msg = str(exc.value)
    assert "\n" not in msg and repr(raw) in msg and expected in msg, msg


def test_two_rag_specs_with_one_name_are_refused():
    with pytest.raises(ConfigError, match="both be named 'rag-bm25-smollm2-135m'"):
        check_distinct_names([parse_spec("rag:bm25+smollm2-135m"), parse_spec("rag:bm25+smollm2-135m?retriever.k1=1")])
    check_distinct_names([parse_spec("rag:bm25+smollm2-135m"), parse_spec("rag:minilm+smollm2-135m")])


def test_parsing_rag_specs_imports_no_adapter_and_no_torch():
    code = (
        "import sys\n"
        "from longctx_eval.models.spec import parse_spec\n"
        "for s in ('rag:bm25+smollm2-135m', 'rag:minilm+smollm2-135m?k=8&iterative=true', 'rag:bm25+tiny-rope'):\n"
        "    parse_spec(s)\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'bm25s')\n"
        "adapters = ('hf.adapter', 'retrieval.dense', 'retrieval.bm25', 'oracle', 'rag.adapter', 'base', 'loader', "
        "'posprobe.forward')\n"
        "print([m for m in sys.modules if m.split('.')[0] in heavy\n"
        "       or m in tuple('longctx_eval.models.' + a for a in adapters)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# --- the prompt -----------------------------------------------------------------------------------------


def test_spans_are_merged_in_document_order_without_duplicates():
    hits = [Hit(50, 60, 3.0), Hit(0, 10, 2.0), Hit(55, 70, 1.0), Hit(10, 20, 0.5), Hit(30, 40, 0.1), Hit(0, 10, 0.1)]
    assert merge_spans(hits) == [(0, 20), (30, 40), (50, 70)]
    context = "".join(chr(ord("a") + i % 26) for i in range(80))
    text = passages_text(context, merge_spans(hits))
    assert text == PASSAGE_SEPARATOR.join([context[0:20], context[30:40], context[50:70]])


def test_substitution_replaces_only_the_context():
    context = "Alpha beta. Gamma delta. Epsilon."
    req = Request("s", f"Read this.\n\n{context}\n\nQuestion: what?", context, "what?", answer_prefix="It is")
    out = substitute_context(req, "Gamma delta.")
    assert out.prompt == "Read this.\n\nGamma delta.\n\nQuestion: what?"
    assert (out.context, out.answer_prefix, out.query, out.sample_id) == ("Gamma delta.", "It is", "what?", "s")
    twice = f"{context} {context}"
    for prompt, found in (("no context here", "does not contain its context"), (twice, "contains its context more")):
        with pytest.raises(ConfigError, match=f"its prompt {found}"):
            substitute_context(Request("s", prompt, context, "q"), "x")


def test_the_note_request_reads_the_passages_and_the_question():
    note = note_request(Request("s", "p", "ctx", "Where does Ann work?", part=1), "Ann works for Acme.")
    assert "Ann works for Acme." in note.prompt and "Where does Ann work?" in note.prompt
    assert note.part == 1 and note.max_new_tokens <= 32 and note.answer_prefix


@pytest.fixture(scope="module")
def rag_smollm():
    model = load_model(parse_spec("rag:bm25+smollm2-135m"))
    yield model
    model.close()


def _needle_requests(tokenizer, length: int, limit: int = 1):
    info = discover().get("needle")
    task = info.build({}, lengths=[length], seed=0, tokenizer=tokenizer)
    samples = build_samples(info, task, limit).samples
    return [(s, task.requests(s)[0]) for s in samples]


def test_rag_prompt_holds_the_passages_in_place_of_the_context(rag_smollm):
    sample, req = _needle_requests(rag_smollm.tokenizer, 4096)[0]
    plan = rag_smollm.plan(req)
    at = req.prompt.index(req.context)
    head, tail = req.prompt[:at], req.prompt[at + len(req.context) :]
    prompt = plan.request.prompt
    assert prompt.startswith(head) and prompt.endswith(tail)
    middle = prompt[len(head) : len(prompt) - len(tail)]
    spans = merge_spans(plan.hits)
    assert middle == plan.request.context == PASSAGE_SEPARATOR.join(req.context[s:e] for s, e in spans)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))  # document order, disjoint, not touching
    assert len(plan.hits) == 5 and len({(h.char_start, h.char_end) for h in plan.hits}) == 5
    start, end = sample.gold["span"]
    needle = req.context[start:end]
    assert middle.count(needle) == 1  # BM25 finds the needle; it appears once
    assert plan.request.answer_prefix == req.answer_prefix and plan.request.max_new_tokens == req.max_new_tokens


def test_rag_prompt_is_far_shorter_than_the_full_context(rag_smollm):
    _, req = _needle_requests(rag_smollm.tokenizer, 4096)[0]
    full = rag_smollm.generator.prompt_tokens(req)
    rag = rag_smollm.prompt_tokens(req)
    assert 4096 - 192 < full <= 4096 and rag < full / 4, (full, rag)  # v5: 4096 is the whole budget
    assert rag_smollm.prompt_tokens(req) == rag and rag_smollm.fits(req, rag)  # measured once, kept


def test_meta_names_both_parts_and_the_generators_window(rag_smollm):
    meta, gen, ret = rag_smollm.meta, rag_smollm.generator.meta, rag_smollm.retriever.meta
    assert (meta.kind, meta.name, meta.capabilities) == ("rag", "rag-bm25-smollm2-135m", ["generate"])
    assert (meta.context_window, meta.tokenizer_sha256) == (gen.context_window, gen.tokenizer_sha256)
    assert meta.settings["retriever"]["identity_sha256"] == ret.identity_sha256
    assert meta.settings["generator"]["identity_sha256"] == gen.identity_sha256
    assert (meta.settings["k"], meta.settings["iterative"], meta.settings["hops"]) == (5, False, 1)
    assert (
        meta.identity_sha256 and load_tokenizer_of(parse_spec("rag:bm25+smollm2-135m")).sha256 == gen.tokenizer_sha256
    )


def test_a_prompt_without_its_context_is_a_clear_error(rag_smollm):
    with pytest.raises(ConfigError, match=r"model spec 'rag:bm25\+smollm2-135m': request 'x' \(part 0\)"):
        rag_smollm.plan(Request("x", "Question only?", "Some document text.", "Question only?"))
    empty = Request("y", "Question only?", "", "Question only?")
    assert rag_smollm.plan(empty).request == empty and rag_smollm.plan(empty).hits == ()


# --- through the runner -----------------------------------------------------------------------------------


def _predictions(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines() if line.strip()]


def test_rag_smollm2_answers_needle_samples_through_the_runner(tmp_path):
    spec = "rag:bm25+smollm2-135m?k=2"
    args = ["run", "--model", spec, "--tasks", "needle", "--lengths", "1024", "--limit", "1", "--out", str(tmp_path)]
    assert main(args) == 0
    run_dir = tmp_path / "rag-bm25-smollm2-135m-k2"
    (pred,) = _predictions(run_dir)
    samples = [json.loads(x) for x in (run_dir / "samples" / "needle.jsonl").read_text().splitlines()]
    start, end = samples[0]["gold"]["span"]
    assert pred["status"] == "ok" and pred["capability"] == "generate" and pred["text"].strip()
    assert any(s <= start and end <= e for s, e, _ in pred["hits"])  # BM25 put the needle before the reader
    assert set(pred["data"]) == {"spans", "retrieval_seconds", "note_seconds", "generation_seconds", "rounds"}
    assert len(pred["data"]["rounds"]) == 1 and pred["prompt_tokens"] < 400
    run = json.loads((run_dir / "run.json").read_text())
    assert run["model"]["kind"] == "rag" and run["tasks"][0]["name"] == "needle"


def test_iterative_mode_retrieves_twice_with_the_note(tmp_path, tiny_llama_dir):
    # A 512-token generator: the 1024-token needle context would not fit; its retrieved chunks do.
    spec = f"rag:bm25+hf:{tiny_llama_dir}?k=2&chunk_tokens=32&chunk_overlap=4&iterative=true&name=iter"
    args = ["run", "--model", spec, "--tasks", "needle", "--lengths", "1024", "--limit", "1", "--out", str(tmp_path)]
    assert main(args) == 0
    (pred,) = _predictions(tmp_path / "iter")
    assert pred["status"] == "ok", pred["error"]
    first, second = pred["data"]["rounds"]
    question = first["query"]
    assert first["note"] and second["query"] == f"{question} {first['note']}" and "note" not in second
    spans = [(s, e) for s, e, _ in pred["hits"]]
    assert len(spans) == len(set(spans)) and 2 <= len(spans) <= 4
    assert spans[:2] == [(s, e) for s, e, _ in first["hits"]]  # round 1's chunks first, then the new ones
    assert pred["data"]["note_seconds"] > 0


def test_each_batch_is_planned_just_before_it_is_served(tmp_path, tiny_llama_dir, monkeypatch):
    """Planning (retrieval, the iterative note) is a rag request's costly work: the runner measures each batch right
    before serving it, so an interrupted run loses one batch's plans, not every plan made before the first answer.
    The real rag model (BM25 + a tiny Llama), its methods wrapped to log the order they ran in."""
    from longctx_eval.models.rag.adapter import RagModel

    events: list[str] = []
    retrieve, generate = RagModel._retrieve, RagModel.generate

    def logged_retrieve(self, request):
        events.append("plan")
        return retrieve(self, request)

    def logged_generate(self, requests):
        events.append("serve")
        return generate(self, requests)

    monkeypatch.setattr(RagModel, "_retrieve", logged_retrieve)
    monkeypatch.setattr(RagModel, "generate", logged_generate)
    spec = f"rag:bm25+hf:{tiny_llama_dir}?k=2&chunk_tokens=32&chunk_overlap=4&iterative=true&name=iter"
    args = ["run", "--model", spec, "--tasks", "needle", "--lengths", "1024", "--limit", "3", "--out", str(tmp_path)]
    assert main(args) == 0
    assert events == ["plan", "serve"] * 3
    assert len(_predictions(tmp_path / "iter")) == 3
