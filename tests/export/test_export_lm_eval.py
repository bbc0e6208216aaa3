"""`export lm-eval`: lm-evaluation-harness 0.4.13 runs our exported needle and cross_paragraph tasks with its own
`--model hf` on SmolLM2 at 1K and gets our `run`'s replies and per-sample scores, sample by sample (slow); its
task loader builds our prompts, answer prefixes and budgets from the exported folder (fast); bad input is one
line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from interop_reference import LENGTH, cross_dataset, interop_datasets, interop_ours  # noqa: F401  (fixtures)

from longctx_eval.cli import main
from longctx_eval.export.targets import EXPORTABLE


def test_every_exportable_task_has_a_row_reader():
    from data_builders.interop import ROW_READERS

    assert set(ROW_READERS) == set(EXPORTABLE)


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ("retrieval", "task 'retrieval' cannot be exported: it is not scored on generated text"),
        ("posprobe", "task 'posprobe' cannot be exported: it is not scored on generated text"),
        ("coref_synthetic", "task 'coref_synthetic' cannot be exported yet"),  # generation, but not one request of ours
        ("needle_multiquery", "task 'needle_multiquery' cannot be exported yet"),
        ("needel", "unknown task 'needel'. Did you mean 'needle'?"),
    ],
)
@pytest.mark.parametrize("target", ["lm-eval", "inspect"])
def test_a_task_that_cannot_export_is_one_line_exit_2(target, task, needle, tmp_path, capsys):
    out = tmp_path / ("out" if target == "lm-eval" else "out.py")
    assert main(["export", target, task, "--dataset", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) <= 2  # rich may wrap one long line
    assert not out.exists()


def test_a_folder_without_a_built_dataset_is_refused(tmp_path, capsys):
    assert main(["export", "lm-eval", "needle", "--dataset", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no README.md dataset card; expected a folder written by `longctx-eval build`" in capsys.readouterr().err


def test_a_dataset_of_another_builder_is_refused(cross_dataset, tmp_path, capsys):  # noqa: F811
    assert main(["export", "lm-eval", "needle", "--dataset", str(cross_dataset), "--out", str(tmp_path / "o")]) == 2
    assert "built by builder 'cross_paragraph'; task 'needle' needs" in capsys.readouterr().err


def export(task: str, dataset: Path, out: Path) -> Path:
    assert main(["export", "lm-eval", task, "--dataset", str(dataset), "--out", str(out)]) == 0
    return out


def test_the_task_folder_is_an_lm_eval_task(cross_dataset, tmp_path):  # noqa: F811
    out = export("cross_paragraph", cross_dataset, tmp_path / "lm")
    name = f"longctx_cross_paragraph_{LENGTH}"
    assert {p.name for p in out.iterdir()} == {f"{name}.yaml", "longctx_cross_paragraph.yaml", "utils.py"}

    class Loader(yaml.SafeLoader):
        """lm-eval's `!function utils.X` tags read as their text."""

    Loader.add_constructor("!function", lambda _loader, node: node.value)
    cfg = yaml.load((out / f"{name}.yaml").read_text(), Loader=Loader)  # noqa: S506
    assert cfg["dataset_kwargs"]["data_files"]["test"] == str(cross_dataset / f"data/cross_paragraph_{LENGTH}.parquet")
    assert cfg["generation_kwargs"] == {"until": [], "do_sample": False, "temperature": 0.0}
    assert [m["metric"] for m in cfg["metric_list"]] == list(EXPORTABLE["cross_paragraph"].fields)
    assert yaml.safe_load((out / "longctx_cross_paragraph.yaml").read_text())["task"] == [name]


def chat_text(prompt: str, answer_prefix: str) -> str:
    """The text our hf: adapter's render_ids tokenizes for SmolLM2: chat template, generation prompt, prefix."""
    from transformers import AutoTokenizer

    from longctx_eval.models.assets import smollm2_dir

    hf_tok = AutoTokenizer.from_pretrained(str(smollm2_dir()))
    messages = [{"role": "user", "content": prompt}]
    return hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + answer_prefix


