"""The batch run (:func:`run_batch`, the CLI's ``score``): read, survey, score in requests,
write and fsync after each, keep a sidecar, resume, stop cleanly.

The steps, each a function: the options are checked and the aspects chosen before any model
loads (:func:`_choose_aspects`, on a first pass over the input, :mod:`.survey`); the run is
opened (:func:`_open_run`: engine, checkpoints checked, run identity, resume, writer, sidecar);
the records are sent as :class:`~unieval_local.requests.score.RecordsRequest` objects of at
most 250 through the batch engine (:func:`_score_requests`); the summary is made from what was
written (:func:`_summary`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine, RunStats
from ..errors import InputFileError, ModelRuntimeError, NothingToScoreError, ResumeError, RunInterrupted
from ..locks import is_stream_path, output_lock
from ..pipeline.validate import check_example, input_hint_message, parse_example
from ..records import AlignedInput, InputSpec, Record, input_fingerprint, iter_records
from ..registry.tasks import ALL, ALL_AVAILABLE, GROUP_NAMES
from ..registry.user_aspects import registry_with
from ..claims import with_claim_checker
from ..settings import EngineSettings
from .. import notes
from ..requests.score import ChunkResult, left_out_message, unavailable_aspects
from ..schema import evaluator_signatures
from ..wire.hosted import hosted_line
from .engines import BatchEngine, make_batch_engine
from .output import (CSV_NO_RESUME, HOSTED_NO_RESUME, OutputWriter, check_csv_output, check_output, count_csv_rows,
                     csv_columns, errors_path, read_output, sort_by_index, write_failed, write_sidecar)
from .resume import parse_shard, resumable, shard_of
from .summary import BatchSummary, Progress, summarize
from .survey import Survey, nothing_to_score_message, survey_input

__all__ = ["OUTPUT_FORMATS", "request_stop", "run_batch"]

#: Output formats of a batch run (``--output-format``): one line per record (``records``,
#: the default) or one line per request in the hosted metric's schema (``hosted``).
OUTPUT_FORMATS: tuple[str, ...] = ("records", "hosted")

#: a stop (Ctrl-C, SIGTERM) asked for by the CLI's signal handlers (:func:`request_stop`).
#: The handler raises too, but an exception raised while a ``__del__`` runs (garbage
#: collection, e.g. in the regex module) is printed and lost, and the run would go on to
#: the end; so the run also checks for it after every forward batch and request.
_STOP: list[BaseException] = []


def request_stop(exc: BaseException) -> None:
    """Ask the running :func:`run_batch` to stop with ``exc`` (a ``KeyboardInterrupt`` or
    :class:`~unieval_local.errors.Terminated`) at its next forward batch or request; for
    signal handlers, which should also raise ``exc`` themselves."""
    _STOP[:] = [exc]


def _check_stop() -> None:
    if _STOP:
        raise _STOP[0]


def _holding_output_lock(run: Callable[..., BatchSummary]) -> Callable[..., BatchSummary]:
    """Make ``run(input, output, **kwargs)`` hold ``output``'s lock
    (:func:`~unieval_local.locks.output_lock`) for its whole life: taken before anything
    else (before any model load), released when it returns or raises. No lock for stdout
    (``None``, ``"-"``), devices and pipes.

    The wrapped function raises, besides its own errors, :class:`~unieval_local.errors.OutputLockedError`
    (another process writes ``output``) and :class:`~unieval_local.errors.LockFileError`
    (the lock file cannot be created).
    """
    @functools.wraps(run)
    def locked(input, output=None, **kwargs):
        with output_lock(output):
            return run(input, output, **kwargs)
    return locked


@_holding_output_lock
def run_batch(
    input: InputSpec,
    output: str | os.PathLike | None = None,
    *,
    task: str = "summarization",
    aspects: Sequence[str] | str | None = None,
    settings: Mapping[str, Any] | EngineSettings | None = None,
    resume: bool = False,
    shard: tuple[int, int] | str | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    evidence: bool = False,
    progress: bool | None = None,
    stream: TextIO | None = None,
    output_format: str = "records",
) -> BatchSummary:
    """Score every record of ``input`` and write one output line per record (the CLI's ``score``).

    Args:
        input: an input spec (:func:`~unieval_local.records.iter_records`): ``.jsonl``
            (streamed; ``-`` = stdin), a ``.json`` list, ``.csv`` / ``.tsv`` (a header row), or an
            :class:`~unieval_local.records.AlignedInput` of line-aligned text files. Records
            that cannot be read (not valid JSON/CSV, text holding a UTF-16 surrogate) become
            error records; the others are scored. The sidecar records its
            :func:`~unieval_local.records.input_fingerprint`.
        output: the output JSONL (``.csv``: CSV rows, :func:`~unieval_local.batch.output.csv_columns`,
            no resume/shard/hosted); ``None`` or ``"-"``: ``stream`` (stdout), no sidecar nor resume.
        task, aspects: what to score. ``None`` or ``"all"`` (the same output): the task's own set
            (UniEval's four for summarization) less those no record can be scored for (named in
            ``summary.skipped_aspects``; stdin: the first record's); a record lacking (absent, null)
            some one's fields gets the others and ``"notes": ["relevance skipped: no references"]``.
            A record lacking the fields of an aspect NAMED is an error line.
            ``"all+"``: as ``"all"`` over every aspect of the task, less those of another
            evaluator not found offline or of another family (never fetched), named in ONE
            ``UserWarning`` before any model loads. ``"geval"``, ``"seahorse"``: as if named.
        settings: keyword arguments of :class:`~unieval_local.engine.Engine` (the same as
            :class:`~unieval_local.Scorer`'s: model, device, dtype, max_length ...).
        resume: keep the records already in ``output`` and score the rest.
        shard: ``(K, N)`` or ``"K/N"``: only the records whose key hashes to K.
        engine: a batch engine of :data:`BATCH_ENGINES` (``local`` or ``ray``).
        engine_options: that engine's options (``ray``: ``actors``, ``gpus_per_actor``, ``address``).
        evidence: add evidence to each output line.
        progress: a bar on a terminal, log lines every 30 s otherwise (None); True a bar; False nothing.
        stream: where to write when ``output`` is None (default stdout).
        output_format: ``records`` (default: one line per record, as above) or ``hosted``:
            one line per request of at most 250 records, as the hosted UniEval metric answers
            it (:func:`hosted_line`), written and flushed as each request finishes. ``hosted``
            needs exactly one aspect, named (``aspects`` not None nor expanding to several),
            and takes no ``resume``, ``shard``, ``evidence`` nor engine other than ``local``;
            no sidecar; never appends (to ``output`` or its errors file: :func:`_hosted_errors`).

    Returns:
        A :class:`BatchSummary` over every record in the output (per record, in both formats).

    Raises:
        InputFileError, ValueError: unreadable input (missing, not UTF-8, unknown extension,
            aligned files of different line counts, an unusable CSV header), bad options,
            unknown aspects, an option ``output_format="hosted"`` (or a ``.csv`` output) does not take.
        NothingToScoreError: no record can be scored for the aspects (a ValueError; before
            any model is loaded).
        ResumeError: the output exists without ``resume`` (or at all, hosted or CSV), or belongs
            to another run (signature or input fingerprint differ; for aligned files the changed
            ones are named); ``resume`` with a ``.csv`` output.
        OutputWriteError: a write of the output, its sidecar or a resume repair failed (disk
            full, file-size limit ...); earlier records are intact.
        OutputLockedError: another process is writing ``output`` (it holds ``OUT.lock``, held
            by this run from its start to its end); refused before any model is loaded.
        LockFileError: ``OUT.lock`` cannot be created (e.g. a missing folder; an ``OSError``).
        RunInterrupted: Ctrl-C, SIGTERM (through the CLI) or a runtime failure of the
            model stopped the run; what was written is intact.
        CheckpointNotFoundError, CheckpointError: no usable checkpoint.

    With ``resume``, duplicate lines of one record in ``output`` (left by two runs writing it
    at once) are repaired: the first line of each record index is kept, the file rewritten
    atomically, and one warning logged with how many were dropped. A score cache that fails
    is disabled with one warning and the run goes on (``summary.cache_disabled``).
    """
    t0, c0 = time.perf_counter(), time.process_time()
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    output = None if output is not None and str(output) == "-" else output
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    hosted = output_format == "hosted"
    if hosted:
        _check_hosted_options(resume=resume, shard=shard, engine=engine, evidence=evidence)
    csv_out = check_csv_output(output, resume=resume, shard=shard, hosted=hosted)
    if not isinstance(settings, EngineSettings):
        settings = EngineSettings.of(settings or {})
    # the task, aspects and input are checked before the engine is made (it imports torch: seconds)
    registry = with_claim_checker(registry_with(settings.aspects_config), settings.claim_checker)  # fact/claims
    if hosted:
        _check_hosted_aspects(aspects, registry.aspect_names(task, aspects) if aspects is not None else [])
    input_path: str | AlignedInput = input if isinstance(input, AlignedInput) else os.fspath(input)
    check_output(output, hosted=hosted, resume=resume, input_path=input_path, csv_out=csv_out)
    records = iter_records(input_path)
    first = next(records, None)
    if first is None:
        raise InputFileError(f"{input_path} holds no records")
    if input_path == "-" and first.error is not None and not first.error.startswith("duplicate"):
        # stdin is read once: its first line decides, before any model loads (not read to its end)
        raise InputFileError("stdin is not JSONL records (one JSON object per line): "
                             + first.error.replace(" of the file", " of stdin"))
    names, skipped_aspects, survey = _choose_aspects(registry, task, aspects, input_path, first, shard,
                                                     model=settings.model)
    columns = csv_columns(names, fields=survey.fields if survey else first.data, evidence=evidence) if csv_out else None
    run = _open_run(settings.replace(progress=False), engine, engine_options, registry, task, names, evidence,
                    input_path, output, stream, resume, shard, hosted, columns)
    run.survey, run.skipped_aspects, run.t0, run.c0 = survey, skipped_aspects, t0, c0
    run.skip_missing = _is_set(aspects)
    bar = Progress(survey.n_in_shard if survey is not None else None, initial=len(run.written), enabled=progress)
    _STOP.clear()
    try:
        _score_requests(run, _requests(run, first, records), bar)
    except (KeyboardInterrupt, ModelRuntimeError) as exc:
        raise _interrupted(run, exc) from exc
    finally:
        _STOP.clear()
        bar.close()
        run.close()
    return _summary(run)


@dataclass
class _Run:
    """One batch run's state, from :func:`_open_run` to :func:`_summary`."""

    core: Engine
    batch_engine: BatchEngine
    registry: Any
    task: str
    names: list[str]
    evidence: bool
    checkpoints: list[str]
    signature: Any
    out_path: Path | None
    sidecar: bool
    hosted: bool
    shard: tuple[int, int] | None
    csv_columns: list[str] | None = None  # a CSV output's columns (None: JSON lines)
    writer: OutputWriter | None = None
    errors: OutputWriter | None = None  # hosted: the refused requests' error lines (opened at the first)
    meta: dict[str, Any] = field(default_factory=dict)
    done: set = field(default_factory=set)
    written: list[dict] = field(default_factory=list)
    stats: RunStats = field(default_factory=RunStats)
    n_skipped: int = 0
    refused: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))  # hosted: records per request
    answered: list[dict] = field(default_factory=list)  # hosted: the records of answered requests
    survey: Survey | None = None
    skipped_aspects: dict[str, str] = field(default_factory=dict)
    t0: float = 0.0
    c0: float = 0.0
    skip_missing: bool = False  # the aspects are a set (all, or none named): RecordsRequest's

    def close(self) -> None:
        """Close the writer and the batch engine (a Ray instance it started)."""
        for writer in (self.writer, self.errors):
            if writer is not None:
                writer.close()
        self.batch_engine.close()


def _is_set(aspects: Sequence[str] | str | None) -> bool:
    """Whether ``aspects`` asks for a set (none named, ``all``, ``all+``), not aspects one by one."""
    asked = [aspects] if isinstance(aspects, str) else list(aspects or ())
    return aspects is None or ALL in asked or ALL_AVAILABLE in asked


def _choose_aspects(registry, task: str, aspects: Sequence[str] | str | None, input_path: Any, first: Record,
                    shard: tuple[int, int] | None,
                    model: Any = None) -> tuple[list[str], dict[str, str], Survey | None]:
    """The aspects to score, those left out (aspect -> why) and the survey of the input.

    ``aspects`` named: those (a family group such as ``"geval"``: its aspects, as named).
    None or ``"all"`` (the same): those of the task's own set
    (:meth:`~unieval_local.registry.tasks.Registry.own_aspects`, the same whatever is staged) some
    record can be scored for (each record is then scored for those it has the fields for, the
    others noted in its line: :class:`~unieval_local.requests.score.RecordsRequest`'s
    ``skip_missing``); ``"all+"``: likewise of every aspect of the task. From stdin (read once):
    the aspects the first record has the fields for. With ``"all+"``, the aspects of another
    evaluator than the task's own are left out when its checkpoint is not here
    (:func:`~unieval_local.requests.score.unavailable_aspects`; ``model``: the run's model spec),
    named in ONE warning (:func:`~unieval_local.requests.score.left_out_message`), not among the
    aspects returned as left out.

    Raises:
        NothingToScoreError: no record of the input can be scored for the aspects.
    """
    expand_all = _is_set(aspects)
    names = registry.aspect_names(task, aspects)
    skipped: dict[str, str] = {}
    optional = registry.optional_aspects(task, aspects)
    absent = unavailable_aspects(registry, task, optional, model) if optional else {}
    if absent and len(absent) < len(names):
        names = [a for a in names if a not in absent]
        notes.note(left_out_message(absent, cli=True), warn=True, stacklevel=4)
    if input_path == "-":
        if expand_all and isinstance(first.data, dict):
            ex, _ = parse_example(first.index, first.data)
            can = [a for a in names
                   if ex is not None and not check_example(first.index, ex, [registry.get_aspect(task, a)])]
            skipped = {a: "the first record (stdin) lacks its fields" for a in names if a not in can}
            names = can or names
        return names, skipped, None
    survey = survey_input(input_path, registry, task, list(registry.get_task(task).aspects), shard)
    if expand_all:
        for a in names:
            missing = [f for f in registry.get_aspect(task, a).required_fields if f not in survey.fields]
            if survey.scorable[a] == 0:
                skipped[a] = (f"needs {', '.join(repr(f) for f in missing)}; no record has it"
                              if missing else "no record can be scored for it")
        if len(skipped) < len(names):
            names = [a for a in names if a not in skipped]
        else:
            skipped = {}
    if survey.n_in_shard and all(survey.scorable[a] == 0 for a in names):
        others = [a for a in registry.get_task(task).aspects if a not in names and survey.scorable.get(a, 0) > 0]
        raise NothingToScoreError(nothing_to_score_message(survey, registry, task, names, input_path,
                                                           unavailable=unavailable_aspects(registry, task, others, model)))
    return names, skipped, survey


def _open_run(settings: EngineSettings, engine: str, engine_options: Mapping[str, Any] | None, registry, task: str,
              names: list[str], evidence: bool, input_path: Any, output: Any, stream: TextIO | None, resume: bool,
              shard: tuple[int, int] | None, hosted: bool, columns: list[str] | None = None) -> _Run:
    """Make the engine and the batch engine, check the checkpoints (before any output is
    written), fix the run identity, keep what a resumed output holds, open the writer (CSV in
    ``columns`` when given) and write the first sidecar. Whatever fails closes what was opened."""
    core = Engine(settings)
    eng = make_batch_engine(engine, core, engine_options)
    try:
        checkpoints = list(dict.fromkeys(registry.get_aspect(task, a).checkpoint for a in names))
        loads_before = core.model_loads
        eng.check(checkpoints)  # fail early on a missing or unloadable checkpoint
        signature = core.signature(task, names[0]).model_copy(update={"aspect": "+".join(names)})
        # fact/claims' settings enter the identity only of runs that have it, so that runs made
        # before those settings existed still resume
        claims = any(registry.get_aspect(task, a).decompose for a in names)
        unused = set() if claims else {"claim_checker", "generator"}
        run_id = {"signature": signature.model_dump(exclude=unused),
                  "config": {k: v for k, v in core.config.as_dict().items() if k not in unused},
                  "checkpoint_fingerprints": {name: core.fingerprint(name) for name in checkpoints},
                  "aspect_hashes": {a: h for a in names if (h := core.aspect_hash(task, a))},
                  "evidence": evidence}
        input_fp = input_fingerprint(input_path)  # None for stdin
        out_path = Path(output) if output is not None else None
        # a device or pipe (-o /dev/null, a FIFO, /dev/stdout even when it is redirected to a
        # file) is written like stdout: no sidecar beside it, no resume
        special = out_path is not None and is_stream_path(out_path)
        if special and resume:
            raise ResumeError(f"{output} is not a regular file (a device or pipe); --resume needs a file")
        sidecar = out_path is not None and not hosted and not special  # a hosted output is not resumable
        run = _Run(core, eng, registry, task, names, evidence, checkpoints, signature, out_path, sidecar, hosted,
                   shard, columns, stats=RunStats(model_loads=core.model_loads - loads_before))  # local: loaded by check
        kept: list[dict] = []
        if sidecar and columns is None:  # a CSV output never resumes (refused before)
            kept, run.done = resumable(out_path, resume, run_id, input_fp, shard)
        run.written = list(kept)
        run.writer = OutputWriter(out_path, stream, resumable=not hosted and columns is None, csv_columns=columns,
                                  no_resume=CSV_NO_RESUME if columns is not None else HOSTED_NO_RESUME)
        run.meta = {"run": run_id, "input": input_fp, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
                    "progress": {"records_seen": 0, "records_in_shard": 0, "written": len(kept), "complete": False},
                    **({"aspect_mean_of": list(names)} if len(names) > 1 else {})}  # what aspect_mean averages
        if sidecar:
            write_sidecar(out_path, run.meta)
    except BaseException:
        if "run" in locals() and run.writer is not None:
            run.writer.close()
        eng.close()
        raise
    return run


def _requests(run: _Run, first: Record, records: Iterator[Record]) -> Iterator[list[Record]]:
    """The records to score, in requests of at most 250 (shard, resume and duplicate ids applied;
    the sidecar's progress counted)."""
    chunk: list[Record] = []
    first_index: dict[str, int] = {}
    progress = run.meta["progress"]
    for rec in _chain_first(first, records):
        progress["records_seen"] += 1
        key = json.dumps(rec.key)
        if key in first_index and rec.error is None:
            rec = Record(rec.index, rec.data, f"duplicate id {rec.key!r} (first at record "
                         f"{first_index[key]}); ids must be unique")
        first_index.setdefault(key, rec.index)
        if run.shard is not None and shard_of(rec.key, run.shard[1]) != run.shard[0]:
            continue
        progress["records_in_shard"] += 1
        if rec.index in run.done:
            run.n_skipped += 1
            continue
        chunk.append(rec)
        if len(chunk) == MAX_EXAMPLES_PER_REQUEST:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _score_requests(run: _Run, requests: Iterator[list[Record]], bar: Progress) -> None:
    """Score the records, write each line (or each request's hosted line) as soon as it is
    scored, fsync, update the sidecar after each request's worth of records."""
    def on_batch(done: int, total: int) -> None:  # after each micro-batch: stop promptly when asked
        _check_stop()
        bar.set(len(run.written) + run.batch_engine.partial())

    since = 0
    for res in run.batch_engine.map(requests, run.task, run.names, run.evidence, on_batch,
                                    per_record=not run.hosted, skip_missing=run.skip_missing):
        _check_stop()
        _write(run, res)
        bar.set(len(run.written))
        since += len(res.lines)
        if run.sidecar and since >= MAX_EXAMPLES_PER_REQUEST:
            since = 0
            _sync(run)
            write_sidecar(run.out_path, run.meta)
    run.meta["progress"]["complete"] = True
    run.meta["stats"] = _run_stats(run).to_dict()
    _finish_meta(run)
    if run.sidecar:
        _sync(run)
        if run.csv_columns is None:
            sort_by_index(run.out_path)  # a resumed run's records after a gap go back in input order
        write_sidecar(run.out_path, run.meta)


def _final_signatures(run: _Run) -> dict[str, str]:
    """The run's signatures as printed, in the sidecar's ``signatures`` and the HTML report: one
    line per evaluator (checkpoint) over the aspects it scored, each with its own settings
    (:func:`~unieval_local.schema.evaluator_signatures`), with the languages the records were read
    in (the run identity, fixed before scoring for ``--resume`` to compare, keeps the run's
    language setting)."""
    languages = [line.get("language") for line in run.written if isinstance(line, dict)]
    per_aspect = {a: run.core.signature(run.task, a, languages) for a in run.names}
    return {name: str(sig) for name, sig in evaluator_signatures(per_aspect).items()}


def _final_signature(signatures: Mapping[str, str]) -> str | None:
    """The sidecar's and the summary's ``signature``: the one line of a run of one evaluator;
    None for a run of several (no one line is true of all: ``signatures`` has each)."""
    return next(iter(signatures.values())) if len(signatures) == 1 else None


def _finish_meta(run: _Run) -> None:
    """The sidecar's final ``signatures`` and ``signature`` (:func:`_final_signatures`) and
    ``run_info``: forward passes (micro-batches; None with Ray), distinct queries scored, wall
    seconds (``time.perf_counter``) and CPU seconds of this process (``time.process_time``: user +
    system, all threads) since the run started (a resumed run: its own)."""
    signatures = _final_signatures(run)
    run.meta["signature"] = _final_signature(signatures)
    run.meta["signatures"] = signatures
    run.meta["run_info"] = {"forward_passes": run.batch_engine.forward_passes(),
                            "distinct_queries": _run_stats(run).n_queries,
                            "wall_s": round(time.perf_counter() - run.t0, 3),
                            "cpu_s": round(time.process_time() - run.c0, 3)}


def _sync(run: _Run) -> None:
    """fsync the output before its sidecar says how much it holds."""
    try:
        run.writer.sync()
    except OSError as exc:
        raise write_failed(run.out_path, exc, True) from exc


def _run_stats(run: _Run) -> RunStats:
    """The run's counters: the records' (input hints, fit shortenings) with, where the batch
    engine knows them, what the model did (distinct queries scored and truncated: a query several
    records share counts once; cache hits and misses; model loads)."""
    model_stats = getattr(run.batch_engine, "model_stats", None)
    if model_stats is None:
        return run.stats
    done = model_stats()
    return dataclasses.replace(run.stats, n_queries=done.n_queries, n_truncated=done.n_truncated,
                               truncated_by=dict(done.truncated_by), truncated_fields=dict(done.truncated_fields),
                               cache_hits=done.cache_hits, cache_misses=done.cache_misses,
                               model_loads=run.stats.model_loads + done.model_loads)


def _write(run: _Run, res: ChunkResult) -> None:
    """Write one result (a record's line, or a request's hosted line) and count it."""
    if run.hosted:
        line = hosted_line(res, run.names[0])
        (_hosted_errors(run) if "error" in line else run.writer).write([line])
        run.refused[0 if "error" in line else 1].append(len(res.lines))
        if "error" not in line:
            run.answered.extend(res.lines)
    else:
        run.writer.write(res.lines)
    run.written.extend(res.lines)
    run.stats += res.stats
    run.meta["stats"] = run.stats.to_dict()  # this run's counters (a resumed run: its own only)
    run.meta["progress"]["written"] = len(run.written)


def _hosted_errors(run: _Run) -> OutputWriter:
    """The writer of the refused requests' error lines, opened at the first (no empty file): the
    output's errors file (:func:`~unieval_local.batch.output.errors_path`), or stderr when the
    output is stdout, a device or a pipe; so every line of the output is a hosted result."""
    if run.errors is None:
        regular = run.out_path is not None and not is_stream_path(run.out_path)
        run.errors = OutputWriter(errors_path(run.out_path) if regular else None, sys.stderr, resumable=False)
    return run.errors


def _interrupted(run: _Run, exc: BaseException) -> RunInterrupted:
    """The :class:`~unieval_local.errors.RunInterrupted` of a stopped run, once the records that
    were complete are written (:meth:`BatchEngine.completed`), counting what the output holds
    (the signal may have come between a write and its bookkeeping)."""
    for res in (run.batch_engine.completed() if not run.hosted else ()):  # a hosted line is a whole request
        try:
            _write(run, res)
        except (KeyboardInterrupt, RunInterrupted):  # a second Ctrl-C: stop writing, what is written stays
            break
    n_done = len(run.written)
    csv_out = run.csv_columns is not None  # a CSV output: its rows are counted (not read as JSON)
    if run.out_path is not None:
        run.writer.close()
        try:
            in_file = [] if csv_out else read_output(run.out_path)[0] + (
                read_output(errors_path(run.out_path))[0] if run.hosted else [])
            n_done = (sum(len(x["examples"]) if "examples" in x else x["error"]["n_examples"]
                          for x in in_file) if run.hosted else count_csv_rows(run.out_path) if csv_out else len(in_file))
            run.meta["progress"]["written"] = n_done
            _finish_meta(run)
            if run.sidecar:
                write_sidecar(run.out_path, run.meta)
        except (OSError, ResumeError, KeyError, TypeError):
            pass
    total = run.survey.n_in_shard if run.survey is not None else None
    return RunInterrupted(exc, n_done, total, run.out_path, resumable=not (run.hosted or csv_out),
                          no_resume=CSV_NO_RESUME if csv_out else None)


def _summary(run: _Run) -> BatchSummary:
    """The :class:`~unieval_local.batch.summary.BatchSummary` over every record in the output."""
    summary = summarize(run.written, run.names)
    if run.hosted:  # the means are over the records of answered requests: the others have no value in the output
        answered = summarize(run.answered, run.names)
        summary.means, summary.counts, summary.per_system = answered.means, answered.counts, answered.per_system
        summary.hosted = (len(run.refused[0]) + len(run.refused[1]), len(run.refused[0]), sum(run.refused[0]))
        summary.hosted_errors = None if run.errors is None else str(run.errors.path or "stderr")
    core = run.core
    summary.n_skipped = run.n_skipped
    summary.stats = _run_stats(run)
    summary.max_lengths = {name: core.max_length(name) for name in run.checkpoints}
    summary.cached = core.cache is not None and core.config.dtype != "bfloat16"
    if core.cache is not None and core.cache.disabled is not None:
        summary.cache_disabled = f"{core.cache.path}: {core.cache.disabled}"
    summary.signatures = run.meta.get("signatures") or _final_signatures(run)  # the sidecar's
    summary.signature = _final_signature(summary.signatures)
    summary.run_info = run.meta.get("run_info")
    summary.seconds = time.perf_counter() - run.t0
    summary.skipped_aspects = run.skipped_aspects
    if run.stats.hints:
        summary.hint_message = input_hint_message([run.registry.get_aspect(run.task, a) for a in run.names],
                                                  run.stats.hints)
    return summary


def _check_hosted_options(*, resume: bool, shard: tuple[int, int] | None, engine: str, evidence: bool) -> None:
    """Refuse the batch options ``--output-format hosted`` does not take (one line per request:
    nothing to resume, shard or merge, and no place for evidence).

    Raises:
        ValueError: one of them is set; the message names each and points to ``records``.
    """
    given = [flag for flag, on in (("--resume", resume), ("--shard", shard is not None),
                                   (f"--engine {engine}", engine != "local"), ("--evidence", evidence)) if on]
    if given:
        raise ValueError(f"--output-format hosted writes one line per request (at most "
                         f"{MAX_EXAMPLES_PER_REQUEST} records) and does not take {' or '.join(given)}; use "
                         "--output-format records for batch runs (resume, shards, Ray, evidence)")


def _check_hosted_aspects(aspects: Sequence[str] | str | None, names: Sequence[str]) -> None:
    """``--output-format hosted`` answers for one aspect, named (the hosted metric's ``evaluation_aspect``).

    Raises:
        ValueError: no aspect named, or several (given, or ``all`` / an aspects config resolving to several).
    """
    why = None
    if aspects is None:
        why = "no --aspect was given"
    elif len(names) != 1:
        asked = [aspects] if isinstance(aspects, str) else list(aspects)
        group = next((g for g in asked if g in GROUP_NAMES), None)
        why = (f"--aspect {group} resolves to {len(names)} aspects ({', '.join(names)})" if group
               else f"{len(names)} aspects were given ({', '.join(names)})")
    if why:
        raise ValueError(f"--output-format hosted scores exactly one aspect per run (the hosted metric's "
                         f"evaluation_aspect), but {why}; give one --aspect, or use --output-format records "
                         "for several")


def _chain_first(first: Record, rest: Iterator[Record]) -> Iterator[Record]:
    yield first
    yield from rest


