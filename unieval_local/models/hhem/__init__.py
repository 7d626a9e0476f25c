"""The hhem backend: HHEM-2.1-Open reimplemented natively (a T5 encoder with a token-classification head)."""

__all__: list[str] = []
