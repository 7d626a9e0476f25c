"""``unieval-local report``: rating / summ / autoeval report documents from UniEval queries (no
LLM). The format flags come from the format registry (:data:`unieval_local.reports.FORMATS`:
each format's :class:`~unieval_local.reports.base.ReportFlag` records), the engine flags from the
settings declaration: a new format or setting needs no edit here."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from .common import (
    EXIT_CHECKPOINT,
    EXIT_OK,
    EXIT_ROWS_FAILED,
    EXIT_WRITE,
    HelpFormatter,
    add_engine_flags,
    check_writable,
    engine_settings,
    examples,
    usage_error,
    write_text,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``report`` command to ``sub`` (argparse subparsers)."""
    from ..reports import FORMATS, report_flags

    p = sub.add_parser(
        "report",
        help="rating / summ / autoeval reports from UniEval queries (no LLM)",
        description="Build one report per record of INPUT (.jsonl or .json; fields of score, also under "
        "the other evaluators' names: input/transcript for source, summary/output for target; plus report "
        "inputs: key_points, n_key_points, max_n_claims, threshold, section_definitions, section_questions, "
        "instructions, categorical, sections; for summ also a hosted custom-run request body "
        "{threshold, model_slug, evaluations: [...]}) and write one JSON document {format, n_records, "
        "n_reported, n_errors, aggregate, n_queries, n_truncated, settings, notes, reports: [{index, id, "
        "report | error, notes}]}. Each report has the documented shape of its format: rating {summary: "
        "{global_explanation, relevancy_rating, score, possible_issues, binary_score, avg_score, <metric>: "
        "{score, explanation, normalized_score}}} (1-3 per metric, normalized = score/3, a good/incomplete/bad "
        "rule engine); summ {score 0-100, passed, threshold, ..., eval_metadata: {missing_details, "
        "misaligned_details, ...}} (claim alignment and key-point coverage); autoeval {accuracy, "
        "accuracy_score, adherence: {rubrics}, adherence_score, completeness: [...], completeness_score}. "
        "Long sources are read in windows (--long-input chunk by default). Exit status: 0 every record "
        "reported, 1 some records have an "
        "error row (the rest are reported), 2 usage, input, option or output error, or another process is "
        "writing OUTPUT (-o holds OUTPUT.lock from before the model loads until it is written), 3 checkpoint "
        "not found or not loadable, 4 writing the output failed. A failing --cache-dir is skipped with one "
        "warning.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local report data.jsonl --format rating -o rating.json",
                        "unieval-local report calls.jsonl --format summ --threshold 70 --n-key-points 5 "
                        "--model ckpt/unieval-sum -o summ.json",
                        docs="docs/reports/index.md, one page per format: docs/reports/rating.md, "
                        "docs/reports/summ.md, docs/reports/autoeval.md; docs/exit-status.md"),
    )
    p.add_argument_group("input").add_argument("input", help="records: .jsonl ('-' for stdin) or a .json list")
    fmt = p.add_argument_group("report format", "each format's options; a flag names the formats that read it")
    fmt.add_argument("--format", required=True, choices=list(FORMATS), dest="report_format",
                     help="the report to build: rating (a 1-3 rating per metric with explanations and a "
                     "good/incomplete/bad verdict), summ (a 0-100 score with a pass/fail against --threshold, "
                     "from claim alignment and key-point coverage) or autoeval (accuracy, adherence to the "
                     "instructions and completeness per section); one page each in docs/reports/")
    output = p.add_argument_group("output")
    output.add_argument("--output", "-o", default=None, help="the JSON document to write (default stdout)")
    fmt.add_argument("--config", default=None, metavar="FILE.yaml",
                    help="the format's options as YAML (rating: see configs/rating.yaml); flags below override it")
    for flag, formats in report_flags().values():
        kwargs = dict(flag.kwargs)
        fmt.add_argument(flag.flag, dest=f"option_{flag.option}", default=None,
                       help=f"{', '.join(formats)}: {flag.help}", **kwargs)
    add_engine_flags(p.add_argument_group("model and engine", "speed and precision: docs/speed.md"),
                     long_input="chunk")  # long sources are read whole, in windows
    p.set_defaults(run=run)


