"""What the three report formats share: input records, the per-row and file-level
output models, derived Boolean-QA queries, and the one-pass query runner.

A report never calls an LLM or any model but the UniEval checkpoints: every
judgement is a Boolean-QA query ``P(Yes) / (P(Yes) + P(No))`` (UniEval, Zhong
et al. 2022, Sec. 3) planned through :meth:`unieval_local.engine.Engine.run`.
A query counts as a "yes" when its probability is at least a threshold
(default 0.5, the point where the model prefers "Yes" to "No").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from ..errors import ExampleProblem
from ..validate import alias_hint, describe_value, is_text, parse_example
from ..schema import Evidence, UniEvalData
from ..tasks import Aspect, PromptField

NA = "N/A"

#: The default checker of consistency-like queries (claims, key points, support).
DEFAULT_CONSISTENCY_ASPECT = "summarization/consistency"


def consistency_aspects() -> list[str]:
    """The registry's claim-vs-document aspects, ``task/aspect``: those whose fields are the
    target (the claim) and the source (the document) and that take the max over windows of
    a long document (a claim is supported if some passage supports it), e.g.
    ``summarization/consistency``, ``fact/consistency``, ``fact/support`` (MiniCheck)."""
    from ..tasks import DEFAULT_REGISTRY

    return [f"{t.name}/{a.name}" for t in DEFAULT_REGISTRY.tasks.values() for a in t.aspects.values()
            if a.required_fields == ("target", "source") and a.window_reduction == "max"]


def check_consistency_aspect(v: str) -> str:
    """``v`` unchanged when it names a claim-vs-document aspect (:func:`consistency_aspects`).

    Raises:
        ValueError: not ``TASK/ASPECT``, unknown, or not a claim-vs-document aspect
            (the message lists the valid ones).
    """
    valid = consistency_aspects()
    if not isinstance(v, str) or v not in valid:
        raise ValueError(f"must be one of {', '.join(valid)} (TASK/ASPECT), got {v!r}")
    return v


def resolve_consistency_aspect(registry, name: str) -> Aspect:
    """The :class:`~unieval_local.tasks.Aspect` ``task/aspect`` from ``registry``."""
    task, _, aspect = name.partition("/")
    return registry.get_aspect(task, aspect)


def migrate_consistency_task(data: Any) -> Any:
    """Options written before ``consistency_aspect``: ``consistency_task: fact`` becomes
    ``consistency_aspect: fact/consistency`` (with a DeprecationWarning)."""
    if isinstance(data, dict) and "consistency_task" in data:
        import warnings

        data = dict(data)
        task = data.pop("consistency_task")
        warnings.warn("the option consistency_task is replaced by consistency_aspect (TASK/ASPECT); "
                      f"consistency_task: {task} reads as consistency_aspect: {task}/consistency",
                      DeprecationWarning, stacklevel=2)
        data.setdefault("consistency_aspect", f"{task}/consistency")
    return data


class ConsistencyOption(BaseModel):
    """The option every report format has: ``consistency_aspect``, the ``task/aspect``
    answering consistency-like queries (checked by :func:`check_consistency_aspect`; the
    older ``consistency_task`` key migrates with a DeprecationWarning)."""

    consistency_aspect: str = DEFAULT_CONSISTENCY_ASPECT

    @model_validator(mode="before")
    @classmethod
    def _old_key(cls, data: Any) -> Any:
        return migrate_consistency_task(data)

    @field_validator("consistency_aspect")
    @classmethod
    def _checker(cls, v: str) -> str:
        return check_consistency_aspect(v)


class WithOptionalDetails(BaseModel):
    """A report whose ``details`` field (None unless the ``details`` option asked for it)
    is left out of the JSON when None, so the report has exactly the documented keys."""

    @model_serializer(mode="wrap")
    def _details_when_asked(self, handler):
        out = handler(self)
        if out.get("details") is None:
            out.pop("details", None)
        return out


#: A percentage in [0, 100], or "N/A" where the inputs do not allow the metric.
Percent = float | Literal["N/A"]


def check_texts(v: list[str] | None) -> list[str] | None:
    """``v`` unchanged; ValueError when an item is empty or whitespace-only."""
    if v is not None and any(not isinstance(x, str) or not x.strip() for x in v):
        raise ValueError("every item must be a non-empty string")
    return v


def check_categorical(v: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
    """``v`` unchanged; ValueError for a section without a name or without non-empty allowed values."""
    for name, allowed in (v or {}).items():
        if not name.strip():
            raise ValueError("a categorical section needs a name")
        if not allowed or any(not a.strip() for a in allowed):
            raise ValueError(f"categorical section {name!r} needs non-empty allowed values")
    return v


#: Input names of other evaluators, read as ours: ``input``/``transcript`` (the source a
#: summary was made from) and ``summary``/``output`` (the summary under evaluation).
FIELD_ALIASES: dict[str, tuple[str, ...]] = {"source": ("input", "transcript"), "target": ("summary", "output")}


def accept_aliases(data: Any) -> Any:
    """``data`` with :data:`FIELD_ALIASES` renamed to ``source`` / ``target``.

    Raises:
        ValueError: two names of one field given with different values (e.g. ``summary`` and ``target``).
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for field_name, aliases in FIELD_ALIASES.items():
        for alias in aliases:
            if alias in data:
                value = data.pop(alias)
                if field_name in data and data[field_name] != value:
                    raise ValueError(f"both {field_name!r} and {alias!r} given, with different values; "
                                     f"{alias!r} is read as {field_name!r}, give one")
                data[field_name] = value
    return data


