"""Report formats computed locally from UniEval Boolean-QA queries (no LLM judge).

* ``rating`` (:mod:`.rating`): 1-3 per metric with cut points, and a
  good/incomplete/bad rule engine; each report ``{"summary": {...}}`` as the rating
  evaluator writes it (its async API: :mod:`unieval_local.compat`).
* ``summ`` (:mod:`.summ`): a 0-100 score from claim alignment and key-point
  coverage, with missing and misaligned details; reads the hosted custom-run body.
* ``autoeval`` (:mod:`.autoeval`): accuracy decomposition, adherence rubrics and
  completeness from section definitions, in the autoeval evaluator's shape.

:func:`make_report` is the Python form of ``unieval-local report``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine, RunStats, truncation_message
from ..extras import require
from ..requests.scheduler import RequestPolicy, Scheduler
from ..wire.custom_run import is_custom_run, read_custom_run
from ..wire.shapes import RowError
from . import autoeval, rating, summ
from .autoeval import AutoevalOptions, AutoevalReport, AutoevalRequest, autoeval_aggregate
from .base import BadRecord, ReportFile, ReportFlag, ReportFormat, ReportPart, ReportRow, ReportSettings
from .rating import (
    RatingConfig,
    RatingReport,
    RatingRequest,
    apply_rules,
    card_checkpoint_note,
    card_checkpoint_problem,
    load_rating_config,
    normalized_score,
    placeholder_note,
    rating_aggregate,
    to_rating,
)
from .records import ReportRecord, in_user_names
from .reasons import slug_note, write_reasons
from .summ import SummOptions, SummReport, SummRequest, summ_aggregate

#: The report formats by name: each one registry record (options, request, aggregate, answer
#: model, CLI flags); ``unieval-local report`` reads its flags from here.
FORMATS: dict[str, ReportFormat] = {f.name: f for f in (
    ReportFormat("rating", RatingConfig, RatingRequest, rating_aggregate, RatingReport, rating.FLAGS),
    ReportFormat("summ", SummOptions, SummRequest, summ_aggregate, SummReport, summ.FLAGS),
    ReportFormat("autoeval", AutoevalOptions, AutoevalRequest, autoeval_aggregate, AutoevalReport, autoeval.FLAGS),
)}


def report_flags() -> dict[str, tuple[ReportFlag, tuple[str, ...]]]:
    """Every format's CLI flags: flag -> (its :class:`ReportFlag`, the formats that read it), in
    first-seen order."""
    out: dict[str, tuple[ReportFlag, tuple[str, ...]]] = {}
    for fmt in FORMATS.values():
        for f in fmt.flags:
            flag, names = out.get(f.flag, (f, ()))
            out[f.flag] = (flag, names + (fmt.name,))
    return out


def make_report(
    records: Sequence[Mapping[str, Any]] | Mapping[str, Any], format: str = "rating", *,
    engine: Engine | None = None, options: Any = None, model: Any = None, device: str | None = None,
    request_size: int = MAX_EXAMPLES_PER_REQUEST, warn: bool = True,
) -> ReportFile:
    """Build one report per record, in input order.

    Args:
        records: dicts with ``target`` (the summary; also read from ``summary`` or
            ``output``), usually ``source`` (also ``input`` or ``transcript``), and the
            report inputs of :class:`~unieval_local.reports.records.ReportRecord`. For
            ``summ``, also a hosted custom-run request body ``{"threshold", "model_slug",
            "evaluations": [...]}`` (:func:`~unieval_local.wire.custom_run.read_custom_run`).
        format: ``rating``, ``summ`` or ``autoeval``.
        engine: the :class:`~unieval_local.engine.Engine` to use (a ``Scorer``'s is
            ``scorer.engine``); default ``Engine(model=model, device=device,
            long_input="chunk")`` so long sources are read whole, in windows.
        options: the format's options (:class:`RatingConfig`, :class:`SummOptions`,
            :class:`AutoevalOptions`), a dict of them, or None for the defaults.
        model, device: for the default engine.
        request_size: records per request (default 250, the request cap of ``score``: the
            :class:`~unieval_local.requests.scheduler.RequestPolicy`); the requests go through one
            :class:`~unieval_local.requests.scheduler.Scheduler`, stage by stage (autoeval has two).
        warn: give each run-level note (``ReportFile.notes``: placeholder rating cut
            points, an ignored ``model_slug`` ...) and the truncation count as a
            ``UserWarning``; False leaves them in the result only.

    Returns:
        :class:`~unieval_local.reports.base.ReportFile`: ``reports[i]`` has the
        report of record ``i`` or an ``error`` naming the field (a bad record, a
        repeated ``id``); ``aggregate`` the means over reported records. A
        ``UserWarning`` says how many queries were longer than ``max_length`` and
        lost their end (``n_truncated``), if any.

    Raises:
        ValueError: unknown format, invalid options, ``request_size`` < 1, a request
            body given to a format other than summ or of the wrong shape.
        CheckpointNotFoundError, CheckpointError: no usable checkpoint.
    """
    if format not in FORMATS:  # before an engine is made
        raise ValueError(f"unknown report format {format!r}; choose one of {', '.join(FORMATS)}")
    plan = plan_report(records, format, engine=engine or Engine(model=model, device=device, long_input="chunk"),
                       options=options, request_size=request_size)
    scheduler = Scheduler(plan.engine, RequestPolicy(request_size))
    return plan.finish(scheduler.answers(plan.requests), warn=warn)


@dataclass
class ReportPlan:
    """One report run, planned: its requests (for any :class:`~unieval_local.requests.scheduler.Scheduler`)
    and what :meth:`finish` needs to build the :class:`ReportFile` from their answers.

    Made by :func:`plan_report`; :func:`make_report` runs it on a scheduler of its own, the HTTP
    service on the shared one (its requests merged with other clients').

    Attributes:
        format: the :class:`ReportFormat`. options: the format's options in effect.
        engine: the engine the requests plan with. records: the input records (a repeated id
            already an error record). requests: one request per part of at most
            ``request_size`` records. notes: run-level notes so far.
    """

    format: ReportFormat
    options: Any
    engine: Engine
    records: list
    requests: list
    notes: list[str]

    def finish(self, parts: Sequence[ReportPart], warn: bool = True) -> ReportFile:
        """The :class:`ReportFile` of the requests' answers (``parts``, in request order).

        Args:
            parts: each request's :class:`ReportPart`, in :attr:`requests` order.
            warn: give the run-level notes and the truncation count as ``UserWarning``.
        """
        engine, fmt, options, records, notes = self.engine, self.format, self.options, self.records, list(self.notes)
        config = engine.config
        rows: list[ReportRow] = sorted((row for part in parts for row in part.rows), key=lambda r: r.index)
        stats = RunStats()
        for part in parts:
            stats += part.stats
        for name, ident in engine.checkpoint_identities().items():  # also a warning: kept in the file too
            # only a checkpoint this run used (a served engine holds others, e.g. unieval-sum beside a G-Eval judge)
            if ident.get("identity") == "unverified" and stats.queries_by.get(name):
                notes.append(f"checkpoint {name} (content {str(ident['fingerprint'])[:12]}) was used unchecked: "
                             "nothing in its folder "
                             f"names the model, so its identity is unverified (settings.checkpoints.{name}.identity)")
        # errors in the field names each record used (summary, input...), not ours
        rows = [r.model_copy(update={"error": in_user_names(r.error, records[r.index], fmt.name)}) if r.error else r
                for r in rows]
        rows, reason_notes = write_reasons(rows, fmt.name, engine)  # the seed formats' reasons: generated or template
        notes += reason_notes
        for note in notes if warn else ():
            warnings.warn(note, UserWarning, stacklevel=3)
        if stats.n_truncated and warn:
            limits = {n: engine.max_length(n) for n in stats.truncated_by}
            warnings.warn(truncation_message(stats, limits, config.long_input, cli=False, evidence=False), UserWarning,
                          stacklevel=3)  # make_report has no evidence option: no "evidence=True shows which"
        settings = ReportSettings(
            package=config.package, checkpoints=engine.checkpoint_identities(),
            consistency_aspect=options.consistency_aspect, run=config.as_dict(),
            options=options.model_dump(mode="json", exclude={"templates"}))
        n_err = sum(r.error is not None for r in rows)
        return ReportFile[fmt.answer](
            format=fmt.name, n_records=len(rows), n_reported=len(rows) - n_err, n_errors=n_err,
            aggregate=fmt.aggregate(rows), n_queries=stats.n_queries, n_truncated=stats.n_truncated,
            truncated_fields=stats.truncated_fields, truncated_by=stats.truncated_by,
            settings=settings, notes=notes, reports=rows)


def plan_report(records: Sequence[Mapping[str, Any]] | Mapping[str, Any], format: str, *, engine: Engine,
                options: Any = None, request_size: int = MAX_EXAMPLES_PER_REQUEST,
                long_input: str | None = None) -> ReportPlan:
    """Check a report run's arguments and plan its requests (the first half of
    :func:`make_report`, whose arguments these are; nothing runs on the model). ``long_input``:
    how its queries read long fields where it is not the engine's mode (the HTTP service reads
    report requests in chunks, as ``report`` does, on an engine that truncates for the hosted
    metric; :attr:`Job.long_input <unieval_local.pipeline.jobs.Job.long_input>`).

    Raises:
        ValueError: as :func:`make_report` (unknown format, invalid options, a bad request body ...).
        MissingExtraError: the ``reports`` extra is not installed.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown report format {format!r}; choose one of {', '.join(FORMATS)}")
    require("reports")
    if isinstance(request_size, bool) or not isinstance(request_size, int) or request_size < 1:
        raise ValueError(f"request_size must be a positive integer, got {request_size!r}")
    fmt = FORMATS[format]
    options_model = fmt.options
    if options is None:
        options = options_model()
    elif isinstance(options, Mapping):
        options = options_model.model_validate(dict(options))
    elif not isinstance(options, options_model):
        raise ValueError(f"options for {format!r} must be {options_model.__name__}, a dict or None, "
                         f"got {type(options).__name__}")
    notes: list[str] = []
    if isinstance(records, Mapping):
        if format != "summ" or not is_custom_run(dict(records)):
            raise ValueError("records must be a list of records (a mapping is read only as a custom-run request "
                             "body {'evaluations': [...]} by the summ format)")
        body, (records, notes) = records, read_custom_run(records)
        notes = [slug_note(body["model_slug"], engine) if n.startswith("model_slug ") else n for n in notes]
    if format == "summ" and "threshold" in options.model_fields_set:
        own = sum(1 for r in records if isinstance(r, Mapping) and r.get("threshold") is not None
                  and r.get("threshold") != options.threshold)
        if own:
            notes.append(f"the threshold option {options.threshold:g} is not used for {own} record(s) that give their "
                         "own threshold (a record's own, or its custom-run evaluation's or body's, takes precedence "
                         "over the option)")
    if format == "rating":
        coverage_used = any(isinstance(r, Mapping) and not (r.get("references") or r.get("reference"))
                            for r in records)  # relevance without a reference: key-point coverage
        usable = any(isinstance(r, Mapping) for r in records)
        problem = card_checkpoint_problem(engine, options) if usable else None
        named = card_checkpoint_note(engine, options) if usable else None  # accepted on its own label: said
        notes[:0] = [n for n in (placeholder_note(options, coverage_used, problem), named) if n]
    records = _mark_duplicate_ids(list(records))
    requests = _language_requests(fmt, records, options, engine, request_size, long_input)
    return ReportPlan(fmt, options, engine, records, requests, notes)


