"""`export inspect`: `inspect eval` (inspect-ai 0.3.285) runs our exported needle and cross_paragraph tasks against
`longctx-eval serve` through inspect's OpenAI-compatible provider and gets our `run`'s replies and per-sample
scores, sample by sample (slow); in process, the written task sends our prompts, answer prefixes and budgets and
scores with our scorer (fast)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from interop_reference import LENGTH, cross_dataset, interop_datasets, interop_ours  # noqa: F401  (fixtures)
from servers import SERVE_MODEL

from longctx_eval.cli import main
from longctx_eval.export.targets import EXPORTABLE

MOCK_REPLY = "Default output from mockllm/model"
"""The reply the fast test's stand-in generate gives (inspect's mock model's text)."""


def export(task: str, dataset: Path, out: Path) -> Path:
    assert main(["export", "inspect", task, "--dataset", str(dataset), "--out", str(out)]) == 0
    return out


def inspect_eval(file: Path, model: str, logs: Path, env: dict[str, str] | None = None) -> dict:
    """`inspect eval FILE --model MODEL` (as `python -m inspect_ai`, the same CLI) in FILE's folder (inspect takes
    a relative task path); its one JSON log."""
    pytest.importorskip("inspect_ai", reason="inspect-ai is the `interop` extra (`make test` installs it)")
    cmd = [sys.executable, "-m", "inspect_ai", "eval", file.name, "--model", model, "--log-dir", str(logs)]
    cmd += ["--log-format", "json", "--display", "plain", "--max-connections", "1"]
    done = subprocess.run(
        cmd, cwd=file.parent, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = logs.glob("*.json")
    data = json.loads(log.read_text())
    assert data["status"] == "success", data.get("error")
    return data


def test_the_file_is_an_inspect_task_sending_our_prompts(cross_dataset, tmp_path):  # noqa: F811
    """The written @task in process (inspect's mock model needs tiktoken's files from the network): its samples,
    the messages and budget its solver generates with, and its scorer against ours."""
    pytest.importorskip("inspect_ai", reason="inspect-ai is the `interop` extra (`make test` installs it)")
    from inspect_ai.model import ModelName, ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    from data_builders.interop import exported_task

    file = export("cross_paragraph", cross_dataset, tmp_path / "cross_task.py")
    spec = importlib.util.spec_from_file_location("cross_task", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = module.longctx_cross_paragraph()
    assert (task.config.temperature, task.config.top_p, task.config.seed) == (0.0, 1.0, 0)
    assert task.config.extra_body == {"add_generation_prompt": False, "continue_final_message": True}
    ours = exported_task("cross_paragraph", str(cross_dataset))
    samples = {s.id: s for s in ours.samples(LENGTH)}
    assert sorted(s.id for s in task.dataset) == sorted(samples)
    for sample in task.dataset:
        p = ours.prompted(samples[sample.id])
        state = TaskState(
            ModelName("mockllm/model"), sample.id, 1, sample.input, list(sample.input), metadata=sample.metadata
        )
        sent: dict = {}

        async def generate(state, sent=sent, **config):
            sent.update(config, messages=[(m.role, m.text) for m in state.messages])
            state.output = ModelOutput.from_content("mockllm/model", MOCK_REPLY)
            return state

        state = asyncio.run(task.solver(state, generate))
        assert sent == {
            "max_tokens": p.max_new_tokens,
            "messages": [("user", p.prompt), ("assistant", p.answer_prefix)],
        }
        score = asyncio.run(task.scorer[0](state, Target(sample.target)))
        assert score.value == ours.score(samples[sample.id], MOCK_REPLY)
        assert score.value["score"] == 0.0 and ours.score(samples[sample.id], " " + sample.target)["score"] == 1.0


def test_an_out_that_is_not_a_python_file_is_refused(cross_dataset, tmp_path, capsys):  # noqa: F811
    assert main(["export", "inspect", "cross_paragraph", "--dataset", str(cross_dataset), "--out", str(tmp_path)]) == 2
    assert "expected a .py file for inspect_ai" in capsys.readouterr().err


@pytest.mark.interop  # measured here (2 cores shared by 5 jobs): 97 s of inspect, after serve starts and the fixtures
def test_inspect_against_serve_reproduces_our_replies_and_scores(
    interop_datasets,  # noqa: F811
    interop_ours,  # noqa: F811
    serve_hf,
    tmp_path,
):
    counts = {}
    env = {"LONGCTX_BASE_URL": serve_hf, "LONGCTX_API_KEY": "unused"}  # openai-api/<service>/<model>
    for task, dataset in interop_datasets.items():
        file = export(task, dataset, tmp_path / f"{task}_task.py")
        log = inspect_eval(file, f"openai-api/longctx/{SERVE_MODEL}", tmp_path / f"logs-{task}", env)
        ours = interop_ours[task]
        assert sorted(s["id"] for s in log["samples"]) == sorted(ours)
        same_text = same_scores = 0
        for s in log["samples"]:
            mine = ours[s["id"]]
            value = s["scores"]["longctx_scorer"]["value"]
            same_text += s["output"]["choices"][0]["message"]["content"] == mine["answer"]
            same_scores += all(value[f] == mine["scores"][f] for f in EXPORTABLE[task].fields)
        counts[task] = (same_text, same_scores, len(log["samples"]))
    print("inspect via serve vs ours (equal replies, equal scores, samples):", counts)
    assert all(text == scores == n for text, scores, n in counts.values()), counts