class SectionDefinition(BaseModel):
    """One section a summary should have (autoeval's section definitions).

    Attributes:
        name: the section's name, e.g. ``"Dates"``, ``"Call reason"``; the summary's
            content for it is the record's ``sections[name]``, else the target's lines
            from a heading ``<name>:`` to the next section's heading.
        instruction: what the section should hold, e.g. ``"Identify any dates explicitly
            mentioned by the agent or the customer"``; asked as an adherence rubric and,
            for a free-text section, turned into the completeness relatedness query
            (:func:`~unieval_local.reports.autoeval.relatedness_question`).
        type: ``free_text`` (default) or ``categorical`` (one of ``allowed_values``).
        allowed_values: the categorical section's values (matched case-insensitively, trimmed).
        prebuilt: a built-in section of the summary template, not defined by the user;
            prebuilt sections have no adherence rubric (a summary of prebuilt sections
            only has adherence N/A) but count for completeness.
        topic: what a transcript sentence must be about to be related to the section
            (a noun phrase, e.g. ``"dates"``); default: derived from the instruction.

    Raises:
        pydantic.ValidationError: no name; a categorical section without allowed values,
            a free-text one with them, or one with neither an instruction nor a topic.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    instruction: str | None = None
    type: Literal["free_text", "categorical"] = "free_text"
    allowed_values: list[str] | None = None
    prebuilt: bool = False
    topic: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _spellings(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("type"), str):
            data = {**data, "type": data["type"].strip().lower().replace("-", "_").replace(" ", "_")}
            if data["type"] in ("freetext", "text"):
                data["type"] = "free_text"
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "SectionDefinition":
        if not self.name.strip():
            raise ValueError("a section needs a non-empty name")
        for key in ("instruction", "topic"):
            value = getattr(self, key)
            if value is not None and not value.strip():
                raise ValueError(f"section {self.name!r}: {key} is empty")
        if self.type == "categorical":
            if not self.allowed_values or any(not isinstance(v, str) or not v.strip() for v in self.allowed_values):
                raise ValueError(f"categorical section {self.name!r} needs non-empty allowed_values")
        elif self.allowed_values:
            raise ValueError(f"section {self.name!r} has allowed_values but type free_text; "
                             "give type: categorical")
        elif self.instruction is None and self.topic is None:
            raise ValueError(f"free-text section {self.name!r} needs an instruction (or a topic)")
        return self


def check_sections(v: list[SectionDefinition] | None) -> list[SectionDefinition] | None:
    """``v`` unchanged; ValueError when two sections share a name (case-insensitive)."""
    seen: set[str] = set()
    for d in v or []:
        key = d.name.strip().lower()
        if key in seen:
            raise ValueError(f"section {d.name!r} is defined twice")
        seen.add(key)
    return v


class ReportRecord(UniEvalData):
    """One input record of ``unieval-local report``: the fields of ``score`` plus report inputs.

    Attributes:
        target, source, references, context: as in :class:`~unieval_local.schema.UniEvalData`
            (``target`` is the summary; ``source`` the document or transcript). The names
            other evaluators use are read too (:data:`FIELD_ALIASES`): ``input`` or
            ``transcript`` for the source, ``summary`` or ``output`` for the target.
        key_points: (summ, rating relevance without reference) the source's key
            points, instead of extracting them.
        n_key_points: how many key points to extract for this record.
        max_n_claims: (summ, autoeval) summary sentences checked for this record.
        threshold: (summ) this record's pass mark on the 0-100 score.
        section_definitions: (autoeval) the sections the summary should have
            (:class:`SectionDefinition`), for adherence and completeness.
        section_questions: (autoeval completeness) topics the summary should cover,
            as noun phrases, e.g. ``"the dates mentioned"``.
        instructions: (autoeval adherence) instructions the summary should follow.
        categorical: (autoeval adherence) section name -> allowed values.
        sections: (autoeval) section name -> the summary's content for it; when
            absent, the target's ``<name>: ...`` lines are used.

    A record's own ``key_points`` / ``section_definitions`` / ``section_questions`` /
    ``instructions`` / ``categorical`` / ``n_key_points`` / ``max_n_claims`` /
    ``threshold`` take precedence over the report options, even when empty (except
    ``key_points: []``, which means "extract them"). Other fields (``id``,
    ``doc_id``, ``system_id``...) are kept.
    """

    key_points: list[str] | None = None
    n_key_points: int | None = Field(default=None, ge=1)
    max_n_claims: int | None = Field(default=None, ge=1)
    threshold: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    section_definitions: list[SectionDefinition] | None = None
    section_questions: list[str] | None = None
    instructions: list[str] | None = None
    categorical: dict[str, list[str]] | None = None
    sections: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _other_names(cls, data: Any) -> Any:
        return accept_aliases(data)

    @field_validator("key_points", "section_questions", "instructions")
    @classmethod
    def _non_empty_texts(cls, v: list[str] | None) -> list[str] | None:
        return check_texts(v)

    @field_validator("categorical")
    @classmethod
    def _allowed_values(cls, v: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        return check_categorical(v)

    @field_validator("section_definitions")
    @classmethod
    def _unique_sections(cls, v: list[SectionDefinition] | None) -> list[SectionDefinition] | None:
        return check_sections(v)


class RowError(BaseModel):
    """Why one record has no report: the field at fault and a message."""

    model_config = ConfigDict(frozen=True)

    field: str
    message: str


R = TypeVar("R")


class ReportRow(BaseModel, Generic[R]):
    """One input record's outcome: its ``report``, or an ``error``.

    Attributes:
        index: the record's position in the input (0-based).
        id: the record's ``id`` if it has one (a string or a number, as given), else None.
        report: the report (None when ``error`` is set).
        error: why there is no report.
        notes: what the reader should know about this record's report, e.g. fewer key
            points than asked for because the source has fewer candidate sentences.
    """

    model_config = ConfigDict(frozen=True)

    index: int
    id: str | int | float | None = None
    report: R | None = None
    error: RowError | None = None
    notes: list[str] = Field(default_factory=list)


class CheckpointIdentity(BaseModel):
    """Which checkpoint answered: hub id or folder, hub revision (when known), the
    content fingerprint (hex SHA-256 of its config, weight and tokenizer files) and the
    tokens per query it read (``max_length``: the run's, else its evaluator's default), and
    whether the folder names that evaluator (``identity``: ``verified`` / ``unverified``)."""

    model_config = ConfigDict(frozen=True)

    checkpoint: str
    revision: str | None = None
    fingerprint: str
    max_length: int | None = None
    identity: str | None = None


class ReportSettings(BaseModel):
    """How a report file was made: enough to reproduce it.

    Attributes:
        package: unieval-local version.
        checkpoints: checkpoint name -> :class:`CheckpointIdentity` of each checkpoint used.
        consistency_aspect: ``task/aspect`` that answered the consistency-like queries
            (claims, key points, support), e.g. ``fact/support`` for MiniCheck.
        run: the engine's :class:`~unieval_local.config.RunConfig` (``as_dict()``): every
            setting that can change a score (max_length, long_input, window_overlap,
            reference_reduction, splitter, dtype, device, forward path) and the library versions.
        options: the report options in effect.
    """

    model_config = ConfigDict(frozen=True)

    package: str
    checkpoints: dict[str, CheckpointIdentity]
    consistency_aspect: str
    run: dict[str, Any]
    options: dict[str, Any]


class ReportFile(BaseModel, Generic[R]):
    """The JSON document ``unieval-local report`` writes.

    Attributes:
        format: ``rating``, ``summ`` or ``autoeval``.
        n_records: input records; ``n_reported`` of them have a report,
            ``n_errors`` an error.
        aggregate: means over the reported records (keys per format, see README).
        n_queries: distinct Boolean-QA queries run; ``n_truncated`` of them were
            longer than ``max_length`` and lost their end, ``truncated_fields`` says in
            which field the cut fell (field -> queries), ``truncated_by`` which checkpoint
            read them (checkpoint -> queries).
        settings: :class:`ReportSettings`.
        notes: run-level notes (also given as ``UserWarning``): placeholder cut points
            in use, input keys that were ignored ...
        reports: one :class:`ReportRow` per input record, in input order.
    """

    format: str
    n_records: int
    n_reported: int
    n_errors: int
    aggregate: dict[str, float | int | None]
    n_queries: int
    n_truncated: int
    truncated_fields: dict[str, int] = Field(default_factory=dict)
    truncated_by: dict[str, int] = Field(default_factory=dict)
    settings: ReportSettings
    notes: list[str] = Field(default_factory=list)
    reports: list[ReportRow[R]]


class ClaimWindow(BaseModel):
    """The part of the source that best supported a claim (chunked sources only).

    ``start``/``end`` are character offsets into the source; ``text`` the passage.
    """

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class BadRecord:
    """An input record that could not be read (e.g. a JSONL line that is not JSON);
    it becomes an error row with ``message``."""

    message: str


def parse_records(records: Sequence[Any]) -> tuple[list[ReportRecord | None], dict[int, RowError]]:
    """Parse every record into :class:`ReportRecord`; never raises for bad input.

    Returns:
        ``(parsed, errors)``: ``parsed[i]`` is None where record ``i`` failed,
        and ``errors[i]`` names the field and why.
    """
    parsed: list[ReportRecord | None] = []
    errors: dict[int, RowError] = {}
    for i, item in enumerate(records):
        rec = None
        if isinstance(item, BadRecord):
            errors[i] = RowError(field="record", message=item.message)
        else:
            if isinstance(item, Mapping) and not isinstance(item, dict):
                item = dict(item)
            rec, problems = parse_example(i, item, ReportRecord)
            if (isinstance(item, dict) and not {"source", *FIELD_ALIASES["source"]} & set(item)
                    and (hint := alias_hint("source", item))):
                # a misnamed source is wrong in every format (autoeval would read the record as
                # having none): an error, with the record's other problems
                problems.append(ExampleProblem(
                    i, "source", f"the source (the document or transcript; also read from "
                    f"{' or '.join(repr(a) for a in FIELD_ALIASES['source'])}) is missing{hint}"))
            if problems:  # every problem of the record at once, not only the first
                fields = list(dict.fromkeys(p.field for p in problems))
                errors[i] = RowError(
                    field=", ".join(fields),
                    message=problems[0].message if len(problems) == 1 else
                    "; ".join(f"{p.field}: {p.message}" for p in problems))
            elif not rec.target.strip():
                errors[i] = RowError(field="target", message="the summary (target) is empty or whitespace-only")
        parsed.append(rec if i not in errors else None)
    return parsed, errors


def describe_validation_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first error of ``exc`` as ``key: message``, without pydantic's prefixes; an
    unknown key lists the valid ones."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "config"
    if err["type"] == "extra_forbidden":
        return f"unknown option {loc!r}; valid options: {', '.join(model.model_fields)}"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("literal_error", "enum") and "input" in err:
        msg += f", got {err['input']!r}"
    return f"{loc}: {msg}"


def load_options(model: type[BaseModel], path: str | os.PathLike | None = None,
                 overrides: Mapping[str, Any] | None = None, flags: Mapping[str, str] | None = None):
    """A report's options: the YAML mapping at ``path`` (if any) updated with ``overrides``
    (None values ignored), validated by ``model``.

    Args:
        model: the options model (``RatingConfig``, ``SummOptions``, ``AutoevalOptions``).
        path: a YAML file of options, or None.
        overrides: option name -> value, e.g. from CLI flags.
        flags: option name -> CLI flag, so that an error in a value that came
            from a flag names the flag instead of the file.

    Raises:
        ValueError: unreadable file, YAML syntax, not a mapping, or an invalid
            option (the message names the file or flag, and the key).
    """
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh) or {}
        except OSError as exc:
            raise ValueError(f"{path}: cannot read options: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: invalid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: options must be a mapping of settings, got {type(data).__name__}")
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        text = describe_validation_error(exc, model)
        flag = (flags or {}).get(name) if name in (overrides or {}) else None
        if flag and text.startswith(name):  # "--flag: ..." (a list item's position dropped: the value says it)
            raise ValueError(flag + re.sub(r"^\.\d+(?=:)", "", text[len(name):])) from None
        raise ValueError(f"{path}: {text}" if path is not None else text) from None


def record_id(record: Any) -> str | int | float | None:
    """The record's ``id`` as it is (a string or a number, so that ids ``1`` and ``"1"``, two
    ids as in ``score``, stay two in the report's rows), another value as its string, or None."""
    rid = record.get("id") if isinstance(record, Mapping) else getattr(record, "id", None)
    if rid is None or (isinstance(rid, (str, int, float)) and not isinstance(rid, bool)):
        return rid
    return str(rid)


