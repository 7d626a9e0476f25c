"""``unieval-local calibration``: the calibration card of the rating report's built-in cut points."""

from __future__ import annotations

import argparse
import json

from .common import EXIT_OK, HelpFormatter, examples

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``calibration`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "calibration",
        help="print the calibration card of the rating report's built-in cut points",
        description="Print the card of the built-in rating cut points: fitted on the official unieval-sum's "
        "SummEval scores against the expert ratings (binned < 2.5 -> 1, < 4 -> 2, else 3), with the "
        "cross-validated accuracy and quadratic kappa (95% intervals over documents) of the fitted cut points "
        "and of the thirds, what the card holds for, and the command that refits it "
        "(scripts/fit_calibration.py). Exit 0.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local calibration", "unieval-local calibration --json",
                        docs="docs/calibration.md"),
    )
    p.add_argument_group("output", "the card is printed on stdout").add_argument("--json", action="store_true", dest="card_json", help="print the card as JSON instead")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local calibration``: print the calibration card (a table, or ``--json``); exit 0."""
    from ..analysis.cutpoints import format_card
    from ..reports.rating import calibration_card

    card = calibration_card()
    print(json.dumps(card, indent=2) if args.card_json else format_card(card))
    return EXIT_OK
