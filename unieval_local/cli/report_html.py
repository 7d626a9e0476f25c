"""``unieval-local report-html``: a self-contained HTML report of a score output."""

from __future__ import annotations

import argparse
import sys

from ..settings import number_type
from .common import EXIT_OK, HelpFormatter, examples, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``report-html`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "report-html",
        help="a self-contained HTML report of a score output",
        description="Score distributions, per-system means with intervals, lowest-scoring examples with "
        "sentences coloured by score and source windows, truncation counts and the run signature, in one "
        "HTML file that needs no network.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local report-html scores.jsonl -o report.html",
                        "unieval-local report-html scores.jsonl --input data.jsonl --title SummEval --lowest 10 "
                        "-o report.html",
                        docs="docs/meta-evaluation.md (the HTML report)"),
    )
    inputs = p.add_argument_group("input")
    inputs.add_argument("output_jsonl", metavar="OUT.jsonl",
                        help="a score output (score -o; with --evidence for per-sentence colours and windows)")
    inputs.add_argument("--input", default=None, metavar="INPUT",
                        help="the scored input, for the target texts and source windows (default: scores only)")
    output = p.add_argument_group("output")
    output.add_argument("--output", "-o", required=True, help="the HTML file to write")
    output.add_argument("--title", default=None, help="the report's title (default: the score output's file name)")
    output.add_argument("--lowest", type=number_type(int, 0), default=5, help="lowest-scoring examples per aspect (default 5)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local report-html``: write the HTML report; exit 0, or 2 on unusable input."""
    from ..analysis.html_report import render_html

    try:
        path = render_html(args.output_jsonl, args.output, input=args.input, title=args.title, n_lowest=args.lowest)
    except (ValueError, OSError, KeyError) as exc:
        return usage_error(exc)
    print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK
