"""The ``autoeval`` report: accuracy decomposition, completeness and adherence.

* Accuracy: every summary sentence (each line on its own, then Punkt; list
  markers dropped; lines holding a categorical section left out; up to
  ``max_n_claims``) is a point; its
  consistency P(Yes) against the source (windows for long sources, max over
  windows) decides ``is_accurate`` (>= ``accuracy_threshold``), and the reason
  quotes the probability and the best source window. Score: percentage accurate.
* Completeness: for each section question q (a noun phrase, e.g. "the dates
  mentioned"), every source sentence with at least ``min_content_words``
  content words gets the query ``Is this sentence about q?``; those with
  P(Yes) >= ``related_threshold`` are related (the ``max_items_per_question``
  most related, in source order). Each related sentence is then checked
  against every summary sentence with the consistency question (claim = the
  transcript sentence, document = the summary sentence): the best one is
  ``related_content_from_summary`` when its P(Yes) >= ``support_threshold``
  (``is_covered``), else empty. Score: percentage covered over the questions
  that have related content; a question without any gives an empty
  ``content_list`` and does not count.
* Adherence: each instruction gets the rubric query ``Does this summary follow
  the instruction?`` (fields summary, instruction); ``is_addressed`` at
  P(Yes) >= ``addressed_threshold``. Each categorical section is checked
  exactly: the summary's value (record ``sections[name]``, else the first
  target line ``<name>: <value>``, name matched case-insensitively) must be
  one of the allowed values. Score: percentage addressed.
* Any score is ``"N/A"`` where the inputs do not allow it (no source: accuracy
  and completeness; no section question or no related content: completeness;
  no instruction and no categorical section: adherence).

Two engine passes: the first runs the accuracy, relatedness and rubric
queries; the second the support checks, which depend on what the first found
related.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..engine import Engine, Job, RunStats
from ..keypoints import content_words, source_sentence_spans
from ..schema import UniEvalData
from .common import (
    DEFAULT_CONSISTENCY_ASPECT,
    check_consistency_aspect,
    migrate_consistency_task,
    resolve_consistency_aspect,
    NA,
    Claims,
    ClaimWindow,
    Flat,
    Percent,
    ReportRow,
    RowError,
    check_categorical,
    check_texts,
    derived_aspect,
    parse_records,
    problems_to_errors,
    record_id,
    short,
    support_aspect,
)

#: The rubric question of adherence (UniEval-style Boolean QA; fields summary, instruction).
ADHERENCE_QUESTION = "Does this summary follow the instruction?"


def relatedness_question(section_question: str) -> str:
    """``Is this sentence about <q>?`` for a section question (trailing ``?``/``.`` dropped)."""
    return f"Is this sentence about {section_question.strip().rstrip('?.!').strip()}?"


class AutoevalOptions(BaseModel):
    """Settings of the ``autoeval`` report (what each does: module docstring).

    Attributes:
        section_questions, instructions, categorical: defaults for records
            that do not give their own.
        max_n_claims: summary sentences decomposed for accuracy (default 50).
        accuracy_threshold, related_threshold, support_threshold,
            addressed_threshold: P(Yes) decision points (default 0.5 each).
        max_items_per_question: related transcript sentences kept per
            question, the most related first (default 10).
        min_content_words: a transcript sentence needs this many content words
            to be asked about (default 3; drops "Okay." turns).
        consistency_aspect: ``task/aspect`` answering accuracy points and support checks
            (``summarization/consistency`` by default; ``fact/support`` for MiniCheck)
            answers the accuracy and support queries.

    Raises:
        pydantic.ValidationError: out-of-range values or empty strings.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    section_questions: list[str] = Field(default_factory=list)
    instructions: list[str] = Field(default_factory=list)
    categorical: dict[str, list[str]] = Field(default_factory=dict)
    max_n_claims: int = Field(default=50, ge=1)
    accuracy_threshold: float = Field(default=0.5, ge=0, le=1)
    related_threshold: float = Field(default=0.5, ge=0, le=1)
    support_threshold: float = Field(default=0.5, ge=0, le=1)
    addressed_threshold: float = Field(default=0.5, ge=0, le=1)
    max_items_per_question: int = Field(default=10, ge=1)
    min_content_words: int = Field(default=3, ge=0)
    consistency_aspect: str = DEFAULT_CONSISTENCY_ASPECT

    @model_validator(mode="before")
    @classmethod
    def _old_key(cls, data: Any) -> Any:
        return migrate_consistency_task(data)

    @field_validator("consistency_aspect")
    @classmethod
    def _checker(cls, v: str) -> str:
        return check_consistency_aspect(v)

    @field_validator("section_questions", "instructions")
    @classmethod
    def _texts(cls, v: list[str]) -> list[str]:
        return check_texts(v)

    @field_validator("categorical")
    @classmethod
    def _categories(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        return check_categorical(v)


class AccuracyPoint(BaseModel):
    """One summary sentence: ``accuracy`` is the reason (from the evidence),
    ``score`` its consistency P(Yes), ``source_window`` the best window of a long source."""

    model_config = ConfigDict(frozen=True)

    point: str
    accuracy: str
    is_accurate: bool
    score: float
    source_window: ClaimWindow | None = None


class Accuracy(BaseModel):
    """``score``: percentage of accurate points (or N/A); ``decomposition``: the points."""

    model_config = ConfigDict(frozen=True)

    score: Percent
    decomposition: list[AccuracyPoint]


class ContentItem(BaseModel):
    """A transcript sentence related to a section question.

    Attributes:
        transcript_content: the sentence; ``start``/``end`` its offsets in the source.
        relatedness: P(Yes) of "Is this sentence about <question>?".
        related_content_from_summary: the summary sentence that supports it
            best, or "" when none reaches the support threshold.
        support: that best support P(Yes).
        is_covered: support >= support_threshold.
    """

    model_config = ConfigDict(frozen=True)

    transcript_content: str
    start: int
    end: int
    relatedness: float
    related_content_from_summary: str
    support: float
    is_covered: bool


class SectionCompleteness(BaseModel):
    """One section question: its ``content_list`` (empty when no source content is
    related), and ``n_related``: sentences above the relatedness threshold
    before the ``max_items_per_question`` cap."""

    model_config = ConfigDict(frozen=True)

    question: str
    content_list: list[ContentItem]
    n_related: int


class Completeness(BaseModel):
    """``score``: percentage of content items covered (or N/A); ``sections``: per question."""

    model_config = ConfigDict(frozen=True)

    score: Percent
    sections: list[SectionCompleteness]


class InstructionCheck(BaseModel):
    """One instruction: rubric P(Yes) (``score``), ``is_addressed`` and a reason."""

    model_config = ConfigDict(frozen=True)

    instruction: str
    is_addressed: bool
    score: float
    reason: str


class CategoricalCheck(BaseModel):
    """One categorical section: the summary's ``value`` (None if absent), the
    ``allowed`` values, ``is_addressed`` (exact membership) and a reason."""

    model_config = ConfigDict(frozen=True)

    section: str
    value: str | None
    allowed: list[str]
    is_addressed: bool
    reason: str


class Adherence(BaseModel):
    """``score``: percentage addressed over instructions and categorical sections (or N/A)."""

    model_config = ConfigDict(frozen=True)

    score: Percent
    instructions: list[InstructionCheck]
    categorical: list[CategoricalCheck]


class AutoevalReport(BaseModel):
    """The ``autoeval`` report of one summary: accuracy, completeness, adherence."""

    model_config = ConfigDict(frozen=True)

    accuracy: Accuracy
    completeness: Completeness
    adherence: Adherence


def section_value(target: str, name: str, sections: dict[str, str] | None) -> str | None:
    """The summary's value of categorical section ``name``: ``sections[name]``, else the
    first target line ``<name>: <value>`` (name case-insensitive), else None."""
    if sections and name in sections:
        return sections[name].strip()
    m = re.search(rf"(?im)^\s*{re.escape(name)}\s*:\s*(.*?)\s*$", target)
    return m.group(1) if m else None


def _section_lines(target: str, names: Sequence[str]):
    """``skip(start, end)``: True for characters on a target line ``<name>: ...`` of a
    categorical section (name case-insensitive); such lines are not accuracy points."""
    ranges = []
    if names:
        pattern = re.compile(rf"(?im)^[ \t]*(?:{'|'.join(re.escape(n) for n in names)})[ \t]*:.*$")
        ranges = [(m.start(), m.end()) for m in pattern.finditer(target)]
    return lambda a, b: any(s <= a and b <= e for s, e in ranges)


def _percent(flags: Sequence[bool]) -> Percent:
    return 100.0 * sum(flags) / len(flags) if flags else NA


def _accuracy_reason(value: float, threshold: float, window: ClaimWindow | None) -> str:
    if value >= threshold:
        text = f"Supported by the source (P(Yes) = {value:.2f} >= {threshold:.2f})."
        return text + (f" Best supporting passage: \"{short(window.text)}\"" if window else "")
    text = f"Not supported by the source (P(Yes) = {value:.2f} < {threshold:.2f})."
    return text + (f" Closest passage: \"{short(window.text)}\"" if window else "")


def autoeval_rows(records: Sequence[Any], engine: Engine, options: AutoevalOptions,
                  start: int = 0) -> tuple[list[ReportRow[AutoevalReport]], RunStats]:
    """Build each record's report (two engine passes, see the module docstring).

    Args:
        records: dicts with ``target`` and optionally ``source``,
            ``section_questions``, ``instructions``, ``categorical``, ``sections``.
        engine: the engine (reports default to ``long_input="chunk"``).
        options: :class:`AutoevalOptions`.
        start: index of ``records[0]`` in the whole input.

    Returns:
        ``(rows, stats)``: one :class:`ReportRow` per record and the summed
        counts of both passes.
    """
    parsed, errors = parse_records(records)
    reg = engine.registry
    cons = resolve_consistency_aspect(reg, options.consistency_aspect)
    claims = Claims()
    questions: dict[str, int] = {}  # question text -> aspect number
    related: dict[int, Flat] = {}  # aspect number -> source sentences asked about
    spans_of: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (aspect number, record) -> sentence spans
    rubric = Flat()
    per_record: dict[int, dict[str, Any]] = {}
    for i, rec in enumerate(parsed):
        if rec is None:
            continue
        has_source = isinstance(rec.source, str) and bool(rec.source.strip())
        qs = rec.section_questions if rec.section_questions is not None else options.section_questions
        insts = rec.instructions if rec.instructions is not None else options.instructions
        cats = rec.categorical if rec.categorical is not None else options.categorical
        skip = _section_lines(rec.target, list(cats))
        per_record[i] = {"source": has_source, "questions": list(dict.fromkeys(qs)), "instructions": insts,
                         "categorical": cats, "claims": False}
        if has_source:
            per_record[i]["claims"] = claims.plan(i, rec, engine.splitter, options.max_n_claims, skip) is None
            spans = [s for s in source_sentence_spans(rec.source, engine.splitter, strip_speakers=True)
                     if len(content_words(rec.source[s[0]:s[1]])) >= options.min_content_words]
            for q in per_record[i]["questions"]:
                k = questions.setdefault(relatedness_question(q), len(questions))
                flat = related.setdefault(k, Flat())
                spans_of[(k, i)] = spans
                for a, b in spans:
                    flat.add(i, UniEvalData(target=rec.source[a:b]))
        for inst in insts:
            rubric.add(i, UniEvalData(target=rec.target, instruction=inst))
    jobs = {"claims": Job((support_aspect(cons, "claim"),), claims.flat.examples)}
    rel_aspects = {k: derived_aspect(f"related_{k}", q, [("sentence", "target")], "unieval-sum")
                   for q, k in questions.items()}
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

    # second pass: support of each related transcript sentence by each summary sentence
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
                a, b = spans_of[(k, i)][s]
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
    q_of = {k: q for q, k in questions.items()}
    for i, rec in enumerate(parsed):
        rid = record_id(records[i])
        if i in errors or rec is None:
            rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, error=errors[i]))
            continue
        info = per_record[i]
        checked = claims.read(i, results["claims"], rec.source) if info["claims"] else []
        values = [[v for _, v, _ in checked]]
        if "rubric" in results:
            values.append([float(results["rubric"].values["adherence"][p]) for p in rubric.of(i)])
        values += [[v for _, v, _ in chosen.get((k, i), [])] for k in q_of]
        if support_values is not None:
            values.append([float(support_values[p]) for p in support.of(i)])
        if any(v is None or not np.isfinite(v).all() for v in values):
            rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, error=RowError(
                field="target", message="the model gave a non-finite score; try dtype float32")))
            continue
        # accuracy
        points: list[AccuracyPoint] = []
        for text, value, window in checked:
            points.append(AccuracyPoint(point=text, accuracy=_accuracy_reason(value, options.accuracy_threshold, window),
                                        is_accurate=value >= options.accuracy_threshold, score=value,
                                        source_window=window))
        accuracy = Accuracy(score=_percent([p.is_accurate for p in points]), decomposition=points)
        # completeness
        sections: list[SectionCompleteness] = []
        covered_flags: list[bool] = []
        for q in info["questions"] if info["source"] else []:
            k = questions[relatedness_question(q)]
            content = []
            for s, rel, ps in chosen.get((k, i), []):
                a, b = spans_of[(k, i)][s]
                sup = [float(support_values[p]) for p in ps] if ps else []
                best = int(np.argmax(sup)) if sup else None
                best_value = sup[best] if best is not None else 0.0
                ok = best is not None and best_value >= options.support_threshold
                content.append(ContentItem(
                    transcript_content=rec.source[a:b], start=a, end=b, relatedness=rel,
                    related_content_from_summary=claims.sentences[i][best] if ok else "",
                    support=best_value, is_covered=ok))
                covered_flags.append(ok)
            sections.append(SectionCompleteness(question=q, content_list=content,
                                                n_related=n_related.get((k, i), 0)))
        completeness = Completeness(score=_percent(covered_flags), sections=sections)
        # adherence
        checks = []
        if "rubric" in results:
            for inst, p in zip(info["instructions"], rubric.of(i)):
                v = float(results["rubric"].values["adherence"][p])
                ok = v >= options.addressed_threshold
                checks.append(InstructionCheck(
                    instruction=inst, is_addressed=ok, score=v,
                    reason=f"Rubric question \"{ADHERENCE_QUESTION}\": P(Yes) = {v:.2f} "
                           f"{'>=' if ok else '<'} {options.addressed_threshold:.2f}."))
        cat_checks = []
        for name, allowed in info["categorical"].items():
            value = section_value(rec.target, name, rec.sections)
            ok = value is not None and value in allowed
            reason = (f"no section '{name}' in the summary" if value is None
                      else f"'{value}' is one of the allowed values" if ok
                      else f"'{value}' is not one of: {', '.join(allowed)}")
            cat_checks.append(CategoricalCheck(section=name, value=value, allowed=list(allowed), is_addressed=ok,
                                               reason=reason))
        adherence_score = _percent([c.is_addressed for c in checks] + [c.is_addressed for c in cat_checks])
        rows.append(ReportRow[AutoevalReport](index=start + i, id=rid, report=AutoevalReport(
            accuracy=accuracy, completeness=completeness,
            adherence=Adherence(score=adherence_score, instructions=checks, categorical=cat_checks))))
    return rows, stats


def autoeval_aggregate(rows: Sequence[ReportRow[AutoevalReport]]) -> dict[str, float | int | None]:
    """File-level means of the accuracy, completeness and adherence percentages,
    over the records where each is not N/A (None when none is)."""
    reps = [r.report for r in rows if r.report is not None]
    out: dict[str, float | int | None] = {}
    for name in ("accuracy", "completeness", "adherence"):
        vals = [getattr(r, name).score for r in reps if getattr(r, name).score != NA]
        out[name] = float(np.mean(vals)) if vals else None
        out[f"n_{name}"] = len(vals)
    return out