def require_text(rec: ReportRecord, name: str, why: str) -> RowError | None:
    """An error when ``rec.<name>`` is not a non-empty string (as :func:`~unieval_local.validate.check_example` says it)."""
    value = rec.get_field(name)
    if is_text(value):
        return None
    return RowError(field=name, message=f"{why} needs '{name}' as a non-empty string; {describe_value(value)}")


def in_user_names(error: RowError, record: Any) -> RowError:
    """``error`` in the field names the record itself used: a record that gave its
    summary as ``summary`` (read as ``target``, :data:`FIELD_ALIASES`) reads
    ``summary: ...``, not ``target: ...``."""
    if not isinstance(record, Mapping):
        return error
    renamed = {ours: alias for ours, aliases in FIELD_ALIASES.items() for alias in aliases
               if alias in record and ours not in record}
    return rename_fields(error, renamed)


def rename_fields(error: RowError, names: Mapping[str, str]) -> RowError:
    """``error`` with the fields in ``names`` (ours -> theirs) renamed in its field and message
    (quoted ``'source'`` and a leading ``source:`` of each part)."""
    if not names:
        return error
    field_names = [names.get(f.strip(), f.strip()) for f in error.field.split(",")]
    message = error.message
    for ours, theirs in names.items():
        message = re.sub(rf"(^|; ){re.escape(ours)}(?=[:.])", rf"\g<1>{theirs}", message)
        message = message.replace(f"'{ours}'", f"'{theirs}'")
    return RowError(field=", ".join(field_names), message=message)


