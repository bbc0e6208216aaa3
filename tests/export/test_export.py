"""HF Datasets export: `load_dataset` round trip, exact contexts from shared documents, byte-identical rebuilds."""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import yaml

from data_builders import build_needle_doc, get_source
from data_builders.dataset import registry
from data_builders.dataset.card import tokenizer_hub_id
from data_builders.dataset.export import DOCUMENT_FEATURES, build_dataset
from data_builders.dataset.registry import BuildConfig, CardInfo, Document, Part, builder
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.builder import FLAT_FEATURES, NEEDLE_FEATURES, documents_by_id, materialize, needle_sample
from data_builders.needle.grid import depth_grid
from data_builders.needle.insertion import MAGIC_TEMPLATES
from longctx_eval.cli import main
from longctx_eval.errors import ConfigError, DataError, TaskDefinitionError
from longctx_eval.hashing import sha256_json
from longctx_eval.registry import Registry
from longctx_eval.text.tokenizer import Tokenizer

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (352, 700)  # whole prompt budgets: contexts of 160 and 508 tokens (length - PROMPT_RESERVE)
CONFIG = BuildConfig(lengths=LENGTHS, depths=4, per_cell=2, seed=3, source="synthetic")


@pytest.fixture(scope="module")
def bpe_file(bpe_tokenizer, tmp_path_factory) -> Tokenizer:
    """The session BPE saved as tokenizer.json and loaded by path, as the CLI loads it."""
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(bpe_tokenizer.backend.to_str())
    return Tokenizer.from_file(path, name=str(path))


