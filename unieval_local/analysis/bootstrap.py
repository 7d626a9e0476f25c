"""Vectorised bootstrap statistics for meta-evaluation: correlations of many resamples at once
(:func:`batch_corr`), the items of resampled units (:func:`resample_items`), and the rounding that
keeps equal means tied (:func:`round_significant`). Used by :func:`unieval_local.analysis.meta.meta_evaluate`
(seeded percentile bootstrap; Efron & Tibshirani 1993)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["METHODS", "batch_corr", "resample_items", "round_significant"]

#: The correlation methods, in table order.
METHODS = ("pearson", "spearman", "kendall")


def round_significant(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """``x`` rounded to ``digits`` significant digits, element-wise (same shape; 0 stays 0).

    Used on computed means before rank statistics: two means that are equal in exact
    arithmetic but differ in the last bits because they were summed in different orders
    become one tie, as they are for ``float(f"{v:.12g}")``. Rounding is monotone, so it
    changes ranks only where values agree to ``digits`` digits.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.floor(np.log10(np.abs(x)))
    unit = 10.0 ** (np.where(np.isfinite(mag), mag, 0.0) - (digits - 1))
    return np.where(x == 0, 0.0, np.round(x / unit) * unit)


def batch_corr(x: np.ndarray, y: np.ndarray, rank_x: np.ndarray | None = None,
                rank_y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Pearson, Spearman and Kendall tau-b of each row of ``x`` with the same row of ``y``.

    Args:
        x, y: float arrays of the same shape ``(r, L)``: ``r`` resamples of ``L`` paired values.
        rank_x, rank_y: optional arrays of that shape for the rank statistics (Spearman,
            Kendall) instead of ``x`` and ``y`` (e.g. ``x`` with near-ties rounded away).

    Returns:
        ``{method: array of shape (r,)}``, values in [-1, 1]; NaN on every row when ``L < 2``
        and on rows where the method's inputs are constant (the rule of :func:`correlations`).
        Pearson is ``scipy.stats.pearsonr(x, y, axis=-1)``; Spearman is the Pearson
        correlation of ``scipy.stats.rankdata(..., axis=-1)`` ranks (average ranks for ties:
        what ``scipy.stats.spearmanr`` computes); Kendall is ``scipy.stats.kendalltau(x, y,
        axis=-1)`` (tau-b). They equal :func:`correlations` row by row to rounding (~1e-15).

    Raises:
        ValueError: arrays of different shapes, or not 2-D.
    """
    from scipy import stats

    rank_x = x if rank_x is None else rank_x
    rank_y = y if rank_y is None else rank_y
    if x.ndim != 2 or not x.shape == y.shape == rank_x.shape == rank_y.shape:
        raise ValueError(f"expected (r, L) arrays of one shape, got {x.shape} and {y.shape}")
    r, length = x.shape
    out = {m: np.full(r, math.nan) for m in METHODS}
    if length < 2 or r == 0:
        return out
    ok = (np.ptp(x, axis=1) > 0) & (np.ptp(y, axis=1) > 0)
    if ok.any():
        out["pearson"][ok] = stats.pearsonr(x[ok], y[ok], axis=-1).statistic
    ok = (np.ptp(rank_x, axis=1) > 0) & (np.ptp(rank_y, axis=1) > 0)
    if ok.any():
        xs, ys = rank_x[ok], rank_y[ok]
        out["spearman"][ok] = stats.pearsonr(stats.rankdata(xs, axis=-1), stats.rankdata(ys, axis=-1),
                                             axis=-1).statistic
        out["kendall"][ok] = stats.kendalltau(xs, ys, axis=-1).statistic
    return out


def resample_items(picks: np.ndarray, starts: np.ndarray, lens: np.ndarray, order: np.ndarray):
    """The items of each resample, as one flat index array and the row lengths.

    Args:
        picks: ``(c, U)`` unit numbers drawn for ``c`` resamples.
        starts, lens: ``(U,)`` where each unit's items begin in ``order`` and how many there are.
        order: ``(n,)`` item indices grouped by unit (each unit's items in input order).

    Returns:
        ``(flat, row_len)``: row ``b`` is ``flat[sum(row_len[:b]):][:row_len[b]]``, the items
        of units ``picks[b, 0], picks[b, 1], ...`` concatenated (repeats kept).
    """
    seg_len = lens[picks].ravel()
    seg_start = starts[picks].ravel()
    seg_off = np.cumsum(seg_len) - seg_len
    pos = np.arange(int(seg_len.sum())) - np.repeat(seg_off, seg_len) + np.repeat(seg_start, seg_len)
    return order[pos], lens[picks].sum(axis=1)