def derived_aspect(name: str, question: str, fields: Sequence[tuple[str, str]], checkpoint: str, *,
                   chunk_field: str | None = None, window_reduction: Literal["max", "mean"] = "mean") -> Aspect:
    """A report's own Boolean-QA question as an output-level :class:`Aspect`
    (the prompt is built exactly like UniEval's: ``question: ... </s> <label>: <value> ...``)."""
    return Aspect(task="report", name=name, question=question,
                  fields=tuple(PromptField(label, f) for label, f in fields), granularity="output",
                  checkpoint=checkpoint, chunk_field=chunk_field, window_reduction=window_reduction)


def support_aspect(consistency: Aspect, name: str = "support") -> Aspect:
    """The consistency question asked of one claim against one document, at output level
    (the claim is not split further): key-point coverage (claim = key point,
    document = summary) and autoeval's support check (claim = transcript
    sentence, document = one summary sentence)."""
    return derived_aspect(name, consistency.question, [(pf.label, pf.field) for pf in consistency.fields],
                          consistency.checkpoint, chunk_field="source", window_reduction="max")


@dataclass
class Flat:
    """Derived examples from many records in one flat list, with the way back.

    ``add(i, example)`` appends and returns the position; ``by_record[i]`` lists
    record ``i``'s positions in order.
    """

    examples: list[UniEvalData] = field(default_factory=list)
    by_record: dict[int, list[int]] = field(default_factory=dict)

    def add(self, record: int, example: UniEvalData) -> int:
        """Append ``example`` for record ``record``; return its position."""
        self.examples.append(example)
        self.by_record.setdefault(record, []).append(len(self.examples) - 1)
        return len(self.examples) - 1

    def of(self, record: int) -> list[int]:
        """Record ``record``'s positions, in the order added."""
        return self.by_record.get(record, [])

    def positions(self) -> dict[int, int]:
        """Position -> record index, for mapping planning problems back to records."""
        return {k: i for i, ks in self.by_record.items() for k in ks}


