"""`rag:<retriever>+<generator>`: the retriever picks chunks of each request's context, the generator answers from
them. The prompt is the task's own, with the retrieved passages where the context was (models/rag/prompt.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError
from longctx_eval.hashing import sha256_text
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.loader import load_model, load_tokenizer_of
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import RagOptions
from longctx_eval.models.rag.prompt import (
    NOTE_ANSWER_PREFIX,
    NOTE_PROMPT,
    NOTE_TOKENS,
    PASSAGE_SEPARATOR,
    merge_spans,
    next_query,
    note_request,
    passages_text,
    substitute_context,
)
from longctx_eval.results import ModelMeta
from longctx_eval.sample import Hit, Prediction, Request, RetrievalParams, Sample
from longctx_eval.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from longctx_eval.task import Task


@dataclass(frozen=True)
class RagPlan:
    """What retrieval made of one request: the generator's request, the chunks found and how they were found."""

    request: Request
    hits: tuple[Hit, ...]
    """Every chunk retrieved, deduplicated, in the order found (round 1's ranking first)."""
    rounds: tuple[dict[str, Any], ...]
    retrieval_seconds: float
    note_seconds: float


class RagModel(ModelAdapter):
    """Serves 'generate' with a retriever and a generator loaded from the spec's two parts."""

    capabilities = frozenset({Capability.GENERATE})
    measures_lazily = True  # a prompt is known only after retrieval (and, iterative, the generator's notes)

    def __init__(self, spec: ModelSpec) -> None:
        retriever_spec, generator_spec = spec.parts
        self.spec = spec
        self.options = cast("RagOptions", spec.options)
        self.retriever = load_model(retriever_spec)
        try:
            self.generator = load_model(generator_spec)
        except BaseException:
            self.retriever.close()
            raise
        try:
            _check_serves(spec, self.retriever, Capability.RETRIEVE, "retriever")
            _check_serves(spec, self.generator, Capability.GENERATE, "generator")
        except ConfigError:
            self.close()
            raise
        self.batch_size = int(getattr(self.generator, "batch_size", 1) or 1)
        super().__init__(self._meta(), self.generator.tokenizer)
        self._plans: dict[tuple, RagPlan] = {}

    def _meta(self) -> ModelMeta:
        o, gen, ret = self.options, self.generator.meta, self.retriever.meta
        settings: dict[str, Any] = {
            "retriever": _part_identity(ret),
            "generator": _part_identity(gen),
            "k": o.k,
            "iterative": o.iterative,
            "hops": o.hops if o.iterative else 1,
            "chunk_tokens": o.chunk_tokens,  # None: the request's RetrievalParams
            "chunk_overlap": o.chunk_overlap,
            "separator": PASSAGE_SEPARATOR,
        }
        if o.iterative:
            settings["note"] = {
                "prompt_sha256": sha256_text(NOTE_PROMPT + NOTE_ANSWER_PREFIX),
                "max_new_tokens": NOTE_TOKENS,
            }
        params = [p for p in (ret.params, gen.params) if p is not None]
        return model_meta(
            self.spec,
            self.generator.tokenizer,
            self.capabilities,
            params=sum(params) if params else None,
            dtype=gen.dtype,
            chat_template_sha256=gen.chat_template_sha256,
            context_window=gen.context_window,
            settings=settings,
        )

    def prompt_tokens(self, request: Request) -> int:
        """The RAG prompt's length exactly as the generator renders it (retrieval runs here once, then is kept)."""
        return self.generator.prompt_tokens(self.plan(request).request)

    def fits(self, request: Request, prompt_tokens: int) -> bool:
        """Whether the RAG prompt plus the generation budget fits the generator's window."""
        return self.generator.fits(self.plan(request).request, prompt_tokens)

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """The generator's answers from the retrieved passages; hits are the chunks it read."""
        plans = [self.plan(r) for r in requests]
        preds = self.generator.generate([p.request for p in plans])
        out = []
        for req, plan, pred in zip(requests, plans, preds, strict=True):
            self._plans.pop(_plan_key(req), None)
            data = {
                "spans": [list(s) for s in merge_spans(plan.hits)],
                "retrieval_seconds": round(plan.retrieval_seconds, 6),
                "note_seconds": round(plan.note_seconds, 6),
                "generation_seconds": round(pred.seconds, 6),
                "rounds": list(plan.rounds),
            }
            seconds = plan.retrieval_seconds + plan.note_seconds + pred.seconds
            out.append(replace(pred, hits=plan.hits, seconds=seconds, data=data))
        return out

    def plan(self, request: Request) -> RagPlan:
        """Retrieve for `request` (once: kept until it is served) and build the generator's request."""
        key = _plan_key(request)
        held = self._plans.get(key)
        if held is None:
            held = self._plans[key] = self._retrieve(request)
        return held

    def _retrieve(self, request: Request) -> RagPlan:
        if not request.context:  # nothing to retrieve from: the prompt goes as it is
            return RagPlan(request, (), (), 0.0, 0.0)
        try:
            substitute_context(request, "")  # check the contract before any work
        except ConfigError as exc:
            raise ConfigError(f"model spec {self.spec.raw!r}: {exc}") from None
        o = self.options
        params = RetrievalParams(
            chunk_tokens=o.chunk_tokens or request.retrieval.chunk_tokens,
            chunk_overlap=request.retrieval.chunk_overlap if o.chunk_overlap is None else o.chunk_overlap,
            k=o.k,
        )
        hits: list[Hit] = []
        seen: set[tuple[int, int]] = set()
        rounds: list[dict[str, Any]] = []
        retrieval_s = note_s = 0.0
        query = request.query
        for hop in range(o.hops if o.iterative else 1):
            found = self.retriever.retrieve([replace(request, query=query, retrieval=params)])[0]
            retrieval_s += found.seconds
            new = [h for h in found.hits if (h.char_start, h.char_end) not in seen]
            seen.update((h.char_start, h.char_end) for h in new)
            hits.extend(new)
            rounds.append({"query": query, "hits": [[h.char_start, h.char_end, h.score] for h in found.hits]})
            if hop + 1 == o.hops or not o.iterative:
                break
            note, seconds = self._note(request, passages_text(request.context, merge_spans(hits)))
            note_s += seconds
            rounds[-1]["note"] = note
            if not note:  # nothing new to search with: another round would retrieve the same chunks
                break
            query = next_query(request.query, note)
        text = passages_text(request.context, merge_spans(hits))
        return RagPlan(substitute_context(request, text), tuple(hits), tuple(rounds), retrieval_s, note_s)

    def _note(self, request: Request, text: str) -> tuple[str | None, float]:
        """The generator's note on the passages so far; None when its prompt does not fit the window."""
        ask = note_request(request, text)
        if not self.generator.fits(ask, self.generator.prompt_tokens(ask)):
            return None, 0.0
        pred = self.generator.generate([ask])[0]
        return (pred.text or "").strip(), pred.seconds

    def bind(self, task: Task, samples: Sequence[Sample]) -> ModelAdapter:
        """Itself (a rag model answers like any generator); plans kept from an earlier task are dropped."""
        self._plans.clear()
        return self

    def close(self) -> None:
        self._plans = {}
        for part in ("retriever", "generator"):
            adapter = getattr(self, part, None)
            if adapter is not None:
                adapter.close()


def rag_tokenizer(spec: ModelSpec) -> Tokenizer:
    """A rag model measures prompts in its generator's tokenizer (loaded without weights)."""
    return load_tokenizer_of(spec.parts[1])


def _plan_key(request: Request) -> tuple:
    return (
        request.sample_id,
        request.part,
        request.prompt,
        request.context,
        request.query,
        request.retrieval,
        request.answer_prefix,
        request.max_new_tokens,
    )


def _part_identity(meta: ModelMeta) -> dict[str, Any]:
    """What names a part in the rag identity: its kind, portable identity hash, weights hash and settings."""
    return {
        "kind": meta.kind,
        "identity_sha256": meta.identity_sha256,
        "sha256": meta.sha256,
        "settings": meta.settings,
    }


def _check_serves(spec: ModelSpec, adapter: ModelAdapter, capability: Capability, role: str) -> None:
    if capability not in adapter.capabilities:
        serves = ", ".join(sorted(adapter.capabilities)) or "nothing"
        raise ConfigError(
            f"model spec {spec.raw!r}: its {role} {adapter.meta.spec!r} serves {serves}; expected one that serves "
            f"{capability.value!r}"
        )