@pytest.fixture(scope="module")
def built(bpe_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("needle-ds")
    return build_dataset("needle", CONFIG, out, bpe_file)


def _load(folder: Path, config: str, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rebuild_in_another_process_is_byte_identical(built, bpe_file, tmp_path):
    again = tmp_path / "again"
    cli = "import sys; from longctx_eval.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", cli, "build", "needle", "--lengths", "352,700", "--depths", "4"]
    cmd += [
        "--per-cell",
        "2",
        "--seed",
        "3",
        "--source",
        "synthetic",
        "--tokenizer",
        bpe_file.name,
        "--out",
        str(again),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a different str-hash order must not change a byte
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, second = _files(built.out), _files(again)
    assert sorted(first) == ["README.md", *sorted(built.files)]
    assert first == second
    assert oct((again / "README.md").stat().st_mode & 0o777) == "0o644"


def test_load_dataset_round_trip_gives_the_exact_needle_docs(built, bpe_file, tmp_path):
    source = get_source("synthetic")
    documents = _load(built.out, "documents", tmp_path)
    assert documents.features == DOCUMENT_FEATURES
    docs = documents_by_id(documents)
    for length in LENGTHS:
        rows = _load(built.out, f"needle_{length}", tmp_path)
        assert rows.features == NEEDLE_FEATURES
        assert len(rows) == CONFIG.depths * CONFIG.per_cell
        for row in rows:
            # An independent build of the same needle, straight from build_needle_doc.
            rng = random.Random(sha256_json([CONFIG.seed, length, row["depth"], row["rep"]]))
            template = MAGIC_TEMPLATES[row["value_kind"]]  # the value kind cycles over the grid
            n = length - PROMPT_RESERVE  # needle v5: the length is the whole prompt budget
            doc = build_needle_doc(
                source, bpe_file, n, row["depth"], rng, template=template, haystack_seed=row["haystack_seed"]
            )
            context = materialize(row, docs)
            assert context == doc.context
            assert bpe_file.count(context) == n == row["context_tokens"]
            assert (row["needle_start"], row["needle_end"]) == (doc.needle_start, doc.needle_end)
            assert (row["needle_token_start"], row["needle_token_end"]) == (
                doc.needle_token_start,
                doc.needle_token_end,
            )
            assert row["answers"] == [doc.value] and row["key"] == doc.key and row["question"] == doc.question
            assert row["actual_depth"] == doc.actual_depth and row["target_tokens"] == length
            sample = needle_sample(row, docs, source=source.name)
            assert sample.context == doc.context and sample.gold["span"] == [doc.needle_start, doc.needle_end]
            assert sample.metadata["source"] == "synthetic" and sample.id == row["id"]


def _needle_task(**kwargs):
    from longctx_eval.discovery import discover

    return discover().get("needle").factory(**kwargs)


def test_task_samples_are_the_built_datasets_rows(built, bpe_file, tmp_path):
    """One generator: the needle task and the `needle` builder give the same samples, in the same order."""
    task = _needle_task(
        lengths=list(LENGTHS),
        seed=CONFIG.seed,
        tokenizer=bpe_file,
        depths=CONFIG.depths,
        per_cell=CONFIG.per_cell,
        source="synthetic",
    )
    samples = list(task.samples())
    docs = documents_by_id(_load(built.out, "documents", tmp_path))
    rows = [row for length in LENGTHS for row in _load(built.out, f"needle_{length}", tmp_path)]
    assert [s.id for s in samples] == [row["id"] for row in rows]
    source = get_source("synthetic")
    meta = {"source": source.name, "source_sha256": source.sha256, "tokenizer": bpe_file.name}
    for sample, row in zip(samples, rows, strict=True):
        assert needle_sample(row, docs, **meta) == sample


def test_flat_build_is_self_sufficient(bpe_file, tmp_path):
    """Plain `load_dataset("parquet")` rows and the card's template reproduce the task's prompts exactly."""
    config = BuildConfig(lengths=(352,), depths=3, seed=5, source="synthetic", options={"flat": "true"})
    report = build_dataset("needle", config, tmp_path / "flat", bpe_file)
    assert [e.name for e in report.configs] == ["needle_352"]  # no documents config: nothing to join
    assert sorted(report.files) == ["data/needle_352.parquet"]
    meta = yaml.safe_load(report.card.split("---\n")[1])
    template = meta["longctx_eval"]["prompt_template"]
    assert f"````text\n{template}\n````" in report.card
    assert "## Scoring" in report.card and "normalized containment" in report.card and "recall@k" in report.card
    assert datasets.Features._from_yaml_list(meta["dataset_info"][0]["features"]) == FLAT_FEATURES
    files = str(report.out / "data" / "needle_352.parquet")
    rows = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "cache"))
    task = _needle_task(lengths=[352], seed=5, tokenizer=bpe_file, depths=3, source="synthetic")
    samples = list(task.samples())
    assert [s.id for s in samples] == rows["id"]
    for sample, row in zip(samples, rows, strict=True):
        assert row["context"] == sample.context and bpe_file.count(row["context"]) == 160 == row["context_tokens"]
        assert row["context"][row["needle_start"] : row["needle_end"]] == row["needle"]
        assert template.format(**row) == task.prompt(sample).prompt
        assert needle_sample(row, source="synthetic") == needle_sample(row, None, source="synthetic")
        assert needle_sample(row).gold == sample.gold
    with pytest.raises(ConfigError, match="expected true or false"):
        build_dataset("needle", BuildConfig(lengths=(352,), options={"flat": "maybe"}), tmp_path / "x", bpe_file)


