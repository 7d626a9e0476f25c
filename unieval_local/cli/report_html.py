"""``unieval-local report-html``: a self-contained HTML report of a score output."""

from __future__ import annotations

import argparse
import sys

from ..settings import number_type
from .common import EXIT_OK, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``report-html`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "report-html",
        help="a self-contained HTML report of a score output",
        description="Score distributions, per-system means with intervals, lowest-scoring examples with "
        "sentences coloured by score and source windows, truncation counts and the run signature, in one "
        "HTML file that needs no network.",
    )
    p.add_argument("output_jsonl", metavar="OUT.jsonl")
    p.add_argument("--output", "-o", required=True, help="the HTML file to write")
    p.add_argument("--input", default=None, help="the scored input, for target text and source windows")
    p.add_argument("--title", default=None)
    p.add_argument("--lowest", type=number_type(int, 0), default=5, help="lowest-scoring examples per aspect (default 5)")
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
