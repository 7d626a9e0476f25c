"""Judges that reason, per example: the rationale, the distribution, the expected rating and the
parse status of each example, ``num_failed`` and the mean valid-rating mass of the run
(:mod:`unieval_local.models.judging` does the work; :mod:`unieval_local.text.judges` has the formats
and their sources). ``Scorer.score`` on the same aspects gives the ratings alone (NaN where a
status is not ``ok``, with a warning).

Example (a fake runner: real ones come from ``Engine(model={"themis": DIR}).runner("themis")``)::

    from unieval_local.judges import judge_examples
    run = judge_examples(runner, [{"source": "...", "target": "..."}], aspect="themis_coherence")
    run.outcomes[0].rating, run.num_failed, run.mean_valid_mass
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .models.judging import JudgeRun, judge_prompts
from .registry.evaluators import get_evaluator
from .registry.tasks import DEFAULT_REGISTRY
from .text.judges import JudgeFormat

__all__ = ["judge_examples"]


def judge_examples(runner, examples: Sequence[Mapping[str, object]], *, aspect: str, task: str = "summarization",
                   max_length: int | None = None) -> JudgeRun:
    """Judge each example's ``target`` against its ``source`` with a judge that reasons.

    Args:
        runner: the judge's runner (``Engine.runner(name)``: a
            :class:`~unieval_local.models.causal_lm.runner.CausalLMRunner`; any object with
            ``fit_prompt``, ``render_prompt``, ``generate`` and ``distributions``).
        examples: mappings with ``source`` and ``target`` (``system_output`` is read as ``target``).
        aspect: a judge aspect of ``task``, e.g. ``themis_coherence`` or ``prometheus_relevance``.
        task: the task (``summarization``). max_length: the prompt window (default: the evaluator's).

    Returns:
        :class:`~unieval_local.models.judging.JudgeRun`: per example a
        :class:`~unieval_local.models.judging.JudgeOutcome` (status, rating, distribution,
        valid_mass, rationale); ``num_failed``; ``mean_valid_mass``; ``judge`` (evaluator, format,
        the prompt's source, the checkpoint's fingerprint).

    Raises:
        UnknownTaskError: unknown task or aspect.
        ValueError: the aspect is not a judge that reasons; an example lacks ``source`` or ``target``
            or holds a non-string there (the message names the example and the field).
    """
    a = DEFAULT_REGISTRY.get_aspect(task, aspect)
    evaluator = get_evaluator(a.checkpoint)
    fmt = evaluator.prompt_format
    if not isinstance(fmt, JudgeFormat):
        raise ValueError(f"{task}/{aspect} is not a judge that reasons (its evaluator {evaluator.name} reads without "
                         "generating): score it with Scorer.score")
    prompts = []
    for i, ex in enumerate(examples):
        row = dict(ex)
        if "target" not in row and "system_output" in row:
            row["target"] = row["system_output"]
        for name in ("source", "target"):
            if not isinstance(row.get(name), str):
                problem = "is missing" if name not in row else f"is {type(row[name]).__name__}, not text"
                raise ValueError(f"example {i}: field {name!r} {problem}; {task}/{aspect} needs source and target")
        query, _ = fmt.query(a, row["source"], row["target"])
        prompts.append(query.encode()[0])
    run = judge_prompts(runner, prompts, max_length=max_length or evaluator.max_length)
    return dataclasses.replace(run, judge={"evaluator": evaluator.name, "format": fmt.name, "source": fmt.source,
                                           "fingerprint": runner.fingerprint})
