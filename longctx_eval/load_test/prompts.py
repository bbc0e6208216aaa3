"""The load test's prompts: the suite's tasks at chosen lengths, built, measured and rendered as a run sends them
through the `openai:` adapter (prompts over the model's window are left out and counted), in one of three cache
scenarios (`--cache`):

- `cold` (default): every request its own prompt, distinct from its first line: the suite's prompts in turn, each
  led by a line naming the request (`Load-test request 17.`), so no request shares a prefix with another past the
  chat template's first tokens and a server's prefix cache cannot flatter the figures;
- `suite`: the suite's prompts exactly as a run sends them, each once, in the run's order (the depths of one
  haystack back to back: the prefix sharing a run itself gets); the pool must hold every request of the sweep;
- `hit`: a cache-hit scenario on purpose: the first `hit_prompts` prompts, sent once before the first level to
  fill the cache (uncounted), then over and over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError, TaskUnavailable
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.openai.client import ServedRequest
from longctx_eval.progress import status
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.sample import Request

CACHE_SCENARIOS = ("cold", "suite", "hit")
LEAD = "Load-test request {n}.\n\n"
"""The line that leads each prompt of the `cold` scenario (n counts from 1 over the whole sweep)."""


@dataclass(frozen=True)
class PromptPool:
    """The requests a load test sends, in the order it sends them, and what they are."""

    requests: list[ServedRequest]
    prompt_tokens: list[int]
    tasks: list[str]
    lengths: list[int]
    over_window: int
    skipped: dict[str, str]
    cache: str = "suite"
    suite_prompts: int = 0
    """Distinct suite prompts the pool was drawn from (fitting the window)."""

    def describe(self) -> dict[str, Any]:
        """The JSON record of the pool: size, prompt lengths, generation budgets, tasks and lengths."""
        n = len(self.prompt_tokens)
        tokens = self.prompt_tokens or [0]
        budgets = [r.max_tokens for r in self.requests] or [0]
        lengths = ", ".join(str(x) for x in self.lengths)
        return {
            "description": f"{', '.join(self.tasks)} at {lengths} tokens ({n} prompts, "
            f"mean {sum(tokens) / max(n, 1):,.0f} prompt tokens, cache {self.cache})",
            "cache": self.cache,
            "suite_prompts": self.suite_prompts,
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


def build_pool(
    adapter: ModelAdapter,
    plans: Sequence[TaskPlan],
    seed: int,
    cache: str = "suite",
    needed: int = 0,
    hit_prompts: int = 1,
) -> PromptPool:
    """The requests of the planned generation tasks that fit the model's window, for the `cache` scenario:
    `needed` requests for `cold` (the suite's prompts in turn, each led by its own line), every prompt once for
    `suite` (a ConfigError when fewer than `needed`), the first `hit_prompts` for `hit`."""
    if cache not in CACHE_SCENARIOS:
        raise ConfigError(f"--cache {cache!r}: expected one of {', '.join(CACHE_SCENARIOS)}")
    base: list[tuple[ModelAdapter, Request]] = []
    names: list[str] = []
    lengths: set[int] = set()
    skipped: dict[str, str] = {}
    for plan in plans:
        info = plan.info
        if info.requires.pick([Capability.GENERATE]) is None:
            skipped[info.name] = "not a generation task"
            continue
        try:
            with status(f"building {info.name} prompts"):
                built = plan_samples(plan, seed, adapter.tokenizer)
        except TaskUnavailable as exc:
            skipped[info.name] = str(exc)
            continue
        names.append(info.name)
        lengths.update(plan.resolved_lengths)
        for group in built.groups:
            bound = adapter.bind(group.task, group.samples)
            base.extend((bound, r) for sample in group.samples for r in group.task.requests(sample))
    fitting, over = [], 0
    for bound, r in base:
        n = bound.prompt_tokens(r)
        if bound.fits(r, n):
            fitting.append((bound, r, n))
        else:
            over += 1
    requests: list[ServedRequest] = []
    tokens: list[int] = []
    if cache == "cold" and fitting:
        with status(f"measuring {needed} distinct prompts"):
            for j in range(needed):
                bound, r, _ = fitting[j % len(fitting)]
                led = replace(r, prompt=LEAD.format(n=j + 1) + r.prompt)
                n = bound.prompt_tokens(led)
                if not bound.fits(led, n):  # the lead line took it over the window: never sent
                    over += 1
                    continue
                requests.append(served_request(bound, led, n))
                tokens.append(n)
    else:
        chosen = fitting[:hit_prompts] if cache == "hit" else fitting
        if cache == "suite" and fitting and len(fitting) < needed:
            raise ConfigError(
                f"load --cache suite: the sweep sends up to {needed} requests but the tasks give {len(fitting)} "
                "prompts that fit the window; raise --limit, add --lengths or tasks, lower --max-requests, or use "
                "--cache cold"
            )
        for bound, r, n in chosen:
            requests.append(served_request(bound, r, n))
            tokens.append(n)
    return PromptPool(requests, tokens, names, sorted(lengths), over, skipped, cache, len(fitting))
