#!/usr/bin/env python
"""Fit the rating report's built-in cut points on the official model's real SummEval scores,
and write the calibration card that says how well they hold.

Data: ``../shared/data/summeval-unieval/summeval_unieval.jsonl`` (SOURCES.md section 9): the
official ``MingZhong/unieval-sum`` model's P(Yes) for coherence, consistency, fluency and
relevance of the 1,600 SummEval summaries (100 documents x 16 systems), beside the expert
ratings (means of 3 experts, 1-5). Each human score is binned as the README does: < 2.5 -> 1,
< 4 -> 2, else 3 (:func:`~unieval_local.cutpoints.human_to_rating`).

Per metric:

1. Agreement is measured out of sample: 10 folds of whole documents (no document's summaries
   on both sides; :func:`~unieval_local.cutpoints.document_folds`, seed 0); each fold is rated
   with cut points fitted on the other nine (:func:`~unieval_local.cutpoints.cross_validated_ratings`),
   once maximising exact agreement and once the quadratic-weighted kappa. The thirds
   (0.3333, 0.6667, the old placeholders) need no fitting.
2. Accuracy and quadratic kappa of each, with percentile 95% intervals over 1,000 resamples of
   the documents, and the paired differences (the same resamples;
   :func:`~unieval_local.cutpoints.bootstrap_agreement`).
3. The objective is the one the cross-validation favours (``--objective``, default ``kappa``:
   exact agreement rewards rating everything 3 where 90% of the human bins are 3, which
   collapses fluency's kappa to 0.27; kappa does not). A metric keeps the fitted cut points
   (fitted on all 1,600) when they are better than the thirds on that objective; otherwise
   the thirds stay, and the card says the fit did not beat them. Whether the difference is
   beyond its interval is written beside it.

The card (JSON) holds the data set, n, bins, folds, the chosen cut points, every figure with
its interval, the checkpoint it holds for and the command to refit; ``unieval-local
calibration`` prints it, and a test pins ``RatingConfig``'s defaults (and
``configs/rating.yaml``) to it.

Usage:
    python scripts/fit_calibration.py [FILE] [-o unieval_local/data/calibration_unieval_sum.json]
        [--n-boot 1000] [--objective kappa|accuracy]

Exit status: 0 written; 2 unusable input.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import shared_data_dir  # noqa: E402

from unieval_local.cutpoints import (OBJECTIVES, bootstrap_agreement, cross_validated_ratings,  # noqa: E402
                                     document_folds, fit_cut_points, format_card, human_to_rating, to_rating)
from unieval_local.hashing import sha256_file  # noqa: E402

METRICS = ("coherence", "consistency", "fluency", "relevance")
BINS = (2.5, 4.0)
THIRDS = (0.3333, 0.6667)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "unieval_local" / "data" / "calibration_unieval_sum.json"


def load(path: Path) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(doc ids, probabilities per metric, human scores per metric)``, one entry per summary.

    Raises:
        ValueError: a row is not in the file's format.
    """
    docs: list[str] = []
    probs: dict[str, list[float]] = {m: [] for m in METRICS}
    human: dict[str, list[float]] = {m: [] for m in METRICS}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row.get("scores"), dict) or "i" not in row:
            raise ValueError("a row lacks 'i' or 'scores': not UniEval's SummEval prediction file")
        for system in sorted(row["scores"]):
            s = row["scores"][system]
            docs.append(str(row["i"]))
            for m in METRICS:
                probs[m].append(float(s[f"unieval_{m}"]))
                human[m].append(float(s[f"human_{m}"]))
    return docs, {m: np.array(v) for m, v in probs.items()}, {m: np.array(v) for m, v in human.items()}


