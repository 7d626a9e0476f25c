"""Text handling below the registry: sentence splitting (:mod:`.sentences`), the prompt
formats that turn an aspect's fields into a Boolean-QA query (:mod:`.prompts`), key-point
extraction (:mod:`.keypoints`), and the claim-list prompts and parser for local generation
(:mod:`.claims`)."""

__all__: list[str] = []
