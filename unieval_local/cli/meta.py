"""``unieval-local meta``: correlations of predicted with human scores (sample, summary, system level), or
with ``--labels`` the binary-label figures (balanced accuracy, tuned thresholds, ROC AUC; issue 36)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from ..settings import number_type
from .common import (
    EXIT_OK,
    HelpFormatter,
    add_positive_label_flag,
    aspect_pairs,
    check_writable,
    examples,
    non_negative,
    usage_error,
)

__all__ = ["add_parser", "load_labels", "run"]


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
        "field 'human', as scripts/convert_summeval.py writes them). With --labels the human field holds binary "
        "labels (1/true = supported): balanced accuracy at a fixed and at a tuned threshold, ROC AUC and F1 of "
        "the unsupported class, per group (--group-by) and their mean, with paired comparisons (--compare).",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local meta scores.jsonl --human summeval.jsonl",
                        "unieval-local meta scores.jsonl --human claims.jsonl --labels --group-by dataset "
                        "--dev dev_scores.jsonl --compare support consistency --json labels.json",
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
                    "writes; 'scores' in a UniEval reproduce file; 'label' with --labels)")
    aspects = p.add_argument_group("aspects")
    aspects.add_argument("--aspect", action="append", dest="aspects",
                         help="an aspect to correlate, repeatable (default: every aspect the predictions and the "
                         "human scores have in common)")
    aspects.add_argument("--human-aspect", action="append", default=None, metavar="PREDICTED=HUMAN",
                    help="compare a predicted aspect with a human score of another name, e.g. support=consistency "
                    "for MiniCheck's fact/support against QAGS's consistency (repeatable)")
    labels = p.add_argument_group(
        "binary labels", "label mode: the human field holds 0/1/true/false, one per record (the truth for every "
        "aspect) or one per aspect ({aspect: label}, read as human scores are, --human-aspect included)")
    labels.add_argument("--labels", action="store_true",
                        help="binary labels instead of graded scores: balanced accuracy, tuned thresholds, ROC AUC "
                        "(without it binary human scores get correlations, as before)")
    add_positive_label_flag(labels)
    labels.add_argument("--group-by", default=None, metavar="FIELD",
                        help="a field of the --human records (else of the score output) that groups the rows, e.g. "
                        "dataset: figures per group and their unweighted mean, as LLM-AggreFact reports")
    labels.add_argument("--threshold", type=number_type(float, 0, high=1), default=0.5,
                        help="the fixed threshold: score > THRESHOLD is 'supported' (default 0.5)")
    labels.add_argument("--dev", default=None, metavar="PRED_FILE",
                        help="a score output of the dev split: each group's threshold is tuned on its dev rows "
                        "(default: k-fold cross-validation on the test rows)")
    labels.add_argument("--dev-human", default=None, metavar="FILE",
                        help="the labels of the --dev rows, joined by key (default: the --human file, which may "
                        "hold the records of both splits)")
    labels.add_argument("--folds", type=number_type(int, 2), default=5,
                        help="k of the cross-validation that tunes thresholds without --dev (default 5)")
    labels.add_argument("--compare", action="append", nargs="+", metavar="A B", default=None,
                        help="compare aspect A with aspect B on the same rows: paired bootstrap of the difference "
                        "of balanced accuracy and ROC AUC, McNemar's exact test (repeatable)")
    labels.add_argument("--html", default=None, metavar="FILE.html",
                        help="also write an HTML page with the table and ROC curves per aspect (needs the html extra)")
    stats = p.add_argument_group("bootstrap intervals")
    stats.add_argument("--bootstrap", type=non_negative, default=1000,
                       help="bootstrap resamples for the 95%% intervals (default 1000; 0 = no intervals)")
    stats.add_argument("--seed", type=int, default=0,
                       help="seed of the resampling (default 0; with --labels also of the folds): the same seed "
                       "gives the same intervals")
    output = p.add_argument_group("output", "the table is printed on stdout")
    output.add_argument("--json", dest="json_out", default=None, metavar="FILE.json",
                        help="also write the table as JSON here (with --labels: every figure, interval, note and "
                        "comparison)")
    output.add_argument("--no-progress", action="store_true",
                    help="no progress bar over resamples (it shows only when stderr is a terminal)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local meta``: print correlations; exit 0, or 2 on unusable input.

    Human scores: ``--human-field`` (default ``human`` with ``--human FILE``, ``scores`` in a
    UniEval reproduce file; see :func:`unieval_local.analysis.meta.load_items`). A progress bar over
    the bootstrap resamples shows on a terminal unless ``--no-progress``.
    """
    from ..analysis.meta import aspect_mean_of, format_meta, load_items, meta_evaluate, rename_human

    if args.labels:
        return _run_labels(args)
    label_flags = (("--group-by", args.group_by), ("--dev", args.dev), ("--dev-human", args.dev_human),
                   ("--compare", args.compare), ("--html", args.html), ("--positive-label", args.positive_label))
    given = [flag for flag, value in label_flags if value]
    given += ["--threshold"] * (args.threshold != 0.5) + ["--folds"] * (args.folds != 5)
    if given:
        return usage_error(ValueError(f"{', '.join(given)}: only with --labels (binary labels)"))
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
    pooled = args.human and any("overall" in rows for rows in result.table.values())
    mean_of = aspect_mean_of(args.predictions) if pooled else None
    if mean_of:  # which aspects a published "overall" averages (issue 37)
        print(f"\noverall: each record's aspect_mean, the mean of {', '.join(mean_of)}")
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
            json.dump(clean({"n": result.n, "unit": result.unit, "n_boot": result.n_boot, "table": result.table,
                             **({"overall_mean_of": mean_of} if mean_of else {})}), fh, indent=2, allow_nan=False)
    return EXIT_OK


