"""Meta-evaluation on binary labels: how well scores tell supported (1) from unsupported (0) claims.

The fact-checking boards' figures: LLM-AggreFact (Tang et al., 2024) reports the balanced accuracy
of ``score > 0.5`` per dataset and the unweighted mean over datasets; FactCG (Lei et al., 2025) also
tunes a threshold per dataset on its dev split (grid 0.01..0.99); TRUE (Honovich et al., 2022) and
SummaC (Laban et al., 2022) report ROC AUC. Each metric equals scikit-learn's to 1e-12
(tests/test_label_meta.py), with no scikit-learn at run time. Tuned thresholds never see the rows
they are scored on (:func:`label_report`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .label_values import labels_from_values, parse_label, plural

__all__ = ["FIGURES", "GRID", "LabelMetrics", "LabelReport", "PairedComparison", "balanced_accuracy", "json_ready",
           "f1_unsupported", "label_report", "labels_from_values", "parse_label", "plural", "roc_auc",
           "tune_threshold"]

#: FactCG's threshold grid: 0.01, 0.02, ..., 0.99.
GRID = np.round(np.arange(1, 100) / 100, 2)
#: The figures that get bootstrap intervals, in table order.
FIGURES = ("balanced_accuracy", "tuned_balanced_accuracy", "roc_auc")


# ----------------------------------------------------------------------------- metrics
def _labels(labels: Any, what: str = "labels") -> np.ndarray:
    """A 1-D int8 array of 0/1; ValueError naming the first bad row."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if arr.dtype.kind in "iuf":
        bad = np.flatnonzero(~np.isin(arr, (0, 1)))
        if len(bad):
            raise ValueError(f"{what}: row {bad[0]} is {arr[bad[0]].item()!r}, not a label (0/1/true/false)")
        return arr.astype(np.int8)
    return np.array([parse_label(v, f"{what}: row {i}") for i, v in enumerate(arr)], dtype=np.int8)


