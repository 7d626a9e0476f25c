"""Cut points that map model probabilities to 1-3 ratings, fitted on human judgements.

Beside the meta-evaluation (:mod:`unieval_local.analysis.meta`): both measure how model scores
agree with people. The ``rating`` report maps a probability p to 1 if p < low, 2 if
low <= p < high, 3 otherwise (:func:`~unieval_local.reports.rating.to_rating`);
:func:`fit_cut_points` finds the ``(low, high)`` that maximise exact agreement with binned
human ratings (or their quadratic-weighted kappa), :func:`cross_validated_ratings` and
:func:`bootstrap_agreement` measure how well fitted cut points carry over to documents not
fitted on (folds of whole documents; intervals from resampled documents).
``scripts/fit_rating_cutpoints.py`` fits a config; ``scripts/fit_calibration.py`` makes the
built-in calibration card.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..extras import require

__all__ = ["Agreement", "CutPointFit", "OBJECTIVES", "bootstrap_agreement", "cross_validated_ratings",
           "document_folds", "fit_cut_points", "format_card", "human_to_rating", "quadratic_kappa", "to_rating"]


def to_rating(probability: float, cut_points: tuple[float, float]) -> int:
    """1 if p < low, 2 if low <= p < high, 3 if p >= high.

    Raises:
        ValueError: ``probability`` is not a finite number.
    """
    if not np.isfinite(probability):
        raise ValueError(f"cannot rate a non-finite probability {probability!r}")
    low, high = cut_points
    return 1 if probability < low else 2 if probability < high else 3


class CutPointFit(BaseModel):
    """The result of :func:`fit_cut_points`.

    Attributes:
        cut_points: the fitted ``(low, high)``.
        accuracy: share of examples whose mapped rating equals the human rating.
        kappa: Cohen's kappa with quadratic weights between mapped and human
            ratings (scikit-learn), in [-1, 1]; None when undefined (one class only).
        n: examples; counts: human ratings 1, 2, 3.
    """

    model_config = ConfigDict(frozen=True)

    cut_points: tuple[float, float]
    accuracy: float
    kappa: float | None
    n: int
    counts: tuple[int, int, int]


def human_to_rating(values: Sequence[float], bins: tuple[float, float]) -> np.ndarray:
    """Human scores to 1-3: below ``bins[0]`` -> 1, below ``bins[1]`` -> 2, else 3.

    Raises:
        ValueError: ``bins`` not increasing, or a non-finite value.
    """
    low, high = bins
    if not low < high:
        raise ValueError(f"bins must be increasing, got {bins}")
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise ValueError("human scores must be finite numbers")
    return np.where(v < low, 1, np.where(v < high, 2, 3))


#: What :func:`fit_cut_points` maximises: exact agreement, or quadratic-weighted kappa.
OBJECTIVES: tuple[str, ...] = ("accuracy", "kappa")


def quadratic_kappa(ratings: Sequence[int], predicted: Sequence[int]) -> float | None:
    """Cohen's kappa with quadratic weights between two 1-3 ratings (Cohen 1968):
    ``1 - sum(w * O) / sum(w * E)``, ``w_ij = (i - j)^2 / 4``, O the confusion counts, E their
    expectation under independent marginals. None when undefined (``sum(w * E) = 0``: one
    class only on both sides). Equals scikit-learn's ``cohen_kappa_score(weights="quadratic")``."""
    y, q = np.asarray(ratings), np.asarray(predicted)
    observed = np.array([[np.sum((y == a) & (q == b)) for b in (1, 2, 3)] for a in (1, 2, 3)], dtype=np.float64)
    return _kappa(observed[None])[0]


_W = np.array([[(i - j) ** 2 / 4.0 for j in range(3)] for i in range(3)])


