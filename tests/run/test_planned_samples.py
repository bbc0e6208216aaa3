"""Planned datasets: a limit is applied to the plan, so a run builds what it selects, and builds it exactly as
the whole grid would; a grid past the bounds is refused with one line before anything is built."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, TaskDefinitionError
from longctx_eval.run import plan_samples as planning
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.sample_cache import SampleCache
from longctx_eval.run.sampling import choose_samples
from longctx_eval.sample import Sample
from longctx_eval.sample_plan import Planned, PlannedDataset

SMALL = {
    "needle": {"depths": 3, "per_cell": 2, "source": "synthetic"},
    "needle_lowlex": {"depths": 3, "per_cell": 2, "source": "synthetic"},
    "needle_multikey": {"depths": 3, "per_cell": 2, "source": "synthetic"},
    "needle_multiquery": {"per_length": 4, "source": "synthetic"},
    "needle_multivalue": {"per_length": 4, "source": "synthetic"},
    "cross_paragraph": {"hops": "2,3", "per_cell": 2, "source": "synthetic"},
    "retrieval": {"docs_per_length": 2, "topics": 2, "source": "synthetic"},
}
LENGTHS = {
    "cross_paragraph": (1024,),
    "retrieval": (512, 640),
    "needle_multivalue": (640, 768),
    "needle_multikey": (640, 768),
}


@pytest.fixture(scope="module")
def registry():
    return discover()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_limited_plan_builds_exactly_what_the_whole_grid_would(registry, name, minilm_tokenizer):
    """The planned and limited samples equal the whole grid's samples limited after building (same ids, order,
    contexts, gold and metadata), for several limits; every entry of a task's grid is planned."""
    info = registry.get(name)
    lengths = LENGTHS.get(name, (448, 512))
    task = info.build(SMALL[name], lengths=list(lengths), seed=3, tokenizer=minilm_tokenizer)
    assert isinstance(task.dataset, PlannedDataset)
    whole = list(task.samples())
    assert [p.id for p in task.dataset.plan()] == [s.id for s in whole]
    for limit in (1, 2, 3, None):
        plan = TaskPlan(info, lengths, limit, SMALL[name])
        got = plan_samples(plan, 3, minilm_tokenizer, SampleCache(None, 0)).samples
        assert got == choose_samples(info, whole, limit).samples, limit


def test_only_the_chosen_samples_are_built(registry, minilm_tokenizer, monkeypatch):
    """A 101 x 40 needle grid limited to one sample a length builds two needle documents, not 8,080 (the real
    builder, counted)."""
    from data_builders.needle import grid

    real, calls = grid.build_needle_doc, []

    def counted(*args, **kwargs):
        calls.append(args[3])  # the depth
        return real(*args, **kwargs)

    monkeypatch.setattr(grid, "build_needle_doc", counted)
    info = registry.get("needle")
    plan = TaskPlan(info, (448, 512), 1, {"depths": 101, "per_cell": 40, "source": "synthetic"})
    out = plan_samples(plan, 0, minilm_tokenizer, SampleCache(None, 0))
    assert [s.id for s in out.samples] == ["L448-d0.50-r0", "L512-d0.50-r0"] and calls == [0.5, 0.5]
    assert sum(out.planned.values()) == 2 * 101 * 40  # coverage still counts the whole grid


def _dataset(plan: list[Planned], build: list[Sample]) -> PlannedDataset:
    return PlannedDataset(lambda: iter(plan), lambda chosen: iter(build))


def _sample(id: str, tokens: int, depth: float | None = None) -> Sample:
    meta = {"target_tokens": tokens} if depth is None else {"target_tokens": tokens, "depth": depth}
    return Sample(id, "context", "question", {"answers": ["x"]}, meta)


