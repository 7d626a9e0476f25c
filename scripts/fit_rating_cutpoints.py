#!/usr/bin/env python
"""Fit the rating report's cut points on data with human scores and write a rating YAML.

For each metric, the model probability p of every example is paired with its
human score; the human score is binned to 1-3 (``--bins LOW,HIGH``: below LOW
-> 1, below HIGH -> 2, else 3) and the cut points (low, high) that make the
rating (1 if p < low, 2 if p < high, else 3) agree best with it are
found by exhaustive search (:func:`unieval_local.analysis.cutpoints.fit_cut_points`), maximising the
quadratic-weighted kappa (``--objective kappa``, default) or the exact agreement
(``--objective accuracy``).
The output is a full rating config (``--config``, default the built-in
defaults) with those cut points replaced, ready for
``unieval-local report --format rating --config OUT.yaml``.

Model probabilities come from a ``unieval-local score`` output (``--scores``,
joined to RECORDS by id, else index, as ``unieval-local meta`` joins them), from a ``unieval-local report --format rating``
output (``--report``: the probabilities it mapped; relevance by key-point
coverage, for records without references, is fitted as ``relevance_coverage``
against the human relevance), or from a field of RECORDS itself
(``--model-field``, e.g. ``predict_scores`` in UniEval's reproduce files).
Human scores come from ``--human-field``; its default is that of ``unieval-local meta``:
``human`` (what scripts/convert_summeval.py writes) with ``--scores`` or ``--report``,
``scores`` for UniEval's reproduce files read with ``--model-field``.

Examples:
    # SummEval: score with the official unieval-sum, then fit (1-5 expert means)
    unieval-local score out/summeval.jsonl --aspect all -o out/summeval_scores.jsonl
    python scripts/fit_rating_cutpoints.py out/summeval.jsonl --scores out/summeval_scores.jsonl \\
        --bins 2.5,4 -o configs/rating.fitted.yaml

    # QAGS-CNNDM with UniEval's published unieval-fact predictions (share of faithful sentences)
    python scripts/fit_rating_cutpoints.py ../shared/data/unieval-reproduce/predict/fact/qags_cnndm_result.json \\
        --model-field predict_scores --metric consistency --bins 0.4,1 --consistency-aspect fact/consistency -o configs/rating.fact-qags.yaml

Exit status: 0 written, 2 unusable input or options.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from unieval_local.analysis.meta import load_items
from unieval_local.records import read_records
from unieval_local.analysis.cutpoints import fit_cut_points, human_to_rating
from unieval_local.reports.rating import METRICS, RatingConfig, load_rating_config


def _get(record: dict, dotted: str):
    value = record
    for part in dotted.split("."):
        value = _parsed(value)
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return _parsed(value)


def _parsed(value):
    """A JSON object stored as a string, parsed; anything else as it is."""
    return json.loads(value) if isinstance(value, str) and value.strip().startswith("{") else value


def check_report(report: dict, records: list, path: str) -> None:
    """Refuse a report that is not a rating report of exactly these records (same count, same ids).

    Raises:
        ValueError: naming the first mismatch.
    """
    if not isinstance(report, dict) or report.get("format") != "rating":
        got = report.get("format") if isinstance(report, dict) else type(report).__name__
        raise ValueError(f"{path} is not a `unieval-local report --format rating` output (format {got!r})")
    rows = report.get("reports", [])
    if len(rows) != len(records):
        raise ValueError(f"{path} has {len(rows)} rows but the records file has {len(records)}; "
                         "give the report made from these records")
    for row, rec in zip(rows, records):
        rid = rec.get("id") if isinstance(rec, dict) else None
        if rid is not None and row.get("id") is not None and str(rid) != str(row["id"]):
            raise ValueError(f"{path}: row {row.get('index')} has id {row['id']!r} but record {row.get('index')} "
                             f"has id {str(rid)!r}; give the report made from these records, in order")


def report_probabilities(report: dict) -> dict[int, dict[str, float]]:
    """Per record index, the probabilities a ``rating`` report mapped: ``metrics.<m>.probability``;
    relevance measured by key-point coverage counts as ``relevance_coverage``."""
    out: dict[int, dict[str, float]] = {}
    for row in report.get("reports", []):
        rep = row.get("report") if isinstance(row, dict) else None
        if not rep:
            continue
        probs = {}
        for m, r in rep.get("metrics", {}).items():
            name = "relevance_coverage" if r.get("method") == "key_point_coverage" else m
            probs[name] = r["probability"]
        out[row["index"]] = probs
    return out


def record_pairs(records: list, human_field: str, model_field: str | None = None,
                 probabilities: dict[int, dict[str, float]] | None = None) -> list[tuple[dict, dict]]:
    """Per record, (model probabilities, human scores) as dicts: the model side from
    ``probabilities[index]`` (a rating report) or from the record's ``model_field``."""
    pairs = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            continue
        pred = probabilities.get(i, {}) if probabilities is not None else _get(rec, model_field)
        human = _get(rec, human_field)
        pairs.append((pred if isinstance(pred, dict) else {}, human if isinstance(human, dict) else {}))
    return pairs