# ----------------------------------------------------------------------------- label mode
def _run_labels(args: argparse.Namespace) -> int:
    """``meta --labels``: print :meth:`~unieval_local.analysis.labels.LabelReport.table`; exit 0, or 2."""
    from ..analysis.labels import label_report

    try:
        for path, flag in ((args.json_out, "--json"), (args.html, "--html")):
            if path:
                try:
                    check_writable(path)
                except ValueError as exc:
                    raise ValueError(str(exc).replace("--output", flag)) from None
        if args.human is None:
            raise ValueError("--labels needs --human FILE: the records with the labels, joined by key")
        field = args.human_field or "label"
        renamed = _human_aspects(args.human_aspect)
        preds, labels, groups = load_labels(args.predictions, args.human, field, args.group_by, renamed, args.aspects,
                                            positive_label=args.positive_label)
        dev = None
        if args.dev:
            dev = load_labels(args.dev, args.dev_human or args.human, field, args.group_by, renamed, list(preds),
                              positive_label=args.positive_label)
        elif args.dev_human:
            raise ValueError("--dev-human needs --dev (the score output of the dev split)")
        # `fact/support` names the output's `support` (benchmark writes task-qualified names)
        compare = [tuple(a if a in preds or a.rpartition("/")[2] not in preds else a.rpartition("/")[2] for a in pair)
                   for pair in aspect_pairs(args.compare or [])]
        report = label_report(preds, labels, groups=groups, dev=dev, threshold=args.threshold, folds=args.folds,
                              bootstrap=args.bootstrap, seed=args.seed, compare=compare)
        if args.html:
            from ..analysis.html_report import render_label_html

            render_label_html(report, preds, labels, args.html, groups=groups, title=Path(args.predictions).name)
    except (ValueError, OSError, KeyError) as exc:
        return usage_error(exc)
    print(report.table())
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(report.to_json(), fh, indent=2, allow_nan=False)
    return EXIT_OK


def _human_aspects(pairs: list[str] | None) -> dict[str, str]:
    """``--human-aspect PREDICTED=HUMAN`` as ``{predicted: human}``."""
    out = {}
    for pair in pairs or []:
        pred, sep, human = pair.partition("=")
        if not sep or not pred.strip() or not human.strip():
            raise ValueError(f"--human-aspect wants PREDICTED=HUMAN, got {pair!r}")
        out[pred.strip()] = human.strip()
    return out


