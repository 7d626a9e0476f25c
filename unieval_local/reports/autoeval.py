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
(:class:`~unieval_local.reports.records.SectionDefinition`: name, instruction, type
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
  (:func:`~unieval_local.text.keypoints.is_informative`) gets the relatedness query of
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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from ..engine import Engine, Job
from ..requests.base import Request, Stage, StageGenerator
from ..schema import UniEvalData
from ..text.keypoints import MIN_KEY_POINT_WORDS, is_informative, source_sentence_spans
from ..wire.autoeval import (
    Accuracy,
    AccuracyPoint,
    Adherence,
    AutoevalDetails,
    AutoevalReport,
    CompletenessDetails,
    CompletenessEntry,
    ContentItem,
    Flag,
    ItemDetails,
    PointDetails,
    Rubric,
    RubricDetails,
)
from ..wire.shapes import NA, ClaimWindow, Percent, RowError
from .base import ReportFlag, ReportPart, ReportRow
from ..settings import check_language
from .options import (CONSISTENCY_FLAG, DETAILS_FLAG, MAX_N_CLAIMS_FLAG, ConsistencyOption, check_categorical,
                      check_texts, resolve_consistency_aspect)
from .queries import (Claims, Flat, derived_aspect, probability_name, problems_to_errors, relatedness_truncation_notes,
                      short, summary_sentence_spans, support_aspect)
from .autoeval_questions import (
    ADHERENCE_QUESTION,
    AUTOEVAL_TEMPLATES,
    CATEGORICAL_RUBRIC,
    autoeval_text,
    completeness_question,
    localized_topic,
    free_text_rubric,
    relatedness_question,
    relatedness_topic,
)
from .records import ReportRecord, SectionDefinition, check_sections, parse_records, record_id
from .sections import SectionSpan, categorical_value, locate_sections, matches_allowed, section_text

__all__ = ["ADHERENCE_QUESTION", "CATEGORICAL_RUBRIC", "FLAGS", "AutoevalOptions", "AutoevalRequest",
           "autoeval_aggregate", "completeness_question", "free_text_rubric", "relatedness_question",
           "relatedness_topic"]

class AutoevalOptions(ConsistencyOption):
    """Settings of the ``autoeval`` report (what each does: module docstring).

    Attributes:
        section_definitions: the sections of the summary template, for records that
            do not give their own (:class:`~unieval_local.reports.records.SectionDefinition`).
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
        language: the language of the report's texts (rubric and completeness questions,
            reasons: :data:`~unieval_local.reports.autoeval_questions.AUTOEVAL_TEMPLATES`, en, zh,
            id); unset, each record's language where texts exist for it, else en.
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
    language: str = "en"

    @property
    def template_languages(self) -> tuple[str, ...]:
        """The languages the report's texts exist in (en, zh, id)."""
        return tuple(AUTOEVAL_TEMPLATES)

    @field_validator("language")
    @classmethod
    def _known_language(cls, v: str) -> str:
        if (v := check_language(v, "language")) not in AUTOEVAL_TEMPLATES:  # zh-CN, ZH, zh_Hant: zh
            raise ValueError(f"language {v!r} has no autoeval texts; have {', '.join(AUTOEVAL_TEMPLATES)}")
        return v

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


# ---------------------------------------------------------------- the summary's sections


def _flag(value: bool, plain: bool) -> Flag:
    return bool(value) if plain else ("True" if value else "False")


def _percent(flags: Sequence[bool]) -> Percent:
    return 100.0 * sum(flags) / len(flags) if flags else NA


def _accuracy_reason(value: float, threshold: float, window: ClaimWindow | None, language: str = "en",
                     p: str = "P(Yes)") -> str:
    ok = value >= threshold
    text = autoeval_text(language, "supported" if ok else "not_supported", p=p, value=value, threshold=threshold)
    if window:
        text += autoeval_text(language, "best_passage" if ok else "closest_passage", text=short(window.text))
    return text


def _rubric_question(language: str, instruction: str | None = None) -> str:
    if language == "en":
        return free_text_rubric(instruction) if instruction is not None else CATEGORICAL_RUBRIC
    if instruction is None:
        return autoeval_text(language, "rubric_categorical")
    return autoeval_text(language, "rubric_free_text", instruction=instruction.strip())


def _completeness_entry(language: str, nli: bool, section: SectionDefinition | None, topic: str | None = None
                        ) -> tuple[str, str]:
    """(completeness question shown, relatedness query asked) of a section or a topic: English
    as before; another language's question from its templates, and with the NLI checker the
    relatedness query is the NLI hypothesis "this sentence is about <topic>" in that language
    (NLI zero-shot classification, Yin et al., EMNLP 2019)."""
    if language == "en" and not nli:
        if section is None:
            return completeness_question(None, topic), relatedness_question(topic, topic=True)
        return completeness_question(section), (relatedness_question(section.topic, topic=True) if section.topic
                                                else relatedness_question(section.instruction or ""))
    if section is not None and section.instruction:
        question = autoeval_text(language, "completeness_instruction", instruction=section.instruction.strip())
    else:
        subject = (topic or (section.topic if section else "") or "").strip().rstrip("?？.!。")
        question = autoeval_text(language, "completeness_topic", topic=subject)
    if section is None or section.topic:
        subject = (topic if section is None else section.topic).strip().rstrip("?？.!。")
    else:
        subject = localized_topic(section.instruction or "", language)
    if not nli:
        return question, relatedness_question(subject, topic=True)
    return question, autoeval_text(language, "related", topic=subject)


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


@dataclass
class _Work:
    """The queries of one autoeval request, over both stages."""

    claims: Claims = field(default_factory=Claims)
    queries: dict[str, int] = field(default_factory=dict)  # relatedness query -> job number
    related: dict[int, Flat] = field(default_factory=dict)  # job number -> source sentences asked about
    source_spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    rubric: Flat = field(default_factory=Flat)
    plans: dict[int, _Plan] = field(default_factory=dict)
    support: Flat = field(default_factory=Flat)  # second stage: related sentence x summary sentence
    chosen: dict[tuple[int, int], list[tuple[int, float, list[int]]]] = field(default_factory=dict)
    n_related: dict[tuple[int, int], int] = field(default_factory=dict)
    support_values: Any = None
    p_name: str = "P(Yes)"  # how the checker's probability is named in the reasons


def _plan_record(i: int, rec: ReportRecord, work: _Work, splitter, options: AutoevalOptions, nli: bool = False) -> None:
    """Plan record ``i``'s first-stage queries: rubrics, claims, relatedness of source sentences."""
    defs, topics, insts = _effective_sections(rec, options)
    categorical = {d.name.strip().lower() for d in defs if d.type == "categorical"}
    spans = locate_sections(rec.target, [d.name for d in defs])
    sentence_spans = _claim_spans(rec.target, splitter, spans, categorical)
    has_source = isinstance(rec.source, str) and bool(rec.source.strip())
    plan = _Plan(has_source=has_source, rubrics=[], questions=[], free_text=bool(sentence_spans), claims=False)
    work.plans[i] = plan
    rubric = work.rubric
    # adherence rubrics: custom sections, then free-form instructions
    for d in defs:
        if d.prebuilt:
            continue
        if d.type == "categorical":
            plan.rubrics.append({"question": _rubric_question(options.language), "kind": "categorical",
                                 "section": d.name,
                                 "instruction": d.instruction, "allowed": list(d.allowed_values or []),
                                 "value": categorical_value(rec.target, d.name, rec.sections, spans)})
        elif d.instruction:
            text = section_text(rec.target, d.name, rec.sections, spans) or rec.target
            plan.rubrics.append({"question": _rubric_question(options.language, d.instruction), "kind": "free_text",
                                 "section": d.name, "instruction": d.instruction, "summary_text": text,
                                 "pos": rubric.add(i, UniEvalData(target=text, instruction=d.instruction))})
    for inst in insts:
        plan.rubrics.append({"question": _rubric_question(options.language, inst), "kind": "free_text", "section": None,
                             "instruction": inst, "summary_text": rec.target,
                             "pos": rubric.add(i, UniEvalData(target=rec.target, instruction=inst))})
    if not has_source:
        return
    plan.claims = work.claims.plan(i, rec, splitter, rec.max_n_claims or options.max_n_claims,
                                   spans=sentence_spans) is None
    if not plan.free_text:
        return  # a categorical summary: completeness is N/A
    entries = [_completeness_entry(options.language, nli, d) for d in defs if d.type == "free_text"]
    entries += [_completeness_entry(options.language, nli, None, t) for t in topics]
    if entries:
        work.source_spans[i] = [s for s in source_sentence_spans(rec.source, splitter, strip_speakers=True)
                                if is_informative(rec.source[s[0]:s[1]], options.min_content_words)]
    for question, query in entries:
        k = work.queries.setdefault(query, len(work.queries))
        plan.questions.append({"question": question, "query": query, "k": k})
        flat = work.related.setdefault(k, Flat())
        if i not in flat.by_record:
            for a, b in work.source_spans[i]:  # NLI: premise the sentence, hypothesis the topic sentence
                flat.add(i, UniEvalData(target=query, source=rec.source[a:b]) if nli
                         else UniEvalData(target=rec.source[a:b]))


def _first_jobs(work: _Work, cons, nli: bool = False) -> tuple[dict[str, Job], dict[int, Any]]:
    """The first stage's jobs (claims, relatedness per question, rubrics) and the
    relatedness aspect of each question number (with ``nli``: the checker's own question,
    premise the transcript sentence, hypothesis the topic sentence)."""
    jobs = {"claims": Job((support_aspect(cons, "claim"),), work.claims.flat.examples)}
    rel_aspects = {k: (support_aspect(cons, f"related_{k}") if nli else
                       derived_aspect(f"related_{k}", q, [("sentence", "target")], "unieval-sum"))
                   for q, k in work.queries.items()}
    for k, flat in work.related.items():
        jobs[f"related_{k}"] = Job((rel_aspects[k],), flat.examples)
    if work.rubric.examples:
        adherence = derived_aspect("adherence", ADHERENCE_QUESTION,
                                   [("summary", "target"), ("instruction", "instruction")], "unieval-sum")
        jobs["rubric"] = Job((adherence,), work.rubric.examples)
    return jobs, rel_aspects


def _support_bound(work: _Work, options: AutoevalOptions) -> int:
    """An upper bound of the second stage's queries: per record and question, the related sentences
    kept (at most ``max_items_per_question``) times the summary's sentences (one query a pair)."""
    return sum(min(options.max_items_per_question, len(positions)) * len(work.claims.sentences.get(i, ()))
               for flat in work.related.values() for i, positions in flat.by_record.items())


def _plan_support(work: _Work, results, rel_aspects, errors, parsed, options: AutoevalOptions) -> None:
    """The second stage: support of each related source sentence by each free-text summary sentence."""
    for k, flat in work.related.items():
        vals = results[f"related_{k}"].values[rel_aspects[k].name]
        for i, positions in flat.by_record.items():
            if i in errors:
                continue
            rel = [(s, float(vals[p])) for s, p in enumerate(positions)]
            above = [(s, v) for s, v in rel if v >= options.related_threshold]
            work.n_related[(k, i)] = len(above)
            top = sorted(sorted(above, key=lambda x: -x[1])[: options.max_items_per_question])
            items = []
            for s, v in top:
                a, b = work.source_spans[i][s]
                ps = [work.support.add(i, UniEvalData(target=parsed[i].source[a:b], source=sent))
                      for sent in work.claims.sentences[i]]
                items.append((s, v, ps))
            work.chosen[(k, i)] = items


def _adherence(plan: _Plan, rubric_result, rec: ReportRecord, options: AutoevalOptions
               ) -> tuple[list[Rubric], list[RubricDetails], list[bool], list[str]]:
    """Each rubric of the record: its answer, details, whether addressed, and truncation notes."""
    rubrics, rubric_details, addressed, notes = [], [], [], []
    for r in plan.rubrics:
        if r["kind"] == "free_text":
            v = float(rubric_result.values["adherence"][r["pos"]])
            ev = rubric_result.evidence["adherence"][r["pos"]] if rubric_result.evidence else None
            if ev is not None and ev.truncated:
                cut = next((q for q in ev.queries if q.truncated), None)
                field_name = {"target": "summary", "instruction": "instruction"}.get(
                    cut.truncated_field if cut else "", cut.truncated_field if cut else "prompt")
                notes.append(f"the adherence query for the instruction '{short(r['instruction'], 80)}' was longer "
                             f"than max_length and lost its end ({cut.tokens_dropped if cut else '?'} tokens, "
                             f"from the {field_name}): its rubric read only the beginning")
            ok, lang = v >= options.addressed_threshold, options.language
            where = autoeval_text(lang, "where_section", section=r["section"]) \
                if r["section"] and r["summary_text"] != rec.target else autoeval_text(lang, "where_summary")
            reasoning = autoeval_text(lang, "rubric_reason", query=ADHERENCE_QUESTION, where=where, value=v,
                                      op=">=" if ok else "<", threshold=options.addressed_threshold)
            rubric_details.append(RubricDetails(question=r["question"], kind="free_text", section=r["section"],
                                                instruction=r["instruction"], score=v,
                                                summary_text=r["summary_text"]))
        else:
            value, allowed = r["value"], r["allowed"]
            hit = matches_allowed(value, allowed)
            ok = hit is not None
            listed = ", ".join(allowed)
            key = "no_section" if value is None else "allowed" if ok else "not_allowed"
            reasoning = autoeval_text(options.language, key, section=r["section"], value=value, allowed=listed)
            rubric_details.append(RubricDetails(question=r["question"], kind="categorical", section=r["section"],
                                                instruction=r["instruction"], value=value, allowed=allowed))
        addressed.append(ok)
        rubrics.append(Rubric(question=r["question"], reasoning=reasoning, is_addressed=_flag(ok, options.plain_booleans)))
    return rubrics, rubric_details, addressed, notes


def _completeness(i: int, rec: ReportRecord, plan: _Plan, work: _Work, options: AutoevalOptions
                  ) -> tuple[list[CompletenessEntry], list[CompletenessDetails], list[bool]]:
    """Each completeness question of the record: its entry, details, and every item's coverage."""
    entries, entry_details, covered_all = [], [], []
    for q in plan.questions:
        content, items, flags = [], [], []
        for s, rel, ps in work.chosen.get((q["k"], i), []):
            a, b = work.source_spans[i][s]
            sup = [float(work.support_values[p]) for p in ps] if ps else []
            best = int(np.argmax(sup)) if sup else None
            best_value = sup[best] if best is not None else 0.0
            ok = best is not None and best_value >= options.support_threshold
            content.append(ContentItem(
                transcript_content=rec.source[a:b],
                related_content_from_summary=work.claims.sentences[i][best] if ok else "",
                is_covered=_flag(ok, options.plain_booleans)))
            items.append(ItemDetails(transcript_content=rec.source[a:b], start=a, end=b, relatedness=rel,
                                     support=best_value))
            flags.append(ok)
        covered_all += flags
        entries.append(CompletenessEntry(question=q["question"], score=_percent(flags), content_list=content))
        entry_details.append(CompletenessDetails(question=q["question"], relatedness_query=q["query"],
                                                 n_related=work.n_related.get((q["k"], i), 0), items=items))
    return entries, entry_details, covered_all


def _record_values(i: int, plan: _Plan, work: _Work, results, checked) -> list[list[float]]:
    """Every probability record ``i``'s report reads (to refuse a non-finite one)."""
    values = [[v for _, v, _ in checked]]
    values.append([float(results["rubric"].values["adherence"][r["pos"]]) for r in plan.rubrics if "pos" in r])
    values += [[v for _, v, _ in work.chosen.get((q["k"], i), [])] for q in plan.questions]
    if work.support_values is not None:
        values.append([float(work.support_values[p]) for p in work.support.of(i)])
    return values


def _report(i: int, rec: ReportRecord, work: _Work, results, options: AutoevalOptions
            ) -> tuple[AutoevalReport | None, list[str]]:
    """Record ``i``'s report and notes (None: a non-finite probability)."""
    plan = work.plans[i]
    checked = work.claims.read(i, results["claims"], rec.source) if plan.claims else []
    if any(not np.isfinite(v).all() for v in _record_values(i, plan, work, results, checked)):
        return None, []
    points = [AccuracyPoint(point=text, accuracy=_accuracy_reason(v, options.accuracy_threshold, w, options.language,
                                                                  work.p_name),
                            is_accurate=v >= options.accuracy_threshold) for text, v, w in checked]
    point_details = [PointDetails(point=text, score=v, source_window=w) for text, v, w in checked]
    rubrics, rubric_details, addressed, notes = _adherence(plan, results.get("rubric"), rec, options)
    notes += relatedness_truncation_notes(i, plan.questions, work.related, results)  # the instruction's other queries
    entries, entry_details, covered_all = _completeness(i, rec, plan, work, options)
    details = AutoevalDetails(accuracy=point_details, adherence=rubric_details,
                              completeness=entry_details) if options.details else None
    return AutoevalReport(
        accuracy=Accuracy(decomposition=points), accuracy_score=_percent([p.is_accurate for p in points]),
        adherence=Adherence(rubrics=rubrics), adherence_score=_percent(addressed),
        completeness=entries, completeness_score=_percent(covered_all), details=details), notes


@dataclass
class AutoevalRequest(Request[ReportPart]):
    """Build each record's report in two stages (see the module docstring): claims, rubrics and
    the relatedness of source sentences (with evidence), then the support of the related
    sentences by the summary's sentences.

    Args:
        records: dicts with ``target`` (or ``summary``) and optionally ``source`` (or
            ``transcript`` / ``input``), ``section_definitions``, ``section_questions``,
            ``instructions``, ``categorical``, ``sections``, ``max_n_claims``.
        options: :class:`AutoevalOptions`.
        start: index of ``records[0]`` in the whole input.

    Answer: a :class:`~unieval_local.reports.base.ReportPart`: one :class:`ReportRow` per
    record (an error row for a bad record; the others are reported) and the summed counters
    of both stages.
    """

    records: Sequence[Any]
    options: AutoevalOptions
    start: int = 0

    def __post_init__(self) -> None:
        self.size = len(self.records)

    def stages(self, engine: Engine) -> StageGenerator:
        options = self.options
        parsed, errors = parse_records(self.records)
        cons = resolve_consistency_aspect(engine.registry, options.consistency_aspect)
        work = _Work(p_name=probability_name(cons))
        # a record in another language whose checks go to the NLI evaluator: relatedness is NLI too
        nli = options.language != "en" and work.p_name != "P(Yes)"
        for i, rec in enumerate(parsed):
            if rec is not None:
                _plan_record(i, rec, work, engine.splitter, options, nli)
        jobs, rel_aspects = _first_jobs(work, cons, nli)
        self.later_queries = _support_bound(work, options)
        got = yield Stage(jobs, evidence=True)
        results, stats = got.results, got.stats
        problems_to_errors(results["claims"].problems, work.claims.flat.positions(), errors)
        if "rubric" in results:
            problems_to_errors(results["rubric"].problems, work.rubric.positions(), errors)
        for k, flat in work.related.items():
            problems_to_errors(results[f"related_{k}"].problems, flat.positions(), errors)
        _plan_support(work, results, rel_aspects, errors, parsed, options)
        if work.support.examples:
            second = yield Stage({"support": Job((support_aspect(cons),), work.support.examples)})
            work.support_values = second.results["support"].values["support"]
            problems_to_errors(second.results["support"].problems, work.support.positions(), errors)
            stats += second.stats
        rows: list[ReportRow[AutoevalReport]] = []
        for i, rec in enumerate(parsed):
            row = ReportRow[AutoevalReport](index=self.start + i, id=record_id(self.records[i]))
            if i in errors or rec is None:
                rows.append(row.model_copy(update={"error": errors[i]}))
                continue
            report, notes = _report(i, rec, work, results, options)
            if report is None:
                rows.append(row.model_copy(update={"error": RowError(
                    field="target", message="the model gave a non-finite score; try dtype float32")}))
            else:
                rows.append(row.model_copy(update={"report": report, "notes": notes}))
        return ReportPart(rows, stats)


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


def _categorical(items: list[str]) -> dict[str, list[str]]:
    cats: dict[str, list[str]] = {}
    for item in items:
        name, sep, allowed = item.partition("=")
        if not sep or not name.strip() or not allowed.strip():
            raise ValueError(f"--categorical wants NAME=V1|V2, got {item!r}")
        if name.strip().lower() in {c.lower() for c in cats}:
            raise ValueError(f"--categorical gives section {name.strip()!r} twice; list all its values in one "
                             "NAME=V1|V2")
        cats[name.strip()] = [v.strip() for v in allowed.split("|") if v.strip()]
    return cats


#: The autoeval format's CLI flags (``unieval-local report --format autoeval``).
FLAGS: tuple[ReportFlag, ...] = (
    MAX_N_CLAIMS_FLAG,
    ReportFlag("section_questions", "--section-question", "a completeness question, e.g. 'the dates mentioned' "
               "(repeatable; records' section_questions take precedence)", {"action": "append", "metavar": "Q"}),
    ReportFlag("instructions", "--instruction", "an instruction the summary should follow (repeatable)",
               {"action": "append", "metavar": "TEXT"}),
    ReportFlag("categorical", "--categorical", "a categorical section and its allowed values (repeatable)",
               {"action": "append", "metavar": "NAME=V1|V2"}, parse=_categorical),
    DETAILS_FLAG,
    ReportFlag("plain_booleans", "--plain-booleans", "is_addressed / is_covered as JSON booleans instead of the "
               "strings \"True\"/\"False\"", {"action": "store_const", "const": True}),
    CONSISTENCY_FLAG,
)
