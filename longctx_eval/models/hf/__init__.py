"""The `hf:` kind: transformers causal LMs in process (adapter, config, batching, generation, prefix cache)."""

from longctx_eval.old_paths import forward

# the names of the old longctx_eval.models.hf module (now hf/adapter.py), one release
__getattr__ = forward(__name__, "longctx_eval.models.hf.adapter")
