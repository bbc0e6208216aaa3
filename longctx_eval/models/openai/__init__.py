"""The `openai:` kind: an OpenAI-compatible server as a model (client, pool, limits, prompts, target, tokenizer)."""