def test_card_names_the_tokenizers_hub_repo():
    assert tokenizer_hub_id("smollm2-135m") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert tokenizer_hub_id("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    assert tokenizer_hub_id("gpt2/x") == "gpt2/x"
    assert tokenizer_hub_id("tiktoken:cl100k_base") is None
    assert tokenizer_hub_id("/tmp/tokenizer.json") is None


def test_entry_point_builders_resolve_to_their_info(monkeypatch):
    """An entry point names a @builder function; the registry resolves it to the builder's info."""
    scratch = _scratch_registry(monkeypatch)
    features = datasets.Features({"id": datasets.Value("string")})

    @builder("plug", version="1", features=features, description="Plugged in.")
    def plug(ctx):
        return iter(())

    scratch.register("plugged", plug, source="entry point x:plug")
    assert registry.get_builder("plug").fn is plug
    with pytest.raises(TaskDefinitionError, match="names builder 'plug'; expected the same name"):
        registry.builders()


def test_each_haystack_is_stored_once(built, bpe_file, tmp_path):
    documents = _load(built.out, "documents", tmp_path)
    assert len(documents) == len(LENGTHS) * CONFIG.per_cell  # not x depths
    for doc in documents:
        assert doc["n_chars"] == len(doc["text"]) and doc["n_tokens"] == bpe_file.count(doc["text"])
        assert doc["sha256"] == hashlib.sha256(doc["text"].encode()).hexdigest()
    rows = _load(built.out, f"needle_{LENGTHS[1]}", tmp_path)
    assert sorted(set(rows["doc_id"])) == [f"needle-{LENGTHS[1]}-r{r}" for r in range(CONFIG.per_cell)]
    assert [row["depth"] for row in rows][: CONFIG.depths] == depth_grid(CONFIG.depths)
    assert len(set(rows["id"])) == len(rows)


def test_card_has_configs_features_license_and_hashes(built, bpe_file):
    card = (built.out / "README.md").read_text()
    assert card == built.card and card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["needle_352", "needle_700", "documents"]
    assert meta["license"] == "apache-2.0"
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert datasets.Features._from_yaml_list(infos["needle_700"]["features"]) == NEEDLE_FEATURES
    assert infos["documents"]["splits"][0]["num_examples"] == 4
    prov = meta["longctx_eval"]
    assert prov["builder"] == "needle" and prov["builder_version"] == "4" and prov["seed"] == 3
    assert prov["source"]["sha256"] == get_source("synthetic").sha256
    assert prov["tokenizer"] == {"name": bpe_file.name, "hub_id": None, "sha256": bpe_file.sha256}
    assert prov["prompt_template"].startswith("Read the following text") and "## Prompt" in card
    for rel, digest in prov["files"].items():
        assert hashlib.sha256((built.out / rel).read_bytes()).hexdigest() == digest
        assert f"| `{rel}` | `{digest}` |" in card
    assert get_source("synthetic").sha256 in card and bpe_file.sha256 in card
    assert "longctx-eval build needle --lengths 352,700 --depths 4 --per-cell 2 --seed 3" in card


def test_materialize_rejects_rows_that_do_not_match(built, tmp_path):
    docs = documents_by_id(_load(built.out, "documents", tmp_path))
    row = dict(_load(built.out, "needle_352", tmp_path)[1])
    with pytest.raises(DataError, match="is not among the 4 documents"):
        materialize({**row, "doc_id": "nope"}, docs)
    with pytest.raises(DataError, match="doc_end"):
        materialize({**row, "doc_end": 10**9}, docs)
    with pytest.raises(DataError, match="do not match"):
        materialize({**row, "insert_at": row["insert_at"] + 1}, docs)


def test_rebuild_into_the_same_folder_drops_stale_configs(bpe_file, tmp_path):
    out = tmp_path / "ds"
    build_dataset("needle", BuildConfig(lengths=(352, 492), depths=1, source="synthetic"), out, bpe_file)
    report = build_dataset("needle", BuildConfig(lengths=(492,), depths=1, source="synthetic"), out, bpe_file)
    assert sorted(_files(out)) == ["README.md", "data/documents/needle_492.parquet", "data/needle_492.parquet"]
    assert [e.name for e in report.configs] == ["needle_492", "documents"]


def _scratch_registry(monkeypatch) -> Registry:
    """A copy of the builder registry, so builders registered by a test leave the real one as it was."""
    scratch: Registry = Registry("dataset builder")
    for name, info in registry.builders().items():
        scratch.register(name, info, source=info.source)
    monkeypatch.setattr(registry, "BUILDERS", scratch)
    return scratch


def test_a_registered_builder_without_documents_exports(bpe_file, tmp_path, monkeypatch):
    _scratch_registry(monkeypatch)
    features = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64")})

    @builder("toy", version="7", features=features, description="Toy rows.", card=CardInfo(tags=("toy",)))
    def toy(ctx):
        for length in ctx.config.lengths:
            yield Part(f"toy_{length}", [{"id": f"{length}-{i}", "n": i} for i in range(3)])

    report = build_dataset("toy", BuildConfig(lengths=(5, 9), source="synthetic"), tmp_path / "toy", bpe_file)
    assert [e.name for e in report.configs] == ["toy_5", "toy_9"]
    rows = _load(report.out, "toy_9", tmp_path / "cache")
    assert rows.features == features and rows["n"] == [0, 1, 2]
    with pytest.raises(TaskDefinitionError, match="already registered"):
        builder("needle", version="1", features=features, description="")(lambda ctx: iter(()))
    with pytest.raises(TaskDefinitionError, match="expected lowercase"):
        builder("Bad Name", version="1", features=features, description="")(lambda ctx: iter(()))


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([Part("../escape", [])], "expected a config name of letters"),
        ([Part("documents", [])], "other than 'documents'"),
        ([Part("a", []), Part("a", [])], "the config was produced twice"),
        ([Part("a", [], [Document("d", "x", 1)]), Part("b", [], [Document("d", "y", 1)])], "doc_id 'd' is used twice"),
        ([Part("a", [{"id": "x"}])], "rows do not match the declared features"),
        ([Part("a", [{"id": 1, "extra": 2}])], "row 0 lacks fields [] and has unknown fields ['extra']"),
    ],
)
def test_malformed_parts_are_refused(bpe_file, tmp_path, monkeypatch, parts, message):
    _scratch_registry(monkeypatch)
    builder("bad", version="1", features=datasets.Features({"id": datasets.Value("int64")}), description="")(
        lambda ctx: iter(parts)
    )
    with pytest.raises(DataError, match=re.escape(message)):
        build_dataset("bad", BuildConfig(lengths=(1,), source="synthetic"), tmp_path / "bad", bpe_file)


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["needl", "--lengths", "1k"], "unknown dataset builder 'needl'. Did you mean 'needle'?"),
        (["needle", "--lengths", "1x"], "--lengths: '1x' is not a positive token count"),
        (["needle", "--lengths", "1k", "--depths", "0"], "--depths: expected a positive integer"),
        (["needle", "--lengths", "1k", "--option", "x=1"], "builder 'needle' has no option 'x'"),
        (["needle", "--lengths", "1k", "--source", "nowhere"], "unknown haystack source 'nowhere'"),
        (["needle", "--lengths", "20"], "length 20: the context would be -172 tokens after the 192-token prompt"),
        (["needle", "--lengths", "1k", "--push-to-hub", "a b"], "expected a repo id such as user/my-dataset"),
    ],
)
def test_bad_build_input_is_a_one_line_error(capsys, tmp_path, argv, message):
    code, err = _cli(capsys, "build", *argv, "--tokenizer", "minilm", "--out", str(tmp_path / "o"))
    assert code == 2 and message in err and "\n" not in err and "Traceback" not in err


