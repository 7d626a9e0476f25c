"""Generate, then read: the judges that reason (:mod:`unieval_local.text.judges`).

For each ``judge`` query (a :class:`~unieval_local.text.chat.ChatQuery` a judge format made):

1. its source is cut to fit the window as scoring cuts it (``runner.fit_prompt``; a prompt still over
   it is ``too_long``), its prompt rendered (``runner.render_prompt``: the chat template, or BOS and
   the plain text) and the rationale generated greedily (``runner.generate``, at most the query's ``max_new_tokens``,
   stopping at its rating prefix ``stop``);
2. where generation stopped at the rating prefix, the same query with ``prefix = rationale + forced``
   and the ``rating-mass`` readout is read (``runner.distributions``): the probabilities of the rating
   tokens ``1..K`` at the position after the forced prefix, each digit's single-token forms with and
   without a leading space summed, as G-Eval's readout (:func:`~unieval_local.models.causal_lm.runner.readout`);
3. the expected rating ``E = sum_k k p(k)`` over ``p`` renormalised over 1..K (G-Eval, Liu et al.,
   2023, Sec. 2.3), and the valid-rating mass ``sum_k P(k)`` before renormalising (flexeval's
   ``LLMGEvalScore`` reports the same: how much the judge's next token was a rating at all).

Every example gets a status (:data:`~unieval_local.text.judges.JUDGE_STATUSES`); one that is not
``ok`` has no rating (its value is NaN), is counted in ``num_failed`` and named in a warning: never
silently scored. The runner is duck-typed (``fit_prompt``, ``render_prompt``, ``generate``,
``distributions``), so
tests drive this module with a fake; no torch here.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..text.chat import ChatQuery

__all__ = ["JudgeOutcome", "JudgeRun", "judge_prompts", "judge_values"]


@dataclass(frozen=True)
class JudgeOutcome:
    """One example's judgement.

    Attributes:
        status: ``ok``, ``truncated``, ``no_rating_prefix``, ``too_long`` or ``no_rating_mass``
            (:data:`~unieval_local.text.judges.JUDGE_STATUSES`).
        rating: the expected rating E in [1, K], or None (status not ``ok``).
        distribution: ``{"1": p(1), ..., "K": p(K)}`` renormalised over the ratings ({} when not read).
        valid_mass: the probability of the rating tokens at the read position before renormalising,
            in [0, 1], or None when nothing was read.
        rationale: the generated text before the rating prefix (all of it when there was none).
        scale: K.
    """

    status: str
    rating: float | None
    distribution: dict[str, float]
    valid_mass: float | None
    rationale: str
    scale: int

    @property
    def value(self) -> float:
        """The rating on [0, 1], ``(E - 1) / (K - 1)`` (what the engine folds), NaN without a rating."""
        return float("nan") if self.rating is None else (self.rating - 1.0) / (self.scale - 1)


@dataclass(frozen=True)
class JudgeRun:
    """The judgements of one run, in the order of its prompts.

    Attributes:
        outcomes: one :class:`JudgeOutcome` per prompt.
        judge: where the judgements come from: the evaluator and prompt format
            (``themis``, ``prometheus-7b-v2.0``; empty when not given), the prompt's source (a URL) and
            the checkpoint's content fingerprint (``runner.fingerprint``).
    """

    outcomes: tuple[JudgeOutcome, ...]
    judge: dict = dataclasses.field(default_factory=dict)

    @property
    def num_failed(self) -> int:
        """How many examples have no rating (status not ``ok``)."""
        return sum(o.status != "ok" for o in self.outcomes)

    @property
    def mean_valid_mass(self) -> float:
        """The mean valid-rating mass over the examples whose rating position was read (NaN when none was)."""
        masses = [o.valid_mass for o in self.outcomes if o.valid_mass is not None]
        return float(np.mean(masses)) if masses else float("nan")


_FINISH = {"length": "truncated", "eos": "no_rating_prefix", "too_long": "too_long"}


def judge_prompts(runner, prompts: Sequence[str], *, max_length: int) -> JudgeRun:
    """Judge each ``judge`` prompt: generate its rationale, force the rating prefix, read the rating
    (module docstring).

    Args:
        runner: has ``fit_prompt(prompt, *, max_length) -> str``, ``render_prompt(prompt) -> str``, ``generate(texts, *, max_new_tokens, stop,
            max_length) -> [Generation]`` and ``distributions(prompts, *, max_length) -> [dict]``
            (:class:`~unieval_local.models.causal_lm.runner.CausalLMRunner`).
        prompts: encoded :class:`~unieval_local.text.chat.ChatQuery` strings with the ``judge`` readout.
        max_length: the prompt window in tokens (a longer prompt is ``too_long``: nothing generated).

    Returns:
        :class:`JudgeRun`, one outcome per prompt in order (identical prompts judged once).

    Raises:
        ValueError: a prompt that is not a judge query.
    """
    distinct = list(dict.fromkeys(prompts))
    queries = [ChatQuery.decode(p) for p in distinct]
    bad = [k for k, q in enumerate(queries) if q.readout != "judge"]
    if bad:
        raise ValueError(f"prompt {bad[0]} is not a judge query (readout {queries[bad[0]].readout!r}): a judge "
                         "that reasons and another evaluator's prompts were mixed")
    fitted = [runner.fit_prompt(p, max_length=max_length) for p in distinct]  # a long source cut as scoring cuts it
    queries = [ChatQuery.decode(p) for p in fitted]
    texts = [runner.render_prompt(p) for p in fitted]
    generations: list = [None] * len(distinct)
    for stop, budget in dict.fromkeys((q.stop, q.max_new_tokens) for q in queries):  # one call per setting
        members = [k for k, q in enumerate(queries) if (q.stop, q.max_new_tokens) == (stop, budget)]
        out = runner.generate([texts[k] for k in members], max_new_tokens=budget, stop=[stop], max_length=max_length)
        for k, g in zip(members, out):
            generations[k] = g
    # the reads: the rationale verbatim, then the forced prefix; never cut (the source stays as generated on)
    reads = {k: dataclasses.replace(q, readout="rating-mass", prefix=q.prefix + generations[k].text + q.forced,
                                    cut=None).encode()[0]
             for k, q in enumerate(queries) if generations[k].finish == "stop"}
    masses = dict(zip(reads, runner.distributions(list(reads.values()), max_length=max_length))) if reads else {}
    outcomes = {}
    for k, q in enumerate(queries):
        g = generations[k]
        if k not in masses:
            outcomes[distinct[k]] = JudgeOutcome(_FINISH.get(g.finish, "no_rating_prefix"), None, {}, None,
                                                 g.text, q.scale)
            continue
        outcomes[distinct[k]] = _read(masses[k], g.text, q.scale)
    return JudgeRun(tuple(outcomes[p] for p in prompts))


def _read(mass: dict[str, float], rationale: str, scale: int) -> JudgeOutcome:
    """The outcome of a read: ``mass`` is rating -> its probability, not renormalised."""
    p = np.array([float(mass.get(str(k), 0.0)) for k in range(1, scale + 1)], dtype=np.float64)
    total = float(p.sum())
    if not math.isfinite(total) or total <= 0:
        return JudgeOutcome("no_rating_mass", None, {}, total if math.isfinite(total) else None, rationale, scale)
    p = p / total
    rating = float(np.dot(np.arange(1, scale + 1), p))
    return JudgeOutcome("ok", rating, {str(k): float(v) for k, v in enumerate(p, 1)}, total, rationale, scale)


def judge_values(runner, prompts: Sequence[str], *, max_length: int):
    """The engine's view of :func:`judge_prompts` (what ``CausalLMRunner.evaluate`` returns for
    judge prompts): ``(values, n_tokens, distributions)`` per prompt: the rating on [0, 1] (NaN
    where the status is not ``ok``), the prompt's token count (``runner.count``), the renormalised
    distribution; failures are counted by status in one warning (:func:`~unieval_local.judges.judge_examples`
    gives each example's outcome).
    """
    run = judge_prompts(runner, prompts, max_length=max_length)
    if run.num_failed:
        counts: dict[str, int] = {}
        for o in run.outcomes:
            if o.status != "ok":
                counts[o.status] = counts.get(o.status, 0) + 1
        warnings.warn(f"{run.num_failed} of {len(run.outcomes)} judge answers have no rating and are not scored "
                      f"(NaN): {', '.join(f'{n} {s}' for s, n in counts.items())}; mean valid-rating mass "
                      f"{run.mean_valid_mass:.3f}", UserWarning, stacklevel=3)
    values = np.array([o.value for o in run.outcomes], dtype=np.float64)
    n_tokens = np.asarray(runner.count(list(prompts)), dtype=np.int64)
    return values, n_tokens, [dict(o.distribution) for o in run.outcomes]
