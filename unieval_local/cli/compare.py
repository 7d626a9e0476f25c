"""``unieval-local compare``: the paired bootstrap test of systems against a baseline (Koehn 2004)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, HelpFormatter, examples, non_negative, read_outputs, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``compare`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "compare",
        help="paired bootstrap test: are systems better than a baseline?",
        description="Paired bootstrap test (Koehn 2004), per aspect, of whether each system's mean score is "
        "above the baseline's: one row per (system, aspect) with both means, the delta, its 95% interval and "
        "the one-sided p-value (not corrected for multiple comparisons). Two forms: "
        "'compare BASE.jsonl B.jsonl [C.jsonl ...]' compares each output with the first, joined by key; "
        "'compare OUT.jsonl --baseline SYSTEM' compares every other system_id of one output with SYSTEM, "
        "paired on doc_id (--baseline is required there: a file's system order is arbitrary).",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local compare baseline.jsonl system_b.jsonl system_c.jsonl",
                        "unieval-local compare scores.jsonl --baseline M0 --bootstrap 2000 --seed 1",
                        docs="docs/meta-evaluation.md"),
    )
    inputs = p.add_argument_group("input")
    inputs.add_argument("outputs", nargs="+", metavar="OUT.jsonl",
                    help="score outputs: the baseline then the others, or one output with system_id and doc_id")
    inputs.add_argument("--baseline", default=None, metavar="SYSTEM",
                    help="one-output form: the system_id the others are compared with (required there)")
    stats = p.add_argument_group("bootstrap")
    stats.add_argument("--bootstrap", type=non_negative, default=1000,
                       help="paired bootstrap resamples (default 1000)")
    stats.add_argument("--seed", type=int, default=0,
                       help="seed of the resampling (default 0): the same seed gives the same p-values")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local compare``: print the paired bootstrap table; exit 0, or 2 on unusable input.

    ``compare BASE B [C ...]``: each output against the first, joined by key
    (:func:`unieval_local.analysis.significance.compare_outputs`); ``compare OUT --baseline SYSTEM``: every
    other ``system_id`` of OUT against SYSTEM, paired on ``doc_id``
    (:func:`unieval_local.analysis.significance.compare_systems`). One row per (system, aspect). Exit 2 with
    a one-line error for: a one-output compare without ``--baseline`` or with an unknown one
    (the systems are listed), records without ``system_id`` / ``doc_id`` there, ``--baseline``
    with several outputs, no common keys or doc ids, unreadable files.
    """
    from ..analysis.significance import compare_outputs, compare_systems, format_comparison_set

    try:
        outputs = [read_outputs(path) for path in args.outputs]
        if len(outputs) == 1:
            cs = compare_systems(outputs[0], args.baseline, n_boot=args.bootstrap, seed=args.seed,
                                 source=args.outputs[0])
        elif args.baseline is not None:
            return usage_error(f"--baseline names a system of ONE output; with {len(outputs)} outputs the first "
                                f"({args.outputs[0]}) is the baseline")
        else:
            cs = compare_outputs(outputs[0], list(zip(args.outputs[1:], outputs[1:])), baseline_name=args.outputs[0],
                                 n_boot=args.bootstrap, seed=args.seed)
        print(format_comparison_set(cs))
    except (ValueError, OSError, KeyError) as exc:
        return usage_error(exc)
    return EXIT_OK