def _report_options(args: argparse.Namespace):
    """The format's options from --config and the flags; ValueError naming the flag or file key."""
    from ..reports import FORMATS, report_flags
    from ..reports.options import load_options

    fmt = args.report_format
    overrides, names = {}, {}
    for flag, formats in report_flags().values():
        value = getattr(args, f"option_{flag.option}")
        names[flag.option] = flag.flag
        if value is None:
            continue
        if fmt not in formats:
            raise ValueError(f"{flag.flag} applies to --format {' or '.join(formats)}, not {fmt}")
        overrides[flag.option] = flag.parse(value) if flag.parse is not None else value
    return load_options(FORMATS[fmt].options, args.config, overrides, names)


def _report_input(path: str, report_format: str):
    """The report's records: JSONL or a JSON list (bad lines become error rows), or, for
    summ, a hosted custom-run request body (a .json object with ``evaluations``) as a mapping."""
    from ..records import InputFileError, iter_records
    from ..reports.base import BadRecord

    if path != "-" and path.endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None  # iter_records says what is wrong
        if isinstance(data, dict) and "evaluations" in data:
            if report_format != "summ":
                raise InputFileError(f"{path} is a custom-run request body ('evaluations'); it is read by "
                                     f"--format summ, not {report_format}")
            return data
        if isinstance(data, dict):
            keys = ", ".join(map(repr, list(data)[:8])) or "none"
            raise InputFileError(
                f"{path} holds one JSON object (keys {keys}), not a list of records"
                + (" nor a custom-run request body: a body needs 'evaluations', a list of {metrics, data}"
                   if report_format == "summ" else "; put the record(s) in a list, or use .jsonl"))
    return [r.data if r.error is None else BadRecord(r.error) for r in iter_records(path)]


def run(args: argparse.Namespace) -> int:
    """``unieval-local report``: build rating/summ/autoeval reports.

    Input: ``args`` of the ``report`` parser. Output: the JSON document on ``-o`` (written
    atomically by :func:`~unieval_local.cli.common.write_text`) or stdout, and a summary on stderr. With ``-o FILE``
    the command holds FILE's lock (:func:`~unieval_local.locks.output_lock`) from before the
    first model load until FILE is written.

    Returns:
        0, 1 (some error rows), 2 (usage, input, option or output error, or another process
        holds the output's lock), 3 (checkpoint) or 4 (writing the output failed). A failing
        score cache only warns.
    """
    import contextlib

    with contextlib.ExitStack() as held:
        return _report(args, held)


