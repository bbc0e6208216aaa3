"""`make bench` harness smoke test on a tiny document: it runs, checks offsets, and writes its results.

Marked `bench`: `make bench` runs it (`pytest -m bench`) after installing the peers (the `bench` extra) and
caching the GPT-2 tiktoken file; the default suite deselects it. Nothing here is timed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

PEERS = ("tiktoken", "chonkie", "semchunk", "langchain_text_splitters", "llama_index.core")


def _missing() -> list[str]:
    missing = []
    for name in PEERS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is absent
            found = False
        if not found:
            missing.append(name)
    return missing


@pytest.fixture(scope="module")
def gpt2_ready() -> None:
    if missing := _missing():
        pytest.skip(f"bench peers not installed ({', '.join(missing)}): pip install -e '.[bench]'")
    from benchmarks.gpt2 import R50K_CACHE_KEY, gpt2_dir

    if not (gpt2_dir() / R50K_CACHE_KEY).is_file() or not (gpt2_dir() / "tokenizer.json").is_file():
        pytest.skip("the GPT-2 tiktoken file is not cached yet; `make bench` fetches it once")


def test_harness_runs_and_checks_offsets(gpt2_ready: None, tmp_path: Path) -> None:
    from benchmarks.__main__ import main

    args = ["--tokens", "2000", "--source", "synthetic", "--runs", "1", "--parts", "chunking"]
    assert main([*args, "--methods", "ours,semchunk,langchain_tiktoken", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "chunking.json").read_text())
    assert result["corpus"]["tokens"] == 2000 and result["corpus"]["backends_agree"]
    methods = result["chunking"]["methods"]
    ours = methods["ours"]["check"]
    assert ours["offsets_exact"] and ours["token_offsets_exact"] and ours["index_roundtrip_failures"] == 0
    assert ours["tokens_max"] <= 512 and ours["uncovered_nonspace_chars"] == 0
    assert methods["semchunk"]["check"]["offsets_exact"]
    assert "offsets_exact" in methods["langchain_tiktoken"]["check"]  # reported, right or wrong
    assert "semchunk" in result["chunking"]["ratios"]
    table = (tmp_path / "README.md").read_text()
    assert "| method |" in table and "semchunk" in table


def test_peer_ruler_reads_lm_eval_progress_and_compares() -> None:
    """lm-eval's per-request times come from its tqdm lines; the table states the speed-up per length."""
    from benchmarks.peer_ruler import _tick_seconds, _tqdm_ticks, compare, peer_ruler_table

    bar = "Running generate_until requests: {p}%|##| {k}/4 [00:01<00:02, 1.0s/it]"
    lines = [(1.0, "INFO Running generate_until requests")] + [
        (10.0 + 2 * k, bar.format(p=25 * k, k=k)) for k in (0, 1, 3, 4)
    ]
    ticks = _tqdm_ticks(lines)
    assert ticks[0] == (10.0, 0) and [_tick_seconds(ticks, k) for k in (1, 2, 3, 4)] == [2.0, 2.0, 2.0, 2.0]
    row = {"samples": 2, "prompt_tokens_mean": 1000.0, "generated_tokens_mean": 5.0, "score": 1.0}
    ours = {"per_length": {"1024": {**row, "seconds_per_sample": 1.0}}, "startup_s": 5.0, "process_s": 9.0}
    theirs = {"per_length": {"1024": {**row, "seconds_per_sample": 3.0}}, "startup_s": 40.0, "process_s": 60.0}
    cmp = compare(ours, theirs)
    assert cmp["1024"]["speedup_theirs_s_over_ours_s"] == 3.0 and cmp["1024"]["time_ratio_ours_over_theirs"] == 0.333
    table = peer_ruler_table({"lengths": [1024], "ours": ours, "theirs": theirs, "comparison": cmp})
    assert "**3.00x**" in table and "ours 5.0 s, lm-eval 40.0 s" in table


