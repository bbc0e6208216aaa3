"""The task contract: a decorated factory returning dataset + prompt + scorer + metrics."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.sample import Prediction, Request, Sample, Score

CAPABILITIES = frozenset({"generate", "loglikelihood", "retrieve", "attention", "coref"})


@dataclass(frozen=True)
class Requirement:
    """Model capabilities a task can run on: any one of `options`, preferred in order."""

    options: tuple[str, ...]

    def pick(self, capabilities: Iterable[str]) -> str | None:
        """The first option the model serves, or None."""
        caps = set(capabilities)
        return next((o for o in self.options if o in caps), None)

    def describe(self) -> str:
        return " or ".join(repr(o) for o in self.options)


def any_of(*capabilities: str) -> Requirement:
    """A task that runs on a model serving any of these capabilities (first preferred)."""
    unknown = [c for c in capabilities if c not in CAPABILITIES]
    if unknown or not capabilities:
        raise TaskDefinitionError(
            f"unknown capability {unknown or '(none given)'}; expected some of {sorted(CAPABILITIES)}"
        )
    return Requirement(tuple(capabilities))


def gold_answer_oracle(sample: Sample) -> Prediction:
    """The oracle's answer: the first gold answer, verbatim (and the gold span as a hit when there is one)."""
    answers = sample.gold.get("answers") or [""]
    span = sample.gold.get("span")
    hits = ()
    if span is not None:
        from longctx_eval.sample import Hit

        hits = (Hit(int(span[0]), int(span[1]), 1.0),)
    return Prediction(text=str(answers[0]), hits=hits)


@dataclass(frozen=True)
class Task:
    """What a task factory returns; the runner owns I/O, batching and progress around it."""

    dataset: Sequence[Sample] | Callable[[], Iterable[Sample]]
    """The samples, or a zero-argument callable yielding them (lazy: `score` builds a task only for its scorer)."""
    prompt: Callable[[Sample], Request]
    scorer: Callable[[Sample, Prediction], Score]
    metrics: Sequence[Metric]
    oracle: Callable[[Sample], Prediction] = gold_answer_oracle


@dataclass(frozen=True)
class TaskInfo:
    """A registered task: its factory and the facts `longctx-eval tasks` lists."""

    name: str
    version: str
    requires: Requirement
    default_lengths: tuple[int, ...]
    description: str
    factory: Callable[..., Task]
    source: str = ""
    params: tuple[str, ...] = field(default_factory=tuple)

    def build(self, **kwargs: object) -> Task:
        """Call the factory with the run's arguments it accepts, and check what it returns."""
        accepted = {k: v for k, v in kwargs.items() if k in self.params}
        result = self.factory(**accepted)
        if not isinstance(result, Task):
            raise TaskDefinitionError(
                f"{self.source}: task {self.name!r} factory returned {type(result).__name__}; expected a Task"
            )
        names = [m.name for m in result.metrics]
        if len(set(names)) != len(names):
            raise TaskDefinitionError(f"{self.source}: task {self.name!r} has duplicate metric names {names}")
        return result


_PENDING: list[TaskInfo] = []
REQUIRED_PARAMS = ("lengths", "seed")


def task(
    *,
    name: str,
    version: str,
    requires: Requirement,
    default_lengths: Sequence[int],
    description: str,
) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Register a task factory; its form is checked here, so a malformed plugin fails at discovery."""

    def register(factory: Callable[..., Task]) -> Callable[..., Task]:
        source = _source_of(factory)
        params = tuple(inspect.signature(factory).parameters)
        missing = [p for p in REQUIRED_PARAMS if p not in params]
        problems = []
        if missing:
            problems.append(f"factory {factory.__name__}() lacks parameter(s) {missing}")
        if not isinstance(requires, Requirement):
            problems.append("requires= must be any_of(...)")
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            problems.append(f"name {name!r} must be non-empty letters, digits, '-' or '_'")
        if not default_lengths or not all(isinstance(n, int) and n > 0 for n in default_lengths):
            problems.append("default_lengths must be a non-empty list of positive ints")
        if not isinstance(version, str) or not version:
            problems.append("version must be a non-empty string")
        if problems:
            raise TaskDefinitionError(
                f"{source}: malformed task {name!r}: {'; '.join(problems)}. Expected: "
                "@task(name=..., version='1', requires=any_of('generate'), default_lengths=[1024], "
                "description=...) on def factory(lengths, seed, ...) -> Task"
            )
        _PENDING.append(TaskInfo(name, version, requires, tuple(default_lengths), description, factory, source, params))
        factory.__longctx_task__ = _PENDING[-1]  # type: ignore[attr-defined]
        return factory

    return register


def _source_of(obj: object) -> str:
    try:
        return str(Path(inspect.getfile(obj)))  # type: ignore[arg-type]
    except TypeError:
        return "<unknown>"


def take_pending() -> list[TaskInfo]:
    """Tasks registered since the last call (the registry drains this after importing a plugin)."""
    out = list(_PENDING)
    _PENDING.clear()
    return out