def load_labels(predictions: str, human: str, field: str, group_by: str | None = None,
                human_aspects: dict[str, str] | None = None, aspects: list[str] | None = None, *,
                positive_label: str | None = None, option: str = "--positive-label") -> tuple[Any, Any, Any]:
    """``(predictions, labels, groups)`` for :func:`~unieval_local.analysis.labels.label_report` from a
    ``score`` output joined by key (``id``, else the record's index) to the records of ``human``.

    ``field`` of a human record holds one label (the truth for every aspect) or a mapping
    ``{aspect: label}`` (``human_aspects`` maps a predicted aspect to its label's name); labels are
    read by :func:`~unieval_local.analysis.labels.labels_from_values` (0/1/true/false, or with
    ``positive_label`` any values: equal to it is 1, else 0; ``option`` names it in errors).
    ``group_by`` names each row's group, read from the human record, else from the output record.
    Error records of the output are skipped (a line on stderr counts them). ``aspects``: the
    aspects to keep (default: every aspect with a score, and a label, on every record).

    Raises:
        ValueError: an id twice in ``human`` or a key twice in ``predictions`` (naming both records
            and the file), a key missing from ``human``, a record without ``field`` or ``group_by``
            (naming the flag that names it), a label not 0/1/true/false without ``positive_label``
            (listing the values seen), a score that is not a finite number (each naming the
            record), no scored records, an aspect without scores or labels on every record.
    """
    import numpy as np

    from ..analysis.labels import labels_from_values, plural
    from ..records import read_records

    by_key: dict[str, tuple[int, dict]] = {}
    for i, h in enumerate(read_records(human)):
        if not isinstance(h, dict):
            continue
        k = json.dumps(h.get("id", i))
        if k in by_key:
            raise ValueError(f"{human}: id {h.get('id', i)!r} is on records {by_key[k][0]} and {i} (0-based): each id "
                             "must name one record (which label is right?)")
        by_key[k] = (i, h)
    seen: dict[str, int] = {}
    keys, scores, raw, groups, skipped = [], [], [], [], 0
    for i, r in enumerate(read_records(predictions)):
        if not isinstance(r, dict) or "key" not in r:
            raise ValueError(f"record {i} of {predictions} has no 'key': it is not a score output")
        k = json.dumps(r["key"])
        if k in seen:
            raise ValueError(f"{predictions}: key {r['key']!r} is on records {seen[k]} and {i} (0-based): each record "
                             "must be scored once (merge or deduplicate the outputs first)")
        seen[k] = i
        if "scores" not in r:
            skipped += 1
            continue
        key, (_, h) = r["key"], by_key.get(k, (None, None))
        if h is None:
            raise ValueError(f"output key {key!r} is not in {human} (joined on its records' 'id', else their index)")
        if field not in h:
            raise ValueError(f"record {key!r} of {human} has no field {field!r}; name the labels' field with "
                             f"--human-field (its fields: {sorted(h)})")
        raw.append((f"record {key!r} of {human}, field {field!r}", h[field]))
        if group_by:
            g = h.get(group_by, r.get(group_by))
            if g is None:
                raise ValueError(f"record {key!r} has no field {group_by!r} (--group-by) in {human} nor in "
                                 f"{predictions}")
            groups.append(str(g))
        keys.append(key)
        scores.append(r["scores"])
    if not keys:
        raise ValueError(f"{predictions} holds no scored records")
    if skipped:
        print(f"{predictions}: {plural(skipped, 'error record')} without scores skipped", file=sys.stderr)
    per_aspect = isinstance(raw[0][1], dict)
    if any(isinstance(v, dict) != per_aspect for _, v in raw):
        raise ValueError(f"{human}: field {field!r} holds one label on some records, a mapping on others")
    name = (human_aspects or {}).get
    common = [a for a in scores[0] if all(a in s for s in scores)
              and (not per_aspect or all(name(a, a) in v for _, v in raw))]
    chosen = list(aspects or common)
    missing = [a for a in chosen if a not in common]
    if missing or not chosen:
        raise ValueError(f"aspect(s) {missing} lack a score or a label on some record of {predictions}; with both "
                         f"on every record: {common}" if chosen else f"no aspect has a score and a label on every "
                         f"record of {predictions} (scores: {sorted(scores[0])}); pair names with --human-aspect")
    preds = {}
    for a in chosen:
        bad = next((i for i, s in enumerate(scores) if isinstance(s[a], bool) or not isinstance(s[a], (int, float))
                    or not math.isfinite(s[a])), None)
        if bad is not None:
            raise ValueError(f"record {keys[bad]!r} of {predictions}: the score of {a!r} is {scores[bad][a]!r}, "
                             "not a finite number")
        preds[a] = np.array([s[a] for s in scores], dtype=np.float64)

    def column(label: str | None) -> np.ndarray:
        values = [v if label is None else v[label] for _, v in raw]
        where = [w if label is None else f"{w}, {label!r}" for w, _ in raw]
        return labels_from_values(values, where, positive_label=positive_label, option=option)

    labels = {a: column(name(a, a)) for a in chosen} if per_aspect else column(None)
    return preds, labels, (np.array(groups) if group_by else None)