def test_out_folder_that_is_not_a_dataset_is_refused(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    code, err = _cli(capsys, "build", "needle", "--lengths", "400", "--tokenizer", "minilm", "--out", str(tmp_path))
    assert code == 2 and "is not empty and holds no longctx-eval dataset card" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_push_to_hub_offline_fails_before_building(capsys, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    out = tmp_path / "ds"
    argv = ["build", "needle", "--lengths", "400", "--depths", "1", "--tokenizer", "minilm", "--out", str(out)]
    code, err = _cli(capsys, *argv, "--push-to-hub", "someone/needle")
    assert code == 2 and "HF_HUB_OFFLINE=1" in err and "\n" not in err
    assert not out.exists()


def test_push_to_hub_network_failure_keeps_the_build(capsys, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens: refused at once
    monkeypatch.setenv("HF_TOKEN", "hf_test_not_a_real_token")
    out = tmp_path / "ds"
    argv = ["build", "needle", "--lengths", "400", "--depths", "1", "--tokenizer", "minilm", "--out", str(out)]
    code, err = _cli(capsys, *argv, "--push-to-hub", "someone/needle")
    last = err.splitlines()[-1]
    assert code == 2 and "--push-to-hub someone/needle failed" in last and "push it later with" in last
    assert (out / "README.md").is_file() and (out / "data" / "needle_400.parquet").is_file()
