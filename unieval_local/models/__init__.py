"""Everything that turns prompts into probabilities: the Runner protocol (:mod:`.base`), the
shared batching core (:mod:`.batching`), devices (:mod:`.devices`), checkpoint resolution,
identity and fingerprints (:mod:`.checkpoints`), staging (:mod:`.download`), offline checks
(:mod:`.verify`), the score cache (:mod:`.cache`) and one package per backend (:mod:`.t5`).
torch and transformers are imported only here, lazily."""

__all__: list[str] = []
