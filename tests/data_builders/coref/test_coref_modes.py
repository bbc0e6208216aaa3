"""The coreference protocol for language models: choice and generate modes, sampled anaphors, one request per
document for a coreference system, length = the whole prompt, fair singletons, and the prompt docs/coref.md shows."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from coref_doc import DOC  # tests/ is on sys.path (conftest)
from transformers import AutoTokenizer

from data_builders.coref.conll import parse_conll, write_conll
from data_builders.coref.haystack import as_long
from data_builders.coref.score_command import score_files
from data_builders.coref.synthetic import synthetic_document
from longctx_eval import Prediction
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.metrics.coref_protocol import choose
from longctx_eval.models.assets import load_tokenizer, smollm2_dir
from longctx_eval.models.hf.adapter import render_ids
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec

ROOT = Path(__file__).resolve().parents[3]
PROMPT_START, PROMPT_END = "<!-- prompt example: start -->", "<!-- prompt example: end -->"


@pytest.fixture(scope="module")
def coref() -> ModuleType:
    package = discover().get("coref_synthetic").factory.__module__.rpartition(".")[0]
    return importlib.import_module(f"{package}._coref")


def _doc():  # noqa: ANN202
    return parse_conll(DOC.splitlines())[0]


def _gold_choice(sample) -> Prediction:  # noqa: ANN001
    """Log-probabilities that put the gold option first, one part per asked mention."""
    clusters = [[tuple(m) for m in c] for c in sample.gold["clusters"]]
    ment = sorted({m for c in clusters for m in c}, key=lambda m: (m[0], -m[1]))
    ent = {m: n for n, c in enumerate(clusters) for m in c}
    parts = []
    for i, options in zip(sample.gold["asked"], sample.gold["candidates"], strict=True):
        same = [j for j in options if j and ent[ment[j - 1]] == ent[ment[i - 1]]]
        best = same[-1] if same else 0
        parts.append(Prediction(data={"logprobs": [0.0 if j == best else -9.0 for j in options]}))
    return Prediction(parts=tuple(parts))


def test_choice_mode_requests_share_the_document_prefix(coref: ModuleType) -> None:
    kit = coref.CorefKit(coref.CorefConfig(candidates=2))
    sample = kit.sample(as_long(_doc()), "t@1", singletons=True, metadata={"target_tokens": 100})
    requests = kit.prompt(sample)
    assert sample.gold["asked"] == [2, 3, 4, 5, 6, 7] and len(requests) == 6
    prefix = kit.prefix(sample)
    assert all(r.prompt.startswith(prefix) and r.max_new_tokens == 0 for r in requests)
    last = requests[-1]  # "Mary" (7): candidates the 2 nearest entities, its own ("She", 3) kept in
    assert last.answer_prefix == "[7 Mary] refers to"
    assert last.choices == (" [3 She]", " [6 It]", " [0 new]")
    assert sample.gold["candidates"][-1] == [3, 6, 0]
    assert kit.scorer(sample, _gold_choice(sample))["conll_doc"] == 1.0


def test_choose_takes_the_highest_sum_first_on_ties_and_refuses_junk() -> None:
    assert choose([-3.0, -1.0, -2.0], [4, 9, 0]) == 9
    assert choose([-1.0, -1.0, -5.0], [4, 9, 0]) == 4
    assert choose([-5.0, -9.0, -1.0], [4, 9, 0]) is None  # the new-entity option
    assert choose([-1.0], [4, 9, 0]) is False and choose(None, [4, 0]) is False
    assert choose([float("nan"), -1.0], [4, 0]) is False


def test_sampled_anaphors_are_stratified_seeded_and_scored_in_the_denominator(coref: ModuleType) -> None:
    long = synthetic_document(3000, seed=5)
    kit = coref.CorefKit(coref.CorefConfig(asked=12, window=512, stride=256))
    sample = kit.sample(long, "s", singletons=True, metadata={"target_tokens": 3000})
    again = coref.CorefKit(coref.CorefConfig(asked=12, window=512, stride=256))
    assert again.sample(long, "s", singletons=True, metadata={"target_tokens": 3000}).gold == sample.gold
    asked, table = sample.gold["asked"], sample.metadata["asked"]["strata"]
    assert len(asked) == 12 and sample.gold["sampled"] and asked == sorted(asked)
    assert sum(a for a, _ in table.values()) == 12 and all(a <= n for a, n in table.values())
    assert len(table) >= 3 and "new" in table
    # equal allocation: no stratum gets two more questions than another that still had mentions left
    assert max(a for a, _ in table.values()) - min(a for a, n in table.values() if a < n) <= 1
    perfect = kit.scorer(sample, _gold_choice(sample))
    assert perfect["conll_doc"] == 1.0 and perfect["span_em_n"] == perfect["span_em_d"] > 0
    assert perfect["asked_d"] == 12 and perfect["malformed_n"] == 0
    # a failed request is no link, counted malformed and kept in the denominator
    parts = list(_gold_choice(sample).parts)
    parts[0] = Prediction(status="error", error="boom")
    failed = kit.scorer(sample, Prediction(parts=tuple(parts)))
    assert failed["malformed_n"] == 1 and failed["asked_d"] == 12
    # every answer "new": no link at all, recall 0 on the asked links
    none = Prediction(parts=tuple(Prediction(data={"logprobs": [-9.0] * (len(c) - 1) + [0.0]})
                                  for c in sample.gold["candidates"]))  # fmt: skip
    nothing = kit.scorer(sample, none)
    assert nothing["span_em_n"] == 0 and nothing["muc_rn"] == 0 and nothing["malformed_n"] == 0


def test_the_entities_offered_are_ranked_apart_from_new(coref: ModuleType) -> None:
    """`antecedent_acc`: a model that always scores `[0 new]` highest links nothing (Span-EM 0) yet may rank its
    mention's own entity first among the others; the metric reads that ranking, against its chance."""
    long = synthetic_document(3000, seed=5)
    kit = coref.CorefKit(coref.CorefConfig(asked=12, window=512, stride=256))
    sample = kit.sample(long, "s", singletons=True, metadata={"target_tokens": 3000})
    perfect = kit.scorer(sample, _gold_choice(sample))
    offered = perfect["antecedent_d"]
    assert 0 < offered < 12  # the "new" stratum's questions have no entity of their own to rank
    assert perfect["antecedent_n"] == offered
    assert 0 < perfect["antecedent_chance_n"] < offered  # one over the named candidates, summed
    # the gold entity second only to [0 new]: no link at all, every entity ranked right
    parts = []
    for part in _gold_choice(sample).parts:
        lp = list(part.data["logprobs"])
        lp[-1] = 1.0
        parts.append(Prediction(data={"logprobs": lp}))
    new_first = kit.scorer(sample, Prediction(parts=tuple(parts)))
    assert new_first["span_em_n"] == 0 and new_first["antecedent_n"] == offered
    # failed questions stay in the denominator as misses
    failed = kit.scorer(sample, Prediction(parts=tuple(Prediction(status="error", error="boom") for _ in parts)))
    assert failed["antecedent_d"] == offered and failed["antecedent_n"] == 0
    # a coreference system's clusters carry no ranking: the metric is left out, not scored 0
    assert "antecedent_d" not in kit.scorer(sample, kit.oracle(sample)).values


