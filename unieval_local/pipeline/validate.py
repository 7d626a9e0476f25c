"""Validation: parse each input item and check the fields its aspects need, before any scoring.

Nothing here raises for bad input: every problem becomes an
:class:`~unieval_local.errors.ExampleProblem` naming the example, the aspect and the
field (with a "did you mean" for the names other tools use), so one bad row never
loses the others. Text that is not valid Unicode (a lone UTF-16 surrogate such as
``"\\ud83d"``, which ``json.loads`` accepts) is such a problem too, naming the field and
the character (:func:`surrogate_problems`). Also: the input-format hints of a task
(dialogue endings) and the non-Latin-script check (the evaluators are English-only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from .. import notes
from ..errors import ExampleProblem
from ..fields import alias_hint
from ..surrogates import find_surrogates, surrogate_advice
from ..schema import UniEvalData
from ..registry.tasks import Aspect

__all__ = ["absent_fields", "check_example", "describe_value", "input_hint_counts", "input_hint_examples", "input_hint_message",
           "is_text", "missing_fields", "parse_example", "surrogate_problems",
           "validate_examples", "validate_with_skips", "warn_input_hints"]


def is_text(value: Any) -> bool:
    """True for a string with some non-whitespace character."""
    return isinstance(value, str) and value.strip() != ""


def describe_value(value: Any) -> str:
    """Why ``value`` is not a usable text: ``it is missing``, ``it is empty ...`` or ``got <type>``."""
    if value is None:
        return "it is missing"
    if isinstance(value, str):
        return "it is empty or whitespace-only"
    return f"got {type(value).__name__}"


def surrogate_problems(index: int, item: Any) -> list[ExampleProblem]:
    """One problem per string of ``item`` (a dict, at any depth, names included, or a parsed
    :class:`UniEvalData`) holding a UTF-16 surrogate code point (U+D800..U+DFFF), naming the
    field (``target``, ``references[1]`` ...) and the 0-based character position, e.g. ``a lone
    UTF-16 surrogate U+D83D at character 17 is not valid Unicode (a string cut inside an emoji?);
    fix the text``; [] when there is none. Such text cannot be tokenized nor written as UTF-8."""
    if isinstance(item, UniEvalData):
        item = {**{k: getattr(item, k) for k in type(item).model_fields}, **(item.model_extra or {})}
    return [ExampleProblem(index, h.field, f"{'its name holds ' if h.in_name else ''}{h.description} is "
                           f"{surrogate_advice([h])}") for h in find_surrogates(item)]


def check_example(index: int, example: UniEvalData, aspects: Sequence[Aspect]) -> list[ExampleProblem]:
    """The problems of one parsed example for the given aspects (empty list if none): an empty
    target, a field an aspect needs that is missing or empty, and any text holding a UTF-16
    surrogate (:func:`surrogate_problems`)."""
    problems: list[ExampleProblem] = surrogate_problems(index, example)
    extra = list((example.model_extra or {}))
    if not is_text(example.target):
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
                ok = isinstance(value, list) and len(value) > 0 and all(is_text(r) for r in value)
                if not ok:
                    why = ("it is missing" if value is None else "it is an empty list" if value == []
                           else "a reference is empty or not a string")
                    problems.append(ExampleProblem(
                        index, name, f"{aspect.task}/{aspect.name} needs 'references', a non-empty "
                        f"list of non-empty reference texts; {why}"
                        + (alias_hint(name, extra) if value is None else ""), aspect.name))
            elif not is_text(value):
                problems.append(ExampleProblem(
                    index, name, f"{aspect.task}/{aspect.name} needs '{name}' as a non-empty string; "
                    f"{describe_value(value)}" + (alias_hint(name, extra) if value is None else ""), aspect.name))
    return problems


def parse_example(index: int, item: Any,
                  model: type[UniEvalData] = UniEvalData) -> tuple[UniEvalData | None, list[ExampleProblem]]:
    """Turn one input item (dict or :class:`UniEvalData`) into ``model`` (``UniEvalData``
    or a subclass, e.g. the reports' record).

    Returns the parsed example (or ``None``) and its parse problems: wrong types, and text
    that is not valid Unicode (a UTF-16 surrogate, :func:`surrogate_problems`: then the
    example is ``None``, so ``Scorer.score`` raises ``InvalidExampleError`` naming the field
    and the position rather than failing with a ``UnicodeEncodeError`` in the tokenizer).
    """
    if isinstance(item, (UniEvalData, dict)):
        bad = surrogate_problems(index, item)
        if bad:
            return None, bad
    if isinstance(item, model):
        return item, []
    if isinstance(item, UniEvalData):
        item = item.model_dump()
    if not isinstance(item, dict):
        return None, [ExampleProblem(index, "record", f"an example must be an object/dict, got {type(item).__name__}")]
    try:
        return model.model_validate(item), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "record"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "missing" and loc in ("target", "source", "references", "context"):
                msg += alias_hint(loc, item)
            if err["type"] == "string_type":
                got = type(err.get("input")).__name__
                msg += f", got {got}" + (" (decode it to str first; the encoding is not guessed)"
                                         if got in ("bytes", "bytearray") else "")
            problems.append(ExampleProblem(index, loc, msg))
        return None, problems


def input_hint_counts(examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect]) -> dict[str, int]:
    """Per field, how many examples lack the ending their aspects' evaluator was trained with.

    An evaluator declares the endings in its ``input_hints``, only where they change the token
    ids (none built in: UniEval's dialogue data ended histories with a blank line and facts with
    a newline, but T5's SentencePiece normalisation drops those, so the ids are the same and a
    hint would be noise). Only fields that the given aspects use are counted.
    """
    return {name: len(idx) for name, idx in input_hint_examples(examples, aspects).items()}


def _hints(aspects: Sequence[Aspect]) -> dict[str, tuple[str, str, str]]:
    """field -> (ending, what it is, evaluator) over the fields the aspects use."""
    from ..registry.evaluators import get_evaluator

    out: dict[str, tuple[str, str, str]] = {}
    for a in aspects:
        ev = get_evaluator(a.checkpoint)
        used = {pf.field for pf in a.fields}
        for name, (suffix, what) in ev.input_hints.items():
            if name in used:
                out.setdefault(name, (suffix, what, ev.name))
    return out


def input_hint_examples(examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect]) -> dict[str, list[int]]:
    """Per field, the indices of the examples counted by :func:`input_hint_counts`."""
    found: dict[str, list[int]] = {}
    for name, (suffix, _, _) in _hints(aspects).items():
        idx = [i for i, ex in enumerate(examples) if ex is not None and isinstance(ex.get_field(name), str)
               and not ex.get_field(name).endswith(suffix)]
        if idx:
            found[name] = idx
    return found


def input_hint_message(aspects: Sequence[Aspect], counts: dict[str, int]) -> str:
    """One sentence per field of :func:`input_hint_counts` (empty string if none)."""
    hints = _hints(aspects)
    parts = []
    for name, n in counts.items():
        suffix, what, evaluator = hints[name]
        parts.append(f"{n} example(s) have a '{name}' not ending with {suffix!r} ({what}), as the "
                     f"{evaluator} checkpoint was trained; they are scored as given (text is never rewritten)")
    return "; ".join(parts)


def warn_input_hints(examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect]) -> dict[str, int]:
    """Warn once per call when inputs lack the trained endings (see :func:`input_hint_counts`);
    the warning is also a note (:func:`unieval_local.notes.note`), so a caller that collects
    notes (the HTTP service) gives it to its client."""
    found = input_hint_examples(examples, aspects)
    if found:
        which = "; ".join(f"'{k}' in examples {v[:10]}{' ...' if len(v) > 10 else ''}" for k, v in found.items())
        notes.note(input_hint_message(aspects, {k: len(v) for k, v in found.items()}) + f" ({which})",
                   warn=True, stacklevel=3)
    return {k: len(v) for k, v in found.items()}


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
        elif isinstance(item, dict):  # also name the other fields the aspects need, all at once
            errs += missing_fields(i, item, aspects, {p.field.split(".")[0] for p in errs})
        problems.extend(errs)
        examples.append(ex if not errs else None)
    return examples, problems


def absent_fields(example: UniEvalData, aspect: Aspect) -> list[str]:
    """The fields ``aspect`` needs (``target`` aside) that ``example`` lacks: absent or None
    (an empty value is not absent: it is a problem of the record)."""
    return [f for f in aspect.required_fields if f != "target" and example.get_field(f) is None]


def validate_with_skips(data: Sequence[Any], aspects: Sequence[Aspect]
                        ) -> tuple[list[UniEvalData | None], list[ExampleProblem], dict[int, dict[str, list[str]]]]:
    """:func:`validate_examples` for a set of aspects (``all``, or none named): an example that
    lacks (:func:`absent_fields`) what some of ``aspects`` need, and is good for the others, is
    kept, with those aspects skipped for it; any other problem stays a problem.

    Returns:
        ``(examples, problems, skips)``: as :func:`validate_examples`, and ``skips[i]``:
        aspect name -> the fields example ``i`` lacks for it (only for examples kept so).
    """
    examples, problems = validate_examples(data, aspects)
    skips: dict[int, dict[str, list[str]]] = {}
    for i in sorted({p.index for p in problems if p.index is not None}):
        ex, errs = parse_example(i, data[i])
        if ex is None or errs:
            continue
        lacking = {a.name: fields for a in aspects if (fields := absent_fields(ex, a))}
        keep = [a for a in aspects if a.name not in lacking]
        if lacking and keep and not check_example(i, ex, keep):
            examples[i], skips[i] = ex, lacking
    return examples, [p for p in problems if p.index not in skips], skips


def missing_fields(index: int, item: dict, aspects: Sequence[Aspect], known: set[str]) -> list[ExampleProblem]:
    """Problems for the fields ``aspects`` need that the raw record ``item`` lacks (None or
    absent), leaving out ``known`` fields (already reported): so that a record that does not
    parse still gets every missing field named in one error."""
    out = []
    for aspect in aspects:
        for name in aspect.required_fields:
            if name in known or item.get(name) is not None or (name == "references" and item.get("reference")):
                continue
            known = known | {name}
            out.append(ExampleProblem(index, name, f"{aspect.task}/{aspect.name} needs '{name}'; it is missing"
                                      + alias_hint(name, item), aspect.name))
    return out