def _kappa(observed: np.ndarray) -> np.ndarray:
    """Quadratic kappa of a stack of 3x3 confusion matrices (shape ``(..., 3, 3)``); NaN where
    undefined, returned as None entries for a 1-d stack of one."""
    n = observed.sum(axis=(-2, -1), keepdims=True)
    expected = observed.sum(axis=-1, keepdims=True) * observed.sum(axis=-2, keepdims=True) / np.maximum(n, 1)
    num, den = (observed * _W).sum(axis=(-2, -1)), (expected * _W).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(den > 0, 1 - num / den, np.nan)
    return [None if not np.isfinite(x) else float(x) for x in k] if k.ndim == 1 and k.size == 1 else k


def fit_cut_points(probabilities: Sequence[float], ratings: Sequence[int], max_candidates: int = 2000,
                   objective: str = "accuracy") -> CutPointFit:
    """Cut points ``(low, high)`` that make :func:`to_rating` agree best with human ratings.

    Exhaustive search: candidate cut points are the midpoints between
    consecutive distinct probabilities (and 0 and 1), thinned to
    ``max_candidates`` quantiles for large inputs (800 for ``kappa``); with prefix counts every
    pair ``low <= high`` is scored in O(K^2): exact agreement (``accuracy``), or the
    quadratic-weighted kappa of the whole confusion matrix (``kappa``: every pair's 3x3 matrix
    comes from the same prefix counts). Ties go to the pair closest to the middle of the tied
    range (the first and last best pairs, averaged, then snapped to the nearest candidate).

    Args:
        probabilities: model scores in [0, 1], shape ``(n,)``.
        ratings: human ratings in {1, 2, 3}, shape ``(n,)``.
        max_candidates: at most this many candidate cut points.
        objective: ``accuracy`` (exact agreement) or ``kappa`` (quadratic-weighted kappa).

    Returns:
        :class:`CutPointFit` (its ``accuracy`` and ``kappa`` on the same data, in-sample).

    Raises:
        ValueError: empty or mismatched inputs, non-finite probabilities,
            ratings outside {1, 2, 3}, an unknown objective.
    """
    require("reports")
    from sklearn.metrics import cohen_kappa_score

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(ratings)
    if p.ndim != 1 or p.shape != y.shape or p.size == 0:
        raise ValueError(f"need equally long, non-empty probabilities and ratings, got {p.shape} and {y.shape}")
    if not np.isfinite(p).all():
        raise ValueError("probabilities must be finite")
    if not np.isin(y, (1, 2, 3)).all():
        raise ValueError("human ratings must be 1, 2 or 3 (map them with human_to_rating)")
    u = np.unique(p)
    cands = np.concatenate([[0.0], (u[:-1] + u[1:]) / 2, [1.0 if u[-1] < 1 else np.nextafter(1.0, 2.0)]])
    limit = max_candidates if objective == "accuracy" else min(max_candidates, 800)
    if cands.size > limit:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, limit)))
    # below[k, c]: examples with rating c+1 and p < cands[k]
    below = np.stack([np.searchsorted(np.sort(p[y == c]), cands, side="left") for c in (1, 2, 3)], axis=1)
    totals = np.array([(y == c).sum() for c in (1, 2, 3)])
    n3 = int(totals[2])
    upper = np.triu(np.ones((cands.size, cands.size), dtype=bool))
    if objective == "accuracy":
        # agreement(low=a, high=b) = #1 below a + (#2 below b - #2 below a) + (#3 - #3 below b), for a <= b
        ones, twos, threes = below[:, 0], below[:, 1], below[:, 2]
        agree = (ones - twos)[:, None] + (twos - threes)[None, :] + n3
        agree = np.where(upper, agree, -1)
    else:
        # confusion[a, b, true c, predicted r]: predicted 1 below a, 2 between a and b, 3 from b
        first = below[:, None, :].astype(np.float64)
        second = below[None, :, :] - below[:, None, :]
        third = totals[None, None, :] - below[None, :, :]
        confusion = np.stack(np.broadcast_arrays(first, second, third), axis=-1)
        agree = np.where(upper, np.nan_to_num(_kappa(confusion), nan=-2.0), -3.0)
    best = agree.max()
    idx = np.argwhere(agree == best)
    mid_a, mid_b = idx[:, 0].mean(), idx[:, 1].mean()
    a, b = idx[np.argmin(np.abs(idx[:, 0] - mid_a) + np.abs(idx[:, 1] - mid_b))]
    low, high = float(min(cands[a], 1.0)), float(min(cands[b], 1.0))
    mapped = np.array([to_rating(x, (low, high)) for x in p])
    kappa = None
    if len(np.unique(np.concatenate([mapped, y]))) > 1:
        k = cohen_kappa_score(y, mapped, weights="quadratic", labels=[1, 2, 3])
        kappa = float(k) if np.isfinite(k) else None
    return CutPointFit(cut_points=(low, high), accuracy=float(np.mean(mapped == y)), kappa=kappa, n=int(p.size),
                       counts=tuple(int((y == c).sum()) for c in (1, 2, 3)))


