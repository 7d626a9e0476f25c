"""The seq-classifier backend: encoder cross-encoders with a classification head (DeBERTa NLI)."""

__all__: list[str] = []