def _language_requests(fmt: ReportFormat, records: list, options: Any, engine: Engine, request_size: int,
                       long_input: str | None = None) -> list:
    """The run's requests: the records grouped by language (each record's ``language``, the
    run's ``language=``, or detected), in input order within a group, each group's records
    reported with their language's options (:func:`~unieval_local.reports.language.language_options`)
    in requests of at most ``request_size``."""
    from .language import LanguageGroup, language_options

    groups: dict[str | None, list[int]] = {}
    for i, rec in enumerate(records):
        try:
            lang = engine.record_language(rec) if isinstance(rec, Mapping) else None
        except ValueError:
            lang = None  # a bad 'language' field: the record's parse names it
        groups.setdefault(lang, []).append(i)
    requests = []
    for lang, indices in groups.items():
        opts, group_notes = language_options(options, lang, engine.registry)
        if (why := _checker_unavailable(engine, options, opts, lang)) is not None:
            for i in indices:  # this language's checker is not here: error rows, the others reported
                if isinstance(records[i], Mapping):
                    records[i] = BadRecord(why, field="language")
            opts, group_notes = options, []  # nothing of the group goes to the missing checker
        for at, part in RequestPolicy(request_size).split(indices):
            inner = fmt.request([records[i] for i in part], opts, 0)
            requests.append(LanguageGroup(inner, list(part), lang, opts.consistency_aspect, group_notes,
                                          long_input))
    return requests


