"""Validation, prompt building (fan-out) and aggregation (fan-in).

Data flows one way: examples -> :func:`validate_examples` -> :func:`build_plan`
(one flat list of query prompts over all examples and aspects) -> the model
runner gives ``p_yes`` per prompt -> :func:`fold` reduces query scores back to
one score per (aspect, example).

Reductions (UniEval, ``evaluator.py``): a sentence-level aspect scores each Punkt
sentence of the target and takes the mean (``sum`` for dialogue engagingness);
an output-level aspect is one query. With several references, the scores per
reference are averaged (the UniEval author's advice, issue #2 of the UniEval
repo) or, on request, the maximum is taken.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from .errors import ExampleProblem
from .schema import UniEvalData
from .sentences import SentenceSplitter
from .tasks import Aspect

ReferenceReduction = Literal["mean", "max"]

#: The literal separator between prompt parts. T5's tokenizer maps it to EOS (id 1).
SEPARATOR = " </s> "

_REDUCE = {"mean": np.mean, "sum": np.sum, "min": np.min, "max": np.max}


def render_prompt(aspect: Aspect, example: UniEvalData, target: str, reference: str | None = None) -> str:
    """Build one query prompt exactly as UniEval's ``add_question`` does.

    Args:
        aspect: the aspect (question and labelled fields).
        example: the example, for the non-target fields.
        target: the text put in the ``target`` slot (the whole target, or one
            sentence at sentence granularity).
        reference: the reference put in the ``references`` slot, if the aspect has one.

    Returns:
        ``"question: <q> </s> <label>: <value> ..."``, joined with ``" </s> "``,
        no stripping.
    """
    parts = [f"question: {aspect.question}"]
    for pf in aspect.fields:
        if pf.field == "target":
            value = target
        elif pf.field == "references":
            value = reference
        else:
            value = example.get_field(pf.field)
        parts.append(f"{pf.label}: {value}")
    return SEPARATOR.join(parts)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _describe(value: Any) -> str:
    if value is None:
        return "it is missing"
    if isinstance(value, str):
        return "it is empty or whitespace-only"
    return f"got {type(value).__name__}"


def check_example(index: int, example: UniEvalData, aspects: Sequence[Aspect]) -> list[ExampleProblem]:
    """The problems of one parsed example for the given aspects (empty list if none)."""
    problems: list[ExampleProblem] = []
    if not _is_text(example.target):
        problems.append(
            ExampleProblem(index, "target", "the text under evaluation is empty or whitespace-only; "
                           "every aspect needs a non-empty target")
        )
    for aspect in aspects:
        for name in aspect.required_fields:
            if name == "target":
                continue
            value = example.get_field(name)
            if name == "references":
                ok = isinstance(value, list) and len(value) > 0 and all(_is_text(r) for r in value)
                if not ok:
                    why = ("it is missing" if value is None else "it is an empty list" if value == []
                           else "a reference is empty or not a string")
                    problems.append(ExampleProblem(
                        index, name, f"{aspect.task}/{aspect.name} needs 'references', a non-empty "
                        f"list of non-empty reference texts; {why}", aspect.name))
            elif not _is_text(value):
                problems.append(ExampleProblem(
                    index, name, f"{aspect.task}/{aspect.name} needs '{name}' as a non-empty string; "
                    f"{_describe(value)}", aspect.name))
    return problems


def parse_example(index: int, item: Any) -> tuple[UniEvalData | None, list[ExampleProblem]]:
    """Turn one input item (dict or :class:`UniEvalData`) into ``UniEvalData``.

    Returns the parsed example (or ``None``) and its parse problems.
    """
    if isinstance(item, UniEvalData):
        return item, []
    if not isinstance(item, dict):
        return None, [ExampleProblem(index, "record", f"an example must be an object/dict, got {type(item).__name__}")]
    try:
        return UniEvalData.model_validate(item), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "record"
            problems.append(ExampleProblem(index, loc, err["msg"]))
        return None, problems


def input_hint_counts(examples: Sequence[UniEvalData | None], task, aspects: Sequence[Aspect]) -> dict[str, int]:
    """Per field, how many examples lack the ending the checkpoint was trained with.

    UniEval's dialogue checkpoint saw histories ending with a blank line and
    facts ending with a newline (``task.input_hints``). Only fields that the
    given aspects use are counted.
    """
    used = {pf.field for a in aspects for pf in a.fields}
    counts: dict[str, int] = {}
    for name, (suffix, _) in task.input_hints.items():
        if name in used:
            n = sum(1 for ex in examples if ex is not None and isinstance(ex.get_field(name), str)
                    and not ex.get_field(name).endswith(suffix))
            if n:
                counts[name] = n
    return counts


def input_hint_message(task, counts: dict[str, int]) -> str:
    """One sentence per field of :func:`input_hint_counts` (empty string if none)."""
    parts = []
    for name, n in counts.items():
        suffix, what = task.input_hints[name]
        parts.append(f"{n} example(s) have a '{name}' not ending with {suffix!r} ({what}), as the "
                     f"{task.name} checkpoint was trained; they are scored as given (text is never rewritten)")
    return "; ".join(parts)


def warn_input_hints(examples: Sequence[UniEvalData | None], task, aspects: Sequence[Aspect]) -> dict[str, int]:
    """Warn once per call when inputs lack the trained endings (see :func:`input_hint_counts`)."""
    counts = input_hint_counts(examples, task, aspects)
    if counts:
        warnings.warn(input_hint_message(task, counts), UserWarning, stacklevel=3)
    return counts


def validate_examples(
    data: Iterable[Any], aspects: Sequence[Aspect]
) -> tuple[list[UniEvalData | None], list[ExampleProblem]]:
    """Parse and check every example; never raises for bad input.

    Returns:
        ``(examples, problems)``: ``examples[i]`` is the parsed example or
        ``None`` when example ``i`` has any problem; ``problems`` lists them all.
    """
    examples: list[UniEvalData | None] = []
    problems: list[ExampleProblem] = []
    for i, item in enumerate(data):
        ex, errs = parse_example(i, item)
        if ex is not None:
            errs = check_example(i, ex, aspects)
        problems.extend(errs)
        examples.append(ex if not errs else None)
    return examples, problems


@dataclass(frozen=True)
class Block:
    """The queries of one (aspect, example): ``prompts[start:start + n_refs * n_units]``.

    Laid out reference-major: row ``r`` holds the ``n_units`` queries (sentences,
    or 1 for output granularity) against reference ``r`` (``n_refs`` is 1 when
    the aspect uses no reference).
    """

    start: int
    n_refs: int
    n_units: int

    @property
    def stop(self) -> int:
        return self.start + self.n_refs * self.n_units


@dataclass
class Plan:
    """A flat list of query prompts and, per aspect, one :class:`Block` per example.

    ``blocks[aspect][i]`` is ``None`` for an example that was not planned.
    """

    prompts: list[str] = field(default_factory=list)
    blocks: dict[str, list[Block | None]] = field(default_factory=dict)
    aspects: dict[str, Aspect] = field(default_factory=dict)


def build_plan(
    examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect], splitter: SentenceSplitter
) -> tuple[Plan, list[ExampleProblem]]:
    """Fan out every (aspect, example) into query prompts.

    Args:
        examples: parsed, checked examples; ``None`` entries are skipped.
        aspects: the aspects to plan (all of one checkpoint, ideally).
        splitter: the sentence splitter for sentence-granularity aspects.

    Returns:
        ``(plan, problems)``; a problem is reported (and the example skipped for
        that aspect) when its target splits into zero sentences.
    """
    plan = Plan(aspects={a.name: a for a in aspects})
    problems: list[ExampleProblem] = []
    sentence_cache: dict[int, list[str]] = {}
    for aspect in aspects:
        blocks: list[Block | None] = []
        uses_refs = any(pf.field == "references" for pf in aspect.fields)
        for i, ex in enumerate(examples):
            if ex is None:
                blocks.append(None)
                continue
            if aspect.granularity == "sentence":
                if i not in sentence_cache:
                    sentence_cache[i] = splitter(ex.target)
                units = sentence_cache[i]
                if not units:
                    problems.append(ExampleProblem(i, "target", "the target has no sentences", aspect.name))
                    blocks.append(None)
                    continue
            else:
                units = [ex.target]
            refs: list[str | None] = list(ex.references) if uses_refs else [None]
            start = len(plan.prompts)
            for ref in refs:
                for unit in units:
                    plan.prompts.append(render_prompt(aspect, ex, unit, ref))
            blocks.append(Block(start, len(refs), len(units)))
        plan.blocks[aspect.name] = blocks
    return plan, problems


def fold(plan: Plan, p_yes: np.ndarray, reference_reduction: ReferenceReduction = "mean") -> dict[str, np.ndarray]:
    """Reduce query scores to one score per (aspect, example).

    Args:
        plan: the plan the scores belong to.
        p_yes: float array, shape ``(len(plan.prompts),)``, one P(Yes) per prompt.
        reference_reduction: ``mean`` or ``max`` over references.

    Returns:
        ``{aspect: array of shape (n_examples,)}``; ``nan`` where an example was
        not planned, or where any of its queries is not finite.
    """
    if reference_reduction not in ("mean", "max"):
        raise ValueError(f"reference_reduction must be 'mean' or 'max', got {reference_reduction!r}")
    out: dict[str, np.ndarray] = {}
    for name, blocks in plan.blocks.items():
        reduce_units = _REDUCE[plan.aspects[name].reduction]
        reduce_refs = _REDUCE[reference_reduction]
        values = np.full(len(blocks), np.nan, dtype=np.float64)
        for i, b in enumerate(blocks):
            if b is None:
                continue
            grid = np.asarray(p_yes[b.start : b.stop], dtype=np.float64).reshape(b.n_refs, b.n_units)
            if np.isfinite(grid).all():
                values[i] = float(reduce_refs(reduce_units(grid, axis=1)))
        out[name] = values
    return out