def card(path: Path, objective: str, n_boot: int, n_folds: int = 10, seed: int = 0) -> dict:
    """The calibration card of the file at ``path`` (module docstring)."""
    docs, probs, human = load(path)
    folds = document_folds(docs, n_folds, seed)
    metrics = {}
    for m in METRICS:
        p, y = probs[m], human_to_rating(human[m], BINS)
        thirds = np.array([to_rating(x, THIRDS) for x in p])
        oof = {o: cross_validated_ratings(p, y, folds, o)[0] for o in OBJECTIVES}
        single, diffs = bootstrap_agreement(y, {"thirds": thirds, **{f"fitted_{o}": oof[o] for o in OBJECTIVES}},
                                            docs, n_boot=n_boot, seed=seed)
        fit = fit_cut_points(p, y, objective=objective)
        measure = "kappa" if objective == "kappa" else "accuracy"
        diff = diffs[f"fitted_{objective} - thirds"]
        gain, ci = getattr(diff, measure), getattr(diff, f"{measure}_ci")
        keep_fit = gain is not None and gain > 0
        metrics[m] = {
            "cut_points": [round(x, 4) for x in (fit.cut_points if keep_fit else THIRDS)],
            "choice": "fitted" if keep_fit else "thirds",
            "fitted_cut_points": [round(x, 4) for x in fit.cut_points],
            "beyond_interval": bool(ci is not None and (ci[0] > 0 if keep_fit else ci[1] < 0)),
            "note": ("the fit beats the thirds beyond the 95% interval" if keep_fit and ci and ci[0] > 0 else
                     "the fit is better than the thirds, but not beyond the 95% interval" if keep_fit else
                     "the fit does not beat the thirds: the thirds are kept"),
            "human_bins": {str(c): int((y == c).sum()) for c in (1, 2, 3)},
            "cv": {name: a.model_dump() for name, a in single.items()},
            "differences": {name: diffs[name].model_dump() for name in
                            (f"fitted_{o} - thirds" for o in OBJECTIVES)},
        }
    return {
        "card": "rating cut points of unieval-sum, calibrated on SummEval",
        "checkpoint": "MingZhong/unieval-sum (the official weights)",
        "holds_for": "the rating metrics coherence, fluency and relevance (with references) answered by unieval-sum, "
                     "and consistency answered by summarization/consistency (unieval-sum); other checkpoints and "
                     "evaluators (unieval-fact, MiniCheck, your own) and relevance by key-point coverage "
                     "(relevance_coverage) are not calibrated by it",
        "data": {"name": "SummEval (Fabbri et al., 2021) with the official unieval-sum's scores",
                 "file": "summeval-unieval/summeval_unieval.jsonl", "sha256": sha256_file(path),
                 "origin": "zouharvi/subset2evaluate, commit d9fa82b4de033afe865619bc456f26454f293f26",
                 "n": len(docs), "n_documents": len(set(docs)), "human": "mean of 3 expert ratings, 1-5"},
        "bins": {"1": f"human < {BINS[0]}", "2": f"{BINS[0]} <= human < {BINS[1]}", "3": f"human >= {BINS[1]}"},
        "rating": "1 if p < low, 2 if low <= p < high, 3 if p >= high",
        "objective": objective,
        "objective_reason": ("kappa: the cross-validation shows that cut points maximising exact agreement "
                             "rate almost everything 3 where most human bins are 3 (consistency, fluency), "
                             "which keeps accuracy high and drops kappa below the thirds' (fluency 0.27); "
                             "quadratic kappa counts agreement beyond chance and how far a rating is off"
                             if objective == "kappa" else "accuracy: exact agreement"),
        "cross_validation": {"folds": n_folds, "by": "document", "seed": seed,
                             "bootstrap": {"n": n_boot, "over": "documents", "interval": "percentile 95%"}},
        "metrics": metrics,
        "date": datetime.date.today().isoformat(),
        "command": "python scripts/fit_calibration.py ../shared/data/summeval-unieval/summeval_unieval.jsonl "
                   f"--objective {objective} --n-boot {n_boot}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default=None,
                        help="summeval_unieval.jsonl (default: ../shared/data/summeval-unieval/)")
    parser.add_argument("-o", "--output", default=str(DEFAULT_OUT), help="the card to write (JSON)")
    parser.add_argument("--objective", default="kappa", choices=list(OBJECTIVES))
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of documents (default 1000)")
    args = parser.parse_args(argv)
    path = Path(args.input) if args.input else shared_data_dir() / "summeval-unieval" / "summeval_unieval.jsonl"
    try:
        c = card(path, args.objective, args.n_boot)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 2
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(c, indent=2) + "\n", encoding="utf-8")
    print(format_card(c))
    print(f"\nwrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
