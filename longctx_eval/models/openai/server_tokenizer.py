"""The served model's own tokenizer, found through the server when the spec gives no `?tokenizer=`.

vLLM and `longctx-eval serve` name what they loaded in `/v1/models` (`root`: the model folder or hub id). When
that name loads here without network (a local folder, an embedded name, a hub id in the local cache), it is
checked against the server's `/tokenize` on a probe text (the same token ids, or the same count where the
server returns only a count) and then builds and counts every context: lengths are then exact in the served
model's tokens. Otherwise `probe_gap` says what is approximate and by how much (the server's count of the probe
against MiniLM's), for the warning the adapter prints.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from longctx_eval.models.openai.client import server_root

PROBE = (
    "The special magic number for Zürich is 7412; don't forget it.\n\n"
    "A second paragraph, with digits (2024-05-17), punctuation and CamelCaseWords."
)
"""Text tokenized by both sides to check that a tokenizer is the server's."""
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerTokenizerProbe:
    """What the server said: the tokenizer name it loaded (`root`), and its ids/count of PROBE (None: no endpoint)."""

    root: str | None
    ids: list[int] | None
    count: int | None
    reachable: bool = True
    """Whether /v1/models answered at all (a server that is down is the adapter's probe's error to report)."""


def _http(url: str, body: dict[str, Any] | None, key: str | None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 (the user's own server URL)
        return json.loads(resp.read())


def probe_server(base_url: str, model: str, api_key_env: str) -> ServerTokenizerProbe:
    """Ask the server for the tokenizer it serves `model` with and its tokens of PROBE; None fields where it has
    no such endpoint or does not answer (the adapter's own probe then reports a server that is down)."""
    key = os.environ.get(api_key_env) or None
    root_name = None
    try:
        listing = _http(f"{base_url.rstrip('/')}/models", None, key)
        for m in listing.get("data", []) if isinstance(listing, dict) else []:
            if isinstance(m, dict) and m.get("id") == model and isinstance(m.get("root"), str) and m["root"]:
                root_name = m["root"]
    except urllib.error.HTTPError:
        pass
    except (OSError, ValueError):
        return ServerTokenizerProbe(None, None, None, reachable=False)
    ids = count = None
    try:
        body = {"model": model, "prompt": PROBE, "add_special_tokens": False}
        got = _http(f"{server_root(base_url)}/tokenize", body, key)
        if isinstance(got, dict):
            if isinstance(got.get("tokens"), list) and all(isinstance(t, int) for t in got["tokens"]):
                ids = got["tokens"]
            count = got["count"] if isinstance(got.get("count"), int) else (len(ids) if ids is not None else None)
    except (OSError, ValueError):
        pass
    if count is None:  # llama.cpp's server: /extras/tokenize {"input"} -> {"tokens"} (special tokens not added)
        try:
            got = _http(f"{server_root(base_url)}/extras/tokenize", {"input": PROBE}, key)
            if isinstance(got, dict) and isinstance(got.get("tokens"), list):
                ids, count = got["tokens"], len(got["tokens"])
        except (OSError, ValueError):
            pass
    return ServerTokenizerProbe(root_name, ids, count)


def tokenizer_name(root: str) -> str:
    """The loadable name of a server's `root`: `longctx-eval serve` reports its spec (`hf:/path?dtype=...`)."""
    name = root.split("?", 1)[0]
    return name[len("hf:") :] if name.startswith("hf:") else name


def agrees(probe: ServerTokenizerProbe, hf_tok: Any) -> bool:
    """Whether a transformers tokenizer tokenizes PROBE exactly as the server did."""
    ids = hf_tok(PROBE, add_special_tokens=False)["input_ids"]
    if probe.ids is not None:
        return list(ids) == list(probe.ids)
    return probe.count is not None and len(ids) == probe.count
