"""The `hf:` kind: transformers causal LMs in process (adapter, config, batching, generation, prefix cache)."""
