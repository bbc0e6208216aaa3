"""The sample cache: a real needle task's samples read back identical, shared by tokenizer, missed on a source edit."""

from __future__ import annotations

import dataclasses
import gzip
import os

import pytest

from longctx_eval.discovery import discover
from longctx_eval.models import model_source
from longctx_eval.models.assets import load_tokenizer
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.run import sample_cache
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.sample_cache import SampleCache, decode, encode, folder_sha256, prune, sample_key
from longctx_eval.run.sampling import dataset_hash

ARGS = {"depths": 3, "source": "synthetic"}
LENGTHS = (448,)


@pytest.fixture(scope="module")
def needle():
    return discover().get("needle")


@pytest.fixture(scope="module")
def built(needle, minilm_tokenizer, tmp_path_factory):
    """The needle plan built once into a disk cache folder: (folder, plan, samples as built)."""
    folder = tmp_path_factory.mktemp("samples")
    plan = TaskPlan(needle, LENGTHS, None, ARGS)
    out = plan_samples(plan, 0, minilm_tokenizer, SampleCache(folder, 1 << 30))
    assert [g.origin for g in out.groups] == ["built"]
    return folder, plan, out.samples


def test_bm25_and_minilm_measure_in_one_tokenizer_so_they_share_samples(needle):
    """bm25 loads MiniLM's tokenizer.json as 'minilm'; hybrid measures in `minilm_tokenizer`, the dense ones chunk
    in `retriever_tokenizer` (the functions their adapters call; the slow test below loads them all)."""
    adapter = load_model(parse_spec("bm25"))
    try:
        assert (adapter.tokenizer.name, adapter.tokenizer.sha256) == ("minilm", load_tokenizer("minilm").sha256)
        keys = {sample_key(needle, ARGS, LENGTHS, 0, adapter.tokenizer)}
    finally:
        adapter.close()
    keys.add(sample_key(needle, ARGS, LENGTHS, 0, model_source.minilm_tokenizer(parse_spec("hybrid"))))
    for raw in ("minilm", "minilm?rerank=maxsim"):
        keys.add(sample_key(needle, ARGS, LENGTHS, 0, model_source.retriever_tokenizer(parse_spec(raw))))
    assert len(keys) == 1 and None not in keys
    smol = load_tokenizer("smollm2-135m")
    assert sample_key(needle, ARGS, LENGTHS, 0, smol) not in keys  # another tokenizer never shares


@pytest.mark.slow
def test_every_loaded_retriever_of_the_reference_suite_keys_samples_alike(needle):
    """The four retrievers as loaded (MiniLM's weights too): one sample key."""
    keys = set()
    for raw in ("bm25", "minilm", "hybrid", "minilm?rerank=maxsim"):
        adapter = load_model(parse_spec(raw))
        try:
            keys.add(sample_key(needle, ARGS, LENGTHS, 0, adapter.tokenizer))
        finally:
            adapter.close()
    assert len(keys) == 1 and None not in keys


def test_samples_read_back_from_disk_are_identical(built, minilm_tokenizer):
    folder, plan, samples = built
    fresh = SampleCache(folder, 1 << 30)  # another process: nothing in memory
    out = plan_samples(plan, 0, minilm_tokenizer, fresh)
    assert [g.origin for g in out.groups] == ["disk"]
    assert out.samples == samples and dataset_hash(out.samples) == dataset_hash(samples)
    again = plan_samples(plan, 0, minilm_tokenizer, fresh)
    assert [g.origin for g in again.groups] == ["memory"] and again.samples == samples
    limited = plan_samples(dataclasses.replace(plan, limit=2), 0, minilm_tokenizer, fresh)
    assert [g.origin for g in limited.groups] == ["memory"] and len(limited.samples) == 2  # limit after the cache


def test_only_tasks_that_opt_in_are_cached(tmp_path, minilm_tokenizer):
    # coref_synthetic keeps its documents in its instance: a second instance is built afresh, never read back.
    coref = discover().get("coref_synthetic")
    assert not coref.cache_samples
    opted = ("needle", "needle_lowlex", "needle_multikey", "needle_multivalue", "needle_multiquery")
    assert all(discover().get(n).cache_samples for n in [*opted, "cross_paragraph", "retrieval"])
    cache = SampleCache(tmp_path, 1 << 30)
    plan = TaskPlan(coref, (256,), None, {})
    origins = [plan_samples(plan, 0, minilm_tokenizer, cache).groups[0].origin for _ in range(2)]
    assert origins == ["built", "built"] and not list(tmp_path.iterdir())


def test_key_changes_with_what_samples_depend_on(needle, minilm_tokenizer):
    base = sample_key(needle, ARGS, LENGTHS, 0, minilm_tokenizer)
    assert base == sample_key(needle, dict(reversed(list(ARGS.items()))), LENGTHS, 0, minilm_tokenizer)
    assert base != sample_key(needle, {**ARGS, "depths": 4}, LENGTHS, 0, minilm_tokenizer)
    assert base != sample_key(needle, ARGS, (512,), 0, minilm_tokenizer)
    assert base != sample_key(needle, ARGS, LENGTHS, 1, minilm_tokenizer)
    assert base != sample_key(dataclasses.replace(needle, version="999"), ARGS, LENGTHS, 0, minilm_tokenizer)


