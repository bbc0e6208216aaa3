"""A `vllm` bench grid survives a stop and spans sittings: each job's checkpoint (benchmarks/vllm_checkpoint.py),
the child's reuse of a finished result, the parent's live progress, and one results file merged over sittings
(benchmarks/vllm_sittings.py). The `hf:` resume runs the real SmolLM2 on a two-sample grid, stopped for real after
its first request; nothing is timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import benchmarks.vllm_checkpoint as vc


def _part(backends: dict[str, Any], lengths: list[int] | None = None, levers: str = "prefix") -> dict[str, Any]:
    grid = {"lengths": lengths or [1024], "depths": 5, "haystacks": 1}
    return {"grid": grid, "levers": levers, "samples": 5, "prefix_bound": 1.43, "cpus": 2, "backends": backends,
            "load_average_1min": {"start": 0.5, **{f"after {b}": 1.0 for b in backends}}}  # fmt: skip


def _res(s: float, key: str = "ours") -> dict[str, Any]:
    rows = [{"id": f"s{i}", "prompt_tokens": 1000, "text": "42", "score": 1.0} for i in range(5)]
    passes = [{"key": k, "label": k, "batch": 1, "seconds": 5 * x, "seconds_per_sample": x, "per_length_s": {},
               "rows": rows} for k, x in ((key, s), ("no_prefix", 1.2 * s))]  # fmt: skip
    return {"passes": passes}


def test_checkpoint_round_trip_keyed_by_job_grid_and_samples(tmp_path: Path) -> None:
    params = {"lengths": [1024], "depths": 5, "haystacks": 1, "levers": "prefix"}
    cp = vc.Checkpoint("hf", params, root=tmp_path)
    assert cp.load() is None and cp.resumes({}, "from_step", 0) == []
    cp.save({"next": 3, "rows": {"ours": [1, 2, 3]}}, ["a", "b"])
    assert cp.load(["a", "b"])["next"] == 3 and cp.saved_utc()
    assert cp.load(["b", "a"]) is None  # other samples, or the same in another order: a fresh start
    assert vc.Checkpoint("vllm", params, root=tmp_path).load(["a", "b"]) is None
    assert vc.Checkpoint("hf", {**params, "levers": "all"}, root=tmp_path).load(["a", "b"]) is None
    again = cp.resumes(cp.load(["a", "b"]), "from_request", 3)
    assert again == [{"from_request": 3, "saved_utc": cp.saved_utc()}]
    cp.path.write_text("{not json")  # a torn file (atomic writes prevent it) reads as none
    assert cp.load(["a", "b"]) is None
    cp.clear()
    assert not cp.path.exists()


HERE = {"model": "Xeon (model 167)", "isa": "avx2 avx512f", "matmul_gflops": 100.0}
"""The machine record each sitting of these tests gets (the real one runs a one-second calibration)."""


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import benchmarks.vllm_sittings as vs

    monkeypatch.setattr(vs, "machine", lambda: dict(HERE))
    return HERE


def test_sittings_merge_keeps_earlier_backends_and_recomputes_the_summary(here) -> None:
    from benchmarks.vllm_sittings import measured_now, merge_sittings, sittings_line

    first = {"environment": {"date_utc": "2026-12-03T12:00:00Z"}, "vllm": _part({"hf": _res(2.0)})}
    second = merge_sittings(_part({"served": _res(1.0)}), first, "2026-12-03T13:00:00Z")
    assert list(second["backends"]) == ["hf", "served"]
    assert second["summary"]["hf"]["seconds_per_sample"] == 2.0 and second["summary"]["served"]["score"] == 1.0
    assert [s["backends"] for s in second["sittings"]] == [["hf"], ["served"]]
    assert [s["date_utc"] for s in second["sittings"]] == ["2026-12-03T12:00:00Z", "2026-12-03T13:00:00Z"]
    line = sittings_line(second)
    assert line.startswith("Measured in 2 sittings: 2026-12-03T12:00:00Z (hf;") and "after served 1.0" in line

    # a third sitting re-measures hf: the new one replaces it, the earlier sitting keeps only what it still holds
    third = merge_sittings(_part({"hf": _res(3.0)}), {"vllm": second}, "2026-12-03T14:00:00Z")
    assert third["summary"]["hf"]["seconds_per_sample"] == 3.0
    assert [s["backends"] for s in third["sittings"]] == [["served"], ["hf"]]

    # a backend that fails now keeps the earlier measurement, the failure written into the sitting
    failed = merge_sittings(_part({"served": {"error": "exit 1 after 9 s"}}), {"vllm": second}, "D4")
    assert failed["summary"]["served"]["seconds_per_sample"] == 1.0
    assert failed["sittings"][-1] == {"date_utc": "D4", "backends": [], "load_average_1min": {"start": 0.5,
                                      "after served": 1.0}, "machine": here,
                                      "failed": {"served": "exit 1 after 9 s"}}  # fmt: skip
    assert "served failed: exit 1 after 9 s" in sittings_line(failed)
    assert measured_now(failed, ["served"]) == []  # its checkpoint stays for the next sitting to resume from
    assert measured_now(_part({"hf": {"error": "exit -9"}}), ["hf"]) == []
    assert measured_now(second, ["served"]) == ["served"]

    # another grid or lever set is another measurement: replaced whole
    other = merge_sittings(_part({"served": _res(1.0)}, lengths=[2048]), first, "D5")
    assert list(other["backends"]) == ["served"] and len(other["sittings"]) == 1
    assert list(merge_sittings(_part({"served": _res(1.0)}, levers="all"), first, "D5")["backends"]) == ["served"]


def test_lm_evals_ratio_compares_only_backends_measured_on_its_machine(here, monkeypatch) -> None:
    import benchmarks.vllm_sittings as vs
    from benchmarks.vllm_table import table

    old = {"environment": {"date_utc": "D1"}, "vllm": _part({"served": _res(4.0)})}  # no machine recorded then
    part = vs.merge_sittings(_part({"vllm": _res(2.0), "lm_eval": _res(2.2)}), old, "D2")
    assert part["summary"]["vllm"]["peer_over_ours"] == 1.1  # one sitting, one machine
    assert "peer_over_ours" not in part["summary"]["served"]
    assert part["summary"]["served"]["peer_over_ours_other_machine"] == 0.55
    text = table(part)
    assert "| **1.10x** |" in text and "| (0.55x, other machine) |" in text
    assert "machine not recorded" in text and "groups: served; vllm + lm_eval" in text

    # a later sitting on the same processor at the same speed compares; at a third of the speed it does not
    monkeypatch.setattr(vs, "machine", lambda: {**HERE, "matmul_gflops": 95.0})
    hf = vs.merge_sittings(_part({"hf": _res(1.0)}), {"vllm": part}, "D3")
    assert hf["summary"]["hf"]["peer_over_ours"] == 2.2 and "groups: served; vllm + lm_eval + hf" in table(hf)
    monkeypatch.setattr(vs, "machine", lambda: {**HERE, "matmul_gflops": 33.0})
    slow = vs.merge_sittings(_part({"hf": _res(1.0)}), {"vllm": part}, "D3")
    assert "peer_over_ours" not in slow["summary"]["hf"]
    assert not vs.same_machine(HERE, {**HERE, "isa": "avx2"}) and not vs.same_machine(HERE, None)


def test_the_machine_record_names_the_processor_and_its_speed(tmp_path: Path) -> None:
    from benchmarks.machine import cpu_fingerprint
    from benchmarks.vllm_sittings import machine

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel\t\t: 167\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 amx_tile sse\n")
    assert cpu_fingerprint(info) == {"model": "Some Xeon (model 167)", "isa": "avx2 amx_tile"}
    real = machine()
    assert real["matmul_gflops"] > 0 and real["model"]


def test_a_finished_job_result_is_reused_by_the_child_and_its_progress_shows(tmp_path: Path, capfd) -> None:
    """A sitting stopped after a job finished, before the part wrote its file: the next sitting's child process
    takes that result from the checkpoint instead of measuring again, and its progress line reaches the console."""
    from benchmarks.vllm_backends import clear_checkpoints, spawn

    params = {"lengths": [77777], "depths": 5, "haystacks": 1, "levers": "prefix"}  # a grid no sitting runs
    cp = vc.Checkpoint("hf", params)
    cp.save({"result": {"backend": "hf", "passes": [], "marker": "from the checkpoint"}})
    try:
        got = spawn(sys.executable, "hf", params, timeout_s=300)
        assert got["marker"] == "from the checkpoint" and got["process_s"] > 0
        assert "hf: the finished result of an earlier sitting" in capfd.readouterr().err
        clear_checkpoints({"hf": params})
        assert not cp.path.exists()
    finally:
        cp.clear()


@pytest.fixture
def stop_after_first_request(monkeypatch):
    """Make the hf job's progress line after request 1 raise, as a stop would: its checkpoint is saved just before."""
    import benchmarks.vllm_hf_job as job

    real = job.log

    def log(message: str) -> None:
        real(message)
        if message.startswith("  request 1/"):
            raise KeyboardInterrupt("stopped")

    monkeypatch.setattr(job, "log", log)
    return monkeypatch


