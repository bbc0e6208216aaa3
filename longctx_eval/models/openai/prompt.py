"""What an `openai:` model sends for a Request, and how its prompt tokens are counted before sending.

Rendering: the chat endpoint sends the prompt as one user message; a task's answer prefix is prefilled as a
final assistant message with vLLM's `continue_final_message` (vLLM, SGLang, `longctx-eval serve`: the same
tokens as the in-process `hf` adapter), or, on hosted APIs that refuse that field (`prefill=none`), not sent and
stripped from the reply when the model repeats it. The completions endpoint sends text rendered here: the
tokenizer's chat template + answer prefix (`chat=auto` with a template), else prompt + newline + prefix.

Counting, most exact first: the model's HF tokenizer (`tokenizer=`: hub id, folder or embedded name; without it,
the one the server names in /v1/models when it loads here and agrees with the server: openai_server_tokenizer.py),
the server's tokenize endpoint (`count=server`: vLLM's /tokenize, llama.cpp's /extras/tokenize), tiktoken for
OpenAI model names (chat overhead as OpenAI documents it), else the packaged MiniLM tokenizer (approximate; the
run's length check then flags the samples whose server-reported length differs).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.models.openai.target import OpenAITarget, parse_target
from longctx_eval.sample import Request
from longctx_eval.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.models.openai.server_tokenizer import ServerTokenizerProbe
    from longctx_eval.models.options import OpenAIOptions

CHAT_MESSAGE_TOKENS = 3
"""tiktoken counting of chat prompts (OpenAI's published rule): 3 tokens per message, 3 to prime the reply."""
RENDER_CACHE = 256


@dataclass(frozen=True)
class Rendered:
    """What is sent for one request: chat messages or completions text, extra body fields, and the prefix to
    strip from the reply when it could not be prefilled."""

    messages: tuple[dict[str, str], ...] | None
    prompt: str | None
    extra_body: dict[str, Any] = field(default_factory=dict)
    strip_prefix: str = ""
    tokenize_fields: dict[str, Any] = field(default_factory=dict)
    """What the server's tokenize endpoint needs besides the prompt to count exactly what is sent."""


@dataclass
class LoadedTokenizer:
    """The tokenizer prompts are built and counted in: our Tokenizer, the transformers one (chat template) if
    any, and whether its counts are the served model's own."""

    tokenizer: Tokenizer
    hf: Any = None
    exact: bool = False
    source: str = "minilm"
    """hf (`tokenizer=`), server (the one the server names, checked against its /tokenize), tiktoken or minilm
    (the approximate fallback)."""


def load_served_tokenizer(spec: ModelSpec, warn: bool = False) -> LoadedTokenizer:
    """The tokenizer of an `openai:` spec, loaded without network beyond the server itself: `tokenizer=` (HF or
    tiktoken:ENC), else the server's own (its /v1/models `root`, checked against its /tokenize; not for hosted
    APIs), else tiktoken for an OpenAI model name, else MiniLM (approximate, with a warning naming the gap)."""
    o = cast("OpenAIOptions", spec.options)
    target = parse_target(spec.target, spec.raw)
    if o.tokenizer and o.tokenizer.startswith("tiktoken:"):
        from longctx_eval.models.assets import load_tokenizer

        return LoadedTokenizer(load_tokenizer(o.tokenizer), exact=True, source="tiktoken")
    if o.tokenizer:
        return _hf(o.tokenizer, spec.raw)
    probe = None
    reason = "it is a hosted API"
    if not target.hosted:
        from longctx_eval.models.openai.server_tokenizer import probe_server

        probe = probe_server(target.base_url, target.model, o.api_key_env)
        found, reason = _server_tokenizer(probe, spec.raw)
        if found is not None:
            return found
    tik = _tiktoken_for(target.model, warn)
    if tik is not None:
        return LoadedTokenizer(tik, exact=True, source="tiktoken")
    from longctx_eval.models.assets import load_tokenizer

    minilm = load_tokenizer("minilm")
    if warn and (probe is None or probe.reachable):  # a server that is down: the adapter's probe says so
        from longctx_eval.progress import console, console_text

        gap = _gap(target.model, reason, probe, minilm, o.count)
        console.print(f"[yellow]warning[/yellow] {console_text(f'{spec.raw}: {gap}')}", highlight=False)
    return LoadedTokenizer(minilm, exact=False, source="minilm")


def _server_tokenizer(probe: ServerTokenizerProbe, raw: str) -> tuple[LoadedTokenizer | None, str]:
    """The tokenizer the server names, when it loads here and agrees with the server; else why not."""
    from longctx_eval.models.openai.server_tokenizer import agrees, tokenizer_name

    if probe.root is None:
        return None, "the server names no model folder or hub id in /v1/models (`root`)"
    name = tokenizer_name(probe.root)
    try:
        loaded = _hf(name, raw)
    except (ConfigError, PrerequisiteError) as exc:
        return None, f"the tokenizer it names, {name!r}, does not load here ({str(exc)[:160]})"
    if probe.count is None:
        return None, f"the server names {name!r} but has no tokenize endpoint to check it against"
    if not agrees(probe, loaded.hf):
        return None, f"the tokenizer it names, {name!r}, tokenizes differently from the server's /tokenize"
    return replace(loaded, source="server"), ""


def _gap(model: str, reason: str, probe: ServerTokenizerProbe | None, minilm: Tokenizer, count: str) -> str:
    """The warning of the approximate fallback: why, and how far MiniLM lengths are from the server's."""
    from longctx_eval.models.openai.server_tokenizer import PROBE

    text = f"contexts are built in the MiniLM tokenizer, not {model!r}'s ({reason}), so lengths are approximate"
    if probe is not None and probe.count is not None:
        mine = minilm.count(PROBE)
        text += (
            f": on a probe text the server counts {probe.count} tokens where MiniLM counts {mine} "
            f"({probe.count / max(mine, 1):.2f}x)"
        )
        if count != "local":
            text += "; prompts are counted by the server's tokenize endpoint for the window check"
    else:
        text += "; the server has no tokenize endpoint, so the window check is approximate too"
    return text + ". Give ?tokenizer=<hf id or folder> for exact lengths (the length check flags mismatches)"


def served_tokenizer(spec: ModelSpec) -> Tokenizer:
    """The kind's tokenizer loader (no weights, no network)."""
    return load_served_tokenizer(spec).tokenizer


def _hf(name: str, raw: str) -> LoadedTokenizer:
    from transformers import AutoTokenizer

    from longctx_eval.models.model_source import EMBEDDED_HF, hf_source, load_error

    source = hf_source(name)
    try:
        hf_tok = AutoTokenizer.from_pretrained(str(source))
    except (OSError, ValueError) as exc:
        raise load_error(name, exc) from exc
    label = name if name in EMBEDDED_HF else getattr(hf_tok, "name_or_path", name)
    try:
        tok = Tokenizer.from_transformers(hf_tok, name=label)
    except PrerequisiteError as exc:
        raise ConfigError(f"model spec {raw!r}: tokenizer {name!r}: {exc}") from exc
    return LoadedTokenizer(tok, hf=hf_tok, exact=True, source="hf")


def _tiktoken_for(model: str, warn: bool) -> Tokenizer | None:
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding = tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return None
    from longctx_eval.text.tiktoken_tokenizer import TiktokenTokenizer

    try:
        return TiktokenTokenizer.from_name(encoding)
    except PrerequisiteError as exc:
        if warn:
            from longctx_eval.progress import console, console_text

            console.print(f"[yellow]warning[/yellow] {console_text(exc)}", highlight=False)
        return None


class PromptRenderer:
    """Renders requests for one endpoint and counts their prompt tokens locally."""

    def __init__(self, spec: ModelSpec, loaded: LoadedTokenizer) -> None:
        o = cast("OpenAIOptions", spec.options)
        self.target: OpenAITarget = parse_target(spec.target, spec.raw)
        self.loaded = loaded
        self.endpoint = o.endpoint
        hosted = self.target.hosted
        template = getattr(loaded.hf, "chat_template", None) if loaded.hf is not None else None
        if o.chat == "true" and not template:
            raise ConfigError(f"model spec {spec.raw!r}: chat=true but the tokenizer has no chat template")
        self.chat_template = bool(template) and o.chat != "false"
        """completions: render the chat template here. chat: count with it (the server applies its own)."""
        self.prefill = o.prefill if o.prefill != "auto" else ("none" if hosted else "continue")
        self.thinking_off = o.thinking == "off"
        self.vllm_fields = not hosted
        self._cache: dict[tuple[str, str], int] = {}

    def settings(self) -> dict[str, Any]:
        """The rendering choices that change what the model sees (they key predictions)."""
        out: dict[str, Any] = {"endpoint": self.endpoint}
        if self.endpoint == "chat":
            out["prefill"] = self.prefill
        else:
            out["chat"] = self.chat_template
        if self.thinking_off:
            out["thinking"] = "off"
        return out

    def _template_kwargs(self) -> dict[str, Any]:
        return {"enable_thinking": False} if self.thinking_off else {}

    def _templated(self, request: Request, prefix: str) -> str:
        messages = [{"role": "user", "content": request.prompt}]
        text = self.loaded.hf.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self._template_kwargs()
        )
        return text + prefix

    def render(self, request: Request) -> Rendered:
        """What is sent for `request`."""
        prefix = request.answer_prefix
        if self.endpoint == "completions":
            if self.chat_template:
                text = self._templated(request, prefix)
                extra: dict[str, Any] = {"add_special_tokens": False} if self.vllm_fields else {}
                return Rendered(None, text, extra, tokenize_fields={"add_special_tokens": False})
            text = request.prompt + ("\n" + prefix if prefix else "")
            return Rendered(None, text, tokenize_fields={"add_special_tokens": True})
        messages: tuple[dict[str, str], ...] = ({"role": "user", "content": request.prompt},)
        extra = {}
        fields: dict[str, Any] = {"add_generation_prompt": True}
        strip = ""
        if prefix and self.prefill == "continue":
            messages += ({"role": "assistant", "content": prefix},)
            extra.update(continue_final_message=True, add_generation_prompt=False)
            fields = {"continue_final_message": True, "add_generation_prompt": False}
        elif prefix:
            strip = prefix
        if self.thinking_off and self.vllm_fields:
            extra["chat_template_kwargs"] = {"enable_thinking": False}
            fields["chat_template_kwargs"] = {"enable_thinking": False}
        return Rendered(messages, None, extra, strip, fields)

    def completion_text(self, request: Request) -> tuple[str, bool]:
        """The completions-endpoint text of `request` whatever the endpoint (the chat template rendered here where the
        tokenizer has one, then the answer prefix; else prompt, newline, prefix) and whether special tokens are added:
        what a log-likelihood request scores its choices after (models/openai/likelihood.py)."""
        if self.chat_template:
            return self._templated(request, request.answer_prefix), False
        return request.prompt + ("\n" + request.answer_prefix if request.answer_prefix else ""), True

    def count(self, request: Request) -> int:
        """Prompt tokens of `request` as rendered, in the loaded tokenizer (exact with the model's HF tokenizer)."""
        key = (request.prompt, request.answer_prefix)
        held = self._cache.get(key)
        if held is not None:
            return held
        n = self._count(request)
        if len(self._cache) >= RENDER_CACHE:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = n
        return n

    def _count(self, request: Request) -> int:
        rendered = self.render(request)
        hf, tok = self.loaded.hf, self.loaded.tokenizer
        if rendered.prompt is not None:
            if hf is not None:
                special = bool(rendered.tokenize_fields.get("add_special_tokens", True))
                return len(hf(rendered.prompt, add_special_tokens=special)["input_ids"])
            return tok.count(rendered.prompt)
        prefix = request.answer_prefix if self.prefill == "continue" else ""
        if hf is not None and self.chat_template:
            return len(hf(self._templated(request, prefix), add_special_tokens=False)["input_ids"])
        body = tok.count(request.prompt) + (tok.count(prefix) if prefix else 0)
        if self.loaded.source == "tiktoken":  # OpenAI's rule: per message 3 + role + content; 3 to prime the reply
            return body + CHAT_MESSAGE_TOKENS + tok.count("user") + CHAT_MESSAGE_TOKENS
        return body
