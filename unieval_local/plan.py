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
from typing import Any, Literal, Protocol

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


def render_prompt_spans(
    aspect: Aspect, example: UniEvalData, target: str, reference: str | None = None,
    overrides: dict[str, str] | None = None,
) -> tuple[str, list[tuple[str, int, int]]]:
    """Build one query prompt exactly as UniEval's ``add_question`` does, with field spans.

    Args:
        aspect: the aspect (question and labelled fields).
        example: the example, for the non-target fields.
        target: the text put in the ``target`` slot (the whole target, or one
            sentence at sentence granularity).
        reference: the reference put in the ``references`` slot, if the aspect has one.
        overrides: field -> text to use instead (a window of a long field).

    Returns:
        ``(prompt, spans)``: ``"question: <q> </s> <label>: <value> ..."`` joined
        with ``" </s> "``, no stripping; ``spans`` gives ``(field, start, end)``,
        the characters of each field's value in the prompt.
    """
    overrides = overrides or {}
    prompt = f"question: {aspect.question}"
    spans: list[tuple[str, int, int]] = []
    for pf in aspect.fields:
        if pf.field in overrides:
            value = overrides[pf.field]
        elif pf.field == "target":
            value = target
        elif pf.field == "references":
            value = reference
        else:
            value = example.get_field(pf.field)
        prompt += f"{SEPARATOR}{pf.label}: "
        spans.append((pf.field, len(prompt), len(prompt) + len(str(value))))
        prompt += str(value)
    return prompt, spans


def render_prompt(aspect: Aspect, example: UniEvalData, target: str, reference: str | None = None,
                  overrides: dict[str, str] | None = None) -> str:
    """The prompt of :func:`render_prompt_spans`, without the spans."""
    return render_prompt_spans(aspect, example, target, reference, overrides)[0]


def non_latin_share(text: str) -> float:
    """Share of the letters of ``text`` that are not in Latin script, in [0, 1] (0 without letters).

    The UniEval checkpoints are English-only; a target that is mostly Cyrillic, CJK,
    Arabic ... gets scores that mean nothing, so callers warn about it.
    """
    import unicodedata

    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    latin = sum(1 for c in letters if c < "\u0250" or unicodedata.name(c, "").startswith("LATIN"))
    return 1.0 - latin / len(letters)


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


#: Field names other evaluators and datasets use, and the field they mean here.
FIELD_ALIASES: dict[str, str] = {
    "summary": "target", "prediction": "target", "hypothesis": "target", "output": "target",
    "generated": "target", "candidate": "target", "response": "target", "claim": "target",
    "document": "source", "input": "source", "article": "source", "transcript": "source",
    "dialogue_history": "source", "history": "source", "refs": "references", "gold": "references",
    "fact": "context", "knowledge": "context",
}


def alias_hint(field: str, present: Iterable[str]) -> str:
    """`` (the record has 'summary': did you mean 'target'?)`` when ``present`` holds a
    common other name of ``field`` (:data:`FIELD_ALIASES`), else ``""``."""
    names = [k for k in present if FIELD_ALIASES.get(str(k).lower()) == field]
    if not names:
        return ""
    return f" (the record has {', '.join(repr(n) for n in names)}: did you mean {field!r}? rename it)"


