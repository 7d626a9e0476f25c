"""What every report format shares: the row and file models of a report document
(:class:`ReportRow`, :class:`ReportFile`, :class:`ReportSettings`), an unreadable input record
(:class:`BadRecord`), one request's part of the rows (:class:`ReportPart`), and the format
registry's record (:class:`ReportFormat`, with the CLI flags it reads: :class:`ReportFlag`).

A report never calls an LLM or any model but the local checkpoints: every judgement is a
Boolean-QA query ``P(Yes) / (P(Yes) + P(No))`` (UniEval, Zhong et al. 2022, Sec. 3) planned by a
:class:`~unieval_local.requests.base.Request` and run by the
:class:`~unieval_local.requests.scheduler.Scheduler`. A query counts as a "yes" when its
probability is at least a threshold (default 0.5, where the model prefers "Yes" to "No")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..engine import RunStats
from ..wire.shapes import RowError

__all__ = ["BadRecord", "CheckpointIdentity", "Reasons", "ReportFile", "ReportFlag", "ReportFormat", "ReportPart",
           "ReportRow", "ReportSettings"]


R = TypeVar("R")


class Reasons(BaseModel):
    """Who wrote a report's text fields (the reasons of the seed formats: a rating's
    ``explanation`` and ``global_explanation``, an accuracy point's ``accuracy``, a rubric's
    ``reasoning``; :mod:`unieval_local.reports.reasons`).

    Attributes:
        source: ``generated`` (every such field written by the local generator), ``template``
            (none: no generator staged, or every generation failed) or ``mixed``.
        generator: the generator's name (``g-eval``, or the NAME of ``--generator NAME=DIR``), or
            None when none is staged.
        fields: each such field's path in the report (``summary.coherence.explanation``,
            ``accuracy.decomposition.0.accuracy``) -> ``generated`` or ``template``.
        failed: the fields whose generation failed -> why (``length``: it hit the token limit;
            ``too_long``: the prompt was over the model's window; ``empty``: no text): they keep
            their template.
    """

    model_config = ConfigDict(frozen=True)

    source: Literal["generated", "template", "mixed"]
    generator: str | None = None
    fields: dict[str, Literal["generated", "template"]] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)


class ReportRow(BaseModel, Generic[R]):
    """One input record's outcome: its ``report``, or an ``error``.

    Attributes:
        index: the record's position in the input (0-based).
        id: the record's ``id`` if it has one (a string or a number, as given), else None.
        report: the report (None when ``error`` is set).
        error: why there is no report.
        notes: what the reader should know about this record's report, e.g. fewer key
            points than asked for because the source has fewer candidate sentences.
        language: the record's language (``en``, ``zh``, ``id``, ``und`` ...: its ``language``
            field, the run's ``language``, or detected), which chose its sentence splitter, its
            consistency checker and its explanations' language.
        consistency_aspect: the ``task/aspect`` that answered this record's consistency-like
            queries (``fact/nli_support`` for a Chinese or Indonesian record unless the options
            chose one).
        reasons: who wrote the report's reasons (:class:`Reasons`: generated or template, per
            field); None for a format without reasons (``summ``) and for an error row.
    """

    model_config = ConfigDict(frozen=True)

    index: int
    id: str | int | float | None = None
    report: R | None = None
    error: RowError | None = None
    notes: list[str] = Field(default_factory=list)
    language: str | None = None
    consistency_aspect: str | None = None
    reasons: Reasons | None = None


class CheckpointIdentity(BaseModel):
    """Which checkpoint answered: hub id or folder, hub revision (when known), the
    content fingerprint (hex SHA-256 of its config, weight and tokenizer files) and the
    tokens per query it read (``max_length``: the run's, else its evaluator's default), and
    what says the folder is that evaluator (``identity``: ``verified``: its files checked against a
    download manifest or HF cache record; ``named``: only its own ``config.json`` label; ``unverified``:
    nothing; :func:`~unieval_local.models.checkpoints.check_identity`)."""

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


@dataclass(frozen=True)
class BadRecord:
    """An input record that could not be read (e.g. a JSONL line that is not JSON), or cannot
    be reported here (its language's checker is not here); it becomes an error row with
    ``message`` naming ``field``."""

    message: str
    field: str = "record"


@dataclass
class ReportPart(Generic[R]):
    """One report request's answer: its rows (``ReportRow.index`` counts from the request's
    ``start`` in the whole input) and its engine counters."""

    rows: list[ReportRow[R]]
    stats: RunStats = field(default_factory=RunStats)


@dataclass(frozen=True)
class ReportFlag:
    """A CLI flag of ``unieval-local report`` that sets one format option.

    Attributes:
        option: the option's name in the format's options model (``n_key_points``).
        flag: the flag (``--n-key-points``); a flag several formats share is one object in each
            format's ``flags``, so the CLI adds it once and names the formats it applies to.
        help: what it does (the CLI prefixes the formats it applies to).
        kwargs: argparse keywords (``type``, ``action``, ``metavar``, ``choices`` ...);
            ``dest`` is ``option`` and ``default`` None (unset).
        parse: turns the parsed value into the option's value (``"a,b"`` -> ``["a", "b"]``);
            raises ``ValueError`` naming the flag.
    """

    option: str
    flag: str
    help: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    parse: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class ReportFormat:
    """One report format, as the registry (:data:`unieval_local.reports.FORMATS`) holds it.

    Attributes:
        name: ``rating``, ``summ``, ``autoeval``.
        options: its options model (a pydantic model; ``--config FILE`` and the flags fill it).
        request: ``(records, options, start) -> Request`` answering a :class:`ReportPart` for
            those records (``start``: index of ``records[0]`` in the whole input).
        aggregate: ``rows -> {name: mean or None}`` over the reported rows (the file's
            ``aggregate``).
        answer: the report model of one row (``ReportFile[answer]``).
        flags: the :class:`ReportFlag` records of its options: a new format needs no CLI edit.
    """

    name: str
    options: type[BaseModel]
    request: Callable[[Sequence[Any], Any, int], Any]
    aggregate: Callable[[Sequence[ReportRow]], dict[str, Any]]
    answer: type[BaseModel]
    flags: tuple[ReportFlag, ...] = ()
