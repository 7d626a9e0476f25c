"""An Inspect AI scorer (``@scorer``) over a shared :class:`~unieval_local.api.Scorer` (issue 45).

Example::

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from unieval_local.integrations.inspect import unieval_scorer

    task = Task(dataset=[Sample(input=document, target=reference)],
                scorer=unieval_scorer(task="summarization", aspect="consistency", model="ckpts/unieval-sum"))
    eval(task, model="...")

The sample's fields map onto the example's: ``target`` (the text scored) is the model's
output (``state.output.completion``); ``source`` is the sample's input text
(``state.input_text``); ``references`` are the sample's targets (``target.target``), used only
by an aspect that needs them; ``context`` is ``state.metadata["context"]``.

The value is the aspect's score: in [0, 1] for the Boolean-QA and classifier evaluators;
dialogue engagingness in [0, n_sentences]; a rating aspect (G-Eval, judges) in [1, K]
(``Aspect.scale``). Metrics: ``mean`` and ``stderr``. Each sample is scored on its own (Inspect
calls a scorer once per sample; the call runs in a worker thread, one at a time), by the
process's one scorer for these settings, so checkpoints load once. Nothing is downloaded.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from ..errors import InvalidExampleError
from ..schema import UniEvalResult
from .shared import check_on_invalid, shared_scorer

__all__ = ["explanation_of", "unieval_scorer"]

#: The package's example fields in Inspect's words (Inspect's ``target`` is the sample's reference).
_INSPECT_WORDS = {"target": "the model's output",
                  "source": "the sample's input (the source)",
                  "references": "the sample's target (the references)",
                  "context": "metadata['context']"}

#: One model call at a time in this process (Inspect runs samples concurrently; the call runs in a
#: worker thread so the event loop, and other samples' generation, go on meanwhile).
_CALL_LOCK = threading.Lock()


def explanation_of(task: str, aspect: str, result: UniEvalResult, value_range: str = "[0, 1]") -> str:
    """A one-example result's evidence in words: the value and its range (``Aspect.value_range``),
    each sentence's value (sentence-level aspects), truncation, and the signature."""
    example = result.examples[0]
    lines = [f"{task}/{aspect} = {example.value:.6f} (range {value_range})"]
    ev = example.evidence
    if ev is not None and ev.sentences:
        lines += [f"  sentence {i}: {s.value:.6f}  {s.text!r}" for i, s in enumerate(ev.sentences)]
    if ev is not None and ev.truncated:
        lines.append("  (a query was longer than max_length: its end was cut)")
    if result.signature is not None:
        lines.append(f"signature: {result.signature}")
    return "\n".join(lines)


@scorer(metrics=[mean(), stderr()])
def unieval_scorer(task: str = "summarization", aspect: str = "coherence", model: Any = None,
                   device: str | None = None, scorer_settings: dict[str, Any] | None = None,
                   on_invalid: str | float = "error") -> Scorer:
    """Score a sample's output for one (task, aspect) with the package's evaluators.

    Args:
        task: summarization, dialogue, data2text or fact.
        aspect: an aspect of the task (``unieval-local tasks`` lists them).
        model: a checkpoint folder or ``{evaluator: folder}``; None: ``$UNIEVAL_LOCAL_MODEL``, else the
            package's resolution (``$UNIEVAL_LOCAL_HOME``, the HF cache). Never downloaded.
        device: ``cpu``, ``cuda`` or ``cuda:N``; None: CUDA when available.
        scorer_settings: other :class:`~unieval_local.api.Scorer` keywords (``dtype``, ``max_length`` ...).
        on_invalid: a sample the aspect cannot score (an empty output, no target where references
            are needed): ``"error"`` (the default) raises, so Inspect marks that sample as an error
            (the others keep their scores; ``fail_on_error`` and ``eval_retry`` decide the rest); a
            number scores it as that number, the explanation saying why (``metadata["invalid"]``).

    Returns:
        An Inspect ``Scorer``: ``Score(value=float, answer=the output, explanation=evidence)``.

    Raises:
        UnknownTaskError: unknown task or aspect (at construction, before any sample).
        InvalidExampleError: a sample lacks a field the aspect needs, naming the sample's id and epoch
            (``on_invalid="error"``).
        ValueError: ``on_invalid`` is neither ``"error"`` nor a finite number (at construction).
    """
    check_on_invalid(on_invalid, ("error",))
    settings = dict(scorer_settings or {}, model=model, device=device)
    spec = shared_scorer(**settings).registry.get_aspect(task, aspect)
    needs, value_range = spec.required_fields, spec.value_range

    async def score(state: TaskState, target: Target) -> Score:
        output = state.output.completion
        example: dict[str, Any] = {"target": output}
        if "source" in needs:
            example["source"] = state.input_text
        if "references" in needs:
            example["references"] = list(target.target)
        if "context" in needs:
            example["context"] = (state.metadata or {}).get("context")
        def call() -> UniEvalResult:
            with _CALL_LOCK:
                return shared_scorer(**settings).score([example], task=task, aspect=aspect, evidence=True)

        try:
            result = await anyio.to_thread.run_sync(call)
        except InvalidExampleError as exc:
            why = "; ".join(f"{_INSPECT_WORDS.get(p.field, repr(p.field))}: {p.message}" for p in exc.problems)
            if on_invalid == "error":
                err = InvalidExampleError(exc.problems)
                err.args = (f"Inspect sample {state.sample_id!r} (epoch {state.epoch}) cannot be scored for "
                            f"{task}/{aspect}: {why}",)
                raise err from None
            return Score(value=float(on_invalid), answer=output,
                         explanation=f"{task}/{aspect}: not scored ({why}); scored {float(on_invalid)} (on_invalid)",
                         metadata={"task": task, "aspect": aspect, "range": value_range, "invalid": True})
        value = float(result.examples[0].value)
        return Score(value=value, answer=output, explanation=explanation_of(task, aspect, result, value_range),
                     metadata={"task": task, "aspect": aspect, "range": value_range,
                               "signature": None if result.signature is None else str(result.signature)})

    return score
