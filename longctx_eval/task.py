"""The task contract: a decorated factory returning dataset + prompt + scorer + metrics."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError, TaskDefinitionError, did_you_mean
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.contrast import Contrast
from longctx_eval.metrics.curves import Curve
from longctx_eval.sample import Hit, Prediction, Request, Sample, Score


@dataclass(frozen=True)
class Requirement:
    """Model capabilities a task can run on: any one of `options`, preferred in order."""

    options: tuple[Capability, ...]
    note: str = ""
    """Why these options, when a task's arguments narrowed them (e.g. "for mode=choice"); shown in a skip."""

    def pick(self, capabilities: Iterable[str]) -> Capability | None:
        """The first option the model serves, or None."""
        caps = {Capability(c) for c in capabilities}
        return next((o for o in self.options if o in caps), None)

    def describe(self) -> str:
        text = " or ".join(repr(o.value) for o in self.options)
        return f"{text} {self.note}" if self.note else text


def any_of(*capabilities: str) -> Requirement:
    """A task that runs on a model serving any of these capabilities (first preferred)."""
    known = [c.value for c in Capability]
    unknown = [c for c in capabilities if c not in known]
    if unknown or not capabilities:
        raise TaskDefinitionError(f"unknown capability {unknown or '(none given)'}; expected some of {known}")
    return Requirement(tuple(Capability(c) for c in capabilities))


def gold_answer_oracle(sample: Sample) -> Prediction:
    """The oracle's answer: the first gold answer, verbatim (and the gold span as a hit when there is one)."""
    answers = sample.gold.get("answers") or [""]
    span = sample.gold.get("span")
    hits = (Hit(int(span[0]), int(span[1]), 1.0),) if span is not None else ()
    return Prediction(text=str(answers[0]), hits=hits)


@dataclass(frozen=True)
class Task:
    """What a task factory returns; the runner owns I/O, batching and progress around it."""

    dataset: Sequence[Sample] | Callable[[], Iterable[Sample]]
    """The samples, or a zero-argument callable yielding them (lazy: `score` builds a task only for its scorer)."""
    prompt: Callable[[Sample], Request | Sequence[Request]]
    scorer: Callable[[Sample, Prediction], Score]
    metrics: Sequence[Metric]
    oracle: Callable[[Sample], Prediction] = gold_answer_oracle
    primary: Mapping[str, str] = field(default_factory=dict)
    """The headline metric per capability (e.g. {"retrieve": "recall@1"}); the first metric otherwise."""
    slices: Sequence[str] = ()
    """Sample metadata keys (e.g. "hops", "distance_bucket"): every metric is also reported per value of each."""
    curves: Sequence[Curve] = ()
    """Curves over score fields (e.g. Recall@K for K = 1..100), reported per length and pooled."""
    contrasts: Sequence[Contrast] = ()
    """Differences of one metric between two slices (e.g. same- minus cross-paragraph recall), with CIs."""
    cluster_noun: str = "clusters"
    """What the samples' `metadata["cluster"]` names, plural ("haystacks", "documents"): shown beside n."""
    requires: Requirement | None = None
    """The capabilities this instance runs on where its arguments narrow the registered ones (coref's `mode=`);
    the runner picks the served capability from these."""
    prompts: Mapping[str, Callable[[Sample], Request | Sequence[Request]]] = field(default_factory=dict)
    """A prompt per capability whose requests differ from `prompt`'s (a coref system: one request per document)."""

    def primary_metric(self, capability: str | None = None) -> Metric:
        """The metric leaderboards show for a run through `capability`."""
        name = self.primary.get(str(capability)) if capability is not None else None
        return next((m for m in self.metrics if m.name == name), self.metrics[0])

    def samples(self) -> Iterable[Sample]:
        """The dataset, built now if it is lazy."""
        return self.dataset() if callable(self.dataset) else self.dataset

    def requests(self, sample: Sample, capability: str | None = None) -> list[Request]:
        """The requests of one sample as `capability` is served them (`prompts`, else `prompt`), numbered by `part`."""
        prompt = self.prompts.get(str(capability), self.prompt) if capability is not None else self.prompt
        out = prompt(sample)
        reqs = [out] if isinstance(out, Request) else list(out)
        return [r if r.part == i else _with_part(r, i) for i, r in enumerate(reqs)]


def _with_part(request: Request, part: int) -> Request:
    from dataclasses import replace

    return replace(request, part=part)


RUN_PARAMS = ("lengths", "seed", "tokenizer")
"""Factory parameters the runner supplies; every other keyword parameter is a task argument."""

Number = int | float


@dataclass(frozen=True)
class Bounds:
    """The values a numeric task argument accepts, inclusive: `low` <= value <= `high` (None: unbounded)."""

    low: Number | None = None
    high: Number | None = None

    def problem(self, value: Number) -> str | None:
        """None when `value` is inside the bounds, else what was expected."""
        if (self.low is None or value >= self.low) and (self.high is None or value <= self.high):
            return None
        return f"expected {self.describe()}, got {value!r}"

    def describe(self) -> str:
        """The accepted range in words: 'from 1 to 101', 'at least 0'."""
        if self.low is not None and self.high is not None:
            return f"a value from {self.low} to {self.high}"
        return f"a value of at least {self.low}" if self.low is not None else f"a value of at most {self.high}"


