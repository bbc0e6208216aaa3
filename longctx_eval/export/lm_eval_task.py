"""`export lm-eval`: a task folder for lm-evaluation-harness (0.4.13): one YAML per length, a group, utils.py.

The YAML loads one length's parquet file of the built dataset; `utils.py` (lm-eval's convention for a task's
Python hooks) adds each row's prompt, answer prefix and budget from the task's own prompt function
(`process_docs`), gives each request its own budget (`LongctxTask`), and scores the generated text with the
task's own scorer (`process_results`), all through `data_builders.interop`. Generation is greedy and stops
only at the model's end-of-sequence token or the budget, as our `hf:` adapter does; the answer prefix is
lm-eval's `gen_prefix` (after the chat template's generation prompt with `--apply_chat_template`, after a
newline without).
"""

from __future__ import annotations

import json
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_text, ensure_dir
from longctx_eval.errors import ConfigError
from longctx_eval.export.built_dataset import BuiltDataset
from longctx_eval.export.targets import ExportTarget

UTILS = '''\
"""lm-evaluation-harness hooks of longctx-eval's {task!r} task (written by `longctx-eval export lm-eval`).

Rows come from the dataset built by `longctx-eval build {task}` at DATASET; each row's prompt, answer prefix
and answer budget come from the task's own prompt function, and the generated text is scored by the task's
own scorer, through `data_builders.interop`: longctx-eval must be importable where lm-eval runs (a checkout
installed with `pip install -e .`), so the scoring rule is ours by construction, not a copy.
"""

from lm_eval.api.task import ConfigurableTask

from data_builders.interop import exported_task

TASK = {task!r}
DATASET = {dataset!r}


def _task():
    return exported_task(TASK, DATASET)


def process_docs(dataset):
    """Each row with the task's prompt, answer prefix (lm-eval's gen_prefix), budget and gold answer."""

    def prompted(row):
        sample = _task().sample(row)
        p = _task().prompted(sample)
        return {{
            "prompt": p.prompt,
            "answer_prefix": p.answer_prefix,
            "max_new_tokens": p.max_new_tokens,
            "gold": sample.gold["answers"][0],
        }}

    return dataset.map(prompted, load_from_cache_file=False)


def doc_to_text(doc):
    """The task's prompt, sent as one user turn."""
    return doc["prompt"]


def process_results(doc, results):
    """Our score fields of the generated continuation (the text after the answer prefix)."""
    task = _task()
    return task.score(task.sample(doc), results[0])


class LongctxTask(ConfigurableTask):
    """The YAML's task, except that each request generates at most its own row's budget (max_new_tokens)."""

    def __init__(self, config=None):
        super().__init__(config={{k: v for k, v in (config or {{}}).items() if k != "class"}})

    def construct_requests(self, doc, ctx, **kwargs):
        request = super().construct_requests(doc, ctx, **kwargs)
        context, generation = request.arguments
        request.arguments = (context, {{**generation, "max_gen_toks": int(doc["max_new_tokens"])}})
        return request
'''


def task_name(task: str, length: int) -> str:
    """The lm-eval task name of one length: `longctx_needle_1024`."""
    return f"longctx_{task}_{length}"


def group_name(task: str) -> str:
    """The lm-eval group of every exported length: `longctx_needle`."""
    return f"longctx_{task}"


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def task_yaml(target: ExportTarget, built: BuiltDataset, length: int, version: str) -> str:
    """The YAML of one length's lm-eval task."""
    metrics = "".join(
        f"  - metric: {f}\n    aggregation: mean\n    higher_is_better: {'false' if f in LOWER_IS_BETTER else 'true'}\n"
        for f in target.fields
    )
    return (
        f"# longctx-eval task {target.task!r} at {length} tokens, written by `longctx-eval export lm-eval`.\n"
        f"task: {task_name(target.task, length)}\n"
        "class: !function utils.LongctxTask\n"
        "dataset_path: parquet\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {_q(str(built.parquet_of(length)))}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "process_docs: !function utils.process_docs\n"
        "doc_to_text: !function utils.doc_to_text\n"
        "doc_to_target: gold\n"
        "gen_prefix: answer_prefix\n"
        "# without a chat template the answer prefix follows the prompt after a newline (as our hf: adapter)\n"
        'target_delimiter: "\\n"\n'
        "generation_kwargs:\n"
        "  until: []  # only the model's end-of-sequence token stops a reply, as in longctx-eval\n"
        "  do_sample: false\n"
        "  temperature: 0.0\n"
        "  # max_gen_toks: each request gets its own row's budget (utils.LongctxTask)\n"
        "process_results: !function utils.process_results\n"
        "metric_list:\n"
        f"{metrics}"
        "metadata:\n"
        f"  version: {_q(version)}\n"
        f"  longctx_eval_task: {_q(target.task)}\n"
        f"  dataset: {_q(str(built.folder))}\n"
    )


LOWER_IS_BETTER = frozenset({"empty", "intermediate", "distractor"})
"""Score fields that are failure rates."""


def write_lm_eval(target: ExportTarget, built: BuiltDataset, version: str, out: Path) -> list[Path]:
    """Write the task folder to `out` (one YAML per length, the group YAML, utils.py); the paths written."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder")
    out = ensure_dir(out)
    written = []
    for length in built.lengths:
        path = out / f"{task_name(target.task, length)}.yaml"
        atomic_write_text(path, task_yaml(target, built, length, version))
        written.append(path)
    members = "".join(f"  - {task_name(target.task, n)}\n" for n in built.lengths)
    group = out / f"{group_name(target.task)}.yaml"
    atomic_write_text(group, f"group: {group_name(target.task)}\ntask:\n{members}")
    utils = out / "utils.py"
    atomic_write_text(utils, UTILS.format(task=target.task, dataset=str(built.folder)))
    return [*written, group, utils]
