"""``unieval-local meta``: correlations of predicted with human scores (sample, summary, system level)."""

from __future__ import annotations

import argparse
import json

from .common import EXIT_OK, HelpFormatter, check_writable, examples, non_negative, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``meta`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "meta",
        help="correlation of scores with human judgements",
        description="Pearson, Spearman and Kendall correlations between predicted and human scores at sample, "
        "summary (per document, averaged; documents with constant scores skipped, as UniEval does) and system "
        "level, per aspect, with seeded bootstrap 95% intervals (documents resampled when doc ids exist). "
        "PREDICTIONS is a UniEval reproduce file (its records hold predict_scores and the human scores in "
        "scores) or a score output joined by key to --human FILE (the scored input; human scores in the "
        "field 'human', as scripts/convert_summeval.py writes them).",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local meta scores.jsonl --human summeval.jsonl",
                        "unieval-local meta scores.jsonl --human qags.jsonl --human-aspect support=consistency "
                        "--bootstrap 2000 --seed 1 --json meta.json",
                        docs="docs/meta-evaluation.md"),
    )
    inputs = p.add_argument_group("input")
    inputs.add_argument("predictions", metavar="PREDICTIONS",
                        help="a score output (.jsonl, joined by key to --human) or a UniEval reproduce file "
                        "(predict_scores and the human scores in each record)")
    inputs.add_argument("--human", default=None, metavar="FILE",
                    help="records with id and human scores (e.g. the score input), joined by key")
    inputs.add_argument("--human-field", default=None, metavar="FIELD",
                    help="field of the human scores (default: 'human' with --human, as scripts/convert_summeval.py "
                    "writes; 'scores' in a UniEval reproduce file)")
    aspects = p.add_argument_group("aspects")
    aspects.add_argument("--aspect", action="append", dest="aspects",
                         help="an aspect to correlate, repeatable (default: every aspect the predictions and the "
                         "human scores have in common)")
    aspects.add_argument("--human-aspect", action="append", default=None, metavar="PREDICTED=HUMAN",
                    help="compare a predicted aspect with a human score of another name, e.g. support=consistency "
                    "for MiniCheck's fact/support against QAGS's consistency (repeatable)")
    stats = p.add_argument_group("bootstrap intervals")
    stats.add_argument("--bootstrap", type=non_negative, default=1000,
                       help="bootstrap resamples for the 95%% intervals (default 1000; 0 = no intervals)")
    stats.add_argument("--seed", type=int, default=0,
                       help="seed of the resampling (default 0): the same seed gives the same intervals")
    output = p.add_argument_group("output", "the table is printed on stdout")
    output.add_argument("--json", dest="json_out", default=None, metavar="FILE.json",
                        help="also write the table as JSON here")
    output.add_argument("--no-progress", action="store_true",
                    help="no progress bar over resamples (it shows only when stderr is a terminal)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local meta``: print correlations; exit 0, or 2 on unusable input.

    Human scores: ``--human-field`` (default ``human`` with ``--human FILE``, ``scores`` in a
    UniEval reproduce file; see :func:`unieval_local.analysis.meta.load_items`). A progress bar over
    the bootstrap resamples shows on a terminal unless ``--no-progress``.
    """
    from ..analysis.meta import format_meta, load_items, meta_evaluate, rename_human

    try:
        if args.json_out:  # before the bootstrap: an unwritable --json is a usage error, not a late traceback
            try:
                check_writable(args.json_out)
            except ValueError as exc:
                raise ValueError(str(exc).replace("--output", "--json")) from None
        items = load_items(args.predictions, args.human, args.human_field)
        for pair in args.human_aspect or []:
            pred, sep, human = pair.partition("=")
            if not sep or not pred.strip() or not human.strip():
                raise ValueError(f"--human-aspect wants PREDICTED=HUMAN, got {pair!r}")
            items = rename_human(items, human.strip(), pred.strip())
        result = meta_evaluate(items, args.aspects, n_boot=args.bootstrap, seed=args.seed,
                               progress=False if args.no_progress else None)
    except (ValueError, OSError, KeyError) as exc:
        return usage_error(exc)
    print(format_meta(result))
    if args.json_out:
        import math

        def clean(x):  # strict JSON: NaN -> null
            if isinstance(x, float) and math.isnan(x):
                return None
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            return x

        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(clean({"n": result.n, "unit": result.unit, "n_boot": result.n_boot, "table": result.table}),
                      fh, indent=2, allow_nan=False)
    return EXIT_OK
