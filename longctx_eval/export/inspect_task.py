"""`export inspect`: an inspect_ai task file: an `@task` over the built dataset with our scorer as an `@scorer`.

Each Sample's input is the task's prompt as one user turn; the solver appends the task's answer prefix as a
final assistant message and generates at most the sample's own budget, greedy (temperature 0), asking the
server to continue that message (`continue_final_message`, which `longctx-eval serve` and vLLM honour), so a
served model receives the token ids our `hf:` adapter renders. The scorer calls the task's own scorer on the
continuation through `data_builders.interop`.
"""

from __future__ import annotations

from pathlib import Path

from longctx_eval.atomic_io import atomic_write_text, ensure_dir
from longctx_eval.errors import ConfigError
from longctx_eval.export.built_dataset import BuiltDataset
from longctx_eval.export.targets import ExportTarget

TEMPLATE = '''\
"""inspect_ai task of longctx-eval's {task!r} task (written by `longctx-eval export inspect`).

Samples come from the dataset built by `longctx-eval build {task}` at DATASET; each prompt, answer prefix
and answer budget come from the task's own prompt function and each reply is scored by the task's own
scorer, through `data_builders.interop`: longctx-eval must be importable where inspect runs (a checkout
installed with `pip install -e .`), so the scoring rule is ours by construction, not a copy.

    inspect eval {file} --model openai-api/longctx/<served-name>   # LONGCTX_BASE_URL=http://HOST:PORT/v1
"""

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, GenerateConfig
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver

from data_builders.interop import exported_task

TASK = {task!r}
DATASET = {dataset!r}
LENGTHS = {lengths!r}
FIELDS = {fields!r}
VERSION = {version!r}
# greedy; the answer prefix (a final assistant message) is continued, as inspect's vllm provider asks vLLM to
CONTINUE = {{"add_generation_prompt": False, "continue_final_message": True}}
GREEDY = GenerateConfig(temperature=0.0, top_p=1.0, seed=0, extra_body=CONTINUE)
_SAMPLES = {{}}  # sample id -> the task's Sample, for the scorer


def _task():
    return exported_task(TASK, DATASET)


def _dataset():
    samples = []
    for length in LENGTHS:
        for ours in _task().samples(length):
            _SAMPLES[ours.id] = ours
            p = _task().prompted(ours)
            samples.append(
                Sample(
                    id=ours.id,
                    input=[ChatMessageUser(content=p.prompt)],
                    target=ours.gold["answers"][0],
                    metadata={{"answer_prefix": p.answer_prefix, "max_new_tokens": p.max_new_tokens, "length": length}},
                )
            )
    return MemoryDataset(samples, name=f"longctx-{{TASK}}")


@solver
def continue_answer_prefix():
    """Append the answer prefix as the assistant's unfinished turn, then generate its own budget."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        prefix = state.metadata["answer_prefix"]
        if prefix:
            state.messages.append(ChatMessageAssistant(content=prefix))
        return await generate(state, max_tokens=int(state.metadata["max_new_tokens"]))

    return solve


@scorer(metrics={{f: [mean()] for f in FIELDS}})
def longctx_scorer():
    """Our score fields of the reply (the continuation after the answer prefix)."""

    async def score(state: TaskState, target: Target) -> Score:
        reply = state.output.completion
        return Score(value=_task().score(_SAMPLES[state.sample_id], reply), answer=reply)

    return score


@task
def longctx_{task}():
    """longctx-eval's {task!r} task (version {version}) over the built dataset, greedy, scored by our scorer."""
    return Task(
        dataset=_dataset(),
        solver=continue_answer_prefix(),
        scorer=longctx_scorer(),
        config=GREEDY,
        version=VERSION,  # the longctx-eval task's version
        metadata={{"longctx_eval_task": TASK, "dataset": DATASET}},
    )
'''


def write_inspect(target: ExportTarget, built: BuiltDataset, version: str, out: Path) -> list[Path]:
    """Write the task file `out`; the paths written."""
    if out.is_dir():
        raise ConfigError(f"--out {out}: is a folder; expected a .py file to write")
    ensure_dir(out.parent)
    text = TEMPLATE.format(
        task=target.task,
        file=out.name,
        dataset=str(built.folder),
        lengths=list(built.lengths),
        fields=target.fields,
        version=version,
    )
    atomic_write_text(out, text)
    return [out]
