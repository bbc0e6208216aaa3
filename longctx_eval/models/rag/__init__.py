"""The `rag:` kind: a retriever and a generator composed (adapter, prompt, spec parsing)."""

from longctx_eval.old_paths import forward

# the names of the old longctx_eval.models.rag module (now rag/adapter.py), one release
__getattr__ = forward(__name__, "longctx_eval.models.rag.adapter")
