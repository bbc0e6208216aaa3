"""What served requests cost: the price table (run/prices.toml or `--prices FILE`) and the `--max-cost` budget.

Local models cost 0. A served model (`openai:<model>@<url>`) costs its table price per 1M input and output
tokens; one the table lacks costs "unknown". The budget is checked before every batch the runner sends: spent
(from the server's `usage`) plus the batch's upper bound (prompt tokens + the full generation budget) must stay
within `--max-cost`, else the run stops there, keeping what it computed.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from longctx_eval.errors import ConfigError
from longctx_eval.models.kinds import MODEL_KINDS

if TYPE_CHECKING:
    from longctx_eval.models.base import ModelAdapter
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.sample import Prediction, Request

PRICES = Path(__file__).with_name("prices.toml")
PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per 1M input (prompt) and output (generated, reasoning included) tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, output_tokens: int) -> float:
        """The cost in USD of one request with these token counts."""
        return (prompt_tokens * self.input + output_tokens * self.output) / PER_TOKENS


@dataclass(frozen=True)
class PriceTable:
    """Served model name -> Price, read from one TOML file."""

    path: Path
    prices: dict[str, Price]
    as_of: str | None = None
    estimated: dict[str, str] = field(default_factory=dict)
    """Served model name -> how its price was estimated (cost_estimate.py), for models the file lacks."""

    def get(self, model: str) -> Price | None:
        """The price of a served model name, None when the table does not list it."""
        return self.prices.get(model)

    def with_estimate(self, model: str, price: Price, how: str) -> PriceTable:
        """This table plus an estimated price for `model` (never over a price the file gives)."""
        if model in self.prices:
            return self
        return replace(self, prices={**self.prices, model: price}, estimated={**self.estimated, model: how})


def load_prices(path: Path | None = None) -> PriceTable:
    """The price table at `path` (default: the packaged prices.toml); a malformed entry is a ConfigError naming it."""
    path = Path(path) if path is not None else PRICES
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"price table {path}: cannot be read: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"price table {path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"models", "as_of"})
    if unknown:
        raise ConfigError(f"price table {path}: unknown key {unknown[0]!r}; expected 'as_of' and [models.\"NAME\"]")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"price table {path}: 'models' must be a table of [models.\"NAME\"] entries")
    prices = {}
    for name, entry in models.items():
        where = f"price table {path}: models.{name!r}"
        if not isinstance(entry, dict) or set(entry) != {"input", "output"}:
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise ConfigError(f"{where}: expected exactly 'input' and 'output' (USD per 1M tokens), got {got}")
        for key in ("input", "output"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{where}.{key}: expected a number >= 0 (USD per 1M tokens), got {value!r}")
        prices[name] = Price(float(entry["input"]), float(entry["output"]))
    as_of = data.get("as_of")
    return PriceTable(path, prices, str(as_of) if as_of is not None else None)


def served_model(spec: ModelSpec) -> str | None:
    """The served model name a spec sends requests to (its own or a part's), None for a local model."""
    kind = MODEL_KINDS.get(spec.kind)
    if kind.served:  # the kind declares it calls a server that may bill it (AdapterKind.served_model)
        return kind.served_model_of(spec)
    for part in spec.parts:
        name = served_model(part)
        if name is not None:
            return name
    return None


@dataclass(frozen=True)
class ModelPrice:
    """How a spec is priced: local (0), a served model with a table price, or a served model of unknown price."""

    served: str | None
    price: Price | None

    @property
    def local(self) -> bool:
        return self.served is None

    @property
    def known(self) -> bool:
        return self.local or self.price is not None

    def cost(self, prompt_tokens: int, output_tokens: int) -> float | None:
        """USD for these tokens: 0 for a local model, None when the served model's price is unknown."""
        if self.local:
            return 0.0
        return None if self.price is None else self.price.cost(prompt_tokens, output_tokens)


def price_of(spec: ModelSpec, table: PriceTable) -> ModelPrice:
    """The pricing of one spec under `table`."""
    served = served_model(spec)
    return ModelPrice(served, None if served is None else table.get(served))


def output_budget(adapter: ModelAdapter, request: Request) -> int:
    """Most tokens a request may generate: the adapter's own bound where it has one (`max_output_tokens(request)`,
    e.g. thinking plus answer budgets), else the request's max_new_tokens."""
    bound = getattr(adapter, "max_output_tokens", None)
    return int(bound(request)) if callable(bound) else request.max_new_tokens


def calls(adapter: ModelAdapter, request: Request, prompt_tokens: int) -> list[tuple[int, int]]:
    """The (prompt tokens, most output tokens) of each call `request` is served as: one, except where the adapter
    sends a choice request as a call per choice (`billed_calls`: a served model scoring by echoed log-probabilities,
    each call billed for the prompt and its choice)."""
    per_choice = getattr(adapter, "billed_calls", None)
    if request.choices and callable(per_choice):
        return list(per_choice(request))
    return [(prompt_tokens, output_budget(adapter, request))]


def price_entry(model: str) -> str:
    """The TOML lines of one price-table entry, to be copied into the table as printed and filled in."""
    name = model.replace("\\", "\\\\").replace('"', '\\"')
    return f'[models."{name}"]\ninput = <USD per 1M prompt tokens>\noutput = <USD per 1M output tokens>'


def missing_price(model: str, path: Path) -> str:
    """Why `--max-cost` refuses a served model without a price, with the entry to add verbatim."""
    return (
        f"--max-cost: no price for served model {model!r} in {path}. Add these lines to it (or to your own file, "
        "passed with --prices FILE), or let a self-hosted server's price be estimated with --gpu-hour-price USD "
        "--throughput-from RUN_DIR|load.json:\n" + price_entry(model)
    )


class BudgetStop(Exception):
    """Raised before a batch that would exceed `--max-cost`; the runner stops, keeping what it computed."""


@dataclass
class Budget:
    """The `--max-cost` budget of one `run` invocation, shared by its models and tasks."""

    max_usd: float
    table: PriceTable
    spent_usd: float = 0.0
    requests: int = 0
    stopped: str | None = None
    _by_spec: dict[str, ModelPrice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.max_usd, bool) or not math.isfinite(self.max_usd) or self.max_usd < 0:
            raise ConfigError(f"--max-cost: expected a number of US dollars >= 0, got {self.max_usd!r}")

    def check_specs(self, specs: Iterable[ModelSpec]) -> None:
        """Refuse to start when a served model's price is unknown (its spending could not be bounded)."""
        for spec in specs:
            priced = price_of(spec, self.table)
            self._by_spec[spec.raw] = priced
            if not priced.known:
                raise ConfigError(missing_price(priced.served or "", self.table.path))

    def _priced(self, raw_spec: str) -> ModelPrice:
        held = self._by_spec.get(raw_spec)
        if held is None:
            from longctx_eval.models.spec import parse_spec

            held = self._by_spec[raw_spec] = price_of(parse_spec(raw_spec), self.table)
        return held

    def before(self, raw_spec: str, batch: Sequence[tuple[int, int]]) -> None:
        """Check a batch of (prompt tokens, max output tokens) before it is sent; raises BudgetStop if it may not be."""
        priced = self._priced(raw_spec)
        if priced.local:
            return
        committed = sum(priced.cost(p, o) or 0.0 for p, o in batch)
        if self.spent_usd + committed > self.max_usd:
            self.stopped = (
                f"stopped before {len(batch)} request(s) to {priced.served} that could cost up to ${committed:.4f}: "
                f"spent ${self.spent_usd:.4f} of --max-cost ${self.max_usd:.4f} on {self.requests} request(s); "
                "what was computed is kept, run the same command again (with a larger --max-cost) to continue"
            )
            raise BudgetStop(self.stopped)

    def after(self, raw_spec: str, batch: Sequence[Sequence[tuple[int, int]]], preds: Sequence[Prediction]) -> None:
        """Add what a sent batch cost, per request its calls (`calls`): the server's usage where reported, else
        each call's upper bound (a request sent as several calls, one per choice, is counted at its calls' bounds:
        its prediction reports the shared prompt once, not what each call was billed)."""
        priced = self._priced(raw_spec)
        self.requests += sum(len(c) for c in batch)
        if priced.local:
            return
        for bills, pred in zip(batch, preds, strict=True):
            if len(bills) != 1:
                self.spent_usd += sum(priced.cost(p, o) or 0.0 for p, o in bills)
                continue
            ((prompt, max_out),) = bills
            # No usage reported (a failed request, a server without usage): counted at its upper bound, so the
            # budget is never exceeded by what the server may have billed anyway.
            used_prompt = pred.prompt_tokens if pred.prompt_tokens is not None else prompt
            used_out = pred.completion_tokens if pred.completion_tokens is not None else max_out
            self.spent_usd += priced.cost(used_prompt, used_out) or 0.0
