"""Several servers of one model (data parallel, `openai:<model>@<url1>,<url2>,...`) behind one client interface.

Each request goes to the server with the fewest requests in flight (ties: the one sent fewest so far, then the
first listed), except that the requests of one document (`ServedRequest.affinity`, set from the request's
context) all go to the server that got its first one, so that server's prefix cache serves the shared prefix.
Every server takes up to `max_in_flight` requests at once; one rate limiter (rpm, tpm) holds for all of them
together. Requests are dispatched in the order given (request i no later than i+1), as by one server's client.
Each result names the server that answered it (`ServedResult.server`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from longctx_eval.models.openai.client import ServedClient, ServedRequest, ServedResult
from longctx_eval.models.openai.limits import ClientLimits, RateLimiter
from longctx_eval.models.openai.server_facts import ServerFacts, smallest

AFFINITY_KEPT = 4096
"""Documents whose server is remembered (the oldest is forgotten first)."""


class ServerPool:
    """The servers of one model: least-in-flight dispatch with document affinity; ServedClient's interface."""

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        limits: ClientLimits | None = None,
    ) -> None:
        self.limits = limits or ClientLimits()
        self.clients = [ServedClient(u, model, api_key_env, self.limits) for u in base_urls]
        self.model = model
        self.api_key_env = api_key_env
        self.base_url = self.clients[0].base_url
        self.base_urls = [c.base_url for c in self.clients]
        self.limiter = RateLimiter(self.limits.rpm, self.limits.tpm)
        self.in_flight = [0] * len(self.clients)
        self.sent = [0] * len(self.clients)
        self._home: OrderedDict[str, int] = OrderedDict()
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"ServerPool({self.base_urls!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    @property
    def limiter(self) -> RateLimiter:
        """The one rate limiter every server's requests share (replaceable, as ServedClient's)."""
        return self._limiter

    @limiter.setter
    def limiter(self, value: RateLimiter) -> None:
        self._limiter = value
        for c in self.clients:
            c.limiter = value

    def scrub(self, text: str) -> str:
        """`text` with the API key masked."""
        return self.clients[0].scrub(text)

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._cond is None or self._loop is not loop:
            self._cond, self._loop = asyncio.Condition(), loop
        return self._cond

    async def _claim(self, req: ServedRequest) -> int:
        """Wait for a free slot on the request's server (its document's, else the least loaded) and take it."""
        cond, cap = self._condition(), self.limits.max_in_flight
        async with cond:
            home = self._home.get(req.affinity) if req.affinity else None
            if home is not None:
                await cond.wait_for(lambda: self.in_flight[home] < cap)
                self._home.move_to_end(cast(str, req.affinity))  # a home is only found by affinity
                pick = home
            else:
                await cond.wait_for(lambda: min(self.in_flight) < cap)
                pick = min(range(len(self.clients)), key=lambda i: (self.in_flight[i], self.sent[i], i))
                if req.affinity:
                    self._home[req.affinity] = pick
                    if len(self._home) > AFFINITY_KEPT:
                        self._home.popitem(last=False)
            self.in_flight[pick] += 1
            self.sent[pick] += 1
            return pick

    async def _release(self, pick: int) -> None:
        cond = self._condition()
        async with cond:
            self.in_flight[pick] -= 1
            cond.notify_all()

    async def _on(self, pick: int, req: ServedRequest) -> ServedResult:
        try:
            result = await self.clients[pick].complete(req)
        finally:
            await self._release(pick)
        result.server = self.clients[pick].base_url
        return result

    async def complete(self, req: ServedRequest) -> ServedResult:
        """Send one request to its server (see the module docstring)."""
        return await self._on(await self._claim(req), req)

    async def complete_many(
        self, reqs: Sequence[ServedRequest], on_result: Callable[[int, ServedResult], None] | None = None
    ) -> list[ServedResult]:
        """Send requests in the order given, each to its server; results in the same order."""
        out: list[ServedResult | None] = [None] * len(reqs)

        async def run(i: int, pick: int, req: ServedRequest) -> None:
            out[i] = result = await self._on(pick, req)
            if on_result is not None:
                on_result(i, result)

        tasks = []
        try:
            for i, req in enumerate(reqs):
                pick = await self._claim(req)
                tasks.append(asyncio.create_task(run(i, pick, req)))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
        return [r for r in out if r is not None]

    async def models(self) -> list[dict[str, Any]]:
        """The first server's /v1/models entries."""
        return await self.clients[0].models()

    async def context_window(self) -> int | None:
        """The smallest context window the servers report (every server is asked: each must be up)."""
        return (await self.server_facts()).window

    async def server_facts(self, props: bool = True) -> ServerFacts:
        """The smallest window and the fewest slots the servers report (every server is asked: each must be up)."""
        return smallest([await c.server_facts(props) for c in self.clients])

    async def tokenize(
        self, *, prompt: str | None = None, messages: Sequence[Mapping[str, str]] | None = None, **fields: Any
    ) -> int | None:
        """Prompt tokens as the first server counts them (every server serves the same model)."""
        return await self.clients[0].tokenize(prompt=prompt, messages=messages, **fields)

    async def aclose(self) -> None:
        """Close every server's HTTP client."""
        for c in self.clients:
            await c.aclose()