def test_vllm_part_bound_summary_and_table() -> None:
    """The `vllm` part's arithmetic on made-up passes: the prefix-sharing bound, repeats averaged, lm-eval's time
    over ours, what each lever bought and the share of the bound; nothing is run or timed."""
    from benchmarks.vllm_grid import depth_grid, prefix_bound
    from benchmarks.vllm_passes import merge_repeats
    from benchmarks.vllm_summary import summarize
    from benchmarks.vllm_table import table

    assert round(prefix_bound(depth_grid(5)), 2) == 1.43 and prefix_bound(depth_grid(2)) == 1.0

    def run(key: str, s: float, tokens: int = 1100, text: str = "42") -> dict:
        rows = [{"id": f"s{i}", "prompt_tokens": tokens, "text": text, "score": 1.0} for i in range(4)]
        return {"key": key, "label": key, "batch": 1, "seconds": 4 * s, "seconds_per_sample": s,
                "per_length_s": {"1024": s}, "rows": rows}  # fmt: skip

    merged = merge_repeats([run("ours", 1.0), run("no_prefix", 1.3), run("ours", 0.8, text="41")])
    assert [p["key"] for p in merged] == ["ours", "no_prefix"]
    assert merged[0]["seconds_per_sample"] == 0.9 and merged[0]["runs_s_per_sample"] == [1.0, 0.8]
    assert merged[0]["repeats_agree"] is False and merged[0]["per_length_s"] == {"1024": 0.9}
    results = {
        "hf": {
            "passes": [run("ours", 2.0), run("no_prefix", 2.6), run("no_suffix_chunk", 2.2), run("no_adjacency", 2.4)]
        },
        "vllm": {
            "passes": [run("ours", 1.0), run("no_prefix", 1.3), run("no_batching", 1.2), run("no_adjacency", 1.1)]
        },
        "served": {"passes": [run("ours", 1.6), run("no_batching", 1.6), run("no_prefix_one", 2.0)]},
        "lm_eval": {"passes": [run("ours", 2.0)]},
    }
    s = summarize(results, 1.43)
    assert s["vllm"]["peer_over_ours"] == 2.0 and s["hf"]["peer_over_ours"] == 1.0
    assert s["vllm"]["lever_speedups"] == {"prefix": 1.3, "adjacency": 1.1, "batching": 1.2}
    assert s["vllm"]["share_of_bound"] == round(1.3 / 1.43, 3)
    assert s["hf"]["lever_speedups"] == {"prefix": 1.3, "adjacency": 1.2, "suffix_chunk": 1.1}
    assert s["served"]["lever_speedups"] == {"prefix": 1.25, "batching": 1.0}
    assert s["vllm"]["prompt_tokens_equal_hf"] == s["vllm"]["compared_to_hf"] == 4
    s["served"] = summarize({"served": {"error": "exit 1 after 3 s", "log_tail": ""}}, 1.43)["served"]
    assert s["served"] == {"error": "exit 1 after 3 s"}
    result = {"grid": {"lengths": [1024], "depths": 5, "haystacks": 1}, "prefix_bound": 1.43}
    text = table({**result, "summary": s, "backends": results})
    assert "**2.00x**" in text and "not measured: exit 1" in text and "**1.43x**" in text and "91%" in text


def test_vllm_part_round_robin_separates_documents() -> None:
    from types import SimpleNamespace

    from benchmarks.vllm_grid import round_robin

    samples = [SimpleNamespace(metadata={"target_tokens": n, "rep": 0}) for n in (1024,) * 3 + (2048,) * 3]
    order = [(i, None, 0) for i in range(6)]
    mixed = round_robin(order, samples)
    assert sorted(mixed) == order
    docs = [samples[i].metadata["target_tokens"] for i, _, _ in mixed]
    assert all(a != b for a, b in zip(docs, docs[1:], strict=False))


def test_vllm_part_without_its_venv_says_so_and_keeps_the_committed_results(tmp_path: Path, monkeypatch) -> None:
    """Without .venv-vllm the part measures nothing, says why in one line, and a committed vllm.json stays."""
    import benchmarks.vllm_backends as vb
    from benchmarks.__main__ import main

    monkeypatch.setattr(vb, "VLLM_VENV", tmp_path / "no-venv")
    assert main(["--parts", "vllm", "--out", str(tmp_path / "a")]) == 0
    written = json.loads((tmp_path / "a" / "vllm.json").read_text())["vllm"]
    assert written["skipped"] == vb.SKIP_LINE and written["samples"] == 10
    assert vb.SKIP_LINE in (tmp_path / "a" / "README.md").read_text()
    kept = tmp_path / "b"
    kept.mkdir()
    committed = {"vllm": {"grid": {"lengths": [1024], "depths": 5, "haystacks": 1}, "prefix_bound": 1.43}}
    (kept / "vllm.json").write_text(json.dumps(committed))
    assert main(["--parts", "vllm", "--out", str(kept)]) == 0
    assert json.loads((kept / "vllm.json").read_text()) == committed