def test_a_coref_system_gets_one_request_per_document_and_the_same_asked_mentions(coref: ModuleType) -> None:
    task = discover().get("coref_synthetic").build({"asked": 10}, lengths=[2048], seed=0, tokenizer=None)
    sample = next(iter(task.samples()))
    (request,) = task.requests(sample, "coref")
    assert request.prompt == "" and request.extra["mentions"] and len(task.requests(sample, "loglikelihood")) == 10
    (pred,) = load_model(parse_spec("coref:baseline")).predict_clusters([request])
    score = task.scorer(sample, Prediction(parts=(pred,)))
    assert score["asked_d"] == 10 and 0 < score["span_em_d"] <= 10  # its clusters, read on the asked mentions
    assert task.scorer(sample, task.oracle(sample))["conll_doc"] == 1.0


def test_mode_narrows_what_the_task_runs_on(coref: ModuleType) -> None:
    info = discover().get("coref_litbank")
    choice = info.build({}, lengths=[4096], seed=0, tokenizer=None).requires
    generate = info.build({"mode": "generate"}, lengths=[4096], seed=0, tokenizer=None).requires
    assert choice.pick({"generate", "loglikelihood"}) == "loglikelihood" and choice.pick({"generate"}) is None
    assert generate.pick({"generate", "loglikelihood"}) == "generate" and generate.pick({"coref"}) == "coref"
    assert choice.describe() == "'coref' or 'loglikelihood' for mode=choice"
    with pytest.raises(ConfigError, match="mode='chose': expected one of choice, generate"):
        info.build({"mode": "chose"}, lengths=[4096], seed=0, tokenizer=None)