def collect(pairs: list[tuple[dict, dict]], metric: str) -> tuple[list, list]:
    """(model probabilities, human scores) of the pairs that have both for ``metric``.

    Human scores of ``relevance_coverage`` are the human ``relevance``.
    """
    human_metric = "relevance" if metric == "relevance_coverage" else metric
    model, human = [], []
    for pred, hum in pairs:
        m, h = pred.get(metric), hum.get(human_metric)
        if h is None or m is None:
            continue
        model.append(float(m))
        human.append(float(h))
    return model, human


def changed_settings(config: RatingConfig) -> dict:
    """What ``config`` changes from the built-in defaults, JSON-ready: only the cut points,
    rules and templates that differ, and the other keys that differ (a rating YAML gives only
    what it changes; the rest stays the built-in, calibrated default, so a fitted file never
    resets another metric's calibrated cut points to placeholders)."""
    ours, base = config.model_dump(mode="json"), RatingConfig().model_dump(mode="json")
    out: dict = {}
    for key, value in ours.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            if key == "templates":
                diff = {lang: {k: v for k, v in table.items() if base[key].get(lang, {}).get(k) != v}
                        for lang, table in value.items()}
                diff = {lang: table for lang, table in diff.items() if table}
            else:
                diff = {k: v for k, v in value.items() if base[key].get(k) != v}
            if key == "cut_points":
                diff = {k: [round(v[0], 6), round(v[1], 6)] for k, v in diff.items()}
            if diff:
                out[key] = diff
        elif value != base.get(key):
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    """Fit and write the config (see the module docstring); returns the exit status (0, or 2)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("records", help="records with human scores (.jsonl or .json list)")
    parser.add_argument("--scores", default=None,
                        help="a unieval-local score output for RECORDS (joined by id, else index, as meta does)")
    parser.add_argument("--report", default=None,
                        help="a `unieval-local report --format rating` output for RECORDS (joined by index): fits "
                        "the probabilities it mapped, including relevance_coverage for records without references")
    parser.add_argument("--metric", action="append", dest="metrics", choices=[*METRICS, "relevance_coverage"],
                        help="metric to fit, repeatable (default: every metric found in the data; relevance_coverage "
                        "is fitted against the human relevance scores)")
    parser.add_argument("--human-field", default=None,
                        help="field holding human scores per metric (default: human with --scores/--report, as "
                        "unieval-local meta; scores for UniEval reproduce files)")
    parser.add_argument("--model-field", default="predict_scores",
                        help="field holding model probabilities per metric when --scores is not given")
    parser.add_argument("--bins", default="2.5,4", help="human score bins LOW,HIGH -> 1/2/3 (default 2.5,4 for 1-5)")
    parser.add_argument("--config", default=None, help="rating YAML to start from (default: the built-in defaults)")
    parser.add_argument("--consistency-aspect", default=None, metavar="TASK/ASPECT",
                        help="set consistency_aspect in the output (the aspect the probabilities came from, "
                        "e.g. fact/consistency)")
    parser.add_argument("--objective", default="kappa", choices=["kappa", "accuracy"],
                        help="what the cut points maximise: quadratic-weighted kappa (default: on SummEval's "
                        "cross-validation it keeps the minority ratings, `unieval-local calibration`) or exact "
                        "agreement (rates almost everything with the majority rating where one rating dominates)")
    parser.add_argument("--min-examples", type=int, default=20, help="refuse to fit on fewer examples (default 20)")
    parser.add_argument("--output", "-o", required=True, help="the rating YAML to write")
    args = parser.parse_args(argv)
    try:
        low, high = (float(x) for x in args.bins.split(","))
        records = read_records(args.records)
        human_field = args.human_field or ("human" if args.scores or args.report else "scores")
        if args.scores and args.report:
            raise ValueError("give --scores or --report, not both")
        if args.scores:  # joined by key (id, else index), as `unieval-local meta` joins them
            pairs = [(it.pred, it.human) for it in load_items(args.scores, args.records, human_field)]
        elif args.report:
            with open(args.report, encoding="utf-8") as fh:
                report = json.load(fh)
            check_report(report, records, args.report)
            pairs = record_pairs(records, human_field, probabilities=report_probabilities(report))
        else:
            pairs = record_pairs(records, human_field, args.model_field)
        base = load_rating_config(args.config) if args.config else RatingConfig()
        fits = {}
        for metric in args.metrics or (*METRICS, "relevance_coverage"):
            model, human = collect(pairs, metric)
            if not model and not args.metrics:
                continue
            if len(model) < args.min_examples:
                raise ValueError(f"{metric}: {len(model)} examples with both a model and a human score "
                                 f"(need {args.min_examples}); check --human-field / --model-field / --scores")
            fits[metric] = fit_cut_points(model, human_to_rating(human, (low, high)), objective=args.objective)
        if not fits:
            raise ValueError("no metric has both model and human scores; check --human-field / --model-field")
    except (ValueError, OSError) as exc:
        print(f"fit_rating_cutpoints: error: {exc}", file=sys.stderr)
        return 2
    cut_points = dict(base.cut_points)
    for metric, fit in fits.items():
        cut_points[metric] = fit.cut_points
    update = {"cut_points": cut_points}
    if args.consistency_aspect:
        update["consistency_aspect"] = args.consistency_aspect
    config = RatingConfig.model_validate({**base.model_dump(), **update})
    data = changed_settings(config)
    header = [f"# rating config written by scripts/fit_rating_cutpoints.py from {args.records}"
              + (f" and {args.scores}" if args.scores else ""), f"# human bins: < {low} -> 1, < {high} -> 2, else 3",
              f"# objective: {args.objective}"]
    print(f"{'metric':<20}{'n':>6}{'low':>9}{'high':>9}{'accuracy':>10}{'kappa':>8}  human 1/2/3")
    for metric, fit in fits.items():
        kappa = "n/a" if fit.kappa is None else f"{fit.kappa:.3f}"
        print(f"{metric:<20}{fit.n:>6}{fit.cut_points[0]:>9.4f}{fit.cut_points[1]:>9.4f}{fit.accuracy:>10.3f}"
              f"{kappa:>8}  {'/'.join(map(str, fit.counts))}")
        header.append(f"# {metric}: n={fit.n}, accuracy {fit.accuracy:.3f}, quadratic kappa {kappa}")
        if fit.kappa is None or fit.kappa < 0.05:
            print(f"warning: {metric}: the fit is degenerate (kappa {kappa}; cut points {fit.cut_points}): the "
                  "model's scores barely separate the human ratings, so the best rule is close to always giving "
                  "the most common rating; do not use these cut points as they are", file=sys.stderr)
            header.append(f"# WARNING {metric}: degenerate fit (kappa {kappa})")
    Path(args.output).write_text("\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                                                                            width=200), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
