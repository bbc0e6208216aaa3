"""The target of an `openai:` spec, `<model>@<base_url>`, and the context windows of well-known hosted models.

A leaf: it imports neither `openai` nor any adapter, so a spec is checked before anything loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from longctx_eval.errors import ConfigError

FORM = "openai:<model>@<base_url>, e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1"
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


@dataclass(frozen=True)
class OpenAITarget:
    """The served model's name and the API base URL (http(s)://host[:port]/v1)."""

    model: str
    base_url: str

    @property
    def hosted(self) -> bool:
        """Whether the host is a hosted API that takes only the standard OpenAI request fields."""
        host = (urlsplit(self.base_url).hostname or "").lower()
        return any(host == s or host.endswith("." + s) for s in HOSTED_SUFFIXES)


def parse_target(target: str, raw: str) -> OpenAITarget:
    """Split `<model>@<base_url>` (at the last '@' before http:// or https://); one-line ConfigError otherwise."""
    found = list(_URL_AT.finditer(target))
    if not found:
        raise ConfigError(f"model spec {raw!r}: target {target!r} lacks '@<base_url>'; expected {FORM}")
    cut = found[-1].start()
    model, url = target[:cut], target[cut + 1 :]
    if not model:
        raise ConfigError(f"model spec {raw!r}: no model name before '@'; expected {FORM}")
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
    return OpenAITarget(model=model, base_url=url.rstrip("/"))


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
    """The display name of an `openai:` spec without ?name=: the model's last path component."""
    found = list(_URL_AT.finditer(target))
    model = target[: found[-1].start()] if found else target
    return model.rstrip("/").rsplit("/", 1)[-1] or "openai"
