"""``unieval-local benchmark``: score labelled claims with the fact checkers and print how well each
tells supported from unsupported ones: LLM-AggreFact beside its board, or your own labelled data
(:mod:`unieval_local.batch.benchmark`). Exit statuses as ``score``'s (:mod:`unieval_local.cli`)."""

from __future__ import annotations

import argparse
import sys

from .common import (
    EXIT_OK,
    EXIT_WRITE,
    HelpFormatter,
    add_engine_flags,
    add_positive_label_flag,
    check_writable,
    aspect_pairs,
    engine_settings,
    examples,
    non_negative,
    run_failure_status,
    usage_error,
    write_text,
)

__all__ = ["add_parser", "run"]

DOCS = "docs/which-checker.md, docs/batch.md (--resume), docs/exit-status.md"


def _common_flags(p: argparse.ArgumentParser) -> None:
    """The flags both benchmarks take: aspects, output, the label figures, the engine."""
    from ..batch.benchmark import DEFAULT_ASPECTS

    scoring = p.add_argument_group("scoring")
    scoring.add_argument("--aspect", action="append", dest="aspects", metavar="TASK/ASPECT",
                         help="aspect to score, repeatable (a bare name means fact/NAME); default: the fact "
                         f"checkers {', '.join(DEFAULT_ASPECTS)}. One whose evaluator is not staged is listed as "
                         "skipped, with how to stage it; a rating aspect (summarization/geval_consistency) is "
                         "rescaled to [0, 1]")
    figures = p.add_argument_group("figures")
    add_positive_label_flag(figures)
    figures.add_argument("--threshold", type=float, default=0.5,
                         help="fixed threshold: score > T is 'supported' (default 0.5, the board's)")
    figures.add_argument("--folds", type=int, default=5,
                         help="k of the cross-validation that tunes thresholds when there is no dev split (default 5)")
    figures.add_argument("--bootstrap", type=non_negative, default=1000,
                         help="bootstrap resamples for the 95%% intervals (default 1000; 0: none)")
    figures.add_argument("--seed", type=int, default=0, help="seed of the resamples and folds (default 0)")
    figures.add_argument("--compare", action="append", nargs="+", default=[], metavar="A,B",
                         help="paired comparison of two aspects on the same rows (A,B or A B) (bootstrap interval of the "
                         "difference, McNemar's exact test); repeatable; needs the 'meta' extra (scipy)")
    add_engine_flags(p.add_argument_group("model and engine", "speed and precision: docs/speed.md"))
    out = p.add_argument_group("output")
    out.add_argument("--output", "-o", required=True, metavar="DIR",
                     help="output folder: <split>.input.jsonl and <split>.scores.jsonl per split (each record "
                     "written as it is scored)")
    out.add_argument("--resume", action="store_true", help="continue the scores files of an interrupted run")
    out.add_argument("--json", default=None, metavar="FILE", help="write every figure as JSON to FILE")
    out.add_argument("--html", default=None, metavar="FILE.html",
                     help="also write an HTML page with the test split's table and ROC curves per aspect, as meta "
                     "--labels writes (needs the html extra)")
    p.set_defaults(run=run)


