"""Text handling below the registry: sentence splitting (:mod:`.sentences`), the prompt
formats that turn an aspect's fields into a Boolean-QA query (:mod:`.prompts`), and key-point
extraction (:mod:`.keypoints`)."""

__all__: list[str] = []
