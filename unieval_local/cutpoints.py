"""Cut points that map model probabilities to 1-3 ratings, fitted on human judgements.

Beside the meta-evaluation (:mod:`unieval_local.meta`): both measure how model scores
agree with people. The ``rating`` report maps a probability p to 1 if p < low, 2 if
low <= p < high, 3 otherwise (:func:`~unieval_local.reports.rating.to_rating`);
:func:`fit_cut_points` finds the ``(low, high)`` that maximise exact agreement with binned
human ratings, and reports quadratic-weighted Cohen's kappa (scikit-learn).
``scripts/fit_rating_cutpoints.py`` is its command line.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from .extras import require


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


def fit_cut_points(probabilities: Sequence[float], ratings: Sequence[int], max_candidates: int = 2000) -> CutPointFit:
    """Cut points ``(low, high)`` that make :func:`to_rating` agree most often with human ratings.

    Exhaustive search: candidate cut points are the midpoints between
    consecutive distinct probabilities (and 0 and 1), thinned to
    ``max_candidates`` quantiles for large inputs; with prefix counts every
    pair ``low <= high`` is scored in O(K^2). Ties go to the pair closest to
    the middle of the tied range (the first and last best pairs, averaged, then
    snapped to the nearest candidate).

    Args:
        probabilities: model scores in [0, 1], shape ``(n,)``.
        ratings: human ratings in {1, 2, 3}, shape ``(n,)``.
        max_candidates: at most this many candidate cut points.

    Returns:
        :class:`CutPointFit`.

    Raises:
        ValueError: empty or mismatched inputs, non-finite probabilities,
            ratings outside {1, 2, 3}.
    """
    require("reports")
    from sklearn.metrics import cohen_kappa_score

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
    if cands.size > max_candidates:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, max_candidates)))
    # below[k, c]: examples with rating c+1 and p < cands[k]
    below = np.stack([np.searchsorted(np.sort(p[y == c]), cands, side="left") for c in (1, 2, 3)], axis=1)
    n3 = int((y == 3).sum())
    # agreement(low=a, high=b) = #1 below a + (#2 below b - #2 below a) + (#3 - #3 below b), for a <= b
    ones, twos, threes = below[:, 0], below[:, 1], below[:, 2]
    agree = (ones - twos)[:, None] + (twos - threes)[None, :] + n3
    agree = np.where(np.triu(np.ones_like(agree, dtype=bool)), agree, -1)
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