def summary_sentence_spans(text: str, splitter) -> list[tuple[int, int]]:
    """The summary's sentences as the reports see them: each line (a bullet, a
    ``Section: value`` line) on its own, split further by ``splitter`` (Punkt),
    list markers left out. Character spans into ``text``."""
    from ..keypoints import source_sentence_spans

    return source_sentence_spans(text, splitter, strip_bullets=True)


@dataclass
class Claims:
    """Claim queries for several records: each summary sentence against the source.

    The query is the task's consistency question at output level, one claim at a
    time (the same prompt UniEval builds for one sentence); a long source is read in
    windows and the best window kept (max).
    """

    flat: Flat = field(default_factory=Flat)
    sentences: dict[int, list[str]] = field(default_factory=dict)

    def plan(self, i: int, rec: ReportRecord, splitter, max_n_claims: int, skip=None,
             spans: Sequence[tuple[int, int]] | None = None) -> RowError | None:
        """Add record ``i``'s first ``max_n_claims`` sentences (``spans`` into the target,
        default :func:`summary_sentence_spans`; those ``skip(start, end)`` does not
        exclude); ``sentences[i]`` keeps all of them. An error when there is none."""
        spans = summary_sentence_spans(rec.target, splitter) if spans is None else spans
        self.sentences[i] = [rec.target[a:b] for a, b in spans if skip is None or not skip(a, b)]
        if not self.sentences[i]:
            return RowError(field="target", message="the summary has no sentence to check")
        for claim in self.sentences[i][:max_n_claims]:
            self.flat.add(i, UniEvalData(target=claim, source=rec.source))
        return None

    def read(self, i: int, result, source: str, name: str = "claim") -> list[tuple[str, float, ClaimWindow | None]]:
        """Record ``i``'s claims: ``(text, P(Yes), best source window or None)``."""
        out = []
        for k in self.flat.of(i):
            ev = result.evidence[name][k] if result.evidence else None
            out.append((self.flat.examples[k].target, float(result.values[name][k]), best_query_window(ev, source)))
        return out


