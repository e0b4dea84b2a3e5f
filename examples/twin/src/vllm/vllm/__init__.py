"""vllm (twin)."""
