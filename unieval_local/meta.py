"""Meta-evaluation: how well scores agree with human judgements, and paired system comparison.

Correlations (Pearson, Spearman, Kendall tau-b, via scipy.stats) at three levels, as in
UniEval's ``reproduce/correlation.py`` (Zhong et al., 2022, Sec. 4):

- sample level: over all samples (UniEval's "turn level" for dialogue, and its QAGS numbers);
- summary level: per document over its systems, then averaged; documents whose
  predicted or human scores are constant are skipped (as UniEval does); only when
  documents have several systems;
- system level: over per-system means; only when there are several system ids.

Confidence intervals: seeded percentile bootstrap, resampling documents when doc ids
exist, else samples, vectorised with numpy over resamples (the statistics themselves are
scipy.stats'). ``paired_bootstrap`` compares two systems' mean scores on the same examples
(Koehn 2004; sacrebleu's paired bootstrap for BLEU); ``compare_outputs`` runs it for several
outputs against a baseline output (joined by key), ``compare_systems`` for the systems of
one output against a baseline system (paired on doc id).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .extras import require
from .records import read_records

METHODS = ("pearson", "spearman", "kendall")


def correlations(pred: Sequence[float], human: Sequence[float]) -> dict[str, float]:
    """Pearson, Spearman and Kendall tau-b of two equal-length sequences (NaN if undefined).

    Raises:
        ValueError: different lengths.
    """
    require("meta")
    from scipy import stats

    pred, human = np.asarray(pred, dtype=np.float64), np.asarray(human, dtype=np.float64)
    if pred.shape != human.shape:
        raise ValueError(f"{len(pred)} predictions but {len(human)} human scores")
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(human) == 0:
        return {m: math.nan for m in METHODS}
    return {"pearson": float(stats.pearsonr(pred, human)[0]),
            "spearman": float(stats.spearmanr(pred, human)[0]),
            "kendall": float(stats.kendalltau(pred, human)[0])}


@dataclass
class Item:
    """One judged example: its key, document, system, predicted and human scores per aspect."""

    key: Any
    pred: dict[str, float]
    human: dict[str, float]
    doc_id: Any = None
    system_id: Any = None


def _level_values(items: Sequence[Item], aspect: str, level: str) -> dict[str, float] | None:
    pairs = [(it.pred[aspect], it.human[aspect], it) for it in items if aspect in it.pred and aspect in it.human]
    if level == "sample":
        return correlations([p for p, _, _ in pairs], [h for _, h, _ in pairs])
    if level == "summary":
        by_doc: dict[Any, list] = defaultdict(list)
        for p, h, it in pairs:
            by_doc[it.doc_id].append((p, h))
        sums, n = {m: 0.0 for m in METHODS}, 0
        for rows in by_doc.values():
            ps, hs = [p for p, _ in rows], [h for _, h in rows]
            if len(rows) < 2 or len(set(ps)) == 1 or len(set(hs)) == 1:
                continue  # UniEval skips documents with constant scores
            c = correlations(ps, hs)
            for m in METHODS:
                sums[m] += c[m]
            n += 1
        return {m: (sums[m] / n if n else math.nan) for m in METHODS}
    by_sys: dict[Any, list] = defaultdict(list)
    for p, h, it in pairs:
        by_sys[it.system_id].append((p, h))
    ps = np.array([float(np.mean([p for p, _ in v])) for v in by_sys.values()])
    hs = np.array([float(np.mean([h for _, h in v])) for v in by_sys.values()])
    out = correlations(ps, hs)
    # rank statistics on means rounded to 12 significant digits, as in the bootstrap: means equal
    # but for summation order stay tied (human means of 3 ratings often are)
    ranked = correlations(_round_significant(ps), _round_significant(hs))
    return {"pearson": out["pearson"], "spearman": ranked["spearman"], "kendall": ranked["kendall"]}


def available_levels(items: Sequence[Item]) -> list[str]:
    """``sample`` always; ``summary`` when documents have several systems; ``system`` when several systems."""
    levels = ["sample"]
    docs: dict[Any, set] = defaultdict(set)
    for it in items:
        if it.doc_id is not None:
            docs[it.doc_id].add(it.system_id)
    if docs and any(len(s) > 1 for s in docs.values()) and all(it.doc_id is not None for it in items):
        levels.append("summary")
    systems = {it.system_id for it in items if it.system_id is not None}
    if len(systems) > 2 and all(it.system_id is not None for it in items):
        levels.append("system")
    return levels


@dataclass
class MetaResult:
    """``table[level][aspect][method] = (value, ci_low, ci_high)``; ``n`` samples; ``unit`` resampled."""

    table: dict[str, dict[str, dict[str, tuple[float, float, float]]]] = field(default_factory=dict)
    n: int = 0
    unit: str = "sample"
    n_boot: int = 0


def _round_significant(x: np.ndarray, digits: int = 12) -> np.ndarray:
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


def _batch_corr(x: np.ndarray, y: np.ndarray, rank_x: np.ndarray | None = None,
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


def _resample_items(picks: np.ndarray, starts: np.ndarray, lens: np.ndarray, order: np.ndarray):
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


def meta_evaluate(items: Sequence[Item], aspects: Sequence[str] | None = None, *, n_boot: int = 1000,
                  seed: int = 0, confidence: float = 0.95, progress: bool | None = None) -> MetaResult:
    """Correlations per level, aspect and method, with seeded percentile-bootstrap intervals.

    Levels (UniEval ``reproduce/correlation.py``; Zhong et al., 2022, Sec. 4): sample level
    = the correlation over all items; summary level = the mean over documents of the
    correlation across that document's items (systems), documents whose predicted or human
    scores are constant skipped; system level = the correlation of per-system mean scores.
    Methods: Pearson, Spearman and Kendall tau-b from ``scipy.stats``.

    Bootstrap (Efron & Tibshirani 1993, percentile interval): each resample draws the units
    (documents when items have doc ids and some document has several items, else items)
    with replacement, ``rng.integers(0, U, U)`` per resample from ``numpy.random.default_rng(seed)``
    (the same draws as before this was vectorised, so the same seed gives the same resamples);
    a document drawn twice counts as two documents. The statistics are computed in blocks
    of resamples with numpy: sample level from index arrays per resample (resamples of equal
    length batched through ``scipy.stats``), summary level as the count-weighted mean of the
    per-document correlations (computed once), system level from per-system means by
    ``np.bincount`` with the resample counts as weights (for its Spearman and Kendall the
    means are rounded to 12 significant digits, :func:`_round_significant`, so that means
    that are equal but for summation order stay tied; Pearson uses them unrounded).
    Resamples whose statistic is undefined (NaN: e.g. all documents skipped, or a system
    absent so that fewer than 2 remain) are left out of the interval. Point estimates come
    from :func:`_level_values` (per-document correlations summed in document order; the
    system level's rank statistics on the same rounded means as the bootstrap).

    Args:
        items: judged examples (``n`` of them); each needs every aspect in ``pred`` and ``human``.
        aspects: aspects to evaluate (default: those with both predicted and human scores on every item).
        n_boot: bootstrap resamples, >= 0 (0: no intervals, NaN bounds).
        seed: the resampling seed (same seed, same intervals).
        confidence: the interval's coverage, in (0, 1); bounds are the ``(1 - confidence) / 2``
            and ``(1 + confidence) / 2`` quantiles of the resampled values.
        progress: a tqdm bar over resamples on stderr: None (default) shows it only when
            stderr is a terminal, False never, True always.

    Returns:
        A :class:`MetaResult`: ``table[level][aspect][method] = (value, low, high)``, each in
        [-1, 1] or NaN when undefined; levels as :func:`available_levels`.

    Raises:
        ValueError: no items, ``n_boot < 0``, or an aspect without scores on every item.
    """
    from tqdm.auto import tqdm

    if not items:
        raise ValueError("no judged examples")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    common = [a for a in items[0].pred if all(a in it.pred and a in it.human for it in items)]
    if aspects is None:
        aspects = common
    if not aspects:
        pred = sorted(items[0].pred)
        human = sorted(items[0].human)
        raise ValueError(f"no aspect has both predicted and human scores: predicted {pred}, human {human}; "
                         f"pair two names with --human-aspect PREDICTED=HUMAN (e.g. {pred[0]}={human[0]})"
                         if pred and human else "no aspect has both predicted and human scores")
    unknown = [a for a in aspects if a not in common]
    if unknown:
        raise ValueError(f"aspect(s) {unknown} have no predicted and human scores on every example; "
                         f"available: {common}")
    levels = available_levels(items)
    n = len(items)
    by_doc = all(it.doc_id is not None for it in items) and len({it.doc_id for it in items}) < n
    unit_ids: dict[Any, int] = {}
    unit_of = np.array([unit_ids.setdefault(it.doc_id if by_doc else k, len(unit_ids))
                        for k, it in enumerate(items)], dtype=np.int64)
    n_units = len(unit_ids)
    order = np.argsort(unit_of, kind="stable")
    lens = np.bincount(unit_of, minlength=n_units)
    starts = np.cumsum(lens) - lens
    pred = {a: np.array([it.pred[a] for it in items], dtype=np.float64) for a in aspects}
    hum = {a: np.array([it.human[a] for it in items], dtype=np.float64) for a in aspects}
    if "system" in levels:
        sys_ids: dict[Any, int] = {}
        sys_of = np.array([sys_ids.setdefault(it.system_id, len(sys_ids)) for it in items], dtype=np.int64)
        n_sys = len(sys_ids)

    result = MetaResult(n=n, unit="document" if by_doc else "sample", n_boot=n_boot)
    points: dict[tuple[str, str], dict[str, float]] = {}
    per_doc: dict[str, dict[str, np.ndarray]] = {}  # summary level: aspect -> method -> (U,), NaN if skipped
    doc_ok: dict[str, np.ndarray] = {}
    for a in aspects:
        for level in levels:
            if level != "summary":
                points[level, a] = _level_values(items, a, level)
                continue
            per_doc[a] = {m: np.full(n_units, math.nan) for m in METHODS}
            doc_ok[a] = np.zeros(n_units, dtype=bool)
            sums, k = {m: 0.0 for m in METHODS}, 0
            for u in range(n_units):  # in document order, summed as _level_values does
                idx = order[starts[u]:starts[u] + lens[u]]
                ps, hs = pred[a][idx], hum[a][idx]
                if len(idx) < 2 or np.ptp(ps) == 0 or np.ptp(hs) == 0:
                    continue  # UniEval skips documents with constant scores
                c = correlations(ps, hs)
                doc_ok[a][u] = True
                for m in METHODS:
                    per_doc[a][m][u] = c[m]
                    sums[m] += c[m]
                k += 1
            points[level, a] = {m: (sums[m] / k if k else math.nan) for m in METHODS}

    dist: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {(lv, a): {m: [] for m in METHODS}
                                                                 for lv in levels for a in aspects}
    rng = np.random.default_rng(seed)
    block = max(1, min(100, 2_000_000 // n))  # resamples per block: bounds memory to ~block * n items
    with tqdm(total=n_boot, desc="bootstrap", unit="resample", leave=False,
              disable=True if n_boot == 0 else (None if progress is None else not progress)) as bar:
        done = 0
        while done < n_boot:
            c = min(block, n_boot - done)
            picks = np.stack([rng.integers(0, n_units, n_units) for _ in range(c)])  # (c, U)
            counts = np.bincount((np.arange(c)[:, None] * n_units + picks).ravel(),
                                 minlength=c * n_units).reshape(c, n_units)
            if "sample" in levels:
                flat, row_len = _resample_items(picks, starts, lens, order)
                bounds = np.cumsum(row_len) - row_len
                for length in np.unique(row_len):
                    rows = np.flatnonzero(row_len == length)
                    mat = flat[bounds[rows][:, None] + np.arange(length)]  # (g, length) item indices
                    for a in aspects:
                        vals = _batch_corr(pred[a][mat], hum[a][mat])
                        for m in METHODS:
                            dist["sample", a][m].append(vals[m])  # row order within a block is immaterial
            if "summary" in levels:
                for a in aspects:
                    cv = counts[:, doc_ok[a]].astype(np.float64)
                    denom = cv.sum(axis=1)
                    for m in METHODS:
                        num = cv @ per_doc[a][m][doc_ok[a]]
                        dist["summary", a][m].append(np.where(denom > 0, num / np.maximum(denom, 1), math.nan))
            if "system" in levels:
                w = counts[:, unit_of].astype(np.float64).ravel()  # (c * n,) each item's multiplicity
                ids = (np.arange(c)[:, None] * n_sys + sys_of[None, :]).ravel()
                size = np.bincount(ids, weights=w, minlength=c * n_sys).reshape(c, n_sys)
                present = size > 0
                full = present.all(axis=1)
                for a in aspects:
                    mp = np.bincount(ids, weights=w * np.tile(pred[a], c), minlength=c * n_sys).reshape(c, n_sys)
                    mh = np.bincount(ids, weights=w * np.tile(hum[a], c), minlength=c * n_sys).reshape(c, n_sys)
                    mp, mh = mp / np.maximum(size, 1), mh / np.maximum(size, 1)
                    rp, rh = _round_significant(mp), _round_significant(mh)  # exact ties stay ties
                    vals = {m: np.full(c, math.nan) for m in METHODS}
                    if full.any():
                        got = _batch_corr(mp[full], mh[full], rp[full], rh[full])
                        for m in METHODS:
                            vals[m][full] = got[m]
                    for b in np.flatnonzero(~full):  # some system absent from this resample
                        keep = present[b]
                        got = _batch_corr(mp[b, keep][None], mh[b, keep][None], rp[b, keep][None], rh[b, keep][None])
                        for m in METHODS:
                            vals[m][b] = got[m][0]
                    for m in METHODS:
                        dist["system", a][m].append(vals[m])
            done += c
            bar.update(c)

    alpha = (1 - confidence) / 2
    for level in levels:
        result.table[level] = {}
        for a in aspects:
            row = {}
            for m in METHODS:
                vals = np.concatenate(dist[level, a][m]) if dist[level, a][m] else np.empty(0)
                vals = vals[~np.isnan(vals)]
                lo, hi = np.quantile(vals, [alpha, 1 - alpha]) if len(vals) else (math.nan, math.nan)
                row[m] = (points[level, a][m], float(lo), float(hi))
            result.table[level][a] = row
    return result


def format_meta(result: MetaResult) -> str:
    """A plain-text table of :class:`MetaResult`."""
    boot = result.n_boot > 0
    lines = [f"{result.n} samples; " + (f"{result.n_boot} bootstrap resamples of {result.unit}s, 95% intervals"
                                          if boot else "no bootstrap intervals")]
    width = 26 if boot else 10
    for level, rows in result.table.items():
        lines.append(f"\n{level} level")
        lines.append(f"{'aspect':<20}" + "".join(f"{m:>{width}}" for m in METHODS))
        for a, row in rows.items():
            cells = []
            for m in METHODS:
                v, lo, hi = row[m]
                if math.isnan(v):
                    cells.append("n/a")
                else:
                    cells.append(f"{v:>8.4f} [{lo:>7.4f},{hi:>7.4f}]" if boot else f"{v:.4f}")
            lines.append(f"{a:<20}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- loading
def _as_dict(v: Any) -> dict:
    if isinstance(v, dict):
        return v
    if isinstance(v, str):
        import ast

        return ast.literal_eval(v)
    raise ValueError(f"expected a dict of scores, got {type(v).__name__}")


def load_items(predictions: str | Path, human: str | Path | None = None,
               human_field: str | None = None) -> list[Item]:
    """Judged examples from UniEval reproduce files or from our outputs joined to human scores.

    Two forms, each with its own default ``human_field``:

    - ``human=None``: ``predictions`` is one of UniEval's ``reproduce/predict`` files, whose
      records hold the model's ``predict_scores`` and the human ``scores`` (so
      ``human_field`` defaults to ``scores`` there);
    - ``human=FILE``: ``predictions`` is our ``score`` output and ``FILE`` the scored input
      (or any records with ``id``) whose ``human_field`` holds the human scores; joined by
      key (``id``, else the record's index). ``human_field`` defaults to ``human``, the
      field ``scripts/convert_summeval.py`` writes.

    Args:
        predictions: the reproduce file or score output (JSON list or JSONL).
        human: the records with human scores, or None (reproduce file).
        human_field: the field of human scores (a dict ``{aspect: value}``, or its ``repr``);
            None: ``scores`` without ``human``, ``human`` with it.

    Returns:
        One :class:`Item` per scored record (error records of a score output are skipped),
        in the order of ``predictions``; ``doc_id`` / ``system_id`` from the prediction
        record, else from the human record.

    Raises:
        ValueError: a reproduce record without ``predict_scores`` or ``human_field``; a
            score output key missing from ``human``; a human record without ``human_field``.
        OSError: unreadable files.
    """
    rows = read_records(predictions)
    items = []
    if human is None:
        fld = human_field or "scores"
        for i, r in enumerate(rows):
            if "predict_scores" not in r or fld not in r:
                lacks = [f for f in ("predict_scores", fld) if f not in r]
                raise ValueError(f"record {i} of {predictions} lacks {' and '.join(repr(f) for f in lacks)}: it is "
                                 "not a UniEval reproduce file (which has both); for a score output give the human "
                                 "scores with --human FILE")
            items.append(Item(r.get("id", i), _as_dict(r["predict_scores"]), _as_dict(r[fld]),
                              r.get("doc_id"), r.get("system_id")))
        return items
    fld = human_field or "human"
    humans = read_records(human)
    by_key = {json.dumps(h.get("id", i)): h for i, h in enumerate(humans)}
    for r in rows:
        if "scores" not in r:
            continue  # error records
        h = by_key.get(json.dumps(r["key"]))
        if h is None:
            raise ValueError(f"output key {r['key']!r} is not in {human}")
        if fld not in h:
            dicts = [k for k, v in h.items() if isinstance(v, dict)]
            raise ValueError(f"record {r['key']!r} of {human} has no field {fld!r}"
                             + (f" (fields holding dicts: {dicts}); choose one with --human-field" if dicts else ""))
        pred = dict(r["scores"])
        hum = {k: float(v) for k, v in _as_dict(h[fld]).items()}
        if "aspect_mean" in r and "overall" not in pred and "overall" in hum:
            pred["overall"] = r["aspect_mean"]
        items.append(Item(r["key"], pred, hum, r.get("doc_id", h.get("doc_id")), r.get("system_id", h.get("system_id"))))
    return items


def rename_human(items: Sequence[Item], human_aspect: str, as_aspect: str) -> list[Item]:
    """The items with human score ``human_aspect`` also available as ``as_aspect``, so a
    predicted aspect of another name can be compared with it (MiniCheck's ``support`` with
    QAGS's human ``consistency``).

    Raises:
        ValueError: an item has no human ``human_aspect`` (the message names its key).
    """
    out = []
    for it in items:
        if human_aspect not in it.human:
            raise ValueError(f"record {it.key!r} has no human score {human_aspect!r}; it has {sorted(it.human)}")
        out.append(Item(it.key, it.pred, {**it.human, as_aspect: it.human[human_aspect]}, it.doc_id, it.system_id))
    return out


# ----------------------------------------------------------------------------- paired comparison
@dataclass
class Comparison:
    """B against A on the same examples, per aspect.

    Attributes:
        rows: ``{aspect: (mean_a, mean_b, delta, ci_low, ci_high, p)}``: the means over the
            ``n`` paired examples, ``delta = mean_b - mean_a``, the 95% percentile-bootstrap
            interval of ``delta`` and the one-sided p-value of "B is not better" (NaN when
            ``n_boot == 0``), in A's aspect order.
        n: paired examples; n_boot: resamples; n_a, n_b: scored examples of A and of B.
    """

    rows: dict[str, tuple[float, float, float, float, float, float]]
    n: int
    n_boot: int
    n_a: int = 0
    n_b: int = 0


def _paired(a: dict[str, dict], b: dict[str, dict], *, n_boot: int, seed: int, label: str, unit: str) -> Comparison:
    """The paired bootstrap of :func:`paired_bootstrap` on ``{join key: scores}`` maps.

    ``label`` and ``unit`` name the two sides and the join key in error messages
    ("{label} have no scored {unit} in common").
    """
    keys = [k for k in a if k in b]
    if not keys:
        raise ValueError(f"{label} have no scored {unit} in common")
    aspects = [asp for asp in next(iter(a.values())) if all(asp in a[k] and asp in b[k] for k in keys)]
    if not aspects:
        raise ValueError(f"{label} have no aspect in common")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), (n_boot, len(keys)))  # (n_boot, n) example numbers
    step = max(1, 4_000_000 // len(keys))  # resamples per block: bounds memory to ~4M values
    rows = {}
    for asp in aspects:
        va = np.array([a[k][asp] for k in keys], dtype=np.float64)
        vb = np.array([b[k][asp] for k in keys], dtype=np.float64)
        diff = vb - va
        boot = np.concatenate([diff[picks[i:i + step]].mean(axis=1) for i in range(0, n_boot, step)]) \
            if n_boot else np.empty(0)
        lo, hi = np.quantile(boot, [0.025, 0.975]) if n_boot else (math.nan, math.nan)
        p = (1 + int((boot <= 0).sum())) / (1 + n_boot) if n_boot else math.nan
        rows[asp] = (float(va.mean()), float(vb.mean()), float(diff.mean()), float(lo), float(hi), p)
    return Comparison(rows, len(keys), n_boot, len(a), len(b))


def paired_bootstrap(a_lines: Sequence[dict], b_lines: Sequence[dict], *, n_boot: int = 1000, seed: int = 0) -> Comparison:
    """Is B better than A? Paired bootstrap over the examples both scored (joined by key).

    Paired bootstrap resampling (Koehn 2004, "Statistical significance tests for machine
    translation evaluation"; sacrebleu's paired bootstrap): draw the ``n`` paired examples
    with replacement ``n_boot`` times (``numpy.random.default_rng(seed)``, one
    ``(n_boot, n)`` draw), take the mean of ``score_B - score_A`` per resample (vectorised),
    and report the 2.5% / 97.5% quantiles of those means as the 95% interval of the delta and
    ``p = (1 + #{resamples with mean_b - mean_a <= 0}) / (1 + n_boot)``, the one-sided
    p-value of "B's mean is not above A's" (in (0, 1]; add-one as in Davison & Hinkley 1997).

    Args:
        a_lines, b_lines: ``score`` output records (``key``, ``scores``); records without
            ``scores`` (errors) are skipped.
        n_boot: resamples, >= 0 (0: NaN interval and p).
        seed: the resampling seed (same seed and ``n``, same resamples).

    Returns:
        A :class:`Comparison` over the keys in both (in A's order) and the aspects both have.

    Raises:
        ValueError: no common keys, no common aspects, or ``n_boot < 0``.
    """
    a = {json.dumps(x["key"]): x["scores"] for x in a_lines if "scores" in x}
    b = {json.dumps(x["key"]): x["scores"] for x in b_lines if "scores" in x}
    return _paired(a, b, n_boot=n_boot, seed=seed, label="the two outputs", unit="key")


@dataclass
class ComparisonSet:
    """Several systems against one baseline, each a :class:`Comparison` (A = the baseline, B = the system).

    Attributes:
        baseline: the baseline's name (its file, or its ``system_id``).
        paired_on: ``"key"`` (outputs joined by record key) or ``"doc_id"`` (systems of one output).
        comparisons: ``[(system name, Comparison)]`` in input order.
        n_boot, seed: the bootstrap's resamples and seed (every comparison uses the same seed).
    """

    baseline: str
    paired_on: str
    comparisons: list[tuple[str, Comparison]]
    n_boot: int
    seed: int

    @property
    def n_tests(self) -> int:
        """The number of (system, aspect) p-values: what a multiple-comparison correction would divide by."""
        return sum(len(c.rows) for _, c in self.comparisons)


def compare_outputs(baseline: Sequence[dict], others: Sequence[tuple[str, Sequence[dict]]], *,
                    baseline_name: str = "baseline", n_boot: int = 1000, seed: int = 0) -> ComparisonSet:
    """Each of several score outputs against a baseline output, joined by key.

    Each comparison is :func:`paired_bootstrap` ``(baseline, other)`` with the same ``seed``
    (Koehn 2004), so its numbers equal a two-output comparison of the pair.

    Args:
        baseline: the baseline's output records (``key``, ``scores``).
        others: ``[(name, records)]``, one or more.
        baseline_name: the baseline's name in the table.
        n_boot, seed: as :func:`paired_bootstrap`.

    Returns:
        A :class:`ComparisonSet` with ``paired_on="key"``.

    Raises:
        ValueError: no other output; an output with no scored key or aspect in common with
            the baseline (the message names it).
    """
    if not others:
        raise ValueError("nothing to compare: give at least one output besides the baseline")
    a = {json.dumps(x["key"]): x["scores"] for x in baseline if "scores" in x}
    if not a:
        raise ValueError(f"{baseline_name} has no scored record")
    comps = []
    for name, lines in others:
        b = {json.dumps(x["key"]): x["scores"] for x in lines if "scores" in x}
        comps.append((name, _paired(a, b, n_boot=n_boot, seed=seed, label=f"{baseline_name} and {name}",
                                    unit="key")))
    return ComparisonSet(baseline_name, "key", comps, n_boot, seed)


def compare_systems(lines: Sequence[dict], baseline: str | None, *, n_boot: int = 1000, seed: int = 0,
                    source: str = "the output") -> ComparisonSet:
    """Every system of ONE score output against a baseline system, paired on ``doc_id``.

    Scored records are grouped by ``str(system_id)``; within a system each ``doc_id`` must
    occur once. Each other system is compared with the baseline by the paired bootstrap of
    :func:`paired_bootstrap` over the doc ids both scored (Koehn 2004), every comparison
    with the same ``seed``. The p-values are per test, not corrected for multiple
    comparisons (``ComparisonSet.n_tests`` of them).

    Args:
        lines: score output records with ``system_id``, ``doc_id`` and ``scores``; records
            without ``scores`` (errors) are skipped.
        baseline: the baseline's ``system_id`` (compared as a string); None raises, listing the systems.
        n_boot, seed: as :func:`paired_bootstrap`.
        source: the output's name in messages (e.g. its path).

    Returns:
        A :class:`ComparisonSet` with ``paired_on="doc_id"``, systems in order of first appearance.

    Raises:
        ValueError: a scored record without ``system_id`` or ``doc_id``; a ``doc_id`` twice in
            one system; no baseline given, or one that is not a system (the systems are listed);
            only one system; a system with no doc id or aspect in common with the baseline.
    """
    groups: dict[str, dict[str, dict]] = {}
    for i, x in enumerate(lines):
        if "scores" not in x:
            continue
        if x.get("system_id") is None:
            raise ValueError(f"{source}: record {i} has no system_id; comparing the systems of one output needs "
                             "system_id and doc_id on each record (or give two outputs to compare them by key)")
        if x.get("doc_id") is None:
            raise ValueError(f"{source}: record {i} has no doc_id; the systems of one output are paired on doc_id")
        system, doc = str(x["system_id"]), json.dumps(x["doc_id"])
        group = groups.setdefault(system, {})
        if doc in group:
            raise ValueError(f"{source}: system {system!r} has doc_id {x['doc_id']!r} twice (record {i}); "
                             "systems are paired on doc_id, one record per document")
        group[doc] = x["scores"]
    if not groups:
        raise ValueError(f"{source} has no scored record")
    names = ", ".join(groups)
    if baseline is None:
        raise ValueError(f"name the baseline system with --baseline; the systems of {source} are: {names}")
    if str(baseline) not in groups:
        raise ValueError(f"unknown baseline {baseline!r}; the systems of {source} are: {names}")
    baseline = str(baseline)
    if len(groups) < 2:
        raise ValueError(f"{source} has only one system ({baseline}); nothing to compare")
    comps = [(s, _paired(groups[baseline], g, n_boot=n_boot, seed=seed, label=f"systems {baseline!r} and {s!r}",
                         unit="doc_id")) for s, g in groups.items() if s != baseline]
    return ComparisonSet(baseline, "doc_id", comps, n_boot, seed)


def format_comparison_set(cs: ComparisonSet) -> str:
    """A plain-text table of :class:`ComparisonSet`: one row per (system, aspect).

    Columns: system, aspect, n (paired examples), the baseline's and the system's mean over
    those examples, delta = system - baseline, its 95% interval and the one-sided p-value;
    a header says the p-values are not corrected for multiple comparisons.
    """
    unit = "keys" if cs.paired_on == "key" else "doc ids"
    k = cs.n_tests
    lines = [f"baseline {cs.baseline}; paired bootstrap over {unit}, "
             + (f"{cs.n_boot} resamples (seed {cs.seed}); p = P(mean system <= mean baseline), one-sided"
                if cs.n_boot else "no resamples (no intervals or p-values)")]
    if cs.n_boot:
        lines.append(f"p-values are not corrected for multiple comparisons ({k} test{'s' if k != 1 else ''} here"
                     + (f"; Bonferroni: compare p with 0.05 / {k} = {0.05 / k:.4g})" if k > 1 else ")"))
    for name, c in cs.comparisons:
        if c.n < max(c.n_a, c.n_b):
            where = "both outputs" if cs.paired_on == "key" else "both systems"
            lines.append(f"warning: {name}: only {c.n} {unit} are in {where} (baseline has {c.n_a} scored, "
                         f"{name} {c.n_b}); the others are left out")
    w = max([6] + [len(name) for name, _ in cs.comparisons]) + 2
    wa = max([6] + [len(a) for _, c in cs.comparisons for a in c.rows]) + 2
    lines.append(f"{'system':<{w}}{'aspect':<{wa}}{'n':>6}{'baseline':>10}{'system':>10}{'delta':>10}"
                 f"{'95% CI':>22}{'p':>9}")
    for name, c in cs.comparisons:
        for asp, (ma, mb, d, lo, hi, p) in c.rows.items():
            ci = f"[{lo:+.4f}, {hi:+.4f}]" if c.n_boot else "n/a"
            pv = f"{p:.4f}" if c.n_boot else "n/a"
            lines.append(f"{name:<{w}}{asp:<{wa}}{c.n:>6}{ma:>10.4f}{mb:>10.4f}{d:>+10.4f}{ci:>22}{pv:>9}")
    return "\n".join(lines)


def format_comparison(c: Comparison) -> str:
    """A plain-text table of :class:`Comparison`."""
    lines = [f"{c.n} paired examples, {c.n_boot} bootstrap resamples; p = P(mean B <= mean A) (one-sided)"]
    if c.n < max(c.n_a, c.n_b):
        lines.append(f"warning: only {c.n} keys are in both outputs (A has {c.n_a} scored, B {c.n_b}); "
                     "the others are left out")
    lines.append(f"{'aspect':<20}{'mean A':>10}{'mean B':>10}{'B - A':>10}{'95% CI':>22}{'p':>9}")
    for asp, (ma, mb, d, lo, hi, p) in c.rows.items():
        ci = f"[{lo:+.4f}, {hi:+.4f}]" if c.n_boot else "n/a"
        pv = f"{p:.4f}" if c.n_boot else "n/a"
        lines.append(f"{asp:<20}{ma:>10.4f}{mb:>10.4f}{d:>+10.4f}{ci:>22}{pv:>9}")
    return "\n".join(lines)
