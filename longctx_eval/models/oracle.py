"""The oracle: answers every request with the task's gold, so a task's scorer can be checked to give 100%."""

from __future__ import annotations

from longctx_eval.assets import load_tokenizer
from longctx_eval.models.base import ModelAdapter, ModelInfo
from longctx_eval.models.spec import ModelSpec
from longctx_eval.task import CAPABILITIES


class OracleAdapter(ModelAdapter):
    """Serves every capability; the runner asks the task's `oracle(sample)` instead of a model."""

    capabilities = CAPABILITIES
    answers_from_gold = True

    def __init__(self, spec: ModelSpec) -> None:
        tok = load_tokenizer("minilm")
        super().__init__(
            ModelInfo(spec=spec.raw, name="oracle", kind="oracle", tokenizer=tok.name, tokenizer_sha256=tok.sha256),
            tok,
        )
