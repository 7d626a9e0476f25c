"""What can be scored: tasks and their aspects (:mod:`.tasks`), the evaluators that answer
them (:mod:`.evaluators`: checkpoint, prompt format, answer words, limits), and aspects a
user defines in YAML (:mod:`.user_aspects`). Data with did-you-mean errors; no torch."""

__all__: list[str] = []