@pytest.mark.parametrize(("name", "length", "args"), [
    ("coref_synthetic", 1024, {"per_length": 3}),
    ("coref_synthetic", 2048, {"per_length": 2, "mode": "generate"}),
    ("coref_ontogum", 2048, {"asked": 10}),
])  # fmt: skip
def test_the_whole_prompt_fits_the_length_in_smollm2_tokens(name: str, length: int, args: dict) -> None:
    tok, hf_tok = load_tokenizer("smollm2-135m"), AutoTokenizer.from_pretrained(str(smollm2_dir()))
    task = discover().get(name).build(args, lengths=[length], seed=0, tokenizer=tok)
    samples = list(task.samples())
    assert samples
    worst = 0
    for sample in samples:
        for r in task.requests(sample):
            ids = render_ids(hf_tok, True, r)
            answer = max((len(hf_tok(c, add_special_tokens=False)["input_ids"]) for c in r.choices), default=0)
            worst = max(worst, len(ids) + answer + r.max_new_tokens)
    assert length * 0.85 < worst <= length  # within the length, and not far under it


def test_a_length_no_document_fits_is_an_error_naming_it() -> None:
    task = discover().get("coref_litbank").build({}, lengths=[1024], seed=0, tokenizer=None)
    with pytest.raises(DataError, match="coref_litbank: no document fits in 1024 tokens"):
        list(task.samples())


def test_coref_score_gives_key_and_response_the_same_singleton_treatment(tmp_path: Path) -> None:
    (doc,) = parse_conll(DOC.splitlines())
    key, response = tmp_path / "key.conll", tmp_path / "resp.conll"
    with_single = [*doc.clusters, ((2, 2),)]  # the response adds a singleton ("met")
    write_conll(key, [doc], [[c for c in doc.clusters if len(c) > 1]])
    write_conll(response, [doc], [with_single])
    auto = score_files(key, response)  # the key annotates no singleton: the response's are dropped
    assert auto["singletons"]["response_singletons_dropped"] == 1 and auto["scores"]["conll"][2] == 1.0
    kept = score_files(key, response, singletons="keep")  # the official scorer's reading
    assert kept["scores"]["mentions"][1] < 1.0
    write_conll(key, [doc], [with_single])  # a key with singletons keeps the response's
    assert score_files(key, response)["singletons"]["response_singletons_dropped"] == 0


def prompt_example(coref: ModuleType) -> str:
    """The docs/coref.md block: both modes' requests for the small example document, from the code."""
    lines = []
    for mode in ("choice", "generate"):
        kit = coref.CorefKit(coref.CorefConfig(mode=mode, candidates=3, batch=3))
        sample = kit.sample(as_long(_doc()), "t", singletons=True, metadata={"target_tokens": 100})
        r = kit.prompt(sample)[-1]
        lines += [f"**{mode}** (the last request of the example; `prompt`, then the reply's start):", "", "```"]
        lines += [r.prompt, "--- answer prefix ---", r.answer_prefix or "(none: the reply follows 'N:')"]
        if r.choices:
            lines += ["--- choices ---", *(repr(c) for c in r.choices)]
        else:
            lines += ["--- generation budget ---", f"{r.max_new_tokens} tokens"]
        lines += ["```", ""]
    return "\n".join(lines).rstrip("\n")


def test_docs_show_the_exact_prompt(coref: ModuleType) -> None:
    text = (ROOT / "docs" / "coref.md").read_text(encoding="utf-8")
    block = text.split(PROMPT_START, 1)[1].split(PROMPT_END, 1)[0].strip("\n")
    assert block == prompt_example(coref), "docs/coref.md's prompt example drifted: regenerate it from prompt_example"


def test_samples_record_their_mode_and_the_run_records_it(tmp_path: Path) -> None:
    from longctx_eval.cli import main

    out = tmp_path / "runs"
    assert main(["run", "--model", "coref:baseline", "--tasks", "coref_synthetic", "--lengths", "1024",
                 "--task-arg", "coref_synthetic.asked=8", "--out", str(out)]) == 0  # fmt: skip
    samples = out / "coref-baseline" / "samples" / "coref_synthetic.jsonl"
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 2 and all(r["metadata"]["mode"] == "choice" and len(r["keys"]) == 1 for r in rows)
    run = json.loads((out / "coref-baseline" / "run.json").read_text())
    assert run["tasks"][0]["capability"] == "coref" and run["tasks"][0]["args"]["asked"] == 8