def test_lm_eval_loads_our_prompts_budgets_and_scorer(cross_dataset, tmp_path):  # noqa: F811
    pytest.importorskip("lm_eval", reason="lm-eval is the `interop` extra (`make test` installs it)")
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from data_builders.interop import exported_task
    from longctx_eval.models.assets import smollm2_dir

    out = export("cross_paragraph", cross_dataset, tmp_path / "lm")
    name = f"longctx_cross_paragraph_{LENGTH}"
    task = TaskManager(include_path=[str(out)]).load([name])["tasks"][name]
    hf_tok = AutoTokenizer.from_pretrained(str(smollm2_dir()))

    def template(messages, add_generation_prompt=True):  # what lm-eval's HFLM.apply_chat_template does
        kw = {"add_generation_prompt": add_generation_prompt, "continue_final_message": not add_generation_prompt}
        return hf_tok.apply_chat_template(messages, tokenize=False, **kw)

    ours = exported_task("cross_paragraph", str(cross_dataset))
    docs = list(task.test_docs())
    assert [d["id"] for d in docs] == [s.id for s in ours.samples(LENGTH)]
    for doc in docs:
        p = ours.prompted(ours.sample(doc))
        ctx = task.fewshot_context(
            doc, 0, apply_chat_template=True, chat_template=template, gen_prefix=task.doc_to_prefix(doc)
        )
        assert ctx == chat_text(p.prompt, p.answer_prefix)
        request = task.construct_requests(doc, ctx, metadata=(name, 0, 1))
        assert request.arguments[1]["max_gen_toks"] == p.max_new_tokens == 16
        gold = " " + doc["answers"][0] + "."
        assert task.process_results(doc, [gold]) == ours.score(ours.sample(doc), gold)
        assert task.process_results(doc, [gold])["score"] == 1.0


@pytest.mark.interop  # measured here (2 shared cores): 98 s of lm-eval after 221 s of fixtures (builds, our run)
def test_lm_eval_hf_reproduces_our_replies_and_scores(interop_datasets, interop_ours, tmp_path):  # noqa: F811
    lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is the `interop` extra (`make test` installs it)")
    from lm_eval.tasks import TaskManager

    from data_builders.interop import exported_task
    from longctx_eval.models.assets import smollm2_dir

    assert lm_eval.__version__ == "0.4.13"
    folders = [str(export(task, ds, tmp_path / task)) for task, ds in interop_datasets.items()]
    result = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={smollm2_dir()},dtype=float32",
        tasks=[f"longctx_{task}_{LENGTH}" for task in interop_datasets],
        batch_size=1,
        device="cpu",
        apply_chat_template=True,  # our hf: adapter applies SmolLM2's chat template (chat=auto)
        log_samples=True,
        task_manager=TaskManager(include_path=folders),
    )
    counts = {}
    for task, dataset in interop_datasets.items():
        exported = exported_task(task, str(dataset))
        logged = result["samples"][f"longctx_{task}_{LENGTH}"]
        ours = interop_ours[task]
        assert sorted(s["doc"]["id"] for s in logged) == sorted(ours)
        same_text = same_scores = 0
        for s in logged:
            mine = ours[s["doc"]["id"]]
            p = exported.prompted(exported.sample(s["doc"]))
            context, generation = s["arguments"][0]
            assert context == chat_text(p.prompt, p.answer_prefix)  # the text our render_ids tokenizes
            assert generation["max_gen_toks"] == p.max_new_tokens
            same_text += s["resps"][0][0] == mine["answer"]
            same_scores += all(s[f] == mine["scores"][f] for f in EXPORTABLE[task].fields)
        counts[task] = (same_text, same_scores, len(logged))
    print("lm-eval vs ours (equal replies, equal scores, samples):", counts)
    assert all(text == scores == n for text, scores, n in counts.values()), counts