def between(low: Number | None = None, high: Number | None = None) -> Bounds:
    """Declared bounds of a task argument, for `@task(bounds={"depths": between(1, 101)})`."""
    return Bounds(low, high)


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
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    """Declared ranges of numeric task arguments (`@task(bounds=...)`), checked for every given value."""
    cache_samples: bool = False
    """Whether built samples may be shared across task instances (`@task(cache_samples=True)`, sample_cache.py)."""

    @property
    def arguments(self) -> dict[str, Any]:
        """Task arguments (factory keyword parameters beyond lengths/seed/tokenizer) with their defaults."""
        sig = inspect.signature(self.factory).parameters
        return {n: p.default for n, p in sig.items() if n not in RUN_PARAMS and p.kind is not p.VAR_KEYWORD}

    def check_args(self, args: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Task arguments checked against the factory's signature, converted to the default's type."""
        known = self.arguments
        out: dict[str, Any] = {}
        for key, value in args.items():
            if key not in known:
                hint = did_you_mean(key, known) if known else " It takes no arguments."
                raise ConfigError(f"{where}: task {self.name!r} has no argument {key!r}.{hint}")
            out[key] = convert_arg(value, known[key], f"{where}: {self.name}.{key}")
            limits = self.bounds.get(key)
            problem = limits.problem(out[key]) if limits is not None else None
            if problem:
                raise ConfigError(f"{where}: {self.name}.{key}={value!r}: {problem}")
        return out

    def build(self, args: Mapping[str, Any] | None = None, **run: object) -> Task:
        """Call the factory with the run's parameters it accepts and the task arguments; check the result."""
        accepted = {k: v for k, v in run.items() if k in self.params}
        result = self.factory(**accepted, **dict(args or {}))
        if not isinstance(result, Task):
            raise TaskDefinitionError(
                f"{self.source}: task {self.name!r} factory returned {type(result).__name__}; expected a Task"
            )
        names = [m.name for m in result.metrics]
        if not names:
            raise TaskDefinitionError(f"{self.source}: task {self.name!r} has no metrics; the first is the primary")
        if len(set(names)) != len(names):
            raise TaskDefinitionError(f"{self.source}: task {self.name!r} has duplicate metric names {names}")
        for cap, metric in result.primary.items():
            if cap not in {c.value for c in Capability} or metric not in names:
                raise TaskDefinitionError(
                    f"{self.source}: task {self.name!r} primary={{{cap!r}: {metric!r}}}: expected a capability "
                    f"mapped to one of its metrics {names}"
                )
        return result


def convert_arg(value: Any, default: Any, where: str) -> Any:
    """A task argument given as text (CLI) or TOML value, converted to the type of the parameter's default."""
    if default is inspect.Parameter.empty or default is None or not isinstance(value, str):
        target = type(default) if default not in (inspect.Parameter.empty, None) else None
        if target is not None and not isinstance(value, target) and not (target is float and type(value) is int):
            raise ConfigError(f"{where}: expected {target.__name__}, got {value!r}")
        return value
    try:
        if isinstance(default, bool):
            low = value.strip().lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            out = float(value)
            if out != out or out in (float("inf"), float("-inf")):
                raise ValueError
            return out
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not a {type(default).__name__}") from None
    return value


_PENDING: list[TaskInfo] = []
REQUIRED_PARAMS = ("lengths", "seed")


def task(
    *,
    name: str,
    version: str,
    requires: Requirement,
    default_lengths: Sequence[int],
    description: str,
    bounds: Mapping[str, Bounds] | None = None,
    cache_samples: bool = False,
) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Register a task factory; its form is checked here, so a malformed plugin fails at discovery.

    `bounds` declares the range of numeric task arguments (`{"depths": between(1, 101)}`): a value given by
    --task-arg or a suite outside it is refused with one line before anything is built. `cache_samples=True`
    lets the runner share the built samples with other instances of the task (other models with the same
    tokenizer, later processes): only for a task whose requests and scores depend on each Sample alone, never
    on state its instance kept while building them.
    """

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
        problems += _bounds_problems(factory, dict(bounds or {}))
        if problems:
            raise TaskDefinitionError(
                f"{source}: malformed task {name!r}: {'; '.join(problems)}. Expected: "
                "@task(name=..., version='1', requires=any_of('generate'), default_lengths=[1024], "
                "description=...) on def factory(lengths, seed, ...) -> Task"
            )
        info = TaskInfo(
            name,
            version,
            requires,
            tuple(default_lengths),
            description,
            factory,
            source,
            params,
            dict(bounds or {}),
            bool(cache_samples),
        )
        _PENDING.append(info)
        factory.__longctx_task__ = _PENDING[-1]  # type: ignore[attr-defined]
        return factory

    return register


def _bounds_problems(factory: Callable[..., Task], bounds: dict[str, Any]) -> list[str]:
    """What is wrong with a task's declared bounds: each names a numeric argument and holds its default."""
    sig = inspect.signature(factory).parameters
    problems = []
    for arg, limits in bounds.items():
        param = sig.get(arg)
        default = param.default if param is not None else None
        if param is None or arg in RUN_PARAMS:
            problems.append(f"bounds names {arg!r}, which is not a task argument")
        elif not isinstance(limits, Bounds):
            problems.append(f"bounds[{arg!r}] must be between(low, high), got {limits!r}")
        elif isinstance(default, bool) or not isinstance(default, int | float):
            problems.append(f"bounds[{arg!r}]: only numeric arguments have bounds, its default is {default!r}")
        elif limits.problem(default):
            problems.append(f"bounds[{arg!r}] {limits.describe()} excludes its own default {default!r}")
    return problems


def _source_of(obj: object) -> str:
    try:
        return str(Path(inspect.getfile(obj)))  # type: ignore[arg-type]
    except TypeError:
        return "<unknown>"


def take_pending() -> list[TaskInfo]:
    """Tasks registered since the last call (discovery drains this after importing a plugin)."""
    out = list(_PENDING)
    _PENDING.clear()
    return out
