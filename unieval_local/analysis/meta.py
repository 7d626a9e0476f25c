"""Meta-evaluation: how well scores agree with human judgements.

Correlations (Pearson, Spearman, Kendall tau-b, via scipy.stats) at three levels, as in
UniEval's ``reproduce/correlation.py`` (Zhong et al., 2022, Sec. 4):

- sample level: over all samples (UniEval's "turn level" for dialogue, and its QAGS numbers);
- summary level: per document over its systems, then averaged; documents whose
  predicted or human scores are constant are skipped (as UniEval does); only when
  documents have several systems;
- system level: over per-system means; only when there are several system ids.

Confidence intervals: seeded percentile bootstrap, resampling documents when doc ids
exist, else samples, vectorised with numpy over resamples (the statistics themselves are
scipy.stats'; the vectorised helpers are in :mod:`.bootstrap`). Paired system comparison
(the paired bootstrap test) is :mod:`.significance`.
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

from ..extras import require
from ..records import read_records
from .bootstrap import METHODS, batch_corr, resample_items, round_significant

__all__ = ["METHODS", "Item", "MetaResult", "available_levels", "correlations", "format_meta", "load_items",
           "meta_evaluate", "rename_human"]



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
    ranked = correlations(round_significant(ps), round_significant(hs))
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
    means are rounded to 12 significant digits, :func:`round_significant`, so that means
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

    aspects = _chosen_aspects(items, aspects, n_boot)
    levels = available_levels(items)
    n = len(items)
    units = _Units.of(items, "system" in levels)
    pred = {a: np.array([it.pred[a] for it in items], dtype=np.float64) for a in aspects}
    hum = {a: np.array([it.human[a] for it in items], dtype=np.float64) for a in aspects}
    result = MetaResult(n=n, unit="document" if units.by_doc else "sample", n_boot=n_boot)
    points: dict[tuple[str, str], dict[str, float]] = {}
    per_doc: dict[str, dict[str, np.ndarray]] = {}  # summary level: aspect -> method -> (U,), NaN if skipped
    doc_ok: dict[str, np.ndarray] = {}
    for a in aspects:
        for level in levels:
            if level != "summary":
                points[level, a] = _level_values(items, a, level)
            else:
                points[level, a], per_doc[a], doc_ok[a] = _summary_points(pred[a], hum[a], units)

    dist: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {(lv, a): {m: [] for m in METHODS}
                                                                 for lv in levels for a in aspects}
    rng = np.random.default_rng(seed)
    block = max(1, min(100, 2_000_000 // n))  # resamples per block: bounds memory to ~block * n items
    with tqdm(total=n_boot, desc="bootstrap", unit="resample", leave=False,
              disable=True if n_boot == 0 else (None if progress is None else not progress)) as bar:
        done = 0
        while done < n_boot:
            c = min(block, n_boot - done)
            picks = np.stack([rng.integers(0, units.n_units, units.n_units) for _ in range(c)])  # (c, U)
            counts = np.bincount((np.arange(c)[:, None] * units.n_units + picks).ravel(),
                                 minlength=c * units.n_units).reshape(c, units.n_units)
            if "sample" in levels:
                _sample_block(picks, units, pred, hum, dist)
            if "summary" in levels:
                for a in aspects:
                    cv = counts[:, doc_ok[a]].astype(np.float64)
                    denom = cv.sum(axis=1)
                    for m in METHODS:
                        num = cv @ per_doc[a][m][doc_ok[a]]
                        dist["summary", a][m].append(np.where(denom > 0, num / np.maximum(denom, 1), math.nan))
            if "system" in levels:
                _system_block(counts, units, pred, hum, dist)
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


def _chosen_aspects(items: Sequence[Item], aspects: Sequence[str] | None, n_boot: int) -> list[str]:
    """The aspects to evaluate (default: those with predicted and human scores on every item).

    Raises:
        ValueError: no items, ``n_boot < 0``, no such aspect, or one without scores on every item.
    """
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
    return list(aspects)


@dataclass
class _Units:
    """The resampling units (documents when items have doc ids and some document has several
    items, else items): each item's unit, the items grouped by unit (``order``, ``starts``,
    ``lens``), and each item's system number when the system level is computed."""

    by_doc: bool
    unit_of: np.ndarray
    n_units: int
    order: np.ndarray
    lens: np.ndarray
    starts: np.ndarray
    sys_of: np.ndarray | None = None
    n_sys: int = 0

    @classmethod
    def of(cls, items: Sequence[Item], systems: bool) -> "_Units":
        n = len(items)
        by_doc = all(it.doc_id is not None for it in items) and len({it.doc_id for it in items}) < n
        unit_ids: dict[Any, int] = {}
        unit_of = np.array([unit_ids.setdefault(it.doc_id if by_doc else k, len(unit_ids))
                            for k, it in enumerate(items)], dtype=np.int64)
        n_units = len(unit_ids)
        order = np.argsort(unit_of, kind="stable")
        lens = np.bincount(unit_of, minlength=n_units)
        starts = np.cumsum(lens) - lens
        out = cls(by_doc, unit_of, n_units, order, lens, starts)
        if systems:
            sys_ids: dict[Any, int] = {}
            out.sys_of = np.array([sys_ids.setdefault(it.system_id, len(sys_ids)) for it in items], dtype=np.int64)
            out.n_sys = len(sys_ids)
        return out


