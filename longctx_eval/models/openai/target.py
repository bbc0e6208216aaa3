"""The target of an `openai:` spec, `<model>@<base_url>[,<base_url>...]` (several servers of one model: data
parallel, models/openai/pool.py), and the context windows of well-known hosted models.

A leaf: it imports neither `openai` nor any adapter, so a spec is checked before anything loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from longctx_eval.errors import ConfigError

if TYPE_CHECKING:
    from longctx_eval.models.model_spec import ModelSpec

FORM = (
    "openai:<model>@<base_url>[,<base_url>...], e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1 "
    "(several base URLs: servers of the same model)"
)
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    # (model-name prefix, context window in tokens), longest prefix first; from the providers' model pages.
    ("gpt-4.1-nano", 1_047_576),
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o-mini", 128_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o4-mini", 200_000),
    ("o3-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
)
HOSTED_SUFFIXES = ("openai.com", "openai.azure.com", "googleapis.com", "anthropic.com")
"""Hosts that refuse vLLM's extra request fields (continue_final_message, add_special_tokens, ...)."""
_URL_AT = re.compile(r"@(?=https?://)")
URL_LIST = re.compile(r",(?=\s*https?://)")
"""Where a list of base URLs is cut: a comma right before http:// or https:// (also how --model keeps them)."""


@dataclass(frozen=True)
class OpenAITarget:
    """The served model's name and the API base URL(s) (http(s)://host[:port]/v1); `base_url` is the first."""

    model: str
    base_url: str
    base_urls: tuple[str, ...] = ()
    """Every server of the model, in the spec's order (one entry for a single server)."""

    @property
    def hosted(self) -> bool:
        """Whether a host is a hosted API that takes only the standard OpenAI request fields."""
        for url in self.base_urls or (self.base_url,):
            host = (urlsplit(url).hostname or "").lower()
            if any(host == s or host.endswith("." + s) for s in HOSTED_SUFFIXES):
                return True
        return False


def parse_target(target: str, raw: str) -> OpenAITarget:
    """Split `<model>@<base_url>[,<base_url>...]` (at the last '@' before http:// or https://, the URLs at commas
    before http(s)://); one-line ConfigError otherwise."""
    found = list(_URL_AT.finditer(target))
    if not found:
        raise ConfigError(f"model spec {raw!r}: target {target!r} lacks '@<base_url>'; expected {FORM}")
    cut = found[-1].start()
    model, urls = target[:cut], [u.strip() for u in URL_LIST.split(target[cut + 1 :])]
    if not model:
        raise ConfigError(f"model spec {raw!r}: no model name before '@'; expected {FORM}")
    for url in urls:
        parts = urlsplit(url)
        if not parts.hostname:
            raise ConfigError(f"model spec {raw!r}: base URL {url!r} has no host; expected {FORM}")
        if parts.username or parts.password:
            raise ConfigError(
                f"model spec {raw!r}: the base URL holds credentials; keys come from an environment variable "
                "(option api_key_env, default OPENAI_API_KEY), never from the spec"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"model spec {raw!r}: base URL {url!r} has a query or fragment; expected {FORM}")
    clean = tuple(u.rstrip("/") for u in urls)
    twice = next((u for i, u in enumerate(clean) if u in clean[:i]), None)
    if twice is not None:
        raise ConfigError(f"model spec {raw!r}: base URL {twice!r} is given twice; expected {FORM}")
    return OpenAITarget(model=model, base_url=clean[0], base_urls=clean)


def check_target(target: str, raw: str) -> None:
    """Spec-time check of an `openai:` target (no network)."""
    parse_target(target, raw)


def known_window(model: str) -> int | None:
    """The context window of a well-known hosted model (by longest name prefix), else None."""
    name = model.rsplit("/", 1)[-1].lower()
    for prefix, window in KNOWN_WINDOWS:
        if name == prefix or name.startswith(prefix + "-"):
            return window
    return None


def default_name(target: str) -> str:
    """The display name of an `openai:` spec without ?name=: the model's last path component (one name for one
    model, however many servers serve it)."""
    found = list(_URL_AT.finditer(target))
    model = target[: found[-1].start()] if found else target
    return model.rstrip("/").rsplit("/", 1)[-1] or "openai"


def served_model(spec: ModelSpec) -> str:
    """The model an `openai:` spec sends requests to (its AdapterKind's `served_model`, for pricing)."""
    return parse_target(spec.target, spec.raw).model