def _checker_unavailable(engine: Engine, options: Any, opts: Any, language: str | None) -> str | None:
    """Why records in ``language`` cannot be reported: their consistency checks were routed to
    another checker than the run's (``opts.consistency_aspect``, chosen by
    :func:`~unieval_local.reports.language.language_options`) whose evaluator is not here
    (:func:`~unieval_local.requests.score.evaluator_unavailable`: found offline, of the right
    model; no model loads); None when it is here or nothing was routed."""
    from ..requests.score import evaluator_unavailable
    from ..text.language import language_name

    checker = getattr(opts, "consistency_aspect", None)
    if checker is None or checker == options.consistency_aspect:
        return None
    name = engine.registry.get_aspect(*checker.split("/")).checkpoint
    why = evaluator_unavailable(name, engine.model)
    if why is None:
        return None
    return (f"the record is in {language_name(language)} ({language}), so its consistency-like checks go to "
            f"{checker}, whose evaluator {name} is not here ({why}): stage it with `unieval-local download "
            f"--checkpoint {name} --to DIR` and give it (--model {name}=DIR, model={{{name!r}: DIR}}), or choose the "
            "checker (--consistency-aspect, consistency_aspect=) or the record's language ('language')")


def _mark_duplicate_ids(records: list) -> list:
    """Records whose ``id`` repeats an earlier record's become error rows (as in ``score``)."""
    import json

    seen: dict[str, int] = {}
    out = []
    for i, rec in enumerate(records):
        rid = rec.get("id") if isinstance(rec, Mapping) else None
        key = json.dumps(rid, sort_keys=True, default=str)  # 1 and "1" differ, as in score
        if rid is not None and key in seen:
            out.append(BadRecord(f"duplicate id {rid!r}: record {seen[key]} has it already; ids must be unique"))
            continue
        if rid is not None:
            seen[key] = i
        out.append(rec)
    return out


__all__ = [
    "FORMATS", "AutoevalOptions", "AutoevalReport", "AutoevalRequest", "BadRecord", "RatingConfig", "RatingReport",
    "RatingRequest", "ReportFile", "ReportFlag", "ReportFormat", "ReportPart", "ReportRecord", "ReportRow",
    "ReportSettings", "RowError", "SummOptions", "SummReport", "SummRequest", "apply_rules", "load_rating_config",
    "ReportPlan", "make_report", "normalized_score", "plan_report", "read_custom_run", "report_flags", "to_rating",
]