def _summary_points(pred: np.ndarray, hum: np.ndarray, units: _Units
                    ) -> tuple[dict[str, float], dict[str, np.ndarray], np.ndarray]:
    """The summary level of one aspect: the point estimates, each document's correlations
    (NaN where skipped) and which documents count (UniEval skips constant ones)."""
    per_doc = {m: np.full(units.n_units, math.nan) for m in METHODS}
    doc_ok = np.zeros(units.n_units, dtype=bool)
    sums, k = {m: 0.0 for m in METHODS}, 0
    for u in range(units.n_units):  # in document order, summed as _level_values does
        idx = units.order[units.starts[u]:units.starts[u] + units.lens[u]]
        ps, hs = pred[idx], hum[idx]
        if len(idx) < 2 or np.ptp(ps) == 0 or np.ptp(hs) == 0:
            continue  # UniEval skips documents with constant scores
        c = correlations(ps, hs)
        doc_ok[u] = True
        for m in METHODS:
            per_doc[m][u] = c[m]
            sums[m] += c[m]
        k += 1
    return {m: (sums[m] / k if k else math.nan) for m in METHODS}, per_doc, doc_ok


def _sample_block(picks: np.ndarray, units: _Units, pred, hum, dist) -> None:
    """Sample-level statistics of a block of resamples (``picks``: ``(c, U)``), appended to ``dist``."""
    flat, row_len = resample_items(picks, units.starts, units.lens, units.order)
    bounds = np.cumsum(row_len) - row_len
    for length in np.unique(row_len):
        rows = np.flatnonzero(row_len == length)
        mat = flat[bounds[rows][:, None] + np.arange(length)]  # (g, length) item indices
        for a in pred:
            vals = batch_corr(pred[a][mat], hum[a][mat])
            for m in METHODS:
                dist["sample", a][m].append(vals[m])  # row order within a block is immaterial


def _system_block(counts: np.ndarray, units: _Units, pred, hum, dist) -> None:
    """System-level statistics of a block of resamples (``counts``: ``(c, U)`` unit
    multiplicities), appended to ``dist``."""
    c, n_sys = counts.shape[0], units.n_sys
    w = counts[:, units.unit_of].astype(np.float64).ravel()  # (c * n,) each item's multiplicity
    ids = (np.arange(c)[:, None] * n_sys + units.sys_of[None, :]).ravel()
    size = np.bincount(ids, weights=w, minlength=c * n_sys).reshape(c, n_sys)
    present = size > 0
    full = present.all(axis=1)
    for a in pred:
        mp = np.bincount(ids, weights=w * np.tile(pred[a], c), minlength=c * n_sys).reshape(c, n_sys)
        mh = np.bincount(ids, weights=w * np.tile(hum[a], c), minlength=c * n_sys).reshape(c, n_sys)
        mp, mh = mp / np.maximum(size, 1), mh / np.maximum(size, 1)
        rp, rh = round_significant(mp), round_significant(mh)  # exact ties stay ties
        vals = {m: np.full(c, math.nan) for m in METHODS}
        if full.any():
            got = batch_corr(mp[full], mh[full], rp[full], rh[full])
            for m in METHODS:
                vals[m][full] = got[m]
        for b in np.flatnonzero(~full):  # some system absent from this resample
            keep = present[b]
            got = batch_corr(mp[b, keep][None], mh[b, keep][None], rp[b, keep][None], rh[b, keep][None])
            for m in METHODS:
                vals[m][b] = got[m][0]
        for m in METHODS:
            dist["system", a][m].append(vals[m])


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


def aspect_mean_of(predictions: str | Path) -> list[str] | None:
    """The aspects the ``aspect_mean`` of a ``score`` output averages (what ``meta``'s
    ``overall`` is then the mean of): the first scored record's aspects, as the run wrote them
    (every record of one run has the same); None when no record has an ``aspect_mean`` (one
    aspect, or a UniEval reproduce file)."""
    for r in read_records(predictions):
        if isinstance(r, dict) and "aspect_mean" in r and isinstance(r.get("scores"), dict):
            return list(r["scores"])
    return None


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
