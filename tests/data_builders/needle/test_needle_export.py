"""HF Datasets export of the needle variants: configs per task x length, a card with prompt and scoring, and
rows that plain `datasets.load_dataset` reads and that equal the tasks' samples."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
import yaml

from data_builders import get_source
from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from data_builders.needle.grid import PROMPT_TEMPLATE
from data_builders.needle.storage import rebuild, split_insertions
from data_builders.needle.variant_builder import VARIANT_FEATURES, documents_by_id, materialize, variant_sample
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, DataError

LENGTHS = (512, 900)
GRID = {"needle_multikey": (2, 2), "needle_lowlex": (3, 1)}  # depths, per_cell
PER_LENGTH = {"needle_multivalue": 3, "needle_multiquery": 3}
RESERVE = {"needle_multivalue": 192}  # the test BPE spends 172 tokens on the 4 value needles: 512 - 320 is too few


def _config(name: str) -> tuple[BuildConfig, dict]:
    if name in GRID:
        depths, per_cell = GRID[name]
        cfg = BuildConfig(lengths=LENGTHS, depths=depths, per_cell=per_cell, seed=4, source="synthetic")
        return cfg, {"depths": depths, "per_cell": per_cell}
    n = PER_LENGTH[name]
    reserve = RESERVE.get(name)
    options = {"per_length": str(n), **({"reserve": str(reserve)} if reserve is not None else {})}
    cfg = BuildConfig(lengths=LENGTHS, seed=4, source="synthetic", options=options)
    return cfg, {"per_length": n, **({"reserve": reserve} if reserve is not None else {})}


def _load(folder: Path, config: str, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache))


@pytest.mark.parametrize("name", [*GRID, *PER_LENGTH])
def test_built_rows_are_the_task_samples(name, bpe_tokenizer, tmp_path):
    cfg, args = _config(name)
    report = build_dataset(name, cfg, tmp_path / name, bpe_tokenizer)
    assert [e.name for e in report.configs] == [f"{name}_{n}" for n in LENGTHS] + ["documents"]
    docs = documents_by_id(_load(report.out, "documents", tmp_path / "cache"))
    rows = [r for n in LENGTHS for r in _load(report.out, f"{name}_{n}", tmp_path / "cache")]
    task = (
        discover()
        .get(name)
        .build({**args, "source": "synthetic"}, lengths=list(LENGTHS), seed=4, tokenizer=bpe_tokenizer)
    )
    samples = list(task.samples())
    assert [r["id"] for r in rows] == [s.id for s in samples]
    source = get_source("synthetic")
    meta = {"source": source.name, "source_sha256": source.sha256, "tokenizer": bpe_tokenizer.name}
    for row, sample in zip(rows, samples, strict=True):
        assert variant_sample(row, docs, **meta) == sample
        context = materialize(row, docs)
        assert bpe_tokenizer.count(context) == row["context_tokens"] == sample.metadata["context_tokens"]
        assert row["target_tokens"] == sample.metadata["target_tokens"] > row["context_tokens"]
        assert all(context[n["start"] : n["end"]] == n["text"] for n in row["needles"])
    card = (report.out / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["longctx_eval"]["prompt_template"] == PROMPT_TEMPLATE
    assert "answer_prefix" in card and "## Scoring" in card
    infos = {c["config_name"]: c for c in front["dataset_info"]}
    assert datasets.Features._from_yaml_list(infos[f"{name}_{LENGTHS[0]}"]["features"]) == VARIANT_FEATURES


def test_one_document_per_haystack(bpe_tokenizer, tmp_path):
    """Every depth of one (length, repetition) shares one stored haystack, as in the needle dataset."""
    cfg, _ = _config("needle_multikey")
    report = build_dataset("needle_multikey", cfg, tmp_path / "mk", bpe_tokenizer)
    rows = _load(report.out, f"needle_multikey_{LENGTHS[0]}", tmp_path / "cache")
    assert len(set(rows["doc_id"])) <= cfg.per_cell < len(rows)


def test_split_and_rebuild_are_exact():
    context = "N1 is here. N2 too. Hay one. Hay two. N3 sits. Hay three. N4 end."
    spans = [(0, 11), (12, 19), (38, 46), (58, 65)]
    assert [context[a:b] for a, b in spans] == ["N1 is here.", "N2 too.", "N3 sits.", "N4 end."]
    got = split_insertions(context, spans)
    assert got.bare == "Hay one. Hay two. Hay three."
    assert rebuild(got.bare, got.insert_at, got.insertion, len(got.bare)) == context
    with pytest.raises(DataError, match="insert_at"):
        rebuild(got.bare, [5, 1, 2, 3], got.insertion, len(got.bare))
    with pytest.raises(DataError, match="doc_end"):
        rebuild(got.bare, got.insert_at, got.insertion, 999)


def test_bad_per_length_option_is_refused(bpe_tokenizer, tmp_path):
    cfg = BuildConfig(lengths=(512,), source="synthetic", options={"per_length": "many"})
    with pytest.raises(ConfigError, match="per_length"):
        build_dataset("needle_multivalue", cfg, tmp_path / "x", bpe_tokenizer)