def add_parser(sub) -> None:
    """Add the ``benchmark`` command (``llm-aggrefact`` and ``labelled``) to ``sub``."""
    p = sub.add_parser(
        "benchmark",
        help="balanced accuracy of the fact checkers on LLM-AggreFact or your own labelled claims",
        description="Score labelled claims (label 1 = supported by the document, 0 = not) with the fact "
        "checkers and print, per group and the mean over groups, the balanced accuracy at a fixed threshold "
        "(0.5) and at a threshold tuned on the dev split (else by k-fold cross-validation on test folds never "
        "scored with it), with bootstrap intervals. 'benchmark llm-aggrefact DATA' reads a staged "
        "LLM-AggreFact copy (gated on the hub: stage it yourself; never downloaded) and prints the board's "
        "table with each evaluator's published row beside ours; 'benchmark labelled FILE' reads your own "
        "records. Scores are written as they come (--output DIR); an interrupted run goes on with --resume.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local benchmark llm-aggrefact ~/data/LLM-AggreFact -o out/aggrefact --json out/aggrefact.json",
                        "unieval-local benchmark labelled claims.jsonl --dev dev.jsonl --group-by domain -o out/mine",
                        docs=DOCS),
    )
    kinds = p.add_subparsers(title="benchmarks", dest="benchmark", required=True, metavar="BENCHMARK",
                             help="llm-aggrefact (a staged copy of the benchmark) or labelled (your own records); "
                             "each has its own --help")
    agg = kinds.add_parser(
        "llm-aggrefact", help="LLM-AggreFact (Tang et al., 2024) beside its board", formatter_class=HelpFormatter,
        description="DATA: a staged copy of lytang/LLM-AggreFact (fields dataset, doc, claim, label): its "
        "parquet, CSV or JSONL files as saved from the hub, or a folder of them; a file's split is its name's "
        "prefix (dev*, test*). Without a dev file thresholds are tuned by k-fold on test. Parquet needs "
        "pip install 'unieval-local[parquet]'.",
        epilog=examples("unieval-local benchmark llm-aggrefact ~/data/LLM-AggreFact -o out/aggrefact",
                        "unieval-local benchmark llm-aggrefact test.jsonl --aspect fact/support -o out/mc --resume",
                        docs=DOCS))
    agg.add_argument_group("input").add_argument("data", metavar="DATA", help="a file or folder of the staged data")
    _common_flags(agg)
    lab = kinds.add_parser(
        "labelled", help="your own labelled claims", formatter_class=HelpFormatter,
        description="FILE: records (.jsonl, .json, .csv, .tsv) with a claim (target or claim), a document "
        "(source or doc) and a label (1/0/true/false); dotted field names read nested objects "
        "(scores.consistency).",
        epilog=examples("unieval-local benchmark labelled claims.jsonl --group-by domain -o out/mine",
                        "unieval-local benchmark labelled test.jsonl --dev dev.jsonl --label-field gold -o out/mine",
                        docs=DOCS))
    inputs = lab.add_argument_group("input")
    inputs.add_argument("file", metavar="FILE", help="the test records")
    inputs.add_argument("--dev", default=None, metavar="FILE", help="dev records to tune thresholds on (optional)")
    inputs.add_argument("--label-field", default="label", help="the label's field (default label)")
    inputs.add_argument("--group-by", default=None, metavar="FIELD",
                        help="report per value of FIELD and the unweighted mean over them (default: one group)")
    inputs.add_argument("--target-field", default=None, help="the claim's field (default: target, else claim ...)")
    inputs.add_argument("--source-field", default=None, help="the document's field (default: source, else doc ...)")
    _common_flags(lab)


def run(args: argparse.Namespace) -> int:
    """``unieval-local benchmark``: score, print the table (stdout), write ``--json`` and ``--html``.

    Exit 0; 2 for unreadable data, a missing extra, bad options or an output to resume; 3 when no
    aspect's evaluator is staged; 4, 5, 130, 143 as ``score`` (rerun with --resume)."""
    from ..batch.benchmark import aggrefact_splits, labelled_splits, run_benchmark
    from .common import stop_on_signals

    settings = engine_settings(args)
    aggrefact = args.benchmark == "llm-aggrefact"
    fields = {} if aggrefact else {"label_field": args.label_field, "group_field": args.group_by,
                                   "target_field": args.target_field, "source_field": args.source_field}
    if args.html:  # before the scoring (hours of it on LLM-AggreFact): an unwritable page is a usage error now
        from ..errors import MissingExtraError
        from ..extras import require

        try:
            check_writable(args.html)
            require("html")
        except (ValueError, MissingExtraError) as exc:
            return usage_error(ValueError(str(exc).replace("--output", "--html")))
    try:
        splits = aggrefact_splits(args.data) if aggrefact else labelled_splits(args.file, args.dev)
        with stop_on_signals():
            result = run_benchmark(splits, args.output, kind=args.benchmark, aspects=args.aspects, settings=settings,
                                   resume=args.resume, positive_label=args.positive_label, threshold=args.threshold,
                                   folds=args.folds, bootstrap=args.bootstrap, seed=args.seed,
                                   compare=aspect_pairs(args.compare), progress=settings["progress"], **fields)
    except Exception as exc:  # noqa: BLE001  the run's failures, each with its exit status
        status = run_failure_status(exc)
        if status is None:
            raise
        return status
    print(result.table())
    for name, sig in sorted(result.signatures.items()):  # cite these (README, Citing): one per evaluator
        print(f"unieval-local: signature ({name}): {sig}", file=sys.stderr)
    if args.json:
        import json

        try:
            write_text(args.json, json.dumps(result.to_json(), indent=1, allow_nan=False) + "\n")
        except OSError as exc:
            print(f"unieval-local: error: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE
    if args.html:
        from pathlib import Path

        from ..analysis.html_report import render_label_html

        preds, labels, groups = result.test_data
        try:
            render_label_html(result.report, preds, labels, args.html, groups=groups,
                              title=Path(args.data if aggrefact else args.file).name,
                              made_by=f"benchmark {args.benchmark}", signatures=dict(result.signatures))
        except OSError as exc:
            print(f"unieval-local: error: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE
    return EXIT_OK
