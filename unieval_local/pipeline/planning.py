"""Planning (fan-out): every (aspect, example) becomes query prompts in one flat list.

A sentence-level aspect gets one query per Punkt sentence of the target, an aspect with
references one per reference, and a long field is cut into windows (``long_input`` fit /
chunk); :class:`Plan` remembers where each prompt comes from so that
:mod:`unieval_local.pipeline.fold` can reduce the scores back (UniEval, ``evaluator.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..config import LONG_INPUT_MODES, LongInput
from ..errors import ExampleProblem
from ..registry.evaluators import format_of
from ..schema import UniEvalData
from ..text.sentences import SentenceSplitter, field_spans, reference_splitter
from .chunk_fit import fit_chunks
from ..registry.tasks import Aspect

__all__ = ["Block", "Plan", "QueryInfo", "TokenCounter", "build_plan", "make_windows", "render_prompt",
           "render_prompt_spans", "shorter_claims_advice"]


@runtime_checkable
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

    def cut_points(self, text: str, n_tokens: int) -> list[int]:
        """Character offsets that cut ``text`` into consecutive parts of ``n_tokens`` tokens
        (the last part may be shorter): increasing, the last one ``len(text)``.

        This default cuts the rest of the text again after each part (one tokenization per
        part: quadratic in the length); the T5 runner overrides it with one tokenization of
        the whole text and cuts by its token offsets (linear).
        """
        points, start = [], 0
        while start < len(text):
            k = max(1, self.cut(text[start:], max(1, n_tokens)))
            start = min(len(text), start + k)
            points.append(start)
        return points


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


_MARGIN = 2  # tokens kept free: sub-word merges at field boundaries are not additive


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
        if n > budget and b - a > 1:  # a piece too long on its own: parts of `budget` tokens
            start = a
            for end in counter.cut_points(text[a:b], budget):
                if a + end > start:
                    pieces.append((start, a + end))
                    start = a + end
            continue
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
    examples: Sequence[UniEvalData | None], aspects: Sequence[Aspect],
    splitter: SentenceSplitter | Sequence[SentenceSplitter], *,
    long_input: LongInput = "truncate", counter: TokenCounter | None = None, max_length: int = 1024,
    overlap: int = 1, chunk_words: int = 500,
) -> tuple[Plan, list[ExampleProblem]]:
    """Fan out every (aspect, example) into query prompts.

    Args:
        examples: parsed, checked examples; ``None`` entries are skipped.
        aspects: the aspects to plan (all of one checkpoint, ideally).
        splitter: the sentence splitter for sentence-granularity aspects, windows and chunks: one
            for all examples, or one per example (by its language: ``Engine.splitter_for``).
        long_input: ``truncate`` (UniEval: the runner cuts the prompt's end),
            ``fit`` (shorten the long context field so the prompt fits; never
            the question or the target) or ``chunk`` (score against windows of
            whole sentences/turns of the aspect's ``chunk_field`` and reduce by
            its ``window_reduction``; aspects without one are fitted).
            A prompt that fits ``max_length`` is never changed.
        counter: token arithmetic, needed for ``fit`` and ``chunk`` (and used to fit a
            self-chunking format's chunks to ``max_length``).
        max_length: the model's token limit per query.
        overlap: pieces shared by consecutive windows (``chunk``).
        chunk_words: words per chunk for an evaluator whose prompt format chunks the
            document itself (MiniCheck): its aspects always get one query per chunk of their
            ``chunk_field`` (reduced by ``window_reduction``, max), whatever ``long_input``
            says; with a ``counter``, a chunk whose prompt is over ``max_length`` tokens is cut
            at sentences (words) until it fits (:func:`~unieval_local.pipeline.chunk_fit.fit_chunks`).

    Returns:
        ``(plan, problems)``; a problem is reported (and the example skipped
        for that aspect) when its target has no sentences, or, in ``fit`` and
        ``chunk`` mode, when the prompt does not fit even with the context
        fields emptied, or when a self-chunked document gives no chunk; with a ``counter``, when
        a claim its backend keeps whole (self-chunking formats; ``cut_field`` ones in ``truncate``)
        does not fit the window (:func:`_long_claim`: field ``target``, the window, what to do).
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
    per_example = splitter if isinstance(splitter, Sequence) else None
    for aspect in aspects:
        blocks: list[Block | None] = []
        uses_refs = any(pf.field == "references" for pf in aspect.fields)
        context_fields = [pf.field for pf in aspect.fields if pf.field != "target"]
        fmt = format_of(aspect)
        for i, ex in enumerate(examples):
            if ex is None:
                blocks.append(None)
                continue
            if per_example is not None:
                splitter = per_example[i]
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
            failed, failed_field = None, "target"
            for r, ref in enumerate(refs):
                # (field, (start, end) in that field, the text the prompt shows) per window
                windows: list[tuple[str | None, tuple[int, int] | None, str | None]] = [(None, None, None)]
                too_long = counter is not None and _long_claim(aspect, ex, units, unit_spans, ref, long_input,
                                                               context_fields, counter, max_length)
                if too_long:  # the claim must be read whole, beside some of the document
                    failed_field, failed = too_long
                    break
                if fmt.own_chunking and aspect.chunk_field:
                    name = aspect.chunk_field
                    document, doc_splitter = str(_field_text(ex, name, ref)), reference_splitter(splitter)
                    chunks = fmt.chunks(document, doc_splitter, chunk_words)
                    if chunks and counter is not None:  # sized in words: cut to the window in tokens
                        chunks = _fit_chunks(aspect, ex, units, ref, name, chunks, document, counter, max_length,
                                             doc_splitter)
                    if not chunks:
                        failed = f"'{name}' gives no text to check (MiniCheck-style chunks are all empty)"
                        break
                    windows = [(name, (a, b), text) for a, b, text in chunks]
                elif long_input != "truncate" and context_fields:
                    windows, failed = _plan_windows(aspect, ex, units, ref, long_input, counter, max_length,
                                                    overlap, splitter, context_fields)
                    if failed:
                        break
                row = []
                for u, unit in enumerate(units):
                    cell = []
                    for name, window, shown in windows:
                        overrides = {}
                        if name is not None:
                            text = _field_text(ex, name, ref)
                            overrides[name] = shown if shown is not None else text[window[0]:window[1]]
                        prompt, spans = render_prompt_spans(aspect, ex, unit, ref, overrides)
                        cell.append(len(plan.prompts))
                        plan.prompts.append(prompt)
                        plan.queries.append(QueryInfo(i, aspect.name, r, u, name, window, tuple(spans)))
                    row.append(cell)
                grid.append(row)
            if failed:
                problems.append(ExampleProblem(i, failed_field, failed, aspect.name))
                blocks.append(None)
                continue
            blocks.append(Block(grid, unit_spans))
        plan.blocks[aspect.name] = blocks
    if long_input != "truncate":
        _shrink_overflowing(plan, counter, max_length)
    return plan, problems


#: tokens of the document that must fit beside the claim when the backend cuts the prompt's end
#: (a right-truncating format: MiniCheck, FactCG), as ``fit``/``chunk`` ask of a window
_MIN_DOCUMENT = 4


def shorter_claims_advice(aspect: Aspect) -> str:
    """What to do about a claim (the target, or one of its sentences) too long for ``aspect``'s
    evaluator, in the words that fit that evaluator: split the sentence (a sentence-level aspect);
    score the target sentence by sentence with a built-in sentence-level aspect of the same
    evaluator where there is one (MiniCheck's ``fact/sentence_support``), else with a user-defined
    aspect of ``granularity: sentence`` where its format has sentences, else shorten it; or give
    it a larger max length. In words every surface reads alike (no flag or keyword syntax): it
    ends a planning problem's message, which the CLI, Python and HTTP show as it is.

    Example:
        >>> from unieval_local.registry.tasks import get_aspect
        >>> shorter_claims_advice(get_aspect("fact", "support")).split(",")[0]
        'score it sentence by sentence (fact/sentence_support)'
    """
    from ..registry.tasks import aspects_of

    sibling = next((f"{a.task}/{a.name}" for a in aspects_of(aspect.checkpoint) if a.granularity == "sentence"), None)
    if aspect.granularity == "sentence":
        split = "split that sentence into shorter ones"
    elif sibling:
        split = f"score it sentence by sentence ({sibling})"
    elif "sentence" in format_of(aspect).capabilities.granularities:
        split = (f"split it into shorter claims (a user-defined aspect on {aspect.checkpoint} with "
                 "granularity: sentence checks it sentence by sentence)")
    else:
        split = "shorten it"
    return f"{split}, or give the evaluator a larger max length (up to what its model was trained for)"


def _long_claim(aspect, ex, units, unit_spans, ref, long_input, context_fields, counter,
                max_length) -> tuple[str, str] | None:
    """:func:`_claim_too_long` where the backend must keep the claim whole: a self-chunking format
    (its chunk field emptied), or in ``truncate`` mode a format whose backend cuts inside one field
    (``cut_field``: that field emptied, or none when the aspect lacks it); None elsewhere (``fit``
    and ``chunk`` windows check it themselves, UniEval's right truncation is its parity)."""
    fmt = format_of(aspect)
    if fmt.own_chunking and aspect.chunk_field:
        emptied = aspect.chunk_field
    elif long_input == "truncate" and fmt.cut_field is not None:
        emptied = fmt.cut_field if fmt.cut_field in context_fields else None
    else:
        return None
    return _claim_too_long(aspect, ex, units, unit_spans, ref, emptied, counter, max_length)


def _claim_too_long(aspect, ex, units, unit_spans, ref, emptied, counter, max_length) -> tuple[str, str] | None:
    """``(field, why)`` when the longest unit (the target, or its longest sentence) cannot be read whole within
    ``max_length`` with the ``emptied`` field left empty (the document the format chunks, or the
    field the backend cuts; None: the whole prompt), or None when it can. The field is ``target``,
    or ``prompt`` when the prompt is over the window even with an empty target (the aspect's
    instructions alone: a max length too small for the aspect).

    A format whose backend cuts the end of the prompt (``cut_field`` None: the claim's end) needs
    :data:`_MIN_DOCUMENT` tokens of the document beside the claim, as ``fit`` and ``chunk`` do; a
    format whose backend cuts inside ``emptied`` (the premise: mdeberta-nli, HHEM, Granite
    Guardian, G-Eval) only needs the rest of the prompt to fit. Without this check the backend
    would cut the claim, read past its window, or (a tokenizer asked for ``only_first``) fail for
    the whole batch."""
    k = int(np.argmax(counter.count_plain(units))) if len(units) > 1 else 0
    overrides = {emptied: ""} if emptied else {}
    base = counter.count([render_prompt(aspect, ex, units[k], ref, overrides)])[0]
    right_cut = format_of(aspect).cut_field is None
    room = max_length - (_MARGIN + _MIN_DOCUMENT if right_cut and emptied else 0)
    if base <= room:
        return None
    fixed = counter.count([render_prompt(aspect, ex, "", ref, overrides)])[0]
    if fixed > room:
        return "prompt", (f"the prompt without the target{f' and the {emptied!r}' if emptied else ''} is {fixed} "
                          f"tokens, over the window of {aspect.checkpoint} (max_length {max_length} tokens) whatever "
                          "the target says: give the evaluator a larger max length (up to what its model was "
                          "trained for)")
    what = "the target" if aspect.granularity != "sentence" else \
        f"sentence {k + 1} of the target (characters {unit_spans[k][0]}-{unit_spans[k][1]})"
    beside = f" with an empty '{emptied}'" if emptied else ""
    need = (f", leaving fewer than {_MIN_DOCUMENT} tokens for the '{emptied}'" if base <= max_length else
            f", over the window of {aspect.checkpoint} (max_length {max_length} tokens)")
    return "target", (f"{what} is too long to score: its prompt{beside} is {base} tokens{need}; it is never cut: "
                      f"{shorter_claims_advice(aspect)}")


def _fit_chunks(aspect, ex, units, ref, name, chunks, document, counter, max_length, splitter):
    """A self-chunking format's chunks checked against ``max_length`` in the runner's tokens, with
    the unit of most tokens as the claim (:func:`~unieval_local.pipeline.chunk_fit.fit_chunks`)."""
    longest = units[int(np.argmax(counter.count_plain(units)))] if len(units) > 1 else units[0]
    return fit_chunks(chunks, document, lambda text: render_prompt(aspect, ex, longest, ref, {name: text}), counter,
                      max_length, splitter)


def _plan_windows(aspect, ex, units, ref, long_input, counter, max_length, overlap, splitter, context_fields):
    """Windows of the field to shorten for one (aspect, example, reference); or an error message."""
    longest = max(units, key=len)
    full = counter.count([render_prompt(aspect, ex, longest, ref)])[0]
    if full <= max_length:
        return [(None, None, None)], None
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
        return [(name, (0, counter.cut(text, budget)), None)], None
    unit = "line" if aspect.chunk_unit == "line" else "sentence"
    spans = field_spans(text, unit, splitter) or [(0, len(text))]
    return [(name, w, None) for w in make_windows(text, spans, counter, budget, overlap)], None


def _shrink_overflowing(plan: Plan, counter: TokenCounter, max_length: int) -> None:
    """Tokenization is not exactly additive: trim the few windows that still overflow (the
    windows of ``fit``/``chunk``; a self-chunking format's chunks are left as the reference has them)."""
    shortened = [k for k, q in enumerate(plan.queries)
                 if q.window is not None and not format_of(plan.aspects[q.aspect]).own_chunking]
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


def render_prompt_spans(aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
                        overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
    """The prompt of one query in the format of the aspect's evaluator, with field spans
    (see :meth:`BooleanQA.render`)."""
    return format_of(aspect).render(aspect, example, target, reference, overrides)


def render_prompt(aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
                  overrides: dict[str, str] | None = None) -> str:
    """The prompt of :func:`render_prompt_spans`, without the spans."""
    return render_prompt_spans(aspect, example, target, reference, overrides)[0]