def best_query_window(ev: Evidence | None, source: str) -> ClaimWindow | None:
    """The source window of the highest-scoring query of ``ev``, when the source was
    read in windows; None when it was read whole."""
    if ev is None:
        return None
    windowed = [q for q in ev.queries if q.window is not None]
    if not windowed:
        return None
    w = max(windowed, key=lambda q: q.value).window
    return ClaimWindow(start=w.start, end=w.end, text=source[w.start:w.end])


def short(text: str, n: int = 160) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def problems_to_errors(problems: Sequence[ExampleProblem], positions: Mapping[int, int],
                       errors: dict[int, RowError]) -> None:
    """Turn planning problems of derived examples into row errors of their records.

    ``positions`` maps a derived example's position to its record index.
    """
    for p in problems:
        rec = positions.get(p.index)
        if rec is not None and rec not in errors:
            errors[rec] = RowError(field=p.field, message=p.message)


@dataclass
class Coverage:
    """Key-point coverage queries for several records (claim = key point, document = summary)."""

    flat: Flat = field(default_factory=Flat)
    key_points: dict[int, list] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)

    def plan(self, i: int, rec: ReportRecord, n_default: int | None, splitter) -> RowError | None:
        """Add record ``i``'s key points (given, or extracted from its source); an error if none.
        Asking for more key points than the source has candidate sentences adds a note
        (``notes[i]``) and checks all of them."""
        from ..keypoints import KeyPoint, extract_key_points

        if rec.key_points:
            points = [KeyPoint(t) for t in rec.key_points]
        else:
            n = rec.n_key_points if rec.n_key_points is not None else n_default
            points = extract_key_points(rec.source or "", n, splitter=splitter)
            if n is not None and 0 < len(points) < n:
                self.notes.setdefault(i, []).append(
                    f"n_key_points is {n}, but the source has only {len(points)} candidate sentence(s) "
                    f"(sentences with at least 3 content words, or 2 with a number or date), "
                    f"so {len(points)} key point(s) are checked")
        if not points:
            return RowError(field="source", message="no key point: the source has no sentence "
                            "(give 'key_points' or a longer source)")
        self.key_points[i] = points
        for kp in points:
            self.flat.add(i, UniEvalData(target=kp.text, source=rec.target))
        return None

    def values(self, i: int, result, name: str = "key_point_coverage") -> list[float]:
        """Record ``i``'s coverage probability per key point, in key-point order."""
        return [float(result.values[name][k]) for k in self.flat.of(i)]


def key_point_json(kp, value: float, threshold: float) -> dict[str, Any]:
    """One key point with its coverage probability and verdict, for the reports' JSON."""
    return {"key_point": kp.text, "score": value, "covered": bool(value >= threshold),
            "start": kp.start, "end": kp.end}
