"""``unieval-local score``: the batch pipeline (records or line-aligned files in, one JSON line
per record or per request out; resume, shards, Ray). Exit statuses: :mod:`unieval_local.cli`."""

from __future__ import annotations

import argparse
import sys

from ..settings import number_type
from .common import (
    EXIT_OK,
    EXIT_ROWS_FAILED,
    EXIT_USAGE,
    HelpFormatter,
    add_engine_flags,
    add_short_help,
    engine_settings,
    examples,
    given_settings,
    run_failure_status,
    stop_on_signals,
    task_name,
    usage_error,
)

__all__ = ["SHORT_DESCRIPTION", "SHORT_HELP", "add_parser", "run"]

#: ``score --help``: what it says instead of the whole description (``--help-all`` gives that).
SHORT_DESCRIPTION = (
    "Score every record of INPUT (.jsonl, '-' for stdin, a .json list, .csv/.tsv), or of line-aligned "
    "text files (--targets ...), and write one JSON line per record, in input order; the mean per aspect "
    "goes to stderr. Exit status: 0 all scored, 1 some records failed, 2 usage or input error, 3 checkpoint, "
    "4 writing failed, 5 the model failed, 130/143 interrupted: docs/exit-status.md."
)
#: The flags ``score --help`` shows (the others: ``--help-all``), each with a shorter help or None.
SHORT_HELP: dict[str, str | None] = {
    "--help": None, "--help-all": None,
    "input": "records: .jsonl ('-' for stdin), .json or .csv/.tsv; or leave it out and give --targets",
    "--targets": "instead of INPUT: one target per line (--sources ... in --help-all)",
    "--task": None,
    "--aspect": "aspect to score, repeatable, or a set such as 'all' (--help-all says which; "
                "unieval-local tasks lists each task's aspects)",
    "--model": "checkpoint folder or hub id, or NAME=DIR per evaluator (repeatable; default: "
               "$UNIEVAL_LOCAL_HOME, the HF cache, the hub)",
    "--device": None, "--long-input": "prompts over --max-length: truncate, fit or chunk",
    "--output": "output .jsonl (default: stdout) or .csv", "--resume": "continue OUTPUT: skip the records already in it (a requeued job)",
    "--shard": None,
}