def check_example(index: int, example: UniEvalData, aspects: Sequence[Aspect]) -> list[ExampleProblem]:
    """The problems of one parsed example for the given aspects (empty list if none)."""
    problems: list[ExampleProblem] = []
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

    Returns the parsed example (or ``None``) and its parse problems.
    """
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
            msg = err["msg"]
            if err["type"] == "missing" and loc in ("target", "source", "references", "context"):
                msg += alias_hint(loc, item)
            if err["type"] == "string_type":
                got = type(err.get("input")).__name__
                msg += f", got {got}" + (" (decode it to str first; the encoding is not guessed)"
                                         if got in ("bytes", "bytearray") else "")
            problems.append(ExampleProblem(index, loc, msg))
        return None, problems


def input_hint_counts(examples: Sequence[UniEvalData | None], task, aspects: Sequence[Aspect]) -> dict[str, int]:
    """Per field, how many examples lack the ending the checkpoint was trained with.

    UniEval's dialogue checkpoint saw histories ending with a blank line and
    facts ending with a newline (``task.input_hints``). Only fields that the
    given aspects use are counted.
    """
    return {name: len(idx) for name, idx in input_hint_examples(examples, task, aspects).items()}


def input_hint_examples(examples: Sequence[UniEvalData | None], task, aspects: Sequence[Aspect]) -> dict[str, list[int]]:
    """Per field, the indices of the examples counted by :func:`input_hint_counts`."""
    used = {pf.field for a in aspects for pf in a.fields}
    found: dict[str, list[int]] = {}
    for name, (suffix, _) in task.input_hints.items():
        if name in used:
            idx = [i for i, ex in enumerate(examples) if ex is not None and isinstance(ex.get_field(name), str)
                   and not ex.get_field(name).endswith(suffix)]
            if idx:
                found[name] = idx
    return found


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
    found = input_hint_examples(examples, task, aspects)
    if found:
        which = "; ".join(f"'{k}' in examples {v[:10]}{' ...' if len(v) > 10 else ''}" for k, v in found.items())
        warnings.warn(input_hint_message(task, {k: len(v) for k, v in found.items()}) + f" ({which})",
                      UserWarning, stacklevel=3)
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


class TokenCounter(Protocol):
    """Token arithmetic that long-input planning needs (the T5 runner provides it)."""

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as a whole prompt (with the final EOS), untruncated."""
        ...

    def count_plain(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens."""
        ...

    def cut(self, text: str, n_tokens: int) -> int:
        """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
        ...


@dataclass(frozen=True)
class QueryInfo:
    """Where one prompt comes from (for evidence).

    ``window`` is the ``(start, end)`` character span of ``field`` used in the
    prompt when long-input handling ("fit" or "chunk") shortened that field;
    ``None`` when the field was used whole.
    """

    example: int
    aspect: str
    reference: int
    unit: int
    field: str | None = None
    window: tuple[int, int] | None = None
    spans: tuple[tuple[str, int, int], ...] = ()


@dataclass
class Block:
    """The queries of one (aspect, example).

    ``grid[r][u][w]`` is the prompt index of reference ``r`` (one row when the
    aspect uses no reference), unit ``u`` (a target sentence, or the whole
    target) and window ``w`` (one, unless the long field was chunked).
    ``unit_spans`` are the units' character spans in the target.
    """

    grid: list[list[list[int]]]
    unit_spans: list[tuple[int, int]]

    @property
    def indices(self) -> list[int]:
        return [i for row in self.grid for unit in row for i in unit]


@dataclass
class Plan:
    """A flat list of query prompts and, per aspect, one :class:`Block` per example.

    ``blocks[aspect][i]`` is ``None`` for an example that was not planned;
    ``queries[k]`` says where ``prompts[k]`` comes from.
    """

    prompts: list[str] = field(default_factory=list)
    queries: list[QueryInfo] = field(default_factory=list)
    blocks: dict[str, list[Block | None]] = field(default_factory=dict)
    aspects: dict[str, Aspect] = field(default_factory=dict)


from .config import LONG_INPUT_MODES, LongInput  # noqa: E402  (re-exported)

_MARGIN = 2  # tokens kept free: sub-word merges at field boundaries are not additive


def field_spans(text: str, unit: str, splitter: SentenceSplitter) -> list[tuple[int, int]]:
    """Character spans of the pieces a long field is windowed by: sentences or lines (turns)."""
    if unit == "line":
        spans, pos = [], 0
        for line in text.split("\n"):
            if line.strip():
                start = pos + len(line) - len(line.lstrip())
                spans.append((start, start + len(line.strip())))
            pos += len(line) + 1
        return spans
    return list(splitter.spans(text)) if hasattr(splitter, "spans") else _spans_by_search(text, splitter(text))


def _spans_by_search(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for piece in pieces:
        start = text.index(piece, pos)
        spans.append((start, start + len(piece)))
        pos = start + len(piece)
    return spans


def make_windows(text: str, spans: list[tuple[int, int]], counter: TokenCounter, budget: int,
                 overlap: int) -> list[tuple[int, int]]:
    """Windows of whole pieces (sentences or turns) whose tokens fit ``budget``.

    Consecutive windows share ``overlap`` pieces. A piece longer than the
    budget on its own is cut into token-sized parts first.

    Returns:
        ``(start, end)`` character spans into ``text``, covering every piece.
    """
    pieces: list[tuple[int, int]] = []
    for (a, b), n in zip(spans, counter.count_plain([text[a:b] for a, b in spans])):
        while n > budget and b - a > 1:
            k = max(1, counter.cut(text[a:b], budget))
            pieces.append((a, a + k))
            a += k
            n = counter.count_plain([text[a:b]])[0]
        pieces.append((a, b))
    counts = counter.count_plain([text[a:b] for a, b in pieces])
    windows, i = [], 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and (j == i or total + counts[j] <= budget):
            total += counts[j]
            j += 1
        windows.append((pieces[i][0], pieces[j - 1][1]))
        if j >= len(pieces):
            break
        i = max(j - overlap, i + 1)
    return windows


def _field_text(example: UniEvalData, name: str, reference: str | None) -> str:
    return reference if name == "references" else example.get_field(name)


def build_plan(
    examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect], splitter: SentenceSplitter, *,
    long_input: LongInput = "truncate", counter: TokenCounter | None = None, max_length: int = 1024,
    overlap: int = 1,
) -> tuple[Plan, list[ExampleProblem]]:
    """Fan out every (aspect, example) into query prompts.

    Args:
        examples: parsed, checked examples; ``None`` entries are skipped.
        aspects: the aspects to plan (all of one checkpoint, ideally).
        splitter: the sentence splitter for sentence-granularity aspects.
        long_input: ``truncate`` (UniEval: the runner cuts the prompt's end),
            ``fit`` (shorten the long context field so the prompt fits; never
            the question or the target) or ``chunk`` (score against windows of
            whole sentences/turns of the aspect's ``chunk_field`` and reduce by
            its ``window_reduction``; aspects without one are fitted).
            A prompt that fits ``max_length`` is never changed.
        counter: token arithmetic, needed for ``fit`` and ``chunk``.
        max_length: the model's token limit per query.
        overlap: pieces shared by consecutive windows (``chunk``).

    Returns:
        ``(plan, problems)``; a problem is reported (and the example skipped
        for that aspect) when its target has no sentences, or, in ``fit`` and
        ``chunk`` mode, when the prompt does not fit even with the context
        fields emptied.
    """
    if long_input not in LONG_INPUT_MODES:
        raise ValueError(f"long_input must be one of {', '.join(LONG_INPUT_MODES)}, got {long_input!r}")
    if long_input != "truncate" and counter is None:
        raise ValueError(f"long_input={long_input!r} needs a token counter")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0, got {overlap}")
    plan = Plan(aspects={a.name: a for a in aspects})
    problems: list[ExampleProblem] = []
    sentence_cache: dict[int, list[tuple[int, int]]] = {}
    for aspect in aspects:
        blocks: list[Block | None] = []
        uses_refs = any(pf.field == "references" for pf in aspect.fields)
        context_fields = [pf.field for pf in aspect.fields if pf.field != "target"]
        for i, ex in enumerate(examples):
            if ex is None:
                blocks.append(None)
                continue
            if aspect.granularity == "sentence":
                if i not in sentence_cache:
                    sentence_cache[i] = field_spans(ex.target, "sentence", splitter)
                unit_spans = sentence_cache[i]
                if not unit_spans:
                    problems.append(ExampleProblem(i, "target", "the target has no sentences", aspect.name))
                    blocks.append(None)
                    continue
            else:
                unit_spans = [(0, len(ex.target))]
            units = [ex.target[a:b] for a, b in unit_spans]
            refs: list[str | None] = list(ex.references) if uses_refs else [None]
            grid: list[list[list[int]]] = []
            failed = None
            for r, ref in enumerate(refs):
                windows: list[tuple[str | None, tuple[int, int] | None]] = [(None, None)]
                if long_input != "truncate" and context_fields:
                    windows, failed = _plan_windows(aspect, ex, units, ref, long_input, counter, max_length,
                                                    overlap, splitter, context_fields)
                    if failed:
                        break
                row = []
                for u, unit in enumerate(units):
                    cell = []
                    for name, window in windows:
                        overrides = {}
                        if name is not None:
                            text = _field_text(ex, name, ref)
                            overrides[name] = text[window[0]:window[1]]
                        prompt, spans = render_prompt_spans(aspect, ex, unit, ref, overrides)
                        cell.append(len(plan.prompts))
                        plan.prompts.append(prompt)
                        plan.queries.append(QueryInfo(i, aspect.name, r, u, name, window, tuple(spans)))
                    row.append(cell)
                grid.append(row)
            if failed:
                problems.append(ExampleProblem(i, "target", failed, aspect.name))
                blocks.append(None)
                continue
            blocks.append(Block(grid, unit_spans))
        plan.blocks[aspect.name] = blocks
    if long_input != "truncate":
        _shrink_overflowing(plan, counter, max_length)
    return plan, problems


def _plan_windows(aspect, ex, units, ref, long_input, counter, max_length, overlap, splitter, context_fields):
    """Windows of the field to shorten for one (aspect, example, reference); or an error message."""
    longest = max(units, key=len)
    full = counter.count([render_prompt(aspect, ex, longest, ref)])[0]
    if full <= max_length:
        return [(None, None)], None
    chunk = long_input == "chunk" and aspect.chunk_field in context_fields
    if chunk:
        name = aspect.chunk_field
    else:  # fit: the longest context field
        lengths = counter.count_plain([str(_field_text(ex, f, ref)) for f in context_fields])
        name = context_fields[int(np.argmax(lengths))]
    text = _field_text(ex, name, ref)
    base = counter.count([render_prompt(aspect, ex, longest, ref, {name: ""})])[0]
    budget = max_length - base - _MARGIN
    if budget < 4:
        return None, (f"the prompt without its '{name}' is {base} tokens, over max_length {max_length}; "
                      f"the target is too long to score ({long_input} mode never cuts the target)")
    if not chunk:
        return [(name, (0, counter.cut(text, budget)))], None
    unit = "line" if aspect.chunk_unit == "line" else "sentence"
    spans = field_spans(text, unit, splitter) or [(0, len(text))]
    return [(name, w) for w in make_windows(text, spans, counter, budget, overlap)], None


def _shrink_overflowing(plan: Plan, counter: TokenCounter, max_length: int) -> None:
    """Tokenization is not exactly additive: trim the few windows that still overflow."""
    shortened = [k for k, q in enumerate(plan.queries) if q.window is not None]
    if not shortened:
        return
    counts = counter.count([plan.prompts[k] for k in shortened])
    for k, n in zip(shortened, counts):
        q = plan.queries[k]
        while n > max_length:
            name, (a, _) = q.field, q.window
            _, start, end = next(s for s in q.spans if s[0] == name)
            window_text = plan.prompts[k][start:end]
            keep = counter.cut(window_text, max(1, counter.count_plain([window_text])[0] - (n - max_length) - 1))
            prompt = plan.prompts[k][:start] + window_text[:keep] + plan.prompts[k][end:]
            spans = tuple((f, s0, e0) if e0 <= start else (f, s0 - (end - start - keep), e0 - (end - start - keep))
                          if s0 >= end else (f, s0, s0 + keep) for f, s0, e0 in q.spans)
            q = QueryInfo(q.example, q.aspect, q.reference, q.unit, name, (a, a + keep), spans)
            plan.prompts[k], plan.queries[k] = prompt, q
            n = counter.count([prompt])[0]


@dataclass
class Folded:
    """Scores per (aspect, example), and what evidence needs.

    ``values[aspect]``: shape ``(n_examples,)``, NaN where not planned or not finite.
    ``unit_values[aspect][i]``: per unit (sentence) of example ``i``, its value
    after reducing windows and references; ``best_window[aspect][i][u]``: the
    prompt index of the window that gave unit ``u`` its value (max reduction),
    else ``None``.
    """

    values: dict[str, np.ndarray]
    unit_values: dict[str, list[list[float] | None]]
    best_query: dict[str, list[list[int | None] | None]]


def fold_all(plan: Plan, p_yes: np.ndarray, reference_reduction: ReferenceReduction = "mean") -> Folded:
    """Reduce query scores: windows (the aspect's ``window_reduction``), then
    references (``reference_reduction``), then units (the aspect's ``reduction``).

    For the built-in aspects the order does not matter: no sentence-level
    aspect uses references (UniEval, ``evaluator.py``).

    Raises:
        ValueError: unknown ``reference_reduction``.
    """
    if reference_reduction not in ("mean", "max"):
        raise ValueError(f"reference_reduction must be 'mean' or 'max', got {reference_reduction!r}")
    values, unit_values, best = {}, {}, {}
    p_yes = np.asarray(p_yes, dtype=np.float64)
    for name, blocks in plan.blocks.items():
        aspect = plan.aspects[name]
        reduce_windows = _REDUCE[aspect.window_reduction]
        reduce_refs = _REDUCE[reference_reduction]
        reduce_units = _REDUCE[aspect.reduction]
        vals = np.full(len(blocks), np.nan, dtype=np.float64)
        per_unit: list[list[float] | None] = []
        per_best: list[list[int | None] | None] = []
        for i, b in enumerate(blocks):
            if b is None or not np.isfinite(p_yes[b.indices]).all():
                per_unit.append(None)
                per_best.append(None)
                continue
            n_units = len(b.grid[0])
            units, bests = [], []
            for u in range(n_units):
                by_ref = [reduce_windows(p_yes[row[u]]) for row in b.grid]
                units.append(float(reduce_refs(by_ref)))
                cells = [k for row in b.grid for k in row[u]]
                bests.append(max(cells, key=lambda k: p_yes[k]) if aspect.window_reduction == "max"
                             and len(b.grid) == 1 and len(cells) > 1 else None)
            vals[i] = float(reduce_units(units))
            per_unit.append(units)
            per_best.append(bests)
        values[name], unit_values[name], best[name] = vals, per_unit, per_best
    return Folded(values, unit_values, best)


def fold(plan: Plan, p_yes: np.ndarray, reference_reduction: ReferenceReduction = "mean") -> dict[str, np.ndarray]:
    """Reduce query scores to one score per (aspect, example) (see :func:`fold_all`).

    Args:
        plan: the plan the scores belong to.
        p_yes: float array, shape ``(len(plan.prompts),)``, one P(Yes) per prompt.
        reference_reduction: ``mean`` or ``max`` over references.

    Returns:
        ``{aspect: array of shape (n_examples,)}``; ``nan`` where an example was
        not planned, or where any of its queries is not finite.
    """
    return fold_all(plan, p_yes, reference_reduction).values
