"""The Runner protocol: what the engine needs from whatever turns prompts into
probabilities (the T5 runner, the score-cache wrapper, the tests' fake runner), and the
factory an engine makes runners with. No torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..pipeline.planning import TokenCounter
from ..registry.evaluators import Evaluator
from .checkpoints import ResolvedCheckpoint

__all__ = ["FINISH_REASONS", "Generation", "Runner", "RunnerFactory"]

#: why a generation ended (:attr:`Generation.finish`)
FINISH_REASONS = ("eos", "stop", "length", "too_long")


@dataclass(frozen=True)
class Generation:
    """One prompt's greedy continuation (:meth:`~unieval_local.models.causal_lm.runner.CausalLMRunner.generate`).

    Attributes:
        text: the decoded new text; the end-of-sequence token and the matched stop string (and
            anything after it) excluded.
        token_ids: the new token ids as generated, the end-of-sequence token or the tokens that
            completed the stop string included (empty for ``too_long``).
        finish: ``eos`` (the model ended), ``stop`` (a stop string appeared), ``length`` (it hit
            ``max_new_tokens``) or ``too_long`` (the prompt and ``max_new_tokens`` exceed the
            window: nothing generated).
    """

    text: str
    token_ids: tuple[int, ...]
    finish: str

    def __post_init__(self):
        if self.finish not in FINISH_REASONS:
            raise ValueError(f"finish must be one of {', '.join(FINISH_REASONS)}, got {self.finish!r}")


def _cannot_generate(name: str):
    """The error of a runner asked to generate that cannot (:meth:`Runner.chat_prompt`, :meth:`Runner.generate`)."""
    from ..errors import CheckpointError

    return CheckpointError(f"{name}: this evaluator's runner cannot generate text (only a causal-lm instruct "
                           "model can: --generator NAME=DIR)")


@runtime_checkable
class Runner(TokenCounter, Protocol):
    """What the engine needs from a model runner: scores with token counts, token
    arithmetic for long inputs (:class:`~unieval_local.pipeline.planning.TokenCounter`), and a name
    and content fingerprint for signatures and cache keys.

    Attributes:
        name: what the runner runs, for messages (a hub id or a folder).
        fingerprint: hex SHA-256 of the checkpoint's content
            (:func:`~unieval_local.models.checkpoints.fingerprint_checkpoint`): part of every cache key.
        forward: the forward that actually runs: ``fast`` (the T5 backend's exact single-step
            forward) or ``plain`` (the model's own ``forward``: asked for, a T5 checkpoint whose
            layout the fast path does not know, or a classifier backend). It enters the signature
            and the cache key, so a fast forward that fell back to plain never signs as fast.
        tokenizer_class: the loaded tokenizer's class and id-changing flags
            (:func:`~unieval_local.models.tokenizer_identity.describe_tokenizer`, e.g.
            ``T5Tokenizer+extra:100``), signed as ``|tok:...``; None: not known (a fake runner).
            Not part of the cache key: it follows from the tokenizer files (in ``fingerprint``)
            and the tokenizers/transformers versions (in the key's context).
        tokenizer_doubt: why the tokenizer may be another model's, when the checks at load found
            it suspicious but could not tell (:func:`~unieval_local.models.tokenizer_identity.check_tokenizer_fits`);
            results then sign ``identity:unverified``. None: no doubt.
    """

    name: str
    fingerprint: str
    forward: str = "fast"
    tokenizer_class: str | None = None
    tokenizer_doubt: str | None = None
    #: padded tokens (rows x longest prompt) per forward batch, and encoder attention cells per
    #: head (:func:`~unieval_local.models.batching.attention_cells`), for a scheduler that forms
    #: batches itself; None: the engine's ``batch_tokens``, no attention budget
    batch_tokens: int | None = None
    max_cells: int | None = None

    def lookup(self, prompts: Sequence[str], *, max_length: int) -> dict[str, tuple[float, int]]:
        """``(p_yes, n_tokens)`` of those ``prompts`` known without the model (a score cache's
        hits: :class:`~unieval_local.models.cache.CachedRunner`); none by default."""
        return {}

    def distributions(self, prompts: Sequence[str], *, max_length: int) -> list[dict[str, float]] | None:
        """Per prompt, its readout's distribution over the answer words or rating digits, for a
        runner whose readout has one (the causal-lm backend's G-Eval ratings: evidence shows it);
        None by default."""
        return None

    def chat_prompt(self, messages: Sequence[dict[str, str]]) -> str:
        """The chat-template rendering of ``messages`` for :meth:`generate` (the causal-lm backend's);
        a runner that cannot generate raises :class:`~unieval_local.errors.CheckpointError` (default)."""
        raise _cannot_generate(self.name)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int, stop: Sequence[str] = (),
                 max_length: int | None = None) -> list[Generation]:
        """Greedy generations of ``prompts`` (the causal-lm backend's); a runner that cannot generate
        raises :class:`~unieval_local.errors.CheckpointError` (default), as :meth:`chat_prompt`."""
        raise _cannot_generate(self.name)

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p_yes, n_tokens)`` per prompt, in order.

        ``p_yes``: float64, shape ``(len(prompts),)``, in [0, 1], NaN where the model gave
        non-finite logits; ``n_tokens``: int64, each prompt's untruncated token count (more
        than ``max_length`` means its end was cut). ``on_batch(done, total)``, when given, is
        called after each forward batch with the distinct prompts scored so far.
        """
        ...


#: ``factory(checkpoint, fingerprint, evaluator) -> Runner``: how an engine makes the runner of
#: one checkpoint (``evaluator``: its :class:`~unieval_local.registry.evaluators.Evaluator` spec).
RunnerFactory = Callable[[ResolvedCheckpoint, str, Evaluator], Runner]