def add_parser(sub) -> None:
    """Add the ``score`` command to ``sub`` (argparse subparsers); its engine flags come from
    the settings declaration (:func:`~unieval_local.cli.common.add_engine_flags`)."""
    from ..batch import BATCH_ENGINES, OUTPUT_FORMATS
    from ..config import MAX_EXAMPLES_PER_REQUEST
    from ..registry.tasks import TASKS

    aspects_help = "; ".join(f"{t}: {', '.join(task.aspects)}" for t, task in TASKS.items())
    p = sub.add_parser(
        "score",
        help="score a .jsonl/.json/.csv/.tsv file of records, or line-aligned text files",
        description=(
            "Score every record of INPUT (.jsonl, '-' for JSONL on stdin, a .json list, or .csv/.tsv "
            "with a header row of field names), or of line-aligned text files (--targets T.txt "
            "[--sources S.txt] [--references R.txt ...] [--contexts C.txt] instead of INPUT: line i of "
            "each file is example i), for one or more aspects, and write one JSON line per "
            "record, in input order: {index, key, [doc_id, system_id], scores: {aspect: value}} "
            "or {index, key, error: {type, message}}. Text is UTF-8 (a BOM is accepted); only \\n ends "
            "a line. A record that cannot be read (invalid JSON or CSV; text holding a lone UTF-16 "
            "surrogate such as \\ud83d, type InvalidText, its key written with the 6-character escape) "
            "is an error record and the others are scored. Records are sent in requests of at most "
            "250. The mean per aspect (and per system_id) is printed on stderr. Exit status: "
            "0 all scored, 1 some records failed (the rest are scored), 2 usage, input, output, "
            "device or resume error, no record scorable for the aspects, or another process is writing OUTPUT "
            "(one writer per output: the run holds OUTPUT.lock, and the message names the holder's pid, host "
            "and start time), 3 checkpoint not found "
            "or not loadable, 4 writing the output or its sidecar failed (disk full, file-size limit), 5 the "
            "model failed while scoring (out of memory, CUDA "
            "error), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM, also while the model loads); after 4, "
            "5, 130 and 143 the records "
            "written are intact: rerun with --resume (which also repairs a torn last line and drops duplicate "
            "lines of a record, keeping the first). A failing --cache-dir is skipped with one warning. --output-format hosted writes instead one line per "
            "request, {overall: {value}, examples: [{value}]}, or {error: {type, message, n_examples, examples: "
            "[{index, record, key, field, message}]}} for a request holding a record that cannot be scored, as the hosted UniEval "
            "metric answers it, written to OUT.errors.jsonl (stderr when OUT is stdout) so that OUT holds results "
            "only (one aspect; no --resume, --shard, --engine ray or --evidence)."
        ),
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local score data.jsonl --task summarization -o scores.jsonl",
                        "unieval-local score --targets hyp.txt --sources src.txt --aspect consistency "
                        "--model ckpt/unieval-sum -o scores.jsonl",
                        docs="docs/scoring.md, docs/batch.md (--resume, --shard, Ray), docs/exit-status.md"),
        add_help=False,
    )
    add_short_help(p, SHORT_DESCRIPTION, SHORT_HELP)
    inputs = p.add_argument_group("input", "a records file, or line-aligned text files")
    inputs.add_argument("input", nargs="?", default=None,
                    help="records: .jsonl (streamed; '-' for stdin), a .json list, or .csv/.tsv (header row = "
                    "field names; an empty cell is a missing field; references: one text or a JSON list "
                    '["a", "b"]); leave it out with --targets')
    inputs.add_argument("--targets", default=None, metavar="T.txt",
                    help="instead of INPUT: the texts under evaluation, one per line (a line's text as it is; a "
                    "blank line is an empty target, an error record)")
    inputs.add_argument("--sources", default=None, metavar="S.txt",
                    help="with --targets: the source of each target, one per line")
    inputs.add_argument("--references", action="append", default=None, metavar="R.txt",
                    help="with --targets: one reference per line; repeat it for several references per example")
    inputs.add_argument("--contexts", default=None, metavar="C.txt",
                    help="with --targets: the context of each target, one per line. Every file must have the "
                    "same number of lines (else exit 2); --resume checks every file")
    scoring = p.add_argument_group("scoring")
    scoring.add_argument("--task", default="summarization", type=task_name, metavar="{" + ",".join(TASKS) + "}",
                    help="task (default summarization)")
    scoring.add_argument("--aspect", action="append", dest="aspects", metavar="ASPECT",
                    help=f"aspect to score, repeatable; 'all' (the default): the task's own set, the aspects of its "
                    f"own evaluator (UniEval's), the same on every machine (as UniEval's evaluate: those the records "
                    f"have the fields for; a record lacking one's fields gets the others and a note, e.g. "
                    f"'relevance skipped: no references', where an aspect named makes it an error line); 'all+': every aspect of the task whose evaluator is here; 'geval', "
                    f"'seahorse': that family's aspects, as if named. {aspects_help}")
    scoring.add_argument("--evidence", action="store_true",
                    help="add per-sentence scores, windows and truncation flags to each output line")
    add_engine_flags(p.add_argument_group("model and engine", "speed and precision: docs/speed.md"))
    output = p.add_argument_group("output")
    output.add_argument("--output", "-o", default=None,
                    help="output .jsonl (default, or '-': stdout); a name ending in .csv writes CSV: a header row, "
                    "one row per record (index, key, one score column per aspect, aspect_mean, language, error; "
                    "--evidence as JSON in one column), no --resume or --shard (docs/scoring.md)")
    output.add_argument("--output-format", default="records", choices=list(OUTPUT_FORMATS),
                    help="records (default): one line per record; hosted: one line per request of at most "
                    f"{MAX_EXAMPLES_PER_REQUEST} records in the hosted UniEval metric's schema, "
                    '{"overall": {"value": mean}, "examples": [{"value": v}, ...]}; a request holding a record '
                    'that cannot be scored is one line {"error": {"type", "message", "n_examples", "examples": '
                    '[{"index", "record", "key", "field", "message"}]}} written to OUT.errors.jsonl (stderr when OUT '
                    "is stdout; the hosted metric answers a request whole or not at all); exactly one --aspect, and no --resume, "
                    "--shard, --engine ray or --evidence (use records for batch runs)")
    batch = p.add_argument_group("batch runs and clusters", "resume, shards, SLURM, Ray: docs/batch.md")
    batch.add_argument("--resume", action="store_true",
                    help="continue OUTPUT: skip records already in it (refused if the run or input differ); a torn "
                    "last line is repaired, and duplicate lines of a record (two runs at once) are dropped, "
                    "keeping the first")
    batch.add_argument("--shard", default=None, metavar="K/N",
                    help="score only the records whose key hashes to K modulo N (for job arrays; join with merge)")
    batch.add_argument("--engine", default="local", choices=list(BATCH_ENGINES),
                    help="local (default) or ray: requests go to a Ray Data pool of scorer actors")
    batch.add_argument("--ray-actors", type=number_type(int, 1), default=1, help="scorer actors (one model each) with --engine ray")
    batch.add_argument("--gpus-per-actor", type=number_type(float, 0), default=0.0, help="GPUs per Ray actor (default 0)")
    batch.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local Ray instance)")
    p.set_defaults(run=run)