def test_a_plan_that_disagrees_with_what_is_built_is_a_task_bug():
    plan = [Planned("a", {"target_tokens": 10, "depth": 0.5})]
    with pytest.raises(TaskDefinitionError, match="built as 'b'"):
        list(_dataset(plan, [_sample("b", 10, 0.5)])())
    with pytest.raises(TaskDefinitionError, match="depth planned 0.5, built 0.25"):
        list(_dataset(plan, [_sample("a", 10, 0.25)])())
    with pytest.raises(TaskDefinitionError, match="was not built"):
        list(_dataset(plan, [])())
    with pytest.raises(TaskDefinitionError, match="built but not planned"):
        list(_dataset(plan, [_sample("a", 10, 0.5), _sample("c", 10, 0.5)])())


def test_a_grid_past_the_bounds_is_refused_before_anything_is_built(registry, minilm_tokenizer, monkeypatch):
    """The plan is read no further than MAX_PLANNED + 1 entries, and a selection past MAX_BUILT is refused;
    nothing is built in either case (the builder would record it)."""
    info = registry.get("needle")
    monkeypatch.setattr(planning, "MAX_PLANNED", 1000)
    monkeypatch.setattr(planning, "MAX_BUILT", 50)
    huge = TaskPlan(info, (448, 512), 1, {"depths": 101, "per_cell": 1000, "source": "synthetic"})
    with pytest.raises(ConfigError, match="holds more than 1,000 samples"):
        plan_samples(huge, 0, minilm_tokenizer, SampleCache(None, 0))
    wide = TaskPlan(info, (448,), None, {"depths": 101, "per_cell": 1, "source": "synthetic"})
    with pytest.raises(ConfigError, match=r"101 needle samples at 448 would be built; at most 50 .* --limit"):
        plan_samples(wide, 0, minilm_tokenizer, SampleCache(None, 0))


def test_long_building_prints_progress(registry, minilm_tokenizer, monkeypatch, capsys):
    """Off a terminal a long build prints 'building ... n/total samples' lines (here every line, interval 0)."""
    monkeypatch.setattr("longctx_eval.progress.PRINT_EVERY_S", 0.0)
    info = registry.get("needle")
    plan = TaskPlan(info, (448,), 2, {"depths": 5, "source": "synthetic"})
    plan_samples(plan, 0, minilm_tokenizer, SampleCache(None, 0))
    err = capsys.readouterr().err
    assert "building needle samples at 448: 1/2 samples" in err and "2/2 samples" in err


def _campaign_grid(out: Path, *extra: str) -> subprocess.CompletedProcess:
    """`run --model bm25 --tasks needle --lengths 1024` on the campaign's 101 x 1,000 grid, with `extra`."""
    grid = ["--task-arg", "needle.depths=101", "--task-arg", "needle.per_cell=1000"]
    cmd = ["run", "--model", "bm25", "--tasks", "needle", "--lengths", "1024", *grid, *extra, "--out", str(out)]
    return subprocess.run([sys.executable, "-m", "longctx_eval.cli", *cmd], capture_output=True, text=True, timeout=600)


def test_the_campaigns_grid_with_limit_one_plans_at_once(tmp_path):
    """The fault campaign's case (depths=101, per_cell=1000, --limit 1, --dry-run) printed nothing for 105 s; it
    now builds one sample and prints its table (asserted by what it prints, not by how long it took)."""
    t0 = time.perf_counter()
    out = _campaign_grid(tmp_path / "o", "--limit", "1", "--dry-run")
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("bm25"))
    assert row.split()[1:3] == ["needle", "1"], row  # one request
    print(f"planned in {time.perf_counter() - t0:.1f} s")


def test_an_oversized_grid_is_refused_by_run_before_any_model_loads(tmp_path):
    """101 depths x 1,000 repetitions at one length with no --limit: one line, exit 2, no output folder made
    (the check reads the plan, which needs no tokenizer and no model)."""
    out = _campaign_grid(tmp_path / "o")
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: task 'needle': 101,000 needle samples at 1024 would be built; at most 100,000 per run of a task; "
        "expected --limit (samples per length), fewer lengths or smaller grid arguments"
    ]
    assert not (tmp_path / "o").exists()
