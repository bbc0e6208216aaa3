"""`openai:<model>@<base_url>`: a model behind an OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp,
`longctx-eval serve`, hosted APIs), through the async `ServedClient` (models/openai/client.py).

A runner batch is sent concurrently, at most `max_in_flight` requests at once, in the runner's order: requests
on one context come back to back (runner.serving_order), and the client dispatches request i before i+1, so
server prefix caches (vLLM automatic prefix caching, SGLang RadixAttention) hit. Every prediction keeps its
serving figures (`data['serving']`), the length check of the server's prompt tokens against the measured
ones (`data['length_check']`), and the raw reply and reasoning when they were stripped before scoring.
A request that finally fails is an `error` prediction with its reason; the runner re-runs it on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.hashing import sha256_text
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.hf.likelihood import ChoiceIds, all_choice_ids
from longctx_eval.models.openai.client import ClientLimits, ServedClient, ServedRequest, ServedResult
from longctx_eval.models.openai.likelihood import PROBE_TEXT, ChoiceSlot, plan_ids, plan_text, read_choice
from longctx_eval.models.openai.pool import ServerPool
from longctx_eval.models.openai.prompt import PromptRenderer, Rendered, load_served_tokenizer
from longctx_eval.models.openai.reasoning import split_reasoning, strip_echoed_prefix
from longctx_eval.models.openai.sampling import Sampling, greedy_sampling
from longctx_eval.models.openai.server_facts import ServerFacts, WindowSource, served_window
from longctx_eval.models.openai.target import known_window, parse_target
from longctx_eval.models.options import OpenAIOptions
from longctx_eval.progress import console, console_text
from longctx_eval.sample import Prediction, Request

if TYPE_CHECKING:
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.sample import Sample
    from longctx_eval.task import Task

T = TypeVar("T")
MIN_BATCH = 32
"""Smallest runner batch (requests handed to the client at once); the default is 4 x max_in_flight."""
PROBE_TRIES = 3


class OpenAIModel(ModelAdapter):
    """Serves 'generate' (and 'loglikelihood' where the server echoes prompt log-probabilities) through an
    OpenAI-compatible endpoint; prompts over the known window are never sent."""

    capabilities = frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD})

    def __init__(self, spec: ModelSpec) -> None:
        o = cast("OpenAIOptions", spec.options)
        self.spec = spec
        self.options = o
        target = parse_target(spec.target, spec.raw)
        self.served_model, self.base_url, self.hosted = target.model, target.base_url, target.hosted
        self.base_urls = target.base_urls
        self.limits = ClientLimits(
            max_in_flight=o.max_in_flight,
            rpm=o.rpm,
            tpm=o.tpm,
            timeout_s=o.timeout,
            max_attempts=o.max_attempts,
            backoff_base_s=o.backoff_base,
            backoff_cap_s=o.backoff_cap,
            seed=o.retry_seed,
        )
        self.client: ServedClient | ServerPool = self._client()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openai-client", daemon=True)
        self._thread.start()
        try:
            loaded = load_served_tokenizer(spec, warn=True)
            self.renderer = PromptRenderer(spec, loaded)
            facts = self._probe()
            self._follow_slots(facts)
            self.count_mode = self._count_mode(loaded.exact)
        except BaseException:
            self.close()
            raise
        self.thinking_tokens = o.thinking_tokens
        self.sampling: Sampling | None = greedy_sampling(o.neutral, self.hosted) if o.decoding == "greedy" else None
        settings: dict[str, Any] = {"decoding": o.decoding, "tokenizer_from": loaded.source, **self.renderer.settings()}
        if self.sampling is not None:  # what every request carries (the seed too), as sent
            settings["generation"] = {**self.sampling.record(), "seed": o.seed}
        if self.sampling is None and "seed" in o.model_fields_set:  # decoding=default sends a seed only when given
            settings["seed"] = o.seed
        if o.thinking_tokens:
            settings["thinking_tokens"] = o.thinking_tokens
        if o.reasoning_effort:
            settings["reasoning_effort"] = o.reasoning_effort
        window = served_window(o.max_length, facts, known_window(self.served_model))
        meta = model_meta(
            spec,
            loaded.tokenizer,
            self.capabilities,
            revision=self.served_model,
            context_window=window.tokens,
            settings=settings,
            runtime=self._runtime(window, facts),
        )
        super().__init__(meta, loaded.tokenizer)
        self.batch_size = o.batch_size or max(MIN_BATCH, 4 * self.limits.max_in_flight)
        self._server_counts: dict[tuple[str, str], int] = {}
        self._tokenize_ok: bool | None = None
        self._warned_lengths = False
        self._echo_refusal: str | None = None
        self._echo_checked = False
        self._choices: dict[tuple[str, str, tuple[str, ...]], tuple[list[int], ChoiceIds]] = {}

    def __repr__(self) -> str:
        return f"OpenAIModel({self.served_model!r} at {self.base_url!r}, api_key_env={self.options.api_key_env!r})"

    # --- the private event loop ---------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the adapter's own loop thread (works whether or not the caller has a loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _client(self) -> ServedClient | ServerPool:
        o = self.options
        if len(self.base_urls) > 1:
            return ServerPool(self.base_urls, self.served_model, o.api_key_env, self.limits)
        return ServedClient(self.base_url, self.served_model, o.api_key_env, self.limits)

    def _follow_slots(self, facts: ServerFacts) -> None:
        """Unless `max_in_flight` was given, send at most as many requests at once as the server has slots (llama.cpp's
        `total_slots`): a one-slot server queues the rest, and their timeouts run while they wait."""
        if facts.slots is None or "max_in_flight" in self.options.model_fields_set:
            return
        if facts.slots != self.limits.max_in_flight:
            self._run(self.client.aclose())
            self.limits = replace(self.limits, max_in_flight=facts.slots)
            self.client = self._client()

    def _runtime(self, window: WindowSource, facts: ServerFacts) -> dict[str, Any]:
        """How it was served here (never part of the identity): the window and where it came from, what the server
        reported, and the requests sent at once and why."""
        given = "max_in_flight" in self.options.model_fields_set
        why = "max_in_flight option" if given else (facts.slots_source or "default (the server reports no slots)")
        return {
            "window": window.record(),
            "server": facts.record(),
            "max_in_flight": {"requests": self.limits.max_in_flight, "source": why},
        }

    def _probe(self) -> ServerFacts:
        """Reach the server once before any task (/v1/models, llama.cpp's /props): its context window and slots, or a
        clear error if it is down or refuses the key."""
        import openai

        last: Exception | None = None
        for attempt in range(PROBE_TRIES):
            try:
                return self._run(self.client.server_facts(props=not self.hosted))
            except openai.AuthenticationError as exc:
                raise PrerequisiteError(
                    f"{self.base_url} refused the API key (HTTP {exc.status_code}); set ${self.options.api_key_env}"
                ) from None
            except openai.APIConnectionError as exc:
                last = exc
                time.sleep(0.2 * (attempt + 1))
            except (openai.APIError, ValueError):
                return ServerFacts()  # no model list here (or a fault): the window comes from max_length or the table
        raise PrerequisiteError(
            f"cannot reach {self.base_url} ({self.client.scrub(str(last))}); is the server running? "
            "(the spec is openai:<model>@<base_url>)"
        )

    def _count_mode(self, exact: bool) -> str:
        """local or server: how prompt_tokens() measures (auto: local when the tokenizer is the model's own)."""
        mode = self.options.count
        if mode == "local" or (mode == "auto" and exact):
            return "local"
        try:
            n = None if self.hosted else self._tokenize(Rendered(None, "Hello"))
        except PrerequisiteError:
            n = None
        if n is None:
            if mode == "server":
                raise ConfigError(
                    f"model spec {self.spec.raw!r}: count=server but {self.base_url} has no tokenize endpoint "
                    "(vLLM: /tokenize, llama.cpp: /extras/tokenize); give ?tokenizer= instead"
                )
            return "local"
        return "server"

    # --- measuring ----------------------------------------------------------------------------------------

    def prompt_tokens(self, request: Request) -> int:
        """The prompt's tokens as sent: counted by the server (count=server) or locally (see openai_prompt.py)."""
        if self.count_mode != "server":
            return self.renderer.count(request)
        key = (request.prompt, request.answer_prefix)
        held = self._server_counts.get(key)
        if held is None:
            held = self._tokenize(self.renderer.render(request))
            if held is None:
                raise PrerequisiteError(f"{self.base_url} stopped answering its tokenize endpoint (count=server)")
            if len(self._server_counts) >= 256:
                self._server_counts.pop(next(iter(self._server_counts)))
            self._server_counts[key] = held
        return held

    def _tokenize(self, rendered: Rendered) -> int | None:
        """The server's token count of a rendered prompt (a few tries); PrerequisiteError if it keeps failing."""
        import openai

        fields = rendered.tokenize_fields
        for attempt in range(PROBE_TRIES):
            try:
                return self._run(self.client.tokenize(prompt=rendered.prompt, messages=rendered.messages, **fields))
            except (openai.APIError, ValueError) as exc:
                if attempt + 1 == PROBE_TRIES:
                    raise PrerequisiteError(
                        f"{self.base_url}: the tokenize endpoint failed: {self.client.scrub(str(exc))[:200]}"
                    ) from None
                time.sleep(0.2 * (attempt + 1))
        return None

    def fits(self, request: Request, prompt_tokens: int) -> bool:
        """Prompt + answer budget + thinking budget within the known window (always, when none is known); with
        choices (`loglikelihood`), prompt + the longest choice + the one token an echo request generates."""
        window = self.meta.context_window
        if request.choices:
            return window is None or prompt_tokens + self.choice_tokens(request) + 1 <= window
        return window is None or prompt_tokens + request.max_new_tokens + self.thinking_tokens <= window

    # --- log-likelihood (models/openai/likelihood.py) -------------------------------------------------------

    @property
    def _scores_ids(self) -> bool:
        """Whether choices are sent as token ids (the model's own HF tokenizer is loaded here), else as text."""
        return self.renderer.loaded.exact and self.renderer.loaded.hf is not None

    def _choice_ids(self, request: Request) -> tuple[list[int], ChoiceIds]:
        """The rendered prompt's ids and each choice's ids in context (as `hf:` scores them), through a small cache."""
        key = (request.prompt, request.answer_prefix, request.choices)
        got = self._choices.get(key)
        if got is None:
            hf = self.renderer.loaded.hf
            text, special = self.renderer.completion_text(request)
            prompt = hf(text, add_special_tokens=special)["input_ids"]
            got = (prompt, all_choice_ids(hf, text, special, prompt, request.choices))
            if len(self._choices) >= 64:
                self._choices.pop(next(iter(self._choices)))
            self._choices[key] = got
        return got

    def choice_tokens(self, request: Request) -> int:
        """The longest choice's tokens: in context after the rendered prompt where the model's tokenizer is here."""
        if self._scores_ids and request.choices:
            return max(len(ids) for ids in self._choice_ids(request)[1].ids)
        return super().choice_tokens(request)

    def unsupported(self, capability: Capability) -> str | None:
        """For 'loglikelihood': why the server cannot score choices, asked once before a task (`_echo_refusal`)."""
        if capability is not Capability.LOGLIKELIHOOD:
            return None
        if not self._echo_checked:
            self._echo_checked = True
            why = self._echo_problem()
            self._echo_refusal = None if why is None else f"{self.base_url} cannot score choices by likelihood: {why}"
        return self._echo_refusal

    def _echo_problem(self) -> str | None:
        """Two echo requests: the probe text must come back with its log-probabilities, and its greedy next token,
        appended, must score as greedy (a server that reports each prompt token under the next position's
        distribution, as llama-cpp-python 0.3 does, fails that); the reason, or None."""
        base = self._echo_base(None)
        limits = replace(self.limits, max_attempts=min(PROBE_TRIES, self.limits.max_attempts))
        client = ServedClient(self.base_url, self.served_model, self.options.api_key_env, limits)
        try:
            return self._echo_answers(client, base)
        finally:
            self._run(client.aclose())

    def _echo_base(self, affinity: str | None) -> dict[str, Any]:
        """The fields of every echo request: greedy, one token, the prompt's log-probabilities (`affinity`: the
        server a document's requests stick to, with several base URLs)."""
        base: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0, "seed": self.options.seed, "stream": False}
        base["echo_logprobs"] = 1
        if affinity is not None:
            base["affinity"] = affinity
        return base

    def _echo_answers(self, client: ServedClient, base: dict[str, Any]) -> str | None:
        first = self._run(client.complete(ServedRequest(prompt=PROBE_TEXT, id="echo-probe", **base)))
        if not first.ok:
            return first.error
        got = read_choice(first.logprobs, ChoiceSlot("text", 1, len(PROBE_TEXT)))  # the first has none
        if isinstance(got, str):
            return got
        if not first.text.startswith(PROBE_TEXT) or not first.text[len(PROBE_TEXT) :]:
            return None  # the echo is not the text sent (a BOS shown) or the model stopped: alignment not checkable
        nxt = first.text[len(PROBE_TEXT) :]
        second = self._run(client.complete(ServedRequest(prompt=PROBE_TEXT + nxt, id="echo-probe-2", **base)))
        if not second.ok:
            return second.error
        check = read_choice(second.logprobs, ChoiceSlot("text", len(PROBE_TEXT), len(PROBE_TEXT) + len(nxt)))
        if isinstance(check, str):
            return check
        if not check.greedy:
            return (
                f"its echoed log-probabilities are not those of the prompt's tokens: the greedy next token {nxt!r}, "
                "sent back in the prompt, does not score as the most likely there (llama-cpp-python 0.3 reports each "
                "prompt token's log-probability under the following position's distribution)"
            )
        return None

    def loglikelihood(self, requests: Sequence[Request]) -> list[Prediction]:
        """Every choice of every request as one echo request (`/v1/completions`, echo, logprobs 1, max_tokens 1),
        all sent in order, request i's choices before request i+1's (the server's prefix cache serves the shared
        document); a request whose choice could not be scored is an `error` prediction with the reason."""
        if not requests:
            return []
        plans = [self._echo_requests(r) for r in requests]
        flat = [sr for _, pairs in plans for sr, _ in pairs]
        t0 = time.perf_counter()
        results = self._run(self.client.complete_many(flat)) if flat else []
        seconds = (time.perf_counter() - t0) / len(requests)
        preds, at = [], 0
        for request, (prompt_tokens, pairs) in zip(requests, plans, strict=True):
            mine = results[at : at + len(pairs)]
            at += len(pairs)
            pred = self._choice_prediction(request, prompt_tokens, pairs, mine, seconds)
            preds.append(pred)
            if self.on_prediction is not None:
                self.on_prediction(request, pred)
        self._warn_failures(preds)
        return preds

    def _echo_requests(self, request: Request) -> tuple[int, list[tuple[ServedRequest, ChoiceSlot]]]:
        """The shared prompt's tokens and, per choice, the echo request and where the choice sits in its echo."""
        base = self._echo_base(sha256_text(request.context)[:16] if len(self.base_urls) > 1 else None)
        out: list[tuple[ServedRequest, ChoiceSlot]] = []
        if self._scores_ids:
            prompt, choices = self._choice_ids(request)
            for j, (ids, slot) in enumerate(plan_ids(prompt, choices.ids)):
                rid = f"{request.sample_id}#{request.part}/{j}"
                req = ServedRequest(prompt="", prompt_ids=tuple(ids), id=rid, prompt_tokens=len(ids), **base)
                out.append((req, slot))
            return len(prompt), out
        text, _ = self.renderer.completion_text(request)
        n = self.renderer.count(request)
        for j, (sent, slot) in enumerate(plan_text(text, request.choices)):
            rid = f"{request.sample_id}#{request.part}/{j}"
            tokens = n + self.tokenizer.count(request.choices[j])
            out.append((ServedRequest(prompt=sent, id=rid, prompt_tokens=tokens, **base), slot))
        return n, out

    def _choice_prediction(
        self,
        request: Request,
        prompt_tokens: int,
        pairs: list[tuple[ServedRequest, ChoiceSlot]],
        results: list[ServedResult],
        seconds: float,
    ) -> Prediction:
        if not pairs:
            return Prediction(status="error", prompt_tokens=prompt_tokens, error="loglikelihood: no choices")
        stats = results[0].stats()
        stats["requests"] = len(results)
        logprobs, tokens, greedy = [], [], []
        for j, ((_req, slot), res) in enumerate(zip(pairs, results, strict=True)):
            if not res.ok:
                return Prediction(status="error", error=res.error, seconds=seconds, data={"serving": res.stats()})
            got = read_choice(res.logprobs, slot)
            if isinstance(got, str):
                return Prediction(
                    status="error",
                    prompt_tokens=prompt_tokens,
                    error=f"choice {j}: {got}",
                    seconds=seconds,
                    data={"serving": res.stats()},
                )
            logprobs.append(got.logprob)
            tokens.append(got.tokens)
            greedy.append(got.greedy)
        first = pairs[0][0]
        check = self.length_check(first.prompt_tokens, results[0].prompt_tokens, "usage")
        data = {
            "logprobs": logprobs,
            "choice_tokens": tokens,
            "greedy": greedy,
            "serving": stats,
            "length_check": check,
        }
        return Prediction(prompt_tokens=prompt_tokens, completion_tokens=0, seconds=seconds, data=data)

    # --- serving ------------------------------------------------------------------------------------------

    @property
    def api_key_env(self) -> str:
        """The NAME of the environment variable the key is read from."""
        return self.options.api_key_env

    def billed_calls(self, request: Request) -> list[tuple[int, int]]:
        """A likelihood request's calls as billed: per choice, its echo call's prompt + choice tokens and 1 token."""
        _, pairs = self._echo_requests(request)
        return [(int(req.prompt_tokens or 0), req.max_tokens) for req, _ in pairs]

    def max_output_tokens(self, request: Request) -> int:
        """The most tokens a reply may generate: the answer budget plus the thinking budget."""
        return request.max_new_tokens + self.thinking_tokens

    def served_request(self, request: Request, prompt_tokens: int | None = None) -> ServedRequest:
        """Exactly what a run sends for `request` (`prompt_tokens`: its measured length, for the tpm window)."""
        return self._served(request, prompt_tokens)[0]

    def _served(self, request: Request, prompt_tokens: int | None = None) -> tuple[ServedRequest, Rendered]:
        o = self.options
        rendered = self.renderer.render(request)
        sampling = self.sampling
        fields = dict(sampling.fields) if sampling is not None else {}
        temperature = fields.pop("temperature", None)
        req = ServedRequest(
            messages=rendered.messages,
            prompt=rendered.prompt,
            max_tokens=self.max_output_tokens(request),
            id=f"{request.sample_id}#{request.part}",
            temperature=temperature,
            seed=o.seed if sampling is not None or "seed" in o.model_fields_set else None,
            sampling=fields,
            stream=o.stream,
            max_tokens_param="max_completion_tokens" if self.hosted and rendered.messages else "max_tokens",
            reasoning_effort=o.reasoning_effort,
            extra_body={**(sampling.extra if sampling is not None else {}), **rendered.extra_body},
            prompt_tokens=prompt_tokens if prompt_tokens is not None else self.renderer.count(request),
            affinity=sha256_text(request.context)[:16] if len(self.base_urls) > 1 else None,
        )
        return req, rendered

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """Every request of the batch, concurrently and in order; failures are `error` predictions."""
        if not requests:
            return []
        pairs = [self._served(r) for r in requests]
        preds = self._complete_as_they_arrive(requests, pairs)
        self._warn_lengths(preds)
        self._warn_failures(preds)
        return preds

    def _complete_as_they_arrive(
        self, requests: Sequence[Request], pairs: list[tuple[ServedRequest, Rendered]]
    ) -> list[Prediction]:
        """The batch's predictions; each is built (here, off the loop thread) and handed to `on_prediction` as
        its reply arrives. A reply's `seconds` is the batch's wall time since the previous reply, so they sum to
        the batch's wall time, as the per-request share did."""
        arrived: queue.SimpleQueue[tuple[int, ServedResult]] = queue.SimpleQueue()
        coro = self.client.complete_many([p[0] for p in pairs], on_result=lambda i, res: arrived.put((i, res)))
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        preds: list[Prediction | None] = [None] * len(requests)
        last = time.perf_counter()

        def take(i: int, res: ServedResult) -> None:
            nonlocal last
            now = time.perf_counter()
            preds[i] = pred = self._prediction(*pairs[i], res, now - last)
            last = now
            if self.on_prediction is not None:
                self.on_prediction(requests[i], pred)

        while not future.done() or not arrived.empty():
            with contextlib.suppress(queue.Empty):
                take(*arrived.get(timeout=0.05))
        results = future.result()  # raises what the batch raised
        return [
            p if p is not None else self._prediction(*pair, res, 0.0)
            for p, pair, res in zip(preds, pairs, results, strict=True)
        ]

    def _prediction(self, req: ServedRequest, rendered: Rendered, res: ServedResult, seconds: float) -> Prediction:
        stats = res.stats()
        if not res.ok:
            return Prediction(status="error", error=res.error, seconds=seconds, data={"serving": stats})
        reply = split_reasoning(res.text, res.reasoning)
        answer = strip_echoed_prefix(reply.answer, rendered.strip_prefix) if rendered.strip_prefix else reply.answer
        if res.prompt_tokens is not None:
            check = self.length_check(req.prompt_tokens, res.prompt_tokens, "usage")
        else:  # no usage in the stream (llama.cpp): the server's tokenize endpoint counts what was sent
            check = self.length_check(req.prompt_tokens, self._server_count(rendered), "tokenize")
            stats["prompt_tokens"] = check["server_prompt_tokens"]  # so throughput counts the prompt tokens
        data: dict[str, Any] = {"serving": stats, "length_check": check}
        if answer != res.text:
            data["raw_text"] = res.text
        if reply.reasoning:
            data["reasoning"] = reply.reasoning
        if reply.truncated:
            data["reasoning_truncated"] = True
        return Prediction(
            text=answer,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
            seconds=seconds,
            data=data,
        )

    def _server_count(self, rendered: Rendered) -> int | None:
        """The server's count of a rendered prompt (tokenize endpoint), None where it has none."""
        if self._tokenize_ok is False or self.hosted:
            return None
        try:
            n = self._tokenize(rendered)
        except PrerequisiteError:
            return None
        if self._tokenize_ok is None:
            self._tokenize_ok = n is not None
        return n

    def length_check(self, expected: int | None, server: int | None, source: str = "usage") -> dict[str, Any]:
        """The server's prompt tokens (from `usage`, else its tokenize endpoint) against the measured ones: a
        mismatch is a difference beyond max(2, length_tolerance x expected)."""
        tol = max(2, math.ceil(self.options.length_tolerance * (expected or 0)))
        check: dict[str, Any] = {
            "expected_prompt_tokens": expected,
            "server_prompt_tokens": server,
            "source": source if server is not None else None,
            "tolerance": tol,
        }
        if server is None or expected is None:
            check["mismatch"] = None
        else:
            check["delta"] = server - expected
            check["mismatch"] = abs(server - expected) > tol
        return check

    def _warn_failures(self, preds: list[Prediction]) -> None:
        failed = [p for p in preds if p.status == "error"]
        if failed:
            kinds = Counter(str((p.data or {}).get("serving", {}).get("error_kind")) for p in failed)
            reasons = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))
            text = (
                f"{self.meta.name}: {len(failed)} of {len(preds)} requests failed after every attempt ({reasons}; "
                f"first: {failed[0].error}); recorded as errors, re-run by the same command (resume)"
            )
            console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)

    def _warn_lengths(self, preds: list[Prediction]) -> None:
        bad = [p for p in preds if p.data and (p.data.get("length_check") or {}).get("mismatch")]
        if bad and not self._warned_lengths:
            self._warned_lengths = True
            check = cast(Mapping[str, Any], bad[0].data)["length_check"]  # bad: only predictions with data
            text = (
                f"{self.meta.name}: the server counts {check['server_prompt_tokens']} prompt tokens where "
                f"{check['expected_prompt_tokens']} were measured (tolerance {check['tolerance']}); such samples are "
                "flagged in data.length_check and the run file's serving section. Give ?tokenizer=<the model's HF "
                "tokenizer> for exact lengths"
            )
            console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)

    def bind(self, task: Task, samples: Sequence[Sample]) -> ModelAdapter:
        """Itself; the length warning is given once per task."""
        self._warned_lengths = False
        return self

    def close(self) -> None:
        """Close the HTTP client and stop the loop thread."""
        loop = getattr(self, "_loop", None)
        if loop is None or loop.is_closed():
            return
        if loop.is_running():
            with contextlib.suppress(Exception):  # closing must not mask the error that led here
                self._run(self.client.aclose())
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=10)
        if not loop.is_running():
            loop.close()
