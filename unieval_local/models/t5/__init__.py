"""The T5 seq2seq backend (UniEval, MiniCheck-Flan-T5): strict checkpoint loading and
checks (:mod:`.loading`) and the exact single-step runner (:mod:`.runner`)."""

__all__: list[str] = []