def test_editing_a_plugin_folder_misses(needle, minilm_tokenizer, tmp_path):
    """A user's plugin: its own file and its helpers beside it are in the key."""
    plugin = tmp_path / "mine.py"
    plugin.write_text("X = 1\n")
    (tmp_path / "_helper.py").write_text("Y = 1\n")
    info = dataclasses.replace(needle, source=str(plugin))
    first = sample_key(info, ARGS, LENGTHS, 0, minilm_tokenizer)
    (tmp_path / "_helper.py").write_text("Y = 2\n")
    folder_sha256.cache_clear()
    assert sample_key(info, ARGS, LENGTHS, 0, minilm_tokenizer) != first
    plugin.write_text("X = 2\n")
    folder_sha256.cache_clear()
    third = sample_key(info, ARGS, LENGTHS, 0, minilm_tokenizer)
    assert len({first, third, sample_key(needle, ARGS, LENGTHS, 0, minilm_tokenizer)}) == 3


def test_a_changed_builder_hash_misses(built, minilm_tokenizer, monkeypatch):
    folder, plan, samples = built
    edited = {**sample_cache.builder_sources(), "data_builders": "0" * 64}
    monkeypatch.setattr(sample_cache, "builder_sources", lambda: edited)
    out = plan_samples(plan, 0, minilm_tokenizer, SampleCache(folder, 1 << 30))
    assert [g.origin for g in out.groups] == ["built"] and out.samples == samples


def test_corrupt_or_foreign_entries_are_rebuilt_with_a_warning(built, minilm_tokenizer, capsys):
    folder, plan, samples = built
    key = sample_key(plan.info, ARGS, LENGTHS, 0, minilm_tokenizer)
    path = folder / f"{key}.json.gz"
    good = path.read_bytes()
    for bad in (good[: len(good) // 2], b"not gzip", encode("another key", samples)):
        path.write_bytes(bad)
        out = plan_samples(plan, 0, minilm_tokenizer, SampleCache(folder, 1 << 30))
        assert [g.origin for g in out.groups] == ["built"] and out.samples == samples
        assert "unusable" in capsys.readouterr().err
        assert decode(key, path.read_bytes()) == samples  # rewritten whole
    tampered = gzip.decompress(good).replace(b"special magic number", b"special magic numbes", 1)
    with pytest.raises(sample_cache.UnusableEntry, match="dataset hash"):
        decode(key, gzip.compress(tampered))


def test_a_link_is_never_followed(built, minilm_tokenizer, tmp_path):
    folder, plan, samples = built
    key = sample_key(plan.info, ARGS, LENGTHS, 0, minilm_tokenizer)
    links = tmp_path / "links"
    links.mkdir()
    target = tmp_path / "elsewhere.json.gz"
    target.write_bytes((folder / f"{key}.json.gz").read_bytes())
    os.symlink(target, links / f"{key}.json.gz")
    out = plan_samples(plan, 0, minilm_tokenizer, SampleCache(links, 1 << 30))
    assert [g.origin for g in out.groups] == ["built"] and out.samples == samples
    assert (links / f"{key}.json.gz").is_symlink() and target.read_bytes()  # neither replaced nor deleted
    linked_folder = tmp_path / "linked"
    os.symlink(folder, linked_folder)
    assert SampleCache(linked_folder, 1 << 30).path_of(key) is None


def test_off_keeps_memory_only_and_the_bound_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv(sample_cache.FOLDER_ENV, "off")
    assert sample_cache.default_folder() is None
    monkeypatch.setenv(sample_cache.FOLDER_ENV, str(tmp_path))
    assert sample_cache.default_folder() == tmp_path
    monkeypatch.setenv(sample_cache.DISK_MB_ENV, "12")
    assert sample_cache.shared_sample_cache().disk_bytes == 12 << 20
    monkeypatch.setenv(sample_cache.DISK_MB_ENV, "-1")
    with pytest.raises(sample_cache.ConfigError, match=sample_cache.DISK_MB_ENV):
        sample_cache.shared_sample_cache()


def test_prune_drops_least_recently_used_first(tmp_path):
    for i, name in enumerate(["old", "mid", "new"]):
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + i, 1000 + i))
    os.symlink(tmp_path / "old.json.gz", tmp_path / "link.json.gz")
    deleted = prune(tmp_path, 150, keep=tmp_path / "new.json.gz")
    assert [p.name for p in deleted] == ["old.json.gz", "mid.json.gz"]
    assert (tmp_path / "link.json.gz").is_symlink()  # a link is never counted or deleted


@pytest.mark.slow  # two suite runs of two models: about 30 s idle, 78 s on busy cores
def test_a_suite_run_shares_samples_in_memory_and_a_later_process_reads_the_disk(tmp_path, monkeypatch, capsys):
    """Through the runner: bm25 builds, the oracle (also MiniLM's tokenizer) reads memory, a fresh process disk."""
    import json

    from longctx_eval.cli import main

    monkeypatch.setenv(sample_cache.FOLDER_ENV, str(tmp_path / "cache"))
    suite = tmp_path / "two.toml"
    needle = 'needle = { lengths = [448], args = { depths = 2, source = "synthetic" } }'
    suite.write_text(f"[bm25]\n{needle}\n[oracle]\n{needle}\n")
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "out")]) == 0
    assert "needle: samples at 448 read from this process's memory" in capsys.readouterr().err
    sample_cache.clear_memory()  # as a new process
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "again")]) == 0
    assert "needle: samples at 448 read from the sample cache on disk" in capsys.readouterr().err
    hashes = {
        json.loads((tmp_path / out / m / "run.json").read_text())["tasks"][0]["dataset_hash"]
        for out in ("out", "again")
        for m in ("bm25", "oracle")
    }
    assert len(hashes) == 1
    assert len(list((tmp_path / "cache").glob("*.json.gz"))) == 1
