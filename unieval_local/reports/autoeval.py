"""The ``autoeval`` report: accuracy decomposition, adherence rubrics, completeness.

A record's report is, exactly as the summarization-autoeval format documents it::

    {"accuracy": {"decomposition": [{"point", "accuracy", "is_accurate"}]},
     "accuracy_score": 0-100 | "N/A",
     "adherence": {"rubrics": [{"question", "reasoning", "is_addressed"}]},
     "adherence_score": 0-100 | "N/A",
     "completeness": [{"question", "score", "content_list":
                       [{"transcript_content", "related_content_from_summary", "is_covered"}]}],
     "completeness_score": 0-100 | "N/A"}

``is_accurate`` is a JSON boolean, ``is_addressed`` and ``is_covered`` the strings
``"True"``/``"False"`` as in that format (option ``plain_booleans``: JSON booleans);
option ``details`` adds ``details`` (every probability, window and offset).

The summary's structure comes from **section definitions**
(:class:`~unieval_local.reports.common.SectionDefinition`: name, instruction, type
``free_text`` or ``categorical`` with ``allowed_values``, ``prebuilt``, optional
``topic``). A section's content in the summary is the record's ``sections[name]``,
else the target's lines from a heading ``<name>:`` to the next section's heading.

* Accuracy: every free-text summary sentence (each line on its own, then Punkt; list
  markers and section headings dropped; categorical section lines left out; up to
  ``max_n_claims``) is a point; its consistency P(Yes) against the source (windows
  for long sources, max over windows) decides ``is_accurate`` (>=
  ``accuracy_threshold``), and ``accuracy`` gives the reason with the best source
  window. Score: percentage accurate.
* Adherence: one rubric per custom (not ``prebuilt``) section, and per free-form
  instruction (``instructions``). Free text: question ``Does the summary follow the
  instruction '<instruction>'?``, answered by the Boolean-QA query ``Does this summary
  follow the instruction?`` over the section's content (the whole summary when the
  section is not found) and the instruction; ``is_addressed`` at P(Yes) >=
  ``addressed_threshold``. Categorical: question ``Does the summary follow the
  instruction and return only one of the allowed categorical values?``, checked
  exactly: the section's value, trimmed, equals an allowed value ignoring case.
  Score: percentage addressed; ``"N/A"`` when there is no rubric (a summary made
  only of prebuilt sections).
* Completeness: one entry per free-text section (prebuilt ones too) and per
  ``section_questions`` topic. Each informative source sentence
  (:func:`~unieval_local.keypoints.is_informative`) gets the relatedness query of
  the section (:func:`relatedness_question`: from its ``topic``, else derived from its
  instruction); those with P(Yes) >= ``related_threshold`` are related (the
  ``max_items_per_question`` most related, in source order). Each related sentence
  is checked against every free-text summary sentence with the consistency question
  (claim = the transcript sentence, document = the summary sentence): the best one
  is ``related_content_from_summary`` when its P(Yes) >= ``support_threshold``
  (``is_covered``), else empty. Per question: percentage covered (``"N/A"`` with an
  empty ``content_list``: nothing related in the transcript, not counted). Score:
  percentage covered over all content items; ``"N/A"`` when no item exists, and for
  a categorical summary (no free-text sentence at all).
* No source: accuracy and completeness are ``"N/A"``.

Two engine passes: the first runs the accuracy, relatedness and rubric queries; the
second the support checks, which depend on what the first found related.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..engine import Engine, Job, RunStats
from ..keypoints import MIN_KEY_POINT_WORDS, is_informative, source_sentence_spans
from ..schema import UniEvalData
from .common import (
    ConsistencyOption,
    WithOptionalDetails,
    NA,
    Claims,
    ClaimWindow,
    Flat,
    Percent,
    ReportRecord,
    ReportRow,
    RowError,
    SectionDefinition,
    check_categorical,
    check_sections,
    check_texts,
    derived_aspect,
    parse_records,
    problems_to_errors,
    record_id,
    resolve_consistency_aspect,
    short,
    summary_sentence_spans,
    support_aspect,
)

#: The Boolean-QA query of a free-text rubric (fields summary, instruction).
ADHERENCE_QUESTION = "Does this summary follow the instruction?"
#: The rubric question shown for a categorical section.
CATEGORICAL_RUBRIC = "Does the summary follow the instruction and return only one of the allowed categorical values?"

#: Leading imperative verbs stripped from an instruction to get its topic.
IMPERATIVE_VERBS = frozenset(
    "identify list extract summarize summarise note capture describe mention include record provide state give "
    "write document outline highlight report specify explain detail find determine indicate name enumerate "
    "collect gather track log flag cite quote recap show present".split())
_LEADING = re.compile(r"^(?:please\s+)?", re.I)
_DETERMINERS = re.compile(r"^(?:any\s+and\s+all|any|all(?:\s+of)?|each(?:\s+of)?|every)\s+(?=\S)", re.I)
_TRAILING = re.compile(r"[\s,;]*(?:\(?\s*if\s+(?:any|applicable|mentioned|present|available|relevant|so)\s*\)?)\s*$",
                       re.I)


def relatedness_topic(instruction: str) -> str:
    """The topic of a section instruction: leading "please" and imperative verbs
    (:data:`IMPERATIVE_VERBS`, chained with "and"/"or"/commas) dropped, then a leading
    "any"/"all"/"each"/"every", then a trailing "if any"/"if applicable"..., then end
    punctuation; the first letter lower-cased unless the word is an acronym or a name.

    ``"Identify any dates explicitly mentioned by the agent or the customer"`` ->
    ``"dates explicitly mentioned by the agent or the customer"``; ``"List and
    describe all action items, if any."`` -> ``"action items"``; a noun phrase stays
    as it is (``"Next steps agreed on the call"`` -> ``"next steps agreed on the call"``).
    """
    text = _LEADING.sub("", " ".join(instruction.split())).strip().rstrip(".!;:").strip()
    text = _TRAILING.sub("", text).strip().rstrip(".!;:,").strip()
    words = text.split(" ")
    k = 0
    while k < len(words):
        w = words[k].lower().strip(",")
        if w in IMPERATIVE_VERBS or (k > 0 and w in ("and", "or", "&") and k + 1 < len(words)
                                     and words[k + 1].lower().strip(",") in IMPERATIVE_VERBS):
            k += 1
            continue
        break
    if 0 < k < len(words):
        text = " ".join(words[k:])
    text = _DETERMINERS.sub("", text)
    first = text.split(" ")[0] if text else ""
    if first and first[1:] == first[1:].lower() and first != "I":
        text = text[0].lower() + text[1:]
    return text


def relatedness_question(instruction_or_topic: str, *, topic: bool = False) -> str:
    """The Boolean-QA relatedness query of a section, asked of each transcript sentence.

    A question (ends with ``?``) becomes
    ``Does this sentence answer the question: <question>``; anything else ``Is this
    sentence about <topic>?`` with the topic from :func:`relatedness_topic` (used as
    given when ``topic`` is True: a section's explicit ``topic`` or a section question).

    >>> relatedness_question("Identify any dates explicitly mentioned by the agent or the customer")
    'Is this sentence about dates explicitly mentioned by the agent or the customer?'
    >>> relatedness_question("the dates mentioned", topic=True)
    'Is this sentence about the dates mentioned?'
    """
    text = " ".join(instruction_or_topic.split()).strip()
    if text.endswith("?") and not topic:
        q = text.rstrip("?").strip()
        return f"Does this sentence answer the question: {q[0].lower() + q[1:] if q[1:2].islower() else q}?"
    subject = text.rstrip("?.!").strip() if topic else relatedness_topic(text)
    return f"Is this sentence about {subject}?"


def completeness_question(section: SectionDefinition | None, topic: str | None = None) -> str:
    """The completeness entry's ``question``: ``Does the summary follow '<instruction>'?``
    for a section with an instruction, else ``Does the summary cover <topic>?``."""
    if section is not None and section.instruction:
        return f"Does the summary follow '{section.instruction.strip()}'?"
    subject = (topic or (section.topic if section else "") or "").strip().rstrip("?.!")
    return f"Does the summary cover {subject}?"


def free_text_rubric(instruction: str) -> str:
    """The adherence rubric ``question`` of a free-text instruction."""
    return f"Does the summary follow the instruction '{instruction.strip()}'?"


class AutoevalOptions(ConsistencyOption):
    """Settings of the ``autoeval`` report (what each does: module docstring).

    Attributes:
        section_definitions: the sections of the summary template, for records that
            do not give their own (:class:`~unieval_local.reports.common.SectionDefinition`).
        section_questions, instructions, categorical: defaults for records that do not
            give their own: completeness topics, free-form adherence instructions,
            categorical sections (name -> allowed values; custom, not prebuilt).
        max_n_claims: summary sentences decomposed for accuracy (default 50).
        accuracy_threshold, related_threshold, support_threshold,
            addressed_threshold: P(Yes) decision points (default 0.5 each).
        max_items_per_question: related transcript sentences kept per
            question, the most related first (default 10).
        min_content_words: a transcript sentence is asked about when it has this many
            content words, or one fewer with a number or date (default 3; drops "Okay." turns).
        consistency_aspect: ``task/aspect`` answering accuracy points and support checks
            (``summarization/consistency`` by default; ``fact/support`` for MiniCheck).
        plain_booleans: ``is_addressed`` / ``is_covered`` as JSON booleans instead of the
            format's ``"True"`` / ``"False"`` strings.
        details: also write each report's ``details`` (probabilities, windows, offsets).

    Raises:
        pydantic.ValidationError: out-of-range values, empty strings, a bad section definition.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    section_definitions: list[SectionDefinition] = Field(default_factory=list)
    section_questions: list[str] = Field(default_factory=list)
    instructions: list[str] = Field(default_factory=list)
    categorical: dict[str, list[str]] = Field(default_factory=dict)
    max_n_claims: int = Field(default=50, ge=1)
    accuracy_threshold: float = Field(default=0.5, ge=0, le=1)
    related_threshold: float = Field(default=0.5, ge=0, le=1)
    support_threshold: float = Field(default=0.5, ge=0, le=1)
    addressed_threshold: float = Field(default=0.5, ge=0, le=1)
    max_items_per_question: int = Field(default=10, ge=1)
    min_content_words: int = Field(default=MIN_KEY_POINT_WORDS, ge=0)
    plain_booleans: bool = False
    details: bool = False

    @field_validator("section_questions", "instructions")
    @classmethod
    def _texts(cls, v: list[str]) -> list[str]:
        return check_texts(v)

    @field_validator("categorical")
    @classmethod
    def _categories(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        return check_categorical(v)

    @field_validator("section_definitions")
    @classmethod
    def _sections(cls, v: list[SectionDefinition]) -> list[SectionDefinition]:
        return check_sections(v)


#: ``"True"``/``"False"`` as the format writes them, or a JSON boolean (``plain_booleans``).
Flag = Literal["True", "False"] | bool


class AccuracyPoint(BaseModel):
    """One summary sentence: ``accuracy`` is the reason, ``is_accurate`` the verdict."""

    model_config = ConfigDict(frozen=True)

    point: str
    accuracy: str
    is_accurate: bool


class Accuracy(BaseModel):
    """``decomposition``: the summary's points."""

    model_config = ConfigDict(frozen=True)

    decomposition: list[AccuracyPoint]


class Rubric(BaseModel):
    """One adherence rubric: the ``question``, the ``reasoning`` and the verdict."""

    model_config = ConfigDict(frozen=True)

    question: str
    reasoning: str
    is_addressed: Flag


class Adherence(BaseModel):
    """``rubrics``: one per custom section and per free-form instruction."""

    model_config = ConfigDict(frozen=True)

    rubrics: list[Rubric]


class ContentItem(BaseModel):
    """A transcript sentence related to a completeness question, and the summary
    sentence that covers it (``""`` when none does)."""

    model_config = ConfigDict(frozen=True)

    transcript_content: str
    related_content_from_summary: str
    is_covered: Flag


class CompletenessEntry(BaseModel):
    """One completeness question: its ``score`` (percentage of ``content_list`` covered,
    ``"N/A"`` when the list is empty) and the related transcript content."""

    model_config = ConfigDict(frozen=True)

    question: str
    score: Percent
    content_list: list[ContentItem]


class PointDetails(BaseModel):
    """An accuracy point's consistency P(Yes) and the best window of a long source."""

    model_config = ConfigDict(frozen=True)

    point: str
    score: float
    source_window: ClaimWindow | None = None


class RubricDetails(BaseModel):
    """How a rubric was decided: ``kind`` ``free_text`` (``score`` the rubric query's
    P(Yes), ``summary_text`` what it was asked of) or ``categorical`` (``value`` found,
    ``allowed``); ``section`` the section name (None for a free-form instruction)."""

    model_config = ConfigDict(frozen=True)

    question: str
    kind: Literal["free_text", "categorical"]
    section: str | None = None
    instruction: str | None = None
    score: float | None = None
    summary_text: str | None = None
    value: str | None = None
    allowed: list[str] | None = None


class ItemDetails(BaseModel):
    """A content item's offsets in the source, relatedness and best support P(Yes)."""

    model_config = ConfigDict(frozen=True)

    transcript_content: str
    start: int
    end: int
    relatedness: float
    support: float


class CompletenessDetails(BaseModel):
    """A completeness question's relatedness query, how many sentences passed the
    relatedness threshold before the ``max_items_per_question`` cap, and its items."""

    model_config = ConfigDict(frozen=True)

    question: str
    relatedness_query: str
    n_related: int
    items: list[ItemDetails]


class AutoevalDetails(BaseModel):
    """Everything behind an autoeval report (``details`` option)."""

    model_config = ConfigDict(frozen=True)

    accuracy: list[PointDetails]
    adherence: list[RubricDetails]
    completeness: list[CompletenessDetails]


class AutoevalReport(WithOptionalDetails):
    """The ``autoeval`` report of one summary (shape in the module docstring)."""

    model_config = ConfigDict(frozen=True)

    accuracy: Accuracy
    accuracy_score: Percent
    adherence: Adherence
    adherence_score: Percent
    completeness: list[CompletenessEntry]
    completeness_score: Percent
    details: AutoevalDetails | None = None


# ---------------------------------------------------------------- the summary's sections


_HEADING = r"^[ \t]*(?:[#>*_\-\u2022]+[ \t]*)?{name}[ \t]*(?:\*\*|__)?[ \t]*:[ \t]*(?:\*\*|__)?[ \t]*"


def heading_pattern(names: Sequence[str]) -> re.Pattern | None:
    """A multiline pattern of a line starting with ``<name>:`` for any of ``names``
    (case-insensitive; markdown ``#``, ``-``, ``**`` around the name allowed); group
    ``name`` is the name as written."""
    if not names:
        return None
    alt = "|".join(re.escape(n.strip()) for n in sorted(names, key=len, reverse=True))
    return re.compile(_HEADING.format(name=f"(?P<name>{alt})"), re.I | re.M)


@dataclass(frozen=True)
class SectionSpan:
    """Where a section is in the target: the heading ``[head_start, start)`` and the
    content ``[start, end)`` (to the next section heading)."""

    head_start: int
    start: int
    end: int


def locate_sections(target: str, names: Sequence[str]) -> dict[str, SectionSpan]:
    """Lower-cased section name -> :class:`SectionSpan` of its first heading in ``target``."""
    pattern = heading_pattern(names)
    if pattern is None:
        return {}
    heads = list(pattern.finditer(target))
    out: dict[str, SectionSpan] = {}
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(target)
        out.setdefault(m.group("name").lower(), SectionSpan(m.start(), m.end(), len(target[:end].rstrip())))
    return out


def section_text(target: str, name: str, sections: dict[str, str] | None,
                 spans: dict[str, SectionSpan]) -> str | None:
    """The summary's content of section ``name``: ``sections[name]`` (name matched
    case-insensitively), else the located content, else None."""
    for key, value in (sections or {}).items():
        if key.strip().lower() == name.strip().lower():
            return value.strip()
    span = spans.get(name.strip().lower())
    return target[span.start:span.end].strip() if span is not None else None


def categorical_value(target: str, name: str, sections: dict[str, str] | None,
                      spans: dict[str, SectionSpan]) -> str | None:
    """The summary's value of categorical section ``name``: its content's first line,
    trimmed (None when the section is absent or empty)."""
    text = section_text(target, name, sections, spans)
    if not text:
        return None
    return text.splitlines()[0].strip().strip("*_").strip() or None


def matches_allowed(value: str | None, allowed: Sequence[str]) -> str | None:
    """The allowed value ``value`` equals, ignoring case and surrounding spaces, else None."""
    if value is None:
        return None
    key = value.strip().casefold()
    return next((a for a in allowed if a.strip().casefold() == key), None)


def _flag(value: bool, plain: bool) -> Flag:
    return bool(value) if plain else ("True" if value else "False")


def _percent(flags: Sequence[bool]) -> Percent:
    return 100.0 * sum(flags) / len(flags) if flags else NA


def _accuracy_reason(value: float, threshold: float, window: ClaimWindow | None) -> str:
    if value >= threshold:
        text = f"Supported by the source (P(Yes) = {value:.2f} >= {threshold:.2f})."
        return text + (f" Best supporting passage: \"{short(window.text)}\"" if window else "")
    text = f"Not supported by the source (P(Yes) = {value:.2f} < {threshold:.2f})."
    return text + (f" Closest passage: \"{short(window.text)}\"" if window else "")


@dataclass
class _Plan:
    """One record's sections and queries."""

    has_source: bool
    rubrics: list[dict[str, Any]]  # {question, kind, section, instruction, summary_text | value, allowed, pos}
    questions: list[dict[str, Any]]  # {question, query, k}
    free_text: bool  # the summary has a free-text sentence
    claims: bool


def _effective_sections(rec: ReportRecord, options: AutoevalOptions) -> tuple[list[SectionDefinition], list[str],
                                                                               list[str]]:
    """The record's section definitions (legacy ``categorical`` as custom categorical
    sections), section-question topics and free-form instructions."""
    defs = list(rec.section_definitions if rec.section_definitions is not None else options.section_definitions)
    cats = rec.categorical if rec.categorical is not None else options.categorical
    known = {d.name.strip().lower() for d in defs}
    defs += [SectionDefinition(name=n, type="categorical", allowed_values=list(v))
             for n, v in cats.items() if n.strip().lower() not in known]
    topics = list(dict.fromkeys(rec.section_questions if rec.section_questions is not None
                                else options.section_questions))
    insts = list(rec.instructions if rec.instructions is not None else options.instructions)
    return defs, topics, insts


def _claim_spans(target: str, splitter, spans: dict[str, SectionSpan], categorical: set[str]) -> list[tuple[int, int]]:
    """The target's free-text sentences: headings left out, categorical sections' content too."""
    def line_end(at: int) -> int:
        k = target.find("\n", at)
        return len(target) if k < 0 else k

    cut = [(s.head_start, line_end(s.start)) for n, s in spans.items() if n in categorical]  # the value's line
    heads = [(s.head_start, s.start) for n, s in spans.items() if n not in categorical]
    out = []
    for a, b in summary_sentence_spans(target, splitter):
        if any(s <= a and b <= e for s, e in cut):
            continue
        for hs, he in heads:
            if hs <= a < he:
                a = he
        a += len(target[a:b]) - len(target[a:b].lstrip())
        if a < b and target[a:b].strip(" \t*_-:"):
            out.append((a, b))
    return out


def autoeval_rows(records: Sequence[Any], engine: Engine, options: AutoevalOptions,
                  start: int = 0) -> tuple[list[ReportRow[AutoevalReport]], RunStats]:
    """Build each record's report (two engine passes, see the module docstring).

    Args:
        records: dicts with ``target`` (or ``summary``) and optionally ``source`` (or
            ``transcript`` / ``input``), ``section_definitions``, ``section_questions``,
            ``instructions``, ``categorical``, ``sections``, ``max_n_claims``.
        engine: the engine (reports default to ``long_input="chunk"``).
        options: :class:`AutoevalOptions`.
        start: index of ``records[0]`` in the whole input.

    Returns:
        ``(rows, stats)``: one :class:`ReportRow` per record (an error row for a bad
        record; the others are reported) and the summed counts of both passes.
    """
    parsed, errors = parse_records(records)
    reg = engine.registry
    cons = resolve_consistency_aspect(reg, options.consistency_aspect)
    claims = Claims()
    queries: dict[str, int] = {}  # relatedness query -> job number
    related: dict[int, Flat] = {}  # job number -> source sentences asked about
    source_spans: dict[int, list[tuple[int, int]]] = {}
    rubric = Flat()
    plans: dict[int, _Plan] = {}
    plain = options.plain_booleans
    for i, rec in enumerate(parsed):
        if rec is None:
            continue
        defs, topics, insts = _effective_sections(rec, options)
        categorical = {d.name.strip().lower() for d in defs if d.type == "categorical"}
        spans = locate_sections(rec.target, [d.name for d in defs])
        sentence_spans = _claim_spans(rec.target, engine.splitter, spans, categorical)
        has_source = isinstance(rec.source, str) and bool(rec.source.strip())
        plan = _Plan(has_source=has_source, rubrics=[], questions=[], free_text=bool(sentence_spans), claims=False)
        plans[i] = plan
        # adherence rubrics: custom sections, then free-form instructions
        for d in defs:
            if d.prebuilt:
                continue
            if d.type == "categorical":
                plan.rubrics.append({"question": CATEGORICAL_RUBRIC, "kind": "categorical", "section": d.name,
                                     "instruction": d.instruction, "allowed": list(d.allowed_values or []),
                                     "value": categorical_value(rec.target, d.name, rec.sections, spans)})
            elif d.instruction:
                text = section_text(rec.target, d.name, rec.sections, spans) or rec.target
                plan.rubrics.append({"question": free_text_rubric(d.instruction), "kind": "free_text",
                                     "section": d.name, "instruction": d.instruction, "summary_text": text,
                                     "pos": rubric.add(i, UniEvalData(target=text, instruction=d.instruction))})
        for inst in insts:
            plan.rubrics.append({"question": free_text_rubric(inst), "kind": "free_text", "section": None,
                                 "instruction": inst, "summary_text": rec.target,
                                 "pos": rubric.add(i, UniEvalData(target=rec.target, instruction=inst))})
        if not has_source:
            continue
        plan.claims = claims.plan(i, rec, engine.splitter, rec.max_n_claims or options.max_n_claims,
                                  spans=sentence_spans) is None
        if not plan.free_text:
            continue  # a categorical summary: completeness is N/A
        entries = [(completeness_question(d), relatedness_question(d.topic, topic=True) if d.topic
                    else relatedness_question(d.instruction or ""))
                   for d in defs if d.type == "free_text"]
        entries += [(completeness_question(None, t), relatedness_question(t, topic=True)) for t in topics]
        if entries:
            source_spans[i] = [s for s in source_sentence_spans(rec.source, engine.splitter, strip_speakers=True)
                               if is_informative(rec.source[s[0]:s[1]], options.min_content_words)]
        for question, query in entries:
            k = queries.setdefault(query, len(queries))
            plan.questions.append({"question": question, "query": query, "k": k})
            flat = related.setdefault(k, Flat())
            if i not in flat.by_record:
                for a, b in source_spans[i]:
                    flat.add(i, UniEvalData(target=rec.source[a:b]))
    jobs = {"claims": Job((support_aspect(cons, "claim"),), claims.flat.examples)}
    rel_aspects = {k: derived_aspect(f"related_{k}", q, [("sentence", "target")], "unieval-sum")
                   for q, k in queries.items()}
    for k, flat in related.items():
        jobs[f"related_{k}"] = Job((rel_aspects[k],), flat.examples)
    if rubric.examples:
        adherence = derived_aspect("adherence", ADHERENCE_QUESTION,
                                   [("summary", "target"), ("instruction", "instruction")], "unieval-sum")
        jobs["rubric"] = Job((adherence,), rubric.examples)
    results, stats = engine.run(jobs, evidence=True)
    problems_to_errors(results["claims"].problems, claims.flat.positions(), errors)
    if "rubric" in results:
        problems_to_errors(results["rubric"].problems, rubric.positions(), errors)
    for k, flat in related.items():
        problems_to_errors(results[f"related_{k}"].problems, flat.positions(), errors)

    # second pass: support of each related transcript sentence by each free-text summary sentence
    support = Flat()
    chosen: dict[tuple[int, int], list[tuple[int, float, list[int]]]] = {}  # (k, i) -> [(span no, rel, positions)]
    n_related: dict[tuple[int, int], int] = {}
    for k, flat in related.items():
        vals = results[f"related_{k}"].values[rel_aspects[k].name]
        for i, positions in flat.by_record.items():
            if i in errors:
                continue
            rel = [(s, float(vals[p])) for s, p in enumerate(positions)]
            above = [(s, v) for s, v in rel if v >= options.related_threshold]
            n_related[(k, i)] = len(above)
            top = sorted(sorted(above, key=lambda x: -x[1])[: options.max_items_per_question])
            items = []
            for s, v in top:
                a, b = source_spans[i][s]
                ps = [support.add(i, UniEvalData(target=parsed[i].source[a:b], source=sent))
                      for sent in claims.sentences[i]]
                items.append((s, v, ps))
            chosen[(k, i)] = items
    support_values = None
    if support.examples:
        second, stats2 = engine.run({"support": Job((support_aspect(cons),), support.examples)})
        support_values = second["support"].values["support"]
        problems_to_errors(second["support"].problems, support.positions(), errors)
        stats += stats2

    rows: list[ReportRow[AutoevalReport]] = []
    for i, rec in enumerate(parsed):
        rid = record_id(records[i])
        if i in errors or rec is None:
            rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, error=errors[i]))
            continue
        plan = plans[i]
        checked = claims.read(i, results["claims"], rec.source) if plan.claims else []
        values = [[v for _, v, _ in checked]]
        values.append([float(results["rubric"].values["adherence"][r["pos"]]) for r in plan.rubrics if "pos" in r])
        values += [[v for _, v, _ in chosen.get((q["k"], i), [])] for q in plan.questions]
        if support_values is not None:
            values.append([float(support_values[p]) for p in support.of(i)])
        if any(not np.isfinite(v).all() for v in values):
            rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, error=RowError(
                field="target", message="the model gave a non-finite score; try dtype float32")))
            continue
        # accuracy
        points = [AccuracyPoint(point=text, accuracy=_accuracy_reason(v, options.accuracy_threshold, w),
                                is_accurate=v >= options.accuracy_threshold) for text, v, w in checked]
        point_details = [PointDetails(point=text, score=v, source_window=w) for text, v, w in checked]
        # adherence
        rubrics, rubric_details, addressed, notes = [], [], [], []
        for r in plan.rubrics:
            if r["kind"] == "free_text":
                v = float(results["rubric"].values["adherence"][r["pos"]])
                ev = results["rubric"].evidence["adherence"][r["pos"]] if results["rubric"].evidence else None
                if ev is not None and ev.truncated:
                    cut = next((q for q in ev.queries if q.truncated), None)
                    field_name = {"target": "summary", "instruction": "instruction"}.get(
                        cut.truncated_field if cut else "", cut.truncated_field if cut else "prompt")
                    notes.append(f"the adherence query for the instruction '{short(r['instruction'], 80)}' was longer "
                                 f"than max_length and lost its end ({cut.tokens_dropped if cut else '?'} tokens, "
                                 f"from the {field_name}): its rubric read only the beginning")
                ok = v >= options.addressed_threshold
                where = f"the '{r['section']}' section" if r["section"] and r["summary_text"] != rec.target \
                    else "the whole summary"
                reasoning = (f"Rubric query \"{ADHERENCE_QUESTION}\" on {where}: P(Yes) = {v:.2f} "
                             f"{'>=' if ok else '<'} {options.addressed_threshold:.2f}.")
                rubric_details.append(RubricDetails(question=r["question"], kind="free_text", section=r["section"],
                                                    instruction=r["instruction"], score=v,
                                                    summary_text=r["summary_text"]))
            else:
                value, allowed = r["value"], r["allowed"]
                hit = matches_allowed(value, allowed)
                ok = hit is not None
                listed = ", ".join(allowed)
                reasoning = (f"The summary has no '{r['section']}' section." if value is None else
                             f"The '{r['section']}' section is '{value}', one of the allowed values ({listed})."
                             if ok else
                             f"The '{r['section']}' section is '{value}', not one of the allowed values ({listed}).")
                rubric_details.append(RubricDetails(question=r["question"], kind="categorical", section=r["section"],
                                                    instruction=r["instruction"], value=value, allowed=allowed))
            addressed.append(ok)
            rubrics.append(Rubric(question=r["question"], reasoning=reasoning, is_addressed=_flag(ok, plain)))
        # completeness
        entries, entry_details, covered_all = [], [], []
        for q in plan.questions:
            content, items, flags = [], [], []
            for s, rel, ps in chosen.get((q["k"], i), []):
                a, b = source_spans[i][s]
                sup = [float(support_values[p]) for p in ps] if ps else []
                best = int(np.argmax(sup)) if sup else None
                best_value = sup[best] if best is not None else 0.0
                ok = best is not None and best_value >= options.support_threshold
                content.append(ContentItem(
                    transcript_content=rec.source[a:b],
                    related_content_from_summary=claims.sentences[i][best] if ok else "",
                    is_covered=_flag(ok, plain)))
                items.append(ItemDetails(transcript_content=rec.source[a:b], start=a, end=b, relatedness=rel,
                                         support=best_value))
                flags.append(ok)
            covered_all += flags
            entries.append(CompletenessEntry(question=q["question"], score=_percent(flags), content_list=content))
            entry_details.append(CompletenessDetails(question=q["question"], relatedness_query=q["query"],
                                                     n_related=n_related.get((q["k"], i), 0), items=items))
        details = (AutoevalDetails(accuracy=point_details, adherence=rubric_details, completeness=entry_details)
                   if options.details else None)
        rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, notes=notes, report=AutoevalReport(
            accuracy=Accuracy(decomposition=points), accuracy_score=_percent([p.is_accurate for p in points]),
            adherence=Adherence(rubrics=rubrics), adherence_score=_percent(addressed),
            completeness=entries, completeness_score=_percent(covered_all), details=details)))
    return rows, stats


def autoeval_aggregate(rows: Sequence[ReportRow[AutoevalReport]]) -> dict[str, float | int | None]:
    """File-level means of ``accuracy_score``, ``completeness_score`` and ``adherence_score``
    (keys ``accuracy``, ``completeness``, ``adherence``) over the records where each is not
    N/A (None when none is), and ``n_<name>``: how many records that is."""
    reps = [r.report for r in rows if r.report is not None]
    out: dict[str, float | int | None] = {}
    for name in ("accuracy", "completeness", "adherence"):
        vals = [getattr(r, f"{name}_score") for r in reps if getattr(r, f"{name}_score") != NA]
        out[name] = float(np.mean(vals)) if vals else None
        out[f"n_{name}"] = len(vals)
    return out