def test_hf_job_resumes_after_a_stop_with_the_same_rows(tmp_path: Path, stop_after_first_request, capsys) -> None:
    """The real `hf:` job on two needle samples, stopped after its first request: the rerun resumes at the second,
    says so in its result, and serves exactly what an uninterrupted run serves (same ids, prompts, replies)."""
    from benchmarks.vllm_hf_job import hf_job

    stop_after_first_request.setattr(vc, "ROOT", tmp_path)
    params = {"lengths": [512], "depths": 2, "haystacks": 1, "levers": "prefix"}
    ids = ["L512-d0.00-r0", "L512-d1.00-r0"]
    stale = {"next": 1, "rows": {"ours": [{}], "no_prefix": [{}]}, "per_len": {}, "spent": {}}
    vc.Checkpoint("hf", params).save(stale, ids)  # an older job's lanes: not resumed from
    with pytest.raises(KeyboardInterrupt):
        hf_job(params)
    saved = vc.Checkpoint("hf", params).load()
    assert saved["next"] == 1 and "result" not in saved  # one request of each lane saved; no result yet
    assert {k: len(v) for k, v in saved["rows"].items()} == {"ours": 1, "no_prefix": 1, "no_suffix_chunk": 1}
    assert not saved.get("resumed") and "holds other lanes: measuring afresh" in capsys.readouterr().err
    stop_after_first_request.undo()
    stop_after_first_request.setattr(vc, "ROOT", tmp_path)
    resumed = hf_job(params)
    assert resumed["resumed"][0]["from_request"] == 1 and resumed["resumed"][0]["saved_utc"]
    vc.Checkpoint("hf", params).clear()
    fresh = hf_job(params)
    assert "resumed" not in fresh
    for a, b in zip(resumed["passes"], fresh["passes"], strict=True):
        keep = ("id", "length", "depth", "prompt_tokens", "text", "status")
        assert [{k: r[k] for k in keep} for r in a["rows"]] == [{k: r[k] for k in keep} for r in b["rows"]]
        assert len(a["rows"]) == 2 and a["seconds"] > 0
    json.dumps(resumed)  # the result (checkpointed rows included) is plain JSON


