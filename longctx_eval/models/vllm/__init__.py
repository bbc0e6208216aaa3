"""The `vllm:` kind: vLLM in process (engine) and its settings (which import no vLLM)."""