def _scores(scores: Any, n: int, what: str = "scores") -> np.ndarray:
    """A 1-D float64 array of ``n`` finite numbers; ValueError naming the first bad row."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{what}: {arr.size} values for {n} labels")
    bad = np.flatnonzero(~np.isfinite(arr))
    if len(bad):
        raise ValueError(f"{what}: row {bad[0]} is {arr[bad[0]]}, not a finite score")
    return arr


def _pair(labels: Any, predicted: Any) -> tuple[np.ndarray, np.ndarray]:
    y, p = _labels(labels), _labels(predicted, "predicted")
    if p.shape != y.shape:
        raise ValueError(f"{len(y)} labels but {len(p)} predictions")
    return y, p


def balanced_accuracy(labels: Any, predicted: Any) -> float:
    """Balanced accuracy: the mean of the recall of class 0 and of class 1 (sklearn's
    ``balanced_accuracy_score``), in [0, 1].

    Args:
        labels, predicted: equal-length 0/1 (or bool) sequences; 1 = supported.

    Returns:
        The balanced accuracy; NaN when ``labels`` hold one class only (sklearn then returns that
        class's recall with a warning; here it is undefined).
    """
    y, p = _pair(labels, predicted)
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    return float(np.mean([np.sum(p[~pos] == 0) / n_neg, np.sum(p[pos] == 1) / n_pos]))


def _weighted_auc(w: np.ndarray, y: np.ndarray, uid: np.ndarray, n_unique: int) -> np.ndarray:
    """ROC AUC of each row of row weights ``w`` ``(c, n)``: the Mann-Whitney statistic, pairs of
    equal scores counted half (``uid``: each row's rank among the ``n_unique`` distinct scores);
    NaN where a class has no weight."""
    c, n = w.shape
    ids = (np.arange(c)[:, None] * n_unique + uid[None, :]).ravel()
    wp = np.bincount(ids, weights=(w * y).ravel(), minlength=c * n_unique).reshape(c, n_unique)
    wn = np.bincount(ids, weights=(w * (1 - y)).ravel(), minlength=c * n_unique).reshape(c, n_unique)
    below = np.cumsum(wn, axis=1) - wn
    num = np.sum(wp * (below + 0.5 * wn), axis=1)
    den = wp.sum(axis=1) * wn.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), math.nan)


def roc_auc(labels: Any, scores: Any) -> float:
    """Area under the ROC curve of ``scores`` for class 1 (sklearn's ``roc_auc_score``), in [0, 1].

    Computed exactly as the Mann-Whitney U statistic over (supported, unsupported) pairs, a pair of
    equal scores counting one half: the trapezoid rule on the ROC curve gives the same number.

    Returns:
        The AUC; NaN when ``labels`` hold one class only (sklearn raises ValueError).

    Raises:
        ValueError: a label not 0/1, a score not finite, different lengths.
    """
    y = _labels(labels)
    s = _scores(scores, len(y))
    _, uid = np.unique(s, return_inverse=True)
    return float(_weighted_auc(np.ones((1, len(y))), y, uid.ravel(), int(uid.max(initial=-1)) + 1)[0])


def f1_unsupported(labels: Any, predicted: Any) -> float:
    """F1 of class 0 (unsupported): ``2 TP / (2 TP + FP + FN)`` with 0 as the positive class
    (sklearn's ``f1_score(labels, predicted, pos_label=0)``); 0.0 when undefined (no 0 among
    the labels nor the predictions: sklearn's ``zero_division=0``)."""
    y, p = _pair(labels, predicted)
    tp = int(np.sum((y == 0) & (p == 0)))
    den = 2 * tp + int(np.sum((y == 1) & (p == 0))) + int(np.sum((y == 0) & (p == 1)))
    return 2 * tp / den if den else 0.0


def tune_threshold(labels: Any, scores: Any, grid: Sequence[float] | None = None) -> float:
    """The threshold ``t`` of ``grid`` that maximises the balanced accuracy of ``scores > t``.

    The grid defaults to FactCG's, 0.01 to 0.99 in steps of 0.01 (:data:`GRID`). Balanced
    accuracies are compared exactly (as the integers ``TP * N + TN * P``); of equally good
    thresholds the one closest to 0.5 wins, then the smaller (distances rounded to 9 decimals,
    so 0.49 and 0.51 tie and 0.49 is chosen).

    Raises:
        ValueError: ``labels`` hold one class only (nothing to tune), an empty grid, a bad label or score.
    """
    y = _labels(labels)
    s = _scores(scores, len(y))
    g = GRID if grid is None else np.asarray(grid, dtype=np.float64).ravel()
    if not len(g) or not np.isfinite(g).all():
        raise ValueError(f"the threshold grid must be finite numbers, got {grid!r}")
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("a threshold cannot be tuned on rows of one class only")
    tp = n_pos - np.searchsorted(np.sort(s[y == 1]), g, side="right")  # positives with score > t
    tn = np.searchsorted(np.sort(s[y == 0]), g, side="right")  # negatives with score <= t
    gain = tp.astype(np.int64) * n_neg + tn.astype(np.int64) * n_pos
    best = g[gain == gain.max()]
    return float(min(best, key=lambda t: (round(abs(float(t) - 0.5), 9), float(t))))


def _folds(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's fold, 0..k-1: the rows of each class shuffled and dealt round-robin (class 0
    first, class 1 going on where it stopped), so every fold holds both classes where it can."""
    order = np.concatenate([rng.permutation(np.flatnonzero(y == c)) for c in (0, 1)])
    fold = np.empty(len(y), dtype=np.int64)
    fold[order] = np.arange(len(y)) % k
    return fold


def _cross_validated(y: np.ndarray, s: np.ndarray, k: int, threshold: float, rng: np.random.Generator
                     ) -> tuple[np.ndarray, float, list[str]]:
    """Held-out predictions of k-fold tuning (each fold predicted with the threshold tuned on the
    others), the median of the fold thresholds, and notes."""
    k = max(2, min(k, len(y)))
    fold = _folds(y, k, rng)
    pred = np.zeros(len(y), dtype=bool)
    chosen, notes = [], []
    for f in range(k):
        held = fold == f
        try:
            t = tune_threshold(y[~held], s[~held])
        except ValueError:
            t = threshold
            notes.append(f"fold {f + 1} of {k}: the other folds hold one class; fixed threshold {threshold} used")
        pred[held] = s[held] > t
        chosen.append(t)
    return pred, float(np.median(chosen)), notes


# ----------------------------------------------------------------------------- results
def json_ready(x: Any) -> Any:
    """Strict JSON: NaN and infinities -> None, tuples -> lists, numpy scalars -> Python, keys -> str."""
    if isinstance(x, dict):
        return {str(k): json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_ready(v) for v in x]
    x = x.item() if isinstance(x, np.generic) else x
    return None if isinstance(x, float) and not math.isfinite(x) else x


@dataclass(frozen=True)
class LabelMetrics:
    """The label figures of one aspect on one group of rows (or the mean over groups).

    ``balanced_accuracy`` is that of ``score > threshold`` (1 = supported); ``tuned_*`` use the
    threshold tuned without these rows (``tuning``: ``"dev"`` or ``"5-fold cross-validation"``;
    for k-fold ``tuned_threshold`` is the median of the fold thresholds; NaN on the mean row).
    ``intervals[figure] = (low, high)``: 95% bootstrap of each of :data:`FIGURES` (empty without
    a bootstrap). NaN marks a figure that is undefined (one class only); ``notes`` say why.
    """

    n: int
    n_supported: int
    n_unsupported: int
    balanced_accuracy: float
    tuned_threshold: float
    tuned_balanced_accuracy: float
    tuning: str
    roc_auc: float
    f1_unsupported: float
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Every field as strict JSON (NaN -> null)."""
        return json_ready({k: getattr(self, k) for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class PairedComparison:
    """Aspect ``a`` against ``b`` on the rows of ``group`` (None: the mean over groups).

    ``*_diff`` = a - b of balanced accuracy (fixed threshold) and ROC AUC, ``*_interval`` its 95%
    paired bootstrap interval, ``*_p`` its two-sided p-value ``min(1, 2 * min(share of differences
    <= 0, share >= 0))``; ``a_only_correct`` / ``b_only_correct``: rows only a / only b gets right at
    the fixed threshold (on the mean row summed over the groups the mean takes); ``mcnemar_p``: McNemar's exact test.
    """

    a: str
    b: str
    group: str | None
    n: int
    balanced_accuracy_diff: float
    balanced_accuracy_interval: tuple[float, float]
    balanced_accuracy_p: float
    roc_auc_diff: float
    roc_auc_interval: tuple[float, float]
    roc_auc_p: float
    a_only_correct: int
    b_only_correct: int
    mcnemar_p: float
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Every field as strict JSON (NaN -> null)."""
        return json_ready({k: getattr(self, k) for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class LabelReport:
    """:func:`label_report`'s answer: ``metrics[aspect][group]``, ``mean[aspect]`` (the unweighted
    mean over groups, the board's "average"), ``comparisons`` and the settings used."""

    aspects: tuple[str, ...]
    groups: tuple[str, ...]
    metrics: dict[str, dict[str, LabelMetrics]]
    mean: dict[str, LabelMetrics]
    comparisons: tuple[PairedComparison, ...]
    threshold: float
    folds: int
    bootstrap: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        """Every figure: settings, ``groups[aspect][group]``, ``mean[aspect]``, ``comparisons``."""
        return {"threshold": self.threshold, "folds": self.folds, "bootstrap": self.bootstrap, "seed": self.seed,
                "aspects": list(self.aspects), "group_names": list(self.groups),
                "groups": {a: {g: m.to_json() for g, m in rows.items()} for a, rows in self.metrics.items()},
                "mean": {a: m.to_json() for a, m in self.mean.items()},
                "comparisons": [c.to_json() for c in self.comparisons]}

    def table(self) -> str:
        """A plain-text table: per aspect one row per group and the mean; then the comparisons and notes."""
        from .label_table import format_report

        return format_report(self)


# ----------------------------------------------------------------------------- the report
def label_report(predictions: Mapping[str, np.ndarray], labels: np.ndarray | Mapping[str, np.ndarray], *,
                 groups: np.ndarray | None = None,
                 dev: tuple[Mapping[str, np.ndarray], np.ndarray | Mapping[str, np.ndarray], np.ndarray | None]
                 | None = None, threshold: float = 0.5, folds: int = 5, bootstrap: int = 1000, seed: int = 0,
                 compare: Sequence[tuple[str, str]] = (), left_out_of_mean: Mapping[str, str] | None = None
                 ) -> LabelReport:
    """Label figures per aspect and group, their unweighted mean over groups, and paired comparisons.

    Per (aspect, group): balanced accuracy of ``score > threshold`` (LLM-AggreFact's figure), the
    balanced accuracy at a tuned threshold (FactCG's), ROC AUC (TRUE's, SummaC's) and the F1 of
    the unsupported class. A tuned threshold never sees the rows it is scored on: with ``dev`` it
    is tuned (:func:`tune_threshold`) on the dev rows of the same group and applied to the test
    rows; without (or for a group without dev rows, or whose dev rows hold one class), by
    ``folds``-fold cross-validation: the rows dealt into folds stratified by label (seeded with
    ``[seed, group number]``, the same folds for every aspect), each fold predicted with the
    threshold tuned on the others, the balanced accuracy taken over the pooled held-out
    predictions; ``tuned_threshold`` is then the median of the fold thresholds.

    Intervals: ``bootstrap`` resamples of each group's rows (``numpy.random.default_rng(seed)``,
    group after group; the same rows for every aspect), tuned thresholds and held-out predictions
    held fixed (the interval covers the sampling of the test rows, not the tuning); 95% percentile
    intervals, resamples where a figure is undefined (one class drawn) left out. The mean over
    groups skips groups with one class only and those of ``left_out_of_mean`` (``notes`` says so),
    the same groups for every figure and for the row counts; its interval is that of the mean of
    the groups' resampled figures. A tuned balanced accuracy whose interval lies wholly below 0.5
    gets a note (the tuned threshold did worse than chance on rows it never saw). A comparison ``(a, b)``: a - b of balanced accuracy and ROC
    AUC with paired bootstrap intervals and p-values, and McNemar's exact test at the fixed
    threshold (scipy.stats.binomtest on the discordant rows; summed over groups on the mean row).

    Args:
        predictions: ``{aspect: scores}``, each ``(n,)`` finite numbers (a higher score = more
            supported; probabilities for the 0.5 threshold to mean what it says).
        labels: ``(n,)`` 0/1/bool (1 = supported), the truth for every aspect; or ``{aspect: (n,)}``.
        groups: ``(n,)`` group names (e.g. the dataset of each row), or None: one group ``"all"``.
        dev: ``(predictions, labels, groups)`` of the dev split, shaped as above (its groups are
            needed when ``groups`` is given), or None: k-fold cross-validation.
        threshold: the fixed threshold; ``score > threshold`` is "supported".
        folds, bootstrap, seed: k of the cross-validation (>= 2; at most the group's rows); the
            resamples (0: no intervals nor bootstrap p-values); the seed of resamples and folds.
        compare: pairs of aspects ``(a, b)`` to compare.
        left_out_of_mean: ``{group: why}``: groups shown with their figures but left out of the mean
            (``benchmark llm-aggrefact``: a dataset not on the board); a name not among the groups
            is ignored.

    Raises:
        ValueError: no rows or aspects, a label not 0/1/true/false, a score NaN or infinite, lengths
            that differ, an unknown aspect to compare, dev predictions without an aspect, bad settings.
    """
    aspects, truth, scores = _inputs(predictions, labels, "")
    n = len(truth[aspects[0]])
    gid, names = _group_ids(groups, n, "groups")
    if not math.isfinite(threshold) or folds < 2 or bootstrap < 0:
        raise ValueError(f"need a finite threshold, folds >= 2, bootstrap >= 0: got {threshold}, {folds}, {bootstrap}")
    pairs = [(str(a), str(b)) for a, b in compare]
    unknown = sorted({x for p in pairs for x in p} - set(aspects))
    if unknown:
        raise ValueError(f"cannot compare unknown aspect(s) {unknown}; the aspects are {aspects}")
    if pairs:
        from ..extras import require

        require("meta")  # scipy.stats.binomtest
    dev_rows = _dev_rows(dev, aspects, groups is not None)
    rng = np.random.default_rng(seed)
    metrics: dict[str, dict[str, LabelMetrics]] = {a: {} for a in aspects}
    dists: dict[str, dict[str, dict[str, np.ndarray]]] = {a: {} for a in aspects}
    comparisons: list[PairedComparison] = []
    for gi, g in enumerate(names):
        rows = np.flatnonzero(gid == gi)
        data, found = {}, {}
        for a in aspects:
            y, s = truth[a][rows], scores[a][rows]
            tuned_on = None if dev_rows is None else dev_rows.get(g, {}).get(a, ())
            found[a], pf, pt = _group_metrics(y, s, threshold, tuned_on, folds, np.random.default_rng([seed, gi]))
            data[a] = (y, s, pf, pt)
        dist = _bootstrap(rng, bootstrap, data)
        for a in aspects:
            dists[a][g] = dist[a]
            intervals = {f: _interval(dist[a][f]) for f in FIGURES} if bootstrap else {}
            notes = found[a].pop("notes") + _below_chance(found[a]["tuning"], intervals)
            metrics[a][g] = LabelMetrics(**found[a], intervals=intervals, notes=notes)
        comparisons += [_compare(a, b, g, data, dist, metrics) for a, b in pairs]
    outside = {str(g): str(why) for g, why in (left_out_of_mean or {}).items() if str(g) in names}
    mean = {a: _mean_metrics(metrics[a], dists[a], bootstrap, outside) for a in aspects}
    comparisons += [_mean_compare(a, b, metrics, dists, comparisons, bootstrap, outside) for a, b in pairs]
    return LabelReport(tuple(aspects), tuple(names), metrics, mean, tuple(comparisons), threshold, folds, bootstrap,
                       seed)


def _inputs(predictions: Mapping[str, Any], labels: Any, prefix: str
            ) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Aspects, labels and scores per aspect, checked (``prefix`` names the split in errors)."""
    if not isinstance(predictions, Mapping) or not predictions:
        raise ValueError(f"{prefix}predictions: give a mapping of aspect -> scores, got {type(predictions).__name__}")
    aspects = [str(a) for a in predictions]
    if isinstance(labels, Mapping):
        missing = [a for a in aspects if a not in labels]
        if missing:
            raise ValueError(f"{prefix}labels: no labels for aspect(s) {missing}")
        truth = {a: _labels(labels[a], f"{prefix}labels of {a!r}") for a in aspects}
    else:
        y = _labels(labels, f"{prefix}labels")
        truth = {a: y for a in aspects}
    n = len(truth[aspects[0]])
    if n == 0 or any(len(t) != n for t in truth.values()):
        raise ValueError(f"{prefix}labels: no rows, or a different number of rows per aspect")
    scores = {a: _scores(predictions[a], n, f"{prefix}scores of {a!r}") for a in aspects}
    return aspects, truth, scores


def _group_ids(groups: Any, n: int, what: str) -> tuple[np.ndarray, list[str]]:
    """Each row's group number and the group names (as strings, in order of first appearance)."""
    if groups is None:
        return np.zeros(n, dtype=np.int64), ["all"]
    arr = [str(v) for v in np.asarray(groups, dtype=object).ravel()]
    if len(arr) != n:
        raise ValueError(f"{what}: {len(arr)} group names for {n} rows")
    names = list(dict.fromkeys(arr))
    index = {g: i for i, g in enumerate(names)}
    return np.array([index[g] for g in arr], dtype=np.int64), names


def _dev_rows(dev: Any, aspects: list[str], grouped: bool) -> dict[str, dict[str, tuple]] | None:
    """``{group: {aspect: (labels, scores)}}`` of the dev split, or None without one."""
    if dev is None:
        return None
    d_pred, d_labels, d_groups = dev
    missing = [a for a in aspects if a not in d_pred]
    if missing:
        raise ValueError(f"the dev predictions have no scores for aspect(s) {missing}")
    d_aspects, truth, scores = _inputs({a: d_pred[a] for a in aspects}, d_labels, "dev ")
    if grouped and d_groups is None:
        raise ValueError("the test rows have groups but the dev rows have none: give the dev rows' groups too")
    gid, names = _group_ids(d_groups if grouped else None, len(truth[d_aspects[0]]), "dev groups")
    return {g: {a: (truth[a][gid == gi], scores[a][gid == gi]) for a in aspects} for gi, g in enumerate(names)}


def _group_metrics(y: np.ndarray, s: np.ndarray, threshold: float, dev: tuple | None, folds: int,
                   fold_rng: np.random.Generator) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The point figures of one aspect on one group (``dev``: its dev rows ``(labels, scores)``,
    ``()`` when the split has none for this group, None without a dev split), the fixed-threshold
    and the tuned predictions."""
    n_pos, notes = int(y.sum()), []
    one_class = n_pos in (0, len(y))
    if one_class:
        notes.append(f"{'supported' if n_pos else 'unsupported'} rows only: balanced accuracy, ROC AUC undefined")
    pf = s > threshold
    tuning, t, pt = None, math.nan, pf
    if dev:
        try:
            t = tune_threshold(*dev)
            tuning, pt = "dev", s > t
        except ValueError:
            notes.append("the dev rows of this group hold one class only: tuned by k-fold cross-validation")
    elif dev is not None:
        notes.append("no dev rows for this group: tuned by k-fold cross-validation")
    if tuning is None:
        tuning = f"{folds}-fold cross-validation"
        if not one_class:
            pt, t, more = _cross_validated(y, s, folds, threshold, fold_rng)
            notes += more
    return (dict(n=len(y), n_supported=n_pos, n_unsupported=len(y) - n_pos, balanced_accuracy=balanced_accuracy(y, pf),
                 tuned_threshold=t, tuned_balanced_accuracy=balanced_accuracy(y, pt), tuning=tuning,
                 roc_auc=roc_auc(y, s), f1_unsupported=f1_unsupported(y, pf), notes=tuple(notes)), pf, pt)


def _weighted_ba(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Balanced accuracy of each row of row weights ``w`` ``(c, n)``; NaN where a class has no weight."""
    yf, pf = y.astype(np.float64), p.astype(np.float64)
    n_pos = w @ yf
    n_neg = w.sum(axis=1) - n_pos
    tp, tn = w @ (yf * pf), w @ ((1 - yf) * (1 - pf))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), (tn / n_neg + tp / n_pos) / 2, math.nan)


def _bootstrap(rng: np.random.Generator, n_boot: int, data: dict[str, tuple]) -> dict[str, dict[str, np.ndarray]]:
    """``{aspect: {figure: (n_boot,)}}``: the figures on ``n_boot`` resamples of the group's rows
    (the same rows for every aspect), drawn in blocks whose row counts fit in memory."""
    n = len(next(iter(data.values()))[0])
    out: dict[str, dict[str, list]] = {a: {f: [] for f in FIGURES} for a in data}
    uniq = {a: np.unique(s, return_inverse=True)[1].ravel() for a, (_, s, _, _) in data.items()}
    block, done = max(1, min(n_boot, 2_000_000 // n)), 0
    while done < n_boot:
        c = min(block, n_boot - done)
        picks = rng.integers(0, n, (c, n))
        w = np.bincount((np.arange(c)[:, None] * n + picks).ravel(), minlength=c * n).reshape(c, n).astype(np.float64)
        for a, (y, _, pf, pt) in data.items():
            out[a]["balanced_accuracy"].append(_weighted_ba(w, y, pf))
            out[a]["tuned_balanced_accuracy"].append(_weighted_ba(w, y, pt))
            out[a]["roc_auc"].append(_weighted_auc(w, y, uniq[a], int(uniq[a].max()) + 1))
        done += c
    return {a: {f: np.concatenate(v) if v else np.empty(0) for f, v in figs.items()} for a, figs in out.items()}


def _interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the defined values, (NaN, NaN) without any."""
    v = values[~np.isnan(values)]
    if not len(v):
        return (math.nan, math.nan)
    lo, hi = np.quantile(v, [0.025, 0.975])
    return (float(lo), float(hi))


def _paired(diffs: np.ndarray) -> tuple[tuple[float, float], float]:
    """Interval and two-sided p-value ``min(1, 2 * min(P(d <= 0), P(d >= 0)))`` of bootstrap differences."""
    d = diffs[~np.isnan(diffs)]
    if not len(d):
        return (math.nan, math.nan), math.nan
    return _interval(d), float(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))))


def _mcnemar(a_only: int, b_only: int) -> float:
    """McNemar's exact test: two-sided binomial test of ``a_only`` of the discordant rows at p = 1/2."""
    if a_only + b_only == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(a_only, a_only + b_only, 0.5).pvalue)


def _compare(a: str, b: str, g: str, data: dict, dist: dict, metrics: dict) -> PairedComparison:
    """Aspect ``a`` against ``b`` on the rows of group ``g``."""
    (ya, _, pa, _), (yb, _, pb, _) = data[a], data[b]
    ok_a, ok_b = pa == (ya == 1), pb == (yb == 1)
    a_only, b_only = int(np.sum(ok_a & ~ok_b)), int(np.sum(~ok_a & ok_b))
    ma, mb = metrics[a][g], metrics[b][g]
    ba_ci, ba_p = _paired(dist[a]["balanced_accuracy"] - dist[b]["balanced_accuracy"])
    auc_ci, auc_p = _paired(dist[a]["roc_auc"] - dist[b]["roc_auc"])
    notes = ("one class only: the differences are undefined",) if math.isnan(ma.balanced_accuracy) else ()
    return PairedComparison(a, b, g, len(ya), ma.balanced_accuracy - mb.balanced_accuracy, ba_ci, ba_p,
                            ma.roc_auc - mb.roc_auc, auc_ci, auc_p, a_only, b_only, _mcnemar(a_only, b_only), notes)


def _below_chance(tuning: str, intervals: dict[str, tuple[float, float]]) -> tuple[str, ...]:
    """A note when the tuned balanced accuracy's interval lies wholly below 0.5 (chance)."""
    lo, hi = intervals.get("tuned_balanced_accuracy", (math.nan, math.nan))
    if not hi < 0.5:
        return ()
    where = "on the test rows" if tuning == "dev" else "out of fold"
    return (f"the tuned threshold did worse than chance {where} (tuned bal. acc. 95% interval [{lo:.4f}, "
            f"{hi:.4f}], wholly below 0.5): the checker has no usable signal on these labels",)


def _defined(per_group: dict[str, LabelMetrics], outside: Mapping[str, str]) -> tuple[list[str], tuple[str, ...]]:
    """The groups the mean takes (figures defined, not in ``outside``), and a note naming the others."""
    one_class = [g for g, m in per_group.items() if math.isnan(m.balanced_accuracy)]
    ok = [g for g in per_group if g not in one_class and g not in outside]
    if len(ok) == len(per_group):
        return ok, ()
    why: dict[str, list[str]] = {}
    for g in per_group:
        if g not in ok:
            why.setdefault("one class only" if g in one_class else outside[g], []).append(g)
    return ok, (f"mean over {len(ok)} of {plural(len(per_group), 'group')}; skipped "
                + "; ".join(f"({reason}): {gs}" for reason, gs in why.items()),)


def _mean_metrics(per_group: dict[str, LabelMetrics], dists: dict[str, dict[str, np.ndarray]],
                  n_boot: int, outside: Mapping[str, str]) -> LabelMetrics:
    """The unweighted mean over groups of each figure, every figure over the same groups (those
    with one class only, and ``outside``, skipped); ``n``, ``n_supported``, ``n_unsupported``
    count every row of the report."""
    ok, notes = _defined(per_group, outside)
    ms = [per_group[g] for g in ok]
    tunings = sorted({m.tuning for m in ms} or {m.tuning for m in per_group.values()})
    figure = {f: float(np.mean([getattr(m, f) for m in ms])) if ok else math.nan
              for f in (*FIGURES, "f1_unsupported")}
    intervals = ({f: _interval(np.mean([dists[g][f] for g in ok], axis=0)) if ok else (math.nan, math.nan)
                  for f in FIGURES} if n_boot else {})
    tuning = tunings[0] if len(tunings) == 1 else "mixed: " + ", ".join(tunings)
    every = per_group.values()
    return LabelMetrics(sum(m.n for m in every), sum(m.n_supported for m in every),
                        sum(m.n_unsupported for m in every),
                        figure["balanced_accuracy"], math.nan, figure["tuned_balanced_accuracy"], tuning,
                        figure["roc_auc"], figure["f1_unsupported"], intervals,
                        notes + _below_chance(tuning, intervals))


def _mean_compare(a: str, b: str, metrics: dict, dists: dict, per_group: list[PairedComparison],
                  n_boot: int, outside: Mapping[str, str]) -> PairedComparison:
    """Aspect ``a`` against ``b`` on the mean over groups (McNemar on the discordant rows of the same groups)."""
    ok_a, notes = _defined(metrics[a], outside)
    ok = [g for g in ok_a if g in _defined(metrics[b], outside)[0]]
    mine = [c for c in per_group if c.a == a and c.b == b and c.group in ok]
    a_only, b_only = sum(c.a_only_correct for c in mine), sum(c.b_only_correct for c in mine)
    out = {}
    for f in ("balanced_accuracy", "roc_auc"):
        point = float(np.mean([getattr(metrics[a][g], f) - getattr(metrics[b][g], f) for g in ok])) if ok else math.nan
        diffs = np.mean([dists[a][g][f] - dists[b][g][f] for g in ok], axis=0) if ok and n_boot else np.empty(0)
        out[f] = (point, *_paired(diffs))
    return PairedComparison(a, b, None, sum(c.n for c in mine), *out["balanced_accuracy"], *out["roc_auc"], a_only,
                            b_only, _mcnemar(a_only, b_only), notes)
