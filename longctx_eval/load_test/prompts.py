"""The load test's prompts: the suite's tasks at chosen lengths, built, measured and rendered exactly as a run sends
them through the `openai:` adapter (prompts over the model's window are left out and counted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longctx_eval.capability import Capability
from longctx_eval.errors import TaskUnavailable
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.openai_client import ServedRequest
from longctx_eval.progress import status
from longctx_eval.run_config import TaskPlan
from longctx_eval.sample import Request
from longctx_eval.sampling import build_samples


@dataclass(frozen=True)
class PromptPool:
    """The requests a load test sends, in the suite's order, and what they are."""

    requests: list[ServedRequest]
    prompt_tokens: list[int]
    tasks: list[str]
    lengths: list[int]
    over_window: int
    skipped: dict[str, str]

    def describe(self) -> dict[str, Any]:
        """The JSON record of the pool: size, prompt lengths, generation budgets, tasks and lengths."""
        n = len(self.prompt_tokens)
        tokens = self.prompt_tokens or [0]
        budgets = [r.max_tokens for r in self.requests] or [0]
        lengths = ", ".join(str(x) for x in self.lengths)
        return {
            "description": f"{', '.join(self.tasks)} at {lengths} tokens ({n} prompts, "
            f"mean {sum(tokens) / max(n, 1):,.0f} prompt tokens)",
            "tasks": self.tasks,
            "lengths": self.lengths,
            "n": n,
            "over_window": self.over_window,
            "skipped": self.skipped,
            "prompt_tokens": {"mean": sum(tokens) / max(n, 1), "min": min(tokens), "max": max(tokens)},
            "max_tokens": {"mean": sum(budgets) / max(n, 1), "max": max(budgets)},
        }


def served_request(adapter: ModelAdapter, request: Request, prompt_tokens: int) -> ServedRequest:
    """What the adapter sends for `request` (its own `served_request` when it has one)."""
    build = getattr(adapter, "served_request", None)
    if callable(build):
        return build(request, prompt_tokens=prompt_tokens)
    messages: tuple[dict[str, str], ...] = ({"role": "user", "content": request.prompt},)
    extra: dict[str, Any] = {}
    if request.answer_prefix:
        messages += ({"role": "assistant", "content": request.answer_prefix},)
        extra = {"continue_final_message": True, "add_generation_prompt": False}
    return ServedRequest(
        messages=messages, max_tokens=request.max_new_tokens, extra_body=extra, prompt_tokens=prompt_tokens
    )


def build_pool(adapter: ModelAdapter, plans: Sequence[TaskPlan], seed: int) -> PromptPool:
    """Every generation request of the planned tasks that fits the model's window, in task and sample order."""
    requests: list[ServedRequest] = []
    tokens: list[int] = []
    names: list[str] = []
    lengths: set[int] = set()
    over = 0
    skipped: dict[str, str] = {}
    for plan in plans:
        info = plan.info
        if info.requires.pick([Capability.GENERATE]) is None:
            skipped[info.name] = "not a generation task"
            continue
        try:
            task = info.build(plan.args, lengths=plan.resolved_lengths, seed=seed, tokenizer=adapter.tokenizer)
            with status(f"building {info.name} prompts"):
                samples = build_samples(info, task, plan.limit).samples
        except TaskUnavailable as exc:
            skipped[info.name] = str(exc)
            continue
        bound = adapter.bind(task, samples)
        names.append(info.name)
        lengths.update(plan.resolved_lengths)
        for sample in samples:
            for r in task.requests(sample):
                n = bound.prompt_tokens(r)
                if not bound.fits(r, n):
                    over += 1
                    continue
                requests.append(served_request(bound, r, n))
                tokens.append(n)
    return PromptPool(requests, tokens, names, sorted(lengths), over, skipped)
