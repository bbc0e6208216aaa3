"""Masking secrets in text the suite prints: keys pasted into a spec, a URL's credentials, bearer tokens.

Keys read from the environment never reach a message (the served client scrubs them); a key pasted into a
spec (`?api_key=sk-...`, `?api_key_env=sk-...`, `http://user:KEY@host`) is refused, and this makes sure the
refusal, and every other line on the console, shows `***` in its place.
"""

from __future__ import annotations

import re

MASK = "***"

_KEY = r"(?:[a-z0-9]+[_-])*(?:api[_-]?key|key|token|secret|password|passwd|pwd|auth|credentials?)"
_VALUE = r"[^&\s'\"]+"
_BEFORE = r"(?:^|[?&\s(])"
"""Where an option starts: a spec's query (?key=, &key=) or a message's words (option key='...')."""
_PATTERNS = (
    # ?api_key=..., &token=..., ?password=...: always masked
    (re.compile(rf"(?i)({_BEFORE}{_KEY}=['\"]?){_VALUE}"), r"\1***"),
    # ?api_key_env=...: masked unless it is what it should be, the NAME of an environment variable
    (
        re.compile(rf"(?i)({_BEFORE}{_KEY}[_-]env=['\"]?)(?!(?-i:[A-Z_][A-Z0-9_]*)(?:[&\s'\"]|$)){_VALUE}"),
        r"\1***",
    ),
    (re.compile(r"(://)[^/@\s'\"]+@"), r"\1***@"),  # http://user:key@host, http://token@host
    (re.compile(r"\b(sk-)[A-Za-z0-9_\-*.]{6,}"), r"\1***"),
    (re.compile(r"\b(hf_)[A-Za-z0-9]{10,}"), r"\1***"),
    (re.compile(r"(?i)\b(bearer\s+)[^\s'\"]+"), r"\1***"),
)


def mask_secrets(text: str) -> str:
    """`text` with every secret-looking value replaced by `***` (the key or scheme before it is kept)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