def test_embedding_reuse_part_runs_small_and_is_exact(tmp_path: Path) -> None:
    """The part on a 2,048-token haystack and 3 samples: later samples reuse vectors, hits equal a no-cache run."""
    from benchmarks.__main__ import main

    args = ["--parts", "embedding_reuse", "--reuse-length", "2048", "--reuse-samples", "3", "--out", str(tmp_path)]
    assert main(args) == 0
    result = json.loads((tmp_path / "embedding_reuse-2048.json").read_text())["embedding_reuse"]
    for spec in ("minilm", "minilm?chunking=resync"):
        run = result["runs"][spec]
        assert "error" not in run, run
        assert run["chunks_looked_up"] > 0 and run["chunks_embedded"] < 3 * run["chunks_per_sample"]
        assert all(e["hits_equal"] for e in run["exact"].values()) and len(run["exact"]) == 2
    assert not (tmp_path / "embedding_reuse.json").exists()  # another length never replaces the default's file


def test_embedding_reuse_bm25_mode_builds_both_ways_and_they_are_equal(tmp_path: Path) -> None:
    """`--bm25` on a 2,048-token haystack and 3 samples: assembled and bm25s arrays equal, later samples reuse."""
    from benchmarks.embedding_reuse import main

    out = tmp_path / "bm25.json"
    assert main(["--bm25", "--length", "2048", "--samples", "3", "--out", str(out)]) == 0
    run = json.loads(out.read_text())["embedding_reuse_bm25"]["run"]
    assert run["all_arrays_equal"] and run["samples"] == 3
    first, *later = run["per_sample"]
    assert first["reused"] == 0 and first["tokenized"] == first["chunks"]
    assert all(p["reused"] > 0 and p["tokenized"] < p["chunks"] for p in later)


def test_build_samples_step_times_old_against_new(tmp_path: Path) -> None:
    """The sample-builder comparison on one small cell: the baseline commit and this checkout each in a fresh
    process, both building the same samples (the cell's dataset hashes agree), the table in the README."""
    from benchmarks.__main__ import main

    args = ["--parts", "build", "--build-steps", "samples", "--build-speed-tasks", "needle"]
    args += ["--build-speed-lengths", "2048", "--build-speed-samples", "2", "--build-speed-runs", "1"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    speed = json.loads((tmp_path / "build.json").read_text())["build"]["samples"]
    cell = speed["cells"]["needle@2048"]
    assert "error" not in cell, cell
    assert cell["same_samples"] and cell["old"][0]["code"] != cell["new"][0]["code"]
    assert len(cell["new"][0]["per_sample_s"]) == 2 and cell["ratio_later"] > 0
    assert "Sample builders" in (tmp_path / "README.md").read_text()


def test_vllm_part_another_grid_writes_its_own_file_and_keeps_the_default(tmp_path: Path) -> None:
    """A grid other than the default (or the prefix-only lever set) goes to vllm-<lengths>x<n>[-prefix].json; the
    README keeps the default vllm.json's table and adds one per other grid."""
    from benchmarks.results_readme import vllm_grid_lines
    from benchmarks.vllm_backends import LENGTHS, result_name

    assert result_name(LENGTHS, 5, 1) == "vllm.json"
    assert result_name([1024, 2048, 4096], 5, 4, "prefix") == "vllm-1024-2048-4096x20-prefix.json"
    assert result_name(LENGTHS, 5, 4) == "vllm-1024-2048x20.json"
    v = {"grid": {"lengths": [4096], "depths": 5, "haystacks": 4}, "levers": "prefix", "samples": 20}
    v |= {"prefix_bound": 1.43, "summary": {}, "backends": {}, "load_average_1min": {"start": 0.5}}
    (tmp_path / "vllm-4096x20-prefix.json").write_text(json.dumps({"environment": {"date_utc": "D"}, "vllm": v}))
    text = "\n".join(vllm_grid_lines(tmp_path))
    assert "[4096] x 5 depths x 4 haystacks (20 samples; `vllm-4096x20-prefix.json`)" in text
    assert "Measured D, levers switched off: prefix; 1-minute load average: start 0.5" in text


def test_vllm_part_rerun_keeps_the_cache_study(tmp_path: Path, monkeypatch) -> None:
    """A new run of the vllm part keeps the prefix-cache study (benchmarks/vllm_priming.py) its file held."""
    import benchmarks.vllm_backends as vb
    from benchmarks.__main__ import main

    def measured(*args: object, **kwargs: object) -> dict:
        return {"grid": {"lengths": [1024, 2048], "depths": 5, "haystacks": 1}, "prefix_bound": 1.43, "samples": 10}

    monkeypatch.setattr(vb, "run_vllm_part", measured)
    committed = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "vllm.json"
    study = json.loads(committed.read_text())["vllm"]["cache_study"]
    (tmp_path / "vllm.json").write_text(json.dumps({"vllm": {"cache_study": study}}))
    assert main(["--parts", "vllm", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "vllm.json").read_text())["vllm"]["cache_study"] == study
    assert "vLLM's prefix cache, counted" in (tmp_path / "README.md").read_text()
