#!/usr/bin/env python
"""Fit the rating report's built-in cut points on the official model's real SummEval scores,
and write the calibration card that says how well they hold.

Data: ``$UNIEVAL_SHARED_DATA/summeval-unieval/summeval_unieval.jsonl`` (default ``../shared/data``) (SOURCES.md section 9): the
official ``MingZhong/unieval-sum`` model's P(Yes) for coherence, consistency, fluency and
relevance of the 1,600 SummEval summaries (100 documents x 16 systems), beside the expert
ratings (means of 3 experts, 1-5). Each human score is binned as the README does: < 2.5 -> 1,
< 4 -> 2, else 3 (:func:`~unieval_local.analysis.cutpoints.human_to_rating`).

Per metric:

1. Agreement is measured out of sample: 10 folds of whole documents (no document's summaries
   on both sides; :func:`~unieval_local.analysis.cutpoints.document_folds`, seed 0); each fold is rated
   with cut points fitted on the other nine (:func:`~unieval_local.analysis.cutpoints.cross_validated_ratings`),
   once maximising exact agreement and once the quadratic-weighted kappa. The thirds
   (0.3333, 0.6667, the old placeholders) need no fitting.
2. Accuracy and quadratic kappa of each, with percentile 95% intervals over 1,000 resamples of
   the documents, and the paired differences (the same resamples;
   :func:`~unieval_local.analysis.cutpoints.bootstrap_agreement`).
3. The objective is the one the cross-validation favours (``--objective``, default ``kappa``:
   exact agreement rewards rating everything 3 where 90% of the human bins are 3, which
   collapses fluency's kappa to 0.27; kappa does not). A metric keeps the fitted cut points
   (fitted on all 1,600) when they are better than the thirds on that objective; otherwise
   the thirds stay, and the card says the fit did not beat them. Whether the difference is
   beyond its interval is written beside it.

The card (JSON) holds the data set, n, bins, folds, the chosen cut points, every figure with
its interval, the checkpoint it holds for and the command to refit; ``unieval-local
calibration`` prints it; ``RatingConfig``'s default cut points are read from it (and a test
pins ``configs/rating.yaml`` to it).

Usage:
    python scripts/fit_calibration.py [FILE] [-o CARD.json] [--n-boot 1000] [--objective kappa|accuracy]

Without ``-o`` the card is printed and nothing is written. ``-o
unieval_local/data/calibration_unieval_sum.json`` replaces the built-in card, and with it the
rating report's default cut points (``reports/rating.py`` reads them from that file, so the
card and the cut points in use cannot differ).

Exit status: 0 done; 2 unusable input.
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

from unieval_local.analysis.cutpoints import (OBJECTIVES, bootstrap_agreement, cross_validated_ratings,  # noqa: E402
                                     document_folds, fit_cut_points, format_card, human_to_rating, to_rating)
from unieval_local.hashing import sha256_file  # noqa: E402

METRICS = ("coherence", "consistency", "fluency", "relevance")
BINS = (2.5, 4.0)
THIRDS = (0.3333, 0.6667)
#: The built-in card: the rating report's default cut points are read from it.
PACKAGE_CARD = Path(__file__).resolve().parents[1] / "unieval_local" / "data" / "calibration_unieval_sum.json"
#: What the official unieval-sum's config.json says (T5-large, v1.1): a checkpoint of another shape
#: is not the model the card was fitted on.
CHECKPOINT_CONFIG = {"model_type": "t5", "d_model": 1024, "num_layers": 24}


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
        other = "accuracy" if measure == "kappa" else "kappa"
        other_ci = getattr(diff, f"{other}_ci")
        beyond = bool(ci is not None and (ci[0] > 0 if keep_fit else ci[1] < 0))
        if keep_fit and beyond:
            note = f"the fit beats the thirds on {measure} beyond the 95% interval"
        elif keep_fit:
            note = (f"the fit's {measure} gain over the thirds is within its 95% interval"
                    + (f" (its {other} gain is beyond it)" if other_ci is not None and other_ci[0] > 0 else ""))
        else:
            note = f"the fit does not beat the thirds on {measure}: the thirds are kept"
        metrics[m] = {
            "cut_points": [round(x, 4) for x in (fit.cut_points if keep_fit else THIRDS)],
            "choice": "fitted" if keep_fit else "thirds",
            "fitted_cut_points": [round(x, 4) for x in fit.cut_points],
            "beyond_interval": beyond,
            "note": note,
            "human_bins": {str(c): int((y == c).sum()) for c in (1, 2, 3)},
            "cv": {name: a.model_dump() for name, a in single.items()},
            "differences": {name: diffs[name].model_dump() for name in
                            (f"fitted_{o} - thirds" for o in OBJECTIVES)},
        }
    return {
        "card": "rating cut points of unieval-sum, calibrated on SummEval",
        "checkpoint": "MingZhong/unieval-sum (the official weights)",
        "checkpoint_config": CHECKPOINT_CONFIG,
        "holds_for": "the rating metrics coherence, fluency and relevance (with references) answered by unieval-sum, "
                     "and consistency answered by summarization/consistency (unieval-sum), on the official "
                     "checkpoint (T5-large: a unieval-sum folder of another shape, or whose identity is unverified, "
                     "is reported as not calibrated; a fine-tune of the same shape cannot be told apart); other "
                     "checkpoints and evaluators (unieval-fact, MiniCheck, your own) and relevance by key-point "
                     "coverage (relevance_coverage) are not calibrated by it",
        "data": {"name": "SummEval (Fabbri et al., 2021) with the official unieval-sum's scores",
                 "file": "summeval-unieval/summeval_unieval.jsonl", "sha256": sha256_file(path),
                 "origin": "zouharvi/subset2evaluate, commit d9fa82b4de033afe865619bc456f26454f293f26",
                 "n": len(docs), "n_documents": len(set(docs)), "human": "mean of 3 expert ratings, 1-5"},
        "bins": {"1": f"human < {BINS[0]}", "2": f"{BINS[0]} <= human < {BINS[1]}", "3": f"human >= {BINS[1]}"},
        "rating": "1 if p < low, 2 if low <= p < high, 3 if p >= high",
        "objective": objective,
        "objective_reason": ("kappa: in the cross-validation, the cut points that maximise exact agreement give "
                             "almost every summary a 3 where most human ratings are 3 (consistency, fluency): "
                             "accuracy stays high but kappa falls below the thirds' (fluency 0.27). Quadratic kappa "
                             "counts agreement beyond chance and how far off a wrong rating is"
                             if objective == "kappa" else "accuracy: exact agreement"),
        "cross_validation": {"folds": n_folds, "by": "document", "seed": seed,
                             "bootstrap": {"n": n_boot, "over": "documents", "interval": "percentile 95%"}},
        "metrics": metrics,
        "date": datetime.date.today().isoformat(),
        "command": f"python scripts/fit_calibration.py --objective {objective} --n-boot {n_boot} "
                   "-o unieval_local/data/calibration_unieval_sum.json (the input: $UNIEVAL_SHARED_DATA, default "
                   "../shared/data, /summeval-unieval/summeval_unieval.jsonl)",
    }


def main(argv: list[str] | None = None) -> int:
    """Fit, print the card, and write it where ``-o`` says (nothing is written without ``-o``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default=None,
                        help="summeval_unieval.jsonl (default: $UNIEVAL_SHARED_DATA, else ../shared/data, "
                        "/summeval-unieval/summeval_unieval.jsonl)")
    parser.add_argument("-o", "--output", default=None,
                        help="write the card (JSON) here; without it the card is only printed. "
                        f"-o {PACKAGE_CARD.relative_to(PACKAGE_CARD.parents[2])} replaces the built-in card AND with "
                        "it the rating report's default cut points (they are read from it)")
    parser.add_argument("--objective", default="kappa", choices=list(OBJECTIVES))
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of documents (default 1000)")
    args = parser.parse_args(argv)
    path = Path(args.input) if args.input else shared_data_dir() / "summeval-unieval" / "summeval_unieval.jsonl"
    try:
        c = card(path, args.objective, args.n_boot)
    except (OSError, ValueError, KeyError) as exc:
        hint = ("; give the file, or set UNIEVAL_SHARED_DATA to the shared data folder" if isinstance(exc, OSError)
                else "")
        print(f"error: {path}: {exc}{hint}", file=sys.stderr)
        return 2
    print(format_card(c))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(c, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.output}", file=sys.stderr)
    else:
        print("\n(not written: give -o FILE)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
