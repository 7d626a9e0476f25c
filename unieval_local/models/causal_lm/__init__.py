"""The ``causal-lm`` backend: decoder LLM judges (Llama, Qwen2, Granite layouts) read in one
forward pass per prompt (:mod:`.model` loads, :mod:`.runner` renders, batches and reads out)."""

__all__: list[str] = []