def document_folds(groups: Sequence, n_folds: int = 10, seed: int = 0) -> np.ndarray:
    """A fold number (0..n_folds-1) per item, whole groups (documents) per fold: the sorted
    distinct groups are shuffled with ``seed`` and dealt round-robin, so no two summaries of
    one document are on both sides of a split.

    Raises:
        ValueError: fewer groups than folds.
    """
    keys = sorted({str(g) for g in groups})
    if len(keys) < n_folds:
        raise ValueError(f"{len(keys)} documents cannot make {n_folds} folds")
    order = np.random.default_rng(seed).permutation(len(keys))
    fold_of = {keys[k]: i % n_folds for i, k in enumerate(order)}
    return np.array([fold_of[str(g)] for g in groups])


def cross_validated_ratings(probabilities: Sequence[float], ratings: Sequence[int], folds: Sequence[int],
                            objective: str = "accuracy") -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Out-of-fold ratings: for each fold, cut points fitted (:func:`fit_cut_points`,
    ``objective``) on the other folds map that fold's probabilities.

    Returns:
        ``(predicted, cuts)``: the 1-3 rating of every item (shape ``(n,)``) and each fold's
        fitted ``(low, high)``.
    """
    p, y, f = np.asarray(probabilities, dtype=np.float64), np.asarray(ratings), np.asarray(folds)
    out = np.zeros(len(p), dtype=int)
    cuts = []
    for k in sorted(set(f.tolist())):
        fit = fit_cut_points(p[f != k], y[f != k], objective=objective)
        out[f == k] = [to_rating(x, fit.cut_points) for x in p[f == k]]
        cuts.append(fit.cut_points)
    return out, cuts


class Agreement(BaseModel):
    """Agreement of 1-3 ratings with human ratings, each with a bootstrap 95% interval.

    Attributes:
        accuracy, kappa: exact agreement and quadratic-weighted kappa, point estimates.
        accuracy_ci, kappa_ci: percentile 95% intervals over documents resampled with
            replacement (:func:`bootstrap_agreement`).
    """

    model_config = ConfigDict(frozen=True)

    accuracy: float
    accuracy_ci: tuple[float, float]
    kappa: float | None
    kappa_ci: tuple[float, float] | None


def bootstrap_agreement(ratings: Sequence[int], predictions: dict[str, Sequence[int]], groups: Sequence, *,
                        n_boot: int = 1000, seed: int = 0) -> tuple[dict[str, Agreement], dict[str, Agreement]]:
    """Accuracy and quadratic kappa of each named set of predicted ratings, with percentile 95%
    intervals from ``n_boot`` resamples of the documents (``groups``; every summary of a drawn
    document comes along, as often as it is drawn), the same resamples for every set.

    Returns:
        ``(agreement, differences)``: name -> :class:`Agreement`, and for every ordered pair
        ``"A - B"`` of names the paired difference (its point estimates and intervals).
    """
    y = np.asarray(ratings)
    g = np.array([str(x) for x in groups])
    docs = sorted(set(g.tolist()))
    members = {d: np.flatnonzero(g == d) for d in docs}
    rng = np.random.default_rng(seed)
    draws = [np.concatenate([members[docs[k]] for k in rng.integers(0, len(docs), len(docs))])
             for _ in range(n_boot)]
    names = list(predictions)
    preds = {n: np.asarray(predictions[n]) for n in names}
    stats = {n: (np.array([np.mean(preds[n][d] == y[d]) for d in draws]),
                 np.array([np.nan if (k := quadratic_kappa(y[d], preds[n][d])) is None else k for d in draws]))
             for n in names}

    def agreement(acc: float, kap: float | None, accs: np.ndarray, kaps: np.ndarray) -> Agreement:
        ci = lambda v: (float(np.nanpercentile(v, 2.5)), float(np.nanpercentile(v, 97.5)))  # noqa: E731
        return Agreement(accuracy=float(acc), accuracy_ci=ci(accs), kappa=kap,
                         kappa_ci=ci(kaps) if np.isfinite(kaps).any() else None)

    point = {n: (float(np.mean(preds[n] == y)), quadratic_kappa(y, preds[n])) for n in names}
    single = {n: agreement(*point[n], *stats[n]) for n in names}
    diffs = {}
    for a in names:
        for b in names:
            if a != b:
                ka, kb = point[a][1], point[b][1]
                diffs[f"{a} - {b}"] = agreement(
                    point[a][0] - point[b][0], None if ka is None or kb is None else ka - kb,
                    stats[a][0] - stats[b][0], stats[a][1] - stats[b][1])
    return single, diffs


def format_card(card: dict) -> str:
    """A calibration card (``scripts/fit_calibration.py``'s JSON) as a text table: per metric its
    cut points, the human bins, and the cross-validated accuracy and quadratic kappa (with 95%
    intervals) of the thirds and of each fitted objective, the fitted-minus-thirds difference,
    the choice made and why; then what it holds for, the objective's reason, the date and the
    command that refits it (what ``unieval-local calibration`` prints)."""
    def fmt(a: dict, key: str) -> str:
        v, ci = a.get(key), a.get(f"{key}_ci")
        return "n/a" if v is None else f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    cv = card["cross_validation"]
    out = [f"{card['card']} (objective: {card['objective']}; {card['data']['n']} summaries, "
           f"{card['data']['n_documents']} documents; {cv['folds']}-fold CV by {cv['by']}, bootstrap "
           f"{cv['bootstrap']['n']} over {cv['bootstrap']['over']}, {cv['bootstrap']['interval']} intervals)",
           f"{'metric':<12}{'cut points':<18}{'human 1/2/3':<15}{'CV':<20}{'accuracy':<24}{'kappa':<24}"]
    for m, r in card["metrics"].items():
        bins = "/".join(str(r["human_bins"][k]) for k in ("1", "2", "3"))
        cuts = f"[{r['cut_points'][0]:.4f}, {r['cut_points'][1]:.4f}]"
        names = ["thirds", f"fitted_{card['objective']}"] + [n for n in r["cv"] if n not in
                                                              ("thirds", f"fitted_{card['objective']}")]
        for i, name in enumerate(names):
            a = r["cv"][name]
            out.append(f"{m if i == 0 else '':<12}{cuts if i == 0 else '':<18}{bins if i == 0 else '':<15}"
                       f"{name:<20}{fmt(a, 'accuracy'):<24}{fmt(a, 'kappa'):<24}".rstrip())
        d = r["differences"][f"fitted_{card['objective']} - thirds"]
        out.append(f"{'':<45}{'fitted - thirds':<20}{fmt(d, 'accuracy'):<24}{fmt(d, 'kappa'):<24}".rstrip())
        out.append(f"{'':<12}-> {r['choice']}: {r['note']}")
    out += ["", f"rating: {card['rating']}; the 'fitted - thirds' rows are paired differences (same resamples)",
            f"checkpoint: {card['checkpoint']}", f"holds for: {card['holds_for']}",
            f"bins: " + "; ".join(f"{k} = {v}" for k, v in card["bins"].items()),
            f"objective: {card['objective_reason']}", f"data: {card['data']['name']}, {card['data']['file']} "
            f"(sha256 {card['data']['sha256'][:12]}, {card['data']['origin']})",
            f"fitted: {card['date']}; refit: {card['command']}"]
    return "\n".join(out)
