"""The `rag:` kind: a retriever and a generator composed (adapter, prompt, spec parsing)."""
