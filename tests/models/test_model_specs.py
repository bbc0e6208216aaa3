"""Model specs: typed options checked before anything loads, names, collisions, tokenizer-only loading, the oracle."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from longctx_eval.capability import ALL_CAPABILITIES, Capability
from longctx_eval.errors import ConfigError, LongctxError, PrerequisiteError
from longctx_eval.hashing import sha256_json
from longctx_eval.metrics.aggregate import mean
from longctx_eval.models.base import portable_identity
from longctx_eval.models.loader import load_model, load_tokenizer_of
from longctx_eval.models.spec import check_distinct_names, expand_models, parse_spec
from longctx_eval.run_folder.predictions import prediction_key
from longctx_eval.sample import Prediction, Request, Sample, Score
from longctx_eval.task import Task

BM25_KEY = "273258768119cbee7bf210057884f5bc8b9e4d80959d9b4fafcf6da802d1211e"
"""prediction_key of KNOWN_REQUEST for `bm25`, computed with the adapter code before the options rewrite."""
BM25_TUNED_IDENTITY = "e31ddac21982376301acb7fa152c2aa14160bf96355f9158f55b6046ade0ac5b"
KNOWN_REQUEST = Request(
    "needle-1024-0.5-0", "Where is the key?", "The key is under the mat. " * 10, "Where is the key?", max_new_tokens=32
)


def test_unknown_option_suggests_the_close_one():
    with pytest.raises(ConfigError, match=r"unknown option 'k' for 'bm25'\. Did you mean 'k1'\?"):
        parse_spec("bm25?k=1")
    with pytest.raises(ConfigError, match=r"Did you mean 'max_length'\?"):
        parse_spec("smollm2-135m?max_lenght=4096")


@pytest.mark.parametrize(
    ("spec", "key", "expected"),
    [
        ("bm25?k1=abc", "k1='abc'", "a finite number > 0"),
        ("bm25?k1=-1", "k1='-1'", "a finite number > 0"),
        ("bm25?k1=nan&b=7", "k1='nan'", "a finite number > 0"),
        ("bm25?k1=inf", "k1='inf'", "a finite number > 0"),
        ("bm25?b=7", "b='7'", "a number in [0, 1]"),
        ("smollm2-135m?max_length=abc", "max_length='abc'", "a positive integer"),
        ("smollm2-135m?max_length=0", "max_length='0'", "a positive integer"),
        ("smollm2-135m?dtype=fp8", "dtype='fp8'", "one of float32, bfloat16, float16"),
        ("smollm2-135m?chat=yes", "chat='yes'", "auto, true or false"),
        ("smollm2-135m?batch_size=-2", "batch_size='-2'", "a positive integer"),
        ("tiny-rope?rope=ntk_by_parts", "rope='ntk_by_parts'", "one of none, linear, dynamic, ntk, yarn, yarn_notemp"),
        ("tiny-rope?rope=linear&rope_factor=0.5", "rope_factor='0.5'", "a finite number >= 1"),
        ("minilm?batch_size=x", "batch_size='x'", "a positive integer"),
        ("coref:baseline?window=0", "window='0'", "a positive integer"),
        ("oracle?name=a b", "name='a b'", "letters, digits"),
    ],
)
def test_bad_values_are_one_line_errors_naming_spec_key_and_form(spec, key, expected):
    with pytest.raises(ConfigError) as exc:
        parse_spec(spec)
    msg = str(exc.value)
    assert "\n" not in msg and repr(spec) in msg and key in msg and expected in msg


def test_a_key_given_twice_is_refused_but_overrides_a_short_names_option():
    with pytest.raises(ConfigError, match="'k1' is given twice"):
        parse_spec("bm25?k1=1&k1=2")
    assert parse_spec("tiny-rope?max_length=1000").options.max_length == 1000
    yarn = parse_spec("tiny-rope-yarn")
    assert (yarn.kind, yarn.target, yarn.name, yarn.options.rope, yarn.options.max_length) == (
        "hf",
        "tiny-rope",
        "tiny-rope-yarn",
        "yarn",
        65536,
    )


def test_values_are_converted_to_their_types():
    o = parse_spec("bm25?k1=1.2&b=0").options
    assert (o.k1, o.b) == (1.2, 0.0) and isinstance(o.k1, float)
    assert parse_spec("smollm2-135m?max_length=4096&batch_size=4").options.batch_size == 4


def test_every_kind_takes_a_name(tiny_llama_dir):
    specs = [f"hf:{tiny_llama_dir}", "retriever:minilm", "minilm", "bm25", "oracle", "coref:baseline", "smollm2-135m"]
    for raw in [*specs, "tiny-rope", "bm25?k1=1.2"]:
        sep = "&" if "?" in raw else "?"
        assert parse_spec(f"{raw}{sep}name=step2000").name == "step2000", raw
    assert load_model(parse_spec("bm25?name=lexical")).meta.name == "lexical"
    assert load_model(parse_spec("oracle?name=gold")).identity["name"] == "gold"


def test_default_names_and_expansion(tiny_llama_dir):
    assert parse_spec(f"hf:{tiny_llama_dir}/").name == tiny_llama_dir.name
    assert parse_spec("coref:baseline").name == "coref-baseline"
    assert parse_spec(" bm25 ").raw == "bm25"
    assert expand_models("default, oracle") == ["minilm", "bm25", "smollm2-135m", "oracle"]
    with pytest.raises(ConfigError, match="--model is empty"):
        expand_models(" , ")


def test_two_specs_with_one_name_are_refused(tmp_path):
    for step in ("step1000", "step2000"):
        (tmp_path / "ckpts" / step / "model").mkdir(parents=True)
    a, b = (parse_spec(f"hf:{tmp_path}/ckpts/{s}/model") for s in ("step1000", "step2000"))
    with pytest.raises(ConfigError) as exc:
        check_distinct_names([a, b])
    msg = str(exc.value)
    assert a.raw in msg and b.raw in msg and "named 'model'" in msg and f"{b.raw}?name=step2000-model" in msg
    with pytest.raises(ConfigError, match="both be named 'bm25'"):
        check_distinct_names([parse_spec("bm25"), parse_spec("bm25?k1=1.2")])
    check_distinct_names([a, parse_spec(f"{b.raw}?name=step2000"), parse_spec("bm25"), parse_spec("bm25")])


def test_parse_spec_imports_no_adapter_and_no_torch():
    code = (
        "import sys\n"
        "from longctx_eval.models.spec import parse_spec\n"
        "for s in ('smollm2-135m?max_length=4096', 'bm25?k1=1.2', 'minilm', 'oracle', 'coref:baseline', 'tiny-rope'):\n"
        "    parse_spec(s)\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'bm25s')\n"
        "adapters = ('hf.adapter', 'retrieval.dense', 'retrieval.bm25', 'oracle', 'coref_baseline', "
        "'posprobe.forward', 'base', 'loader')\n"
        "print([m for m in sys.modules if m.split('.')[0] in heavy\n"
        "       or m in tuple('longctx_eval.models.' + a for a in adapters)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_load_tokenizer_of_reads_no_weights(tmp_path, tiny_llama_dir):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_llama_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    tok = load_tokenizer_of(parse_spec(f"hf:{broken}"))
    assert tok.sha256 == load_tokenizer_of(parse_spec(f"hf:{tiny_llama_dir}")).sha256
    assert tok.count("The quick brown fox") > 0
    with pytest.raises(PrerequisiteError, match="cannot be loaded"):
        load_model(parse_spec(f"hf:{broken}"))
    assert load_tokenizer_of(parse_spec("bm25?k1=2")).name == "minilm"


def test_missing_folder_and_uncached_hub_id():
    with pytest.raises(ConfigError) as exc:
        parse_spec("hf:/does/not/exist")
    assert str(exc.value).endswith(
        "no such folder /does/not/exist; expected a local model folder (config.json + weights) or a hub id org/name"
    )
    with pytest.raises(ConfigError, match="no such folder ./nope"):
        parse_spec("retriever:./nope")
    spec = parse_spec("hf:no-such-org/no-such-model")  # a well-formed hub id parses
    with pytest.raises(PrerequisiteError) as exc:
        load_tokenizer_of(spec)
    msg = str(exc.value)
    assert "offline" in msg and "local Hugging Face cache" in msg and "hf:/path/to/model" in msg


def test_bm25_prediction_keys_are_unchanged():
    bm25 = load_model(parse_spec("bm25"))
    assert prediction_key("needle", "3", "needle-1024-0.5-0#0", KNOWN_REQUEST, bm25.identity) == BM25_KEY
    assert bm25.meta.identity_sha256 == sha256_json(portable_identity(bm25.meta))
    tuned = load_model(parse_spec("bm25?k1=1.2&b=0.5"))
    assert tuned.meta.identity_sha256 == BM25_TUNED_IDENTITY
    assert tuned.meta.settings == {"k1": 1.2, "b": 0.5, "stopwords": "en"}
    assert tuned.meta.capabilities == ["retrieve"] and tuned.capabilities == {Capability.RETRIEVE}


def _task(oracle=None) -> tuple[Task, list[Sample]]:
    samples = [
        Sample("s0", "alpha beta gamma", "q0", {"answers": ["beta"], "span": [6, 10]}, {"target_tokens": 8}),
        Sample("s1", "delta epsilon", "q1", {"answers": ["delta"], "parts": ["d", "e"]}, {"target_tokens": 8}),
    ]

    def prompt(s: Sample) -> list[Request]:
        return [Request(s.id, f"{s.context} {s.question} {i}", s.context, s.question, part=i) for i in range(2)]

    kwargs = {"oracle": oracle} if oracle else {}
    task = Task(samples, prompt, lambda s, p: Score({"score": 1.0}), [mean("score")], **kwargs)
    return task, samples


def test_the_oracle_bound_to_a_task_answers_with_its_gold():
    oracle = load_model(parse_spec("oracle"))
    assert oracle.capabilities == ALL_CAPABILITIES
    task, samples = _task()
    bound = oracle.bind(task, samples)
    assert bound.identity == oracle.identity and bound.meta == oracle.meta
    reqs = task.requests(samples[0])
    preds = bound.serve("retrieve", reqs)
    assert [p.text for p in preds] == ["beta", "beta"] and preds[0].hits[0].char_start == 6
    assert [p.prompt_tokens for p in preds] == [oracle.tokenizer.count(r.prompt) for r in reqs]
    with pytest.raises(RuntimeError, match="bound"):
        oracle.serve("generate", reqs)
    with pytest.raises(ValueError, match="'nope'"):
        bound.serve("generate", [Request("nope", "p", "c", "q")])

    def parts(s: Sample) -> Prediction:
        return Prediction(parts=tuple(Prediction(text=t) for t in s.gold.get("parts", ["x", "y"])))

    task, samples = _task(parts)
    preds = oracle.bind(task, samples).serve(Capability.COREF, task.requests(samples[1]))
    assert [p.text for p in preds] == ["d", "e"]
    bm25 = load_model(parse_spec("bm25"))
    assert bm25.bind(task, samples) is bm25


def test_an_unknown_kind_lists_the_forms():
    with pytest.raises(LongctxError, match="Did you mean 'bm25'"):
        parse_spec("bm52")
    with pytest.raises(ConfigError, match="unknown coref system 'maverick'"):
        parse_spec("coref:maverick")


def test_meta_round_trips_through_json():
    meta = load_model(parse_spec("coref:baseline?window=20")).meta
    data = json.loads(meta.model_dump_json())
    assert data["settings"]["window"] == 20 and data["identity_sha256"] == meta.identity_sha256


def test_coref_baseline_counts_lengths_in_the_tokenizer_it_is_given():
    """`?tokenizer=` decides which documents a task gives it (fitted to that tokenizer's length), so it is part of
    the identity and recorded; the default (MiniLM) records nothing new."""
    default = load_model(parse_spec("coref:baseline")).meta
    smol = load_model(parse_spec("coref:baseline?tokenizer=smollm2-135m")).meta
    assert default.tokenizer == "minilm" and "tokenizer" not in default.settings
    assert smol.tokenizer == "smollm2-135m" and smol.settings["tokenizer"] == "smollm2-135m"
    assert smol.identity_sha256 != default.identity_sha256 and smol.name == default.name == "coref-baseline"