def _source(args: argparse.Namespace):
    """INPUT, or the line-aligned files; None after printing a usage error."""
    from ..records import AlignedInput

    extra = [flag for flag, v in (("--sources", args.sources), ("--references", args.references),
                                  ("--contexts", args.contexts)) if v]
    if args.input is not None and args.targets is not None:
        usage_error(f"give INPUT ({args.input}) or --targets, not both")
        return None
    if args.input is None and args.targets is None:
        usage_error("give INPUT (.jsonl, .json, .csv, .tsv, or - for stdin) or --targets T.txt "
                    "[--sources S.txt] [--references R.txt] [--contexts C.txt]")
        return None
    if args.input is not None and extra:
        usage_error(f"{' and '.join(extra)} go with --targets (line-aligned text files), not with INPUT "
                    f"{args.input}: put those fields in the records")
        return None
    return (args.input if args.input is not None else
            AlignedInput(args.targets, args.sources, tuple(args.references or ()), args.contexts))


def _warn_about_flags(args: argparse.Namespace, settings: dict) -> None:
    """Flags given where they do nothing: --ray-* without --engine ray, --window-overlap without chunk."""
    ray_flags = [f for f, v, default in (("--ray-actors", args.ray_actors, 1),
                                         ("--gpus-per-actor", args.gpus_per_actor, 0.0),
                                         ("--ray-address", args.ray_address, None)) if v != default]
    if ray_flags and args.engine != "ray":
        print(f"unieval-local: warning: {', '.join(ray_flags)} apply to --engine ray (ignored with --engine "
              f"{args.engine})", file=sys.stderr)
    if "window_overlap" in given_settings(args) and settings["long_input"] != "chunk":
        print(f"unieval-local: warning: --window-overlap only applies to --long-input chunk "
              f"(ignored with {settings['long_input']})", file=sys.stderr)


def _print_summary(summary, args: argparse.Namespace, long_input: str) -> None:
    """The run's summary, skipped aspects and warnings, on stderr."""
    from ..batch import format_summary

    print(format_summary(summary), file=sys.stderr)
    for aspect, why in summary.skipped_aspects.items():
        print(f"skipped aspect {aspect} ({'--aspect all' if args.aspects else 'no --aspect: every aspect that can run'}"
              f"): {why}", file=sys.stderr)
    if summary.hint_message:
        print(f"warning: {summary.hint_message}", file=sys.stderr)
    stats = summary.stats
    if stats.n_truncated:
        from ..engine import truncation_message

        print(f"warning: {truncation_message(stats, summary.max_lengths, long_input, cli=True)}",
              file=sys.stderr)
    if stats.n_shortened:
        print(f"warning: {stats.n_shortened} of {stats.n_queries} distinct queries had a long field "
              "shortened to fit (--long-input fit reads only its beginning; chunk reads all of it); "
              "--evidence shows the windows", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """``unieval-local score``: see :mod:`unieval_local.cli` for output and exit status.

    ``--output-format records`` (default) writes one line per record; ``hosted`` one line per
    request in the hosted metric's schema (:func:`unieval_local.wire.hosted.hosted_line`), with the
    same exit statuses (1 when some records failed; 2 for a hosted run with zero or several
    aspects, ``--resume``, ``--shard``, ``--engine ray`` or ``--evidence``). The summary goes to
    stderr in both formats.

    The input is INPUT or line-aligned files (``--targets`` [``--sources``, ``--references`` ...,
    ``--contexts``]: a :class:`~unieval_local.records.AlignedInput`); exit 2 when both or
    neither are given, when ``--sources`` / ``--references`` / ``--contexts`` come without
    ``--targets``, or when the aligned files differ in line count (each named with its count)."""
    from ..batch import parse_shard, run_batch

    source = _source(args)
    if source is None:
        return EXIT_USAGE
    settings = engine_settings(args)
    engine_options = ({"actors": args.ray_actors, "gpus_per_actor": args.gpus_per_actor, "address": args.ray_address}
                      if args.engine == "ray" else {})
    _warn_about_flags(args, settings)
    aspects = None if not args.aspects else list(dict.fromkeys(args.aspects))
    try:
        with stop_on_signals():
            summary = run_batch(
                source, args.output, task=args.task, aspects=aspects, settings=settings,
                resume=args.resume, shard=parse_shard(args.shard), engine=args.engine,
                engine_options=engine_options, evidence=args.evidence,
                progress=settings["progress"], output_format=args.output_format,
            )
    except Exception as exc:  # noqa: BLE001  the run's failures, each with its exit status
        status = run_failure_status(exc)
        if status is None:
            raise
        return status
    _print_summary(summary, args, settings["long_input"])
    return EXIT_ROWS_FAILED if summary.n_failed else EXIT_OK
