"""The model-adapter protocol: batch-first methods per capability, and the metadata that keys predictions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from longctx_eval.capability import Capability
from longctx_eval.hashing import sha256_json
from longctx_eval.results import ModelMeta
from longctx_eval.sample import Prediction, Request, Sample
from longctx_eval.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.task import Task


def identity_of(meta: ModelMeta) -> dict[str, Any]:
    """What keys a prediction: model name and spec, revision, weights hash, the generation/retrieval settings."""
    return {"name": meta.name, "spec": meta.spec, "revision": meta.revision, "sha256": meta.sha256, **meta.settings}


def portable_identity(meta: ModelMeta) -> dict[str, Any]:
    """What makes two runs the same model wherever it is installed: weights (or revision), tokenizer, settings
    (with a local folder's config, tokenizer and chat-template files by content: `models/model_files.py`).

    Unlike `identity_of` (which keys predictions and keeps the spec and folder path, so existing
    predictions.jsonl files resume), it leaves out names and install paths: a clone elsewhere, or another
    virtualenv, is the same model; other weights, dtype, context window or settings are not.
    """
    ident = {
        "kind": meta.kind,
        "sha256": meta.sha256,
        "tokenizer_sha256": meta.tokenizer_sha256,
        "dtype": meta.dtype,
        "context_window": meta.context_window,
        **meta.settings,
    }
    if meta.sha256 is None:  # no weights hash (a hub id, an index): its revision names it
        ident["revision"] = meta.revision
    return ident


def model_meta(spec: ModelSpec, tokenizer: Tokenizer, capabilities: Iterable[Capability], **fields: Any) -> ModelMeta:
    """The run-file record of a loaded model, its identity hash filled in."""
    meta = ModelMeta(
        spec=spec.raw,
        name=spec.name,
        kind=spec.kind,
        tokenizer=tokenizer.name,
        tokenizer_sha256=tokenizer.sha256,
        capabilities=sorted(str(c) for c in capabilities),
        **fields,
    )
    return meta.model_copy(update={"identity_sha256": sha256_json(portable_identity(meta))})


class ModelAdapter:
    """Base of every adapter; subclasses set `capabilities` and implement the methods they declare."""

    capabilities: frozenset[Capability] = frozenset()
    on_prediction: Callable[[Request, Prediction], None] | None = None
    """Set by the runner around a batch: an adapter that finishes a batch's requests one by one (`openai:`) calls
    it with each request and its prediction as soon as it is ready, so a kill loses only requests in flight."""

    measures_lazily = False
    """Whether measuring a request is its costly work (`rag:` retrieves, and writes notes, to know its prompt): the
    runner then measures each batch just before serving it, so a stop loses only the batch in hand and progress
    shows from the first request, instead of measuring every request first."""

    def __init__(self, meta: ModelMeta, tokenizer: Tokenizer) -> None:
        self.meta = meta
        self.tokenizer = tokenizer

    @property
    def identity(self) -> dict[str, Any]:
        """What keys a prediction (unchanged across versions, so earlier predictions.jsonl files resume)."""
        return identity_of(self.meta)

    def prompt_tokens(self, request: Request) -> int:
        """Measured prompt length of `request` in this model's tokenizer, exactly as it will be sent."""
        return self.tokenizer.count(request.prompt)

    def choice_tokens(self, request: Request) -> int:
        """Tokens of the longest of `request.choices` (0 without choices), in this model's tokenizer; an adapter
        that tokenizes a choice in context (after the prompt, `hf:`) counts it that way."""
        return max((self.tokenizer.count(c) for c in request.choices), default=0)

    def fits(self, request: Request, prompt_tokens: int) -> bool:
        """Whether prompt plus generation budget fits the context window (always, when there is none); a request
        with choices (`loglikelihood`) needs the prompt plus its longest choice to fit instead."""
        window = self.meta.context_window
        return window is None or prompt_tokens + self.output_tokens(request) <= window

    def output_tokens(self, request: Request) -> int:
        """What follows the prompt in the window: the longest choice where the request has choices, else the
        generation budget."""
        return self.choice_tokens(request) if request.choices else request.max_new_tokens

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """Greedy completions for a batch of requests."""
        raise NotImplementedError(f"{type(self).__name__} does not serve 'generate'")

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        """Ranked chunk hits of each request's context for its query."""
        raise NotImplementedError(f"{type(self).__name__} does not serve 'retrieve'")

    def loglikelihood(self, requests: Sequence[Request]) -> list[Prediction]:
        """Each request's choices scored by summed log-probability after its rendered prompt (see `Request.choices`)."""
        raise NotImplementedError(f"{type(self).__name__} does not serve 'loglikelihood'")

    def serve(self, capability: Capability | str, requests: Sequence[Request]) -> list[Prediction]:
        """Dispatch a batch to the method that serves `capability`."""
        return getattr(self, Capability(capability).method)(requests)

    def unsupported(self, capability: Capability) -> str | None:
        """Why this model cannot serve `capability` although it declares it (its architecture, read from the
        config before any request is sent), or None when it can; the runner skips the task with this reason."""
        return None

    def bind(self, task: Task, samples: Sequence[Sample]) -> ModelAdapter:
        """The adapter that answers `task`'s requests for `samples`: itself, except for the oracle."""
        return self

    def close(self) -> None:
        """Release memory held by the model."""
