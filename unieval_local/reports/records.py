"""The input records of the report formats: :class:`ReportRecord` (the fields of ``score``
plus report inputs, read under the other evaluators' names too), :class:`SectionDefinition`
(autoeval's sections), and parsing that never raises for bad input (:func:`parse_records`:
every problem of a record at once, in the record's own field names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ExampleProblem
from ..fields import alias_hint, read_aliases, record_names
from ..pipeline.validate import describe_value, is_text, parse_example
from ..schema import UniEvalData
from ..wire.shapes import RowError, rename_fields
from .base import BadRecord
from .options import check_categorical, check_texts

__all__ = ["ReportRecord", "SectionDefinition", "accept_aliases", "check_sections", "in_user_names",
           "parse_records", "record_id", "rename_fields", "require_text"]


def accept_aliases(data: Any) -> Any:
    """``data`` with the other evaluators' names (:func:`~unieval_local.fields.read_aliases`:
    ``input``/``transcript``, ``summary``/``output``) renamed to ``source`` / ``target``.

    Raises:
        ValueError: two names of one field given with different values (e.g. ``summary`` and ``target``).
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for field_name, aliases in read_aliases().items():
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
            other evaluators use are read too (:mod:`unieval_local.fields`): ``input`` or
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
            errors[i] = RowError(field=item.field, message=item.message)
        else:
            if isinstance(item, Mapping) and not isinstance(item, dict):
                item = dict(item)
            rec, problems = parse_example(i, item, ReportRecord)
            if (isinstance(item, dict) and not {"source", *read_aliases()["source"]} & set(item)
                    and (hint := alias_hint("source", item))):
                # a misnamed source is wrong in every format (autoeval would read the record as
                # having none): an error, with the record's other problems
                problems.append(ExampleProblem(
                    i, "source", f"the source (the document or transcript; also read from "
                    f"{' or '.join(repr(a) for a in read_aliases()['source'])}) is missing{hint}"))
            problems = [_missing_summary(p) for p in problems]
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


def _missing_summary(problem: ExampleProblem) -> ExampleProblem:
    """``problem`` with pydantic's bare "Field required" of a missing target said in words (a
    did-you-mean after it is kept; ``(target)`` is dropped where the record's own name replaces it)."""
    if problem.field != "target" or not problem.message.startswith("Field required"):
        return problem
    return ExampleProblem(problem.index, problem.field, "the summary (target) is missing"
                          + problem.message[len("Field required"):], problem.aspect)


def record_id(record: Any) -> str | int | float | None:
    """The record's ``id`` as it is (a string or a number, so that ids ``1`` and ``"1"``, two
    ids as in ``score``, stay two in the report's rows), another value as its string, or None."""
    rid = record.get("id") if isinstance(record, Mapping) else getattr(record, "id", None)
    if rid is None or (isinstance(rid, (str, int, float)) and not isinstance(rid, bool)):
        return rid
    return str(rid)


def require_text(rec: ReportRecord, name: str, why: str) -> RowError | None:
    """An error when ``rec.<name>`` is not a non-empty string (as :func:`~unieval_local.pipeline.validate.check_example` says it)."""
    value = rec.get_field(name)
    if is_text(value):
        return None
    return RowError(field=name, message=f"{why} needs '{name}' as a non-empty string; {describe_value(value)}")


def in_user_names(error: RowError, record: Any, report_format: str | None = None) -> RowError:
    """``error`` in the field names the record itself used: a record that gave its
    summary as ``summary`` (read as ``target``, :func:`~unieval_local.fields.user_names`) reads
    ``summary: ...``, not ``target: ...``; a field such a record lacks is named as
    ``report_format``'s tool names it (:func:`~unieval_local.fields.record_names`: a summ record
    ``{"output": ...}`` without a source reads ``input: ...``)."""
    if not isinstance(record, Mapping):
        return error
    return rename_fields(error, record_names(record, report_format))