def test_run_plan_resumes_after_the_last_saved_pass_and_keeps_the_peer_between_ours() -> None:
    """The `vllm` job's plan (ours, salted, ours with lm-eval's pass after the first two), stopped during the
    salted pass, then resumed: no finished pass runs twice, and lm-eval's second pass still comes before our last."""
    from benchmarks.vllm_passes import run_plan

    ran: list[str] = []
    saves: list[dict] = []
    stop = {"salted": True}

    def step(name: str):
        def run() -> dict:
            if stop.get(name):
                stop[name] = False
                raise KeyboardInterrupt(name)
            ran.append(name)
            return {"key": name}

        return run

    def peer() -> dict:
        ran.append("lm-eval")
        return {"key": "lm-eval"}

    plan = [step("ours"), step("salted"), step("ours")]
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, {}, lambda st: saves.append(json.loads(json.dumps(st))), peer, (0, 1))
    assert ran == ["ours", "lm-eval"] and saves[-1]["done"] == 1 and saves[-1]["peer_steps"] == [0]
    state = run_plan(plan, saves[-1], lambda st: saves.append(json.loads(json.dumps(st))), peer, (0, 1))
    assert ran == ["ours", "lm-eval", "salted", "lm-eval", "ours"]
    assert [r["key"] for r in state["runs"]] == ["ours", "salted", "ours"] and state["peer_steps"] == [0, 1]
    assert run_plan(plan, state, saves.append, peer, (0, 1)) == state and len(ran) == 5  # all done: nothing runs