def _report(args: argparse.Namespace, held) -> int:
    """The body of :func:`run`; the output lock enters ``held`` (a ``contextlib.ExitStack``
    closed by the caller once the output is written)."""
    from ..engine import Engine
    from ..errors import CheckpointError, CheckpointNotFoundError, InputFileError
    from ..locks import OutputLockedError, output_lock
    from ..reports import make_report

    try:
        options = _report_options(args)
        settings = engine_settings(args)
        records = _report_input(args.input, args.report_format)  # input and output checked before the engine
        if not records:
            raise InputFileError(f"{args.input} holds no records")
        if args.output:  # fail before scoring when the output cannot be written, or has another writer
            check_writable(args.output)
            held.enter_context(output_lock(args.output))
        engine = Engine(**settings)
        with warnings.catch_warnings():  # an unchecked checkpoint is one of the report's notes, printed below
            warnings.filterwarnings("ignore", message="checkpoint folder .* unchecked")
            result = make_report(records, args.report_format, engine=engine, options=options, warn=False)
    except (CheckpointNotFoundError, CheckpointError) as exc:
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except (InputFileError, ValueError, OSError, OutputLockedError) as exc:
        return usage_error(exc)
    text = json.dumps(_dumped(result), indent=2, ensure_ascii=False, allow_nan=False)
    if args.output:
        try:
            write_text(args.output, text + "\n")
        except OSError as exc:
            print(f"unieval-local: error: writing {args.output} failed: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE
    else:
        print(text)
    _print_summary(args, result, engine, settings["long_input"], _file_names(records, args.report_format))
    return EXIT_ROWS_FAILED if result.n_errors else EXIT_OK


def _dumped(result) -> dict:
    """The report file as JSON; a rating report's ``summary`` rounded as the compat layer and the
    HTTP service round it (``avg_score`` and each ``normalized_score`` to 2 decimals:
    :func:`~unieval_local.wire.rating_evaluator.evaluator_result`), its ``details`` at full precision."""
    from ..wire.rating_evaluator import METRICS, evaluator_result

    out = result.model_dump(mode="json")
    if out.get("format") == "rating":
        for row in out.get("reports", []):
            if isinstance(row.get("report"), dict) and "summary" in row["report"]:
                row["report"]["summary"] = evaluator_result(row["report"]["summary"], METRICS)["summary"]
    return out


def _file_names(records, report_format: str) -> dict[str, str]:
    """Our fields (``source``, ``target``) as the input file names them, where all its records
    agree (:func:`~unieval_local.fields.record_names`: ``input`` for a file of ``{"input", "output"}``
    rows); a custom-run body's rows are the hosted summ metric's ``input`` and ``output``."""
    from ..fields import FIELDS, HOSTED_SUMM_NAMES, record_names

    if isinstance(records, dict):
        return dict(HOSTED_SUMM_NAMES)
    used: dict[str, set[str]] = {f: set() for f in FIELDS}
    for rec in records:
        if isinstance(rec, dict):
            names = record_names(rec, report_format)
            for f in FIELDS:
                used[f].add(names.get(f, f))
    return {f: next(iter(n)) for f, n in used.items() if len(n) == 1 and n != {f}}


def _counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 error``, ``2 errors``, ``1 distinct query``, ``0 distinct queries``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _print_summary(args: argparse.Namespace, result, engine, long_input: str,
                   field_names: dict[str, str] | None = None) -> None:
    """The report's counts, cache use, notes, per-record errors and truncation, on stderr
    (fields in the input file's names: ``field_names``, :func:`_file_names`)."""
    agg = ", ".join("{} {}".format(k, "N/A" if v is None else v if isinstance(v, int) else f"{v:.4f}")
                    for k, v in result.aggregate.items())
    print(f"{args.report_format}: {result.n_reported} of {_counted(result.n_records, 'record')} reported, "
          f"{_counted(result.n_errors, 'error')}; {_counted(result.n_queries, 'distinct query', 'distinct queries')}"
          + (f"; {agg}" if agg else ""), file=sys.stderr)
    if args.cache_dir:
        hits, misses = engine.cache_counts()
        broken = engine.cache.disabled if engine.cache is not None else None
        print(f"score cache: {hits} queries reused, {misses} scored"
              + (f"; disabled ({engine.cache.path}: {broken}): scored without it" if broken else ""),
              file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    for row in result.reports:
        where = f"  record {row.index}{f' ({row.id})' if row.id is not None else ''}"
        if row.error is not None:
            print(f"{where}: {row.error.field}: {row.error.message}", file=sys.stderr)
        for note in row.notes:
            print(f"{where}: note: {note}", file=sys.stderr)
    if result.n_truncated:
        from ..engine import RunStats, truncation_message

        limits = {n: c.max_length for n, c in result.settings.checkpoints.items() if c.max_length}
        stats = RunStats(n_queries=result.n_queries, n_truncated=result.n_truncated,
                         truncated_fields=result.truncated_fields, truncated_by=result.truncated_by)
        # no --evidence here (score has it): the advice names only what report offers
        said = truncation_message(stats, limits, long_input, cli=True, evidence=False, field_names=field_names)
        print(f"warning: {said}", file=sys.stderr)
