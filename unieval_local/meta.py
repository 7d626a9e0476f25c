"""Meta-evaluation: how well scores agree with human judgements, and paired system comparison.

Correlations (Pearson, Spearman, Kendall tau-b, via scipy.stats) at three levels, as in
UniEval's ``reproduce/correlation.py`` (Zhong et al., 2022, Sec. 4):

- sample level: over all samples (UniEval's "turn level" for dialogue, and its QAGS numbers);
- summary level: per document over its systems, then averaged; documents whose
  predicted or human scores are constant are skipped (as UniEval does); only when
  documents have several systems;
- system level: over per-system means; only when there are several system ids.

Confidence intervals: seeded percentile bootstrap, resampling documents when doc ids
exist, else samples. ``paired_bootstrap`` compares two systems' mean scores on the
same examples (Koehn 2004; sacrebleu's paired bootstrap for BLEU).
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

from .records import read_records

METHODS = ("pearson", "spearman", "kendall")


def correlations(pred: Sequence[float], human: Sequence[float]) -> dict[str, float]:
    """Pearson, Spearman and Kendall tau-b of two equal-length sequences (NaN if undefined).

    Raises:
        ValueError: different lengths.
    """
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
    ps = [float(np.mean([p for p, _ in v])) for v in by_sys.values()]
    hs = [float(np.mean([h for _, h in v])) for v in by_sys.values()]
    return correlations(ps, hs)


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
                  seed: int = 0, confidence: float = 0.95) -> MetaResult:
    """Correlations per level, aspect and method, with seeded bootstrap intervals.

    Args:
        items: judged examples.
        aspects: aspects to evaluate (default: those with both predicted and human scores).
        n_boot: bootstrap resamples (0: no intervals).
        seed: the resampling seed (same seed, same intervals).
        confidence: the interval's coverage.

    Returns:
        A :class:`MetaResult`.
    """
    if not items:
        raise ValueError("no judged examples")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    common = [a for a in items[0].pred if all(a in it.pred and a in it.human for it in items)]
    if aspects is None:
        aspects = common
    unknown = [a for a in aspects if a not in common]
    if unknown:
        raise ValueError(f"aspect(s) {unknown} have no predicted and human scores on every example; "
                         f"available: {common}")
    levels = available_levels(items)
    by_doc = all(it.doc_id is not None for it in items) and len({it.doc_id for it in items}) < len(items)
    units: dict[Any, list[Item]] = defaultdict(list)
    for k, it in enumerate(items):
        units[it.doc_id if by_doc else k].append(it)
    unit_keys = list(units)
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(unit_keys), len(unit_keys))
        boot: list[Item] = []
        for j, u in enumerate(pick):
            for it in units[unit_keys[u]]:
                # resampled documents become distinct documents
                boot.append(Item(it.key, it.pred, it.human, (j, it.doc_id) if by_doc else None, it.system_id))
        samples.append(boot)
    result = MetaResult(n=len(items), unit="document" if by_doc else "sample", n_boot=n_boot)
    alpha = (1 - confidence) / 2
    for level in levels:
        result.table[level] = {}
        for a in aspects:
            point = _level_values(items, a, level)
            dist = {m: [] for m in METHODS}
            for boot in samples:
                v = _level_values(boot, a, level)
                for m in METHODS:
                    if not math.isnan(v[m]):
                        dist[m].append(v[m])
            row = {}
            for m in METHODS:
                lo, hi = (np.quantile(dist[m], [alpha, 1 - alpha]) if dist[m] else (math.nan, math.nan))
                row[m] = (point[m], float(lo), float(hi))
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


def load_items(predictions: str | Path, human: str | Path | None = None, human_field: str = "scores") -> list[Item]:
    """Judged examples from UniEval reproduce files or from our outputs joined to human scores.

    Args:
        predictions: a file whose records hold ``predict_scores`` and ``scores``
            (UniEval's ``reproduce/predict`` files), or our ``score`` output.
        human: with our output: the input file (or any records with ``id``) whose
            ``human_field`` holds the human scores; joined by key (``id``, else index).
        human_field: the field of human scores (default ``scores``).

    Raises:
        ValueError: no human scores, or keys that do not join.
    """
    rows = read_records(predictions)
    items = []
    if human is None:
        for i, r in enumerate(rows):
            if "predict_scores" not in r or human_field not in r:
                raise ValueError(f"record {i} of {predictions} has no 'predict_scores' and '{human_field}'; "
                                 "give the human scores with --human FILE")
            items.append(Item(r.get("id", i), _as_dict(r["predict_scores"]), _as_dict(r[human_field]),
                              r.get("doc_id"), r.get("system_id")))
        return items
    humans = read_records(human)
    by_key = {json.dumps(h.get("id", i)): h for i, h in enumerate(humans)}
    for r in rows:
        if "scores" not in r:
            continue  # error records
        h = by_key.get(json.dumps(r["key"]))
        if h is None:
            raise ValueError(f"output key {r['key']!r} is not in {human}")
        if human_field not in h:
            raise ValueError(f"record {r['key']!r} of {human} has no field {human_field!r}")
        pred = dict(r["scores"])
        hum = {k: float(v) for k, v in _as_dict(h[human_field]).items()}
        if "aspect_mean" in r and "overall" not in pred and "overall" in hum:
            pred["overall"] = r["aspect_mean"]
        items.append(Item(r["key"], pred, hum, r.get("doc_id", h.get("doc_id")), r.get("system_id", h.get("system_id"))))
    return items


# ----------------------------------------------------------------------------- paired comparison
@dataclass
class Comparison:
    """B against A on the same examples, per aspect: ``{aspect: (mean_a, mean_b, delta, ci_low, ci_high, p)}``."""

    rows: dict[str, tuple[float, float, float, float, float, float]]
    n: int
    n_boot: int
    n_a: int = 0
    n_b: int = 0


def paired_bootstrap(a_lines: Sequence[dict], b_lines: Sequence[dict], *, n_boot: int = 1000, seed: int = 0) -> Comparison:
    """Is B better than A? Paired bootstrap over the examples both scored (joined by key).

    ``p`` is the one-sided p-value of "B's mean is not above A's":
    ``(1 + #{resamples with mean_b - mean_a <= 0}) / (1 + n_boot)`` (Koehn 2004).

    Raises:
        ValueError: no common keys or no common aspects.
    """
    a = {json.dumps(x["key"]): x["scores"] for x in a_lines if "scores" in x}
    b = {json.dumps(x["key"]): x["scores"] for x in b_lines if "scores" in x}
    keys = [k for k in a if k in b]
    if not keys:
        raise ValueError("the two outputs have no scored key in common")
    aspects = [asp for asp in next(iter(a.values())) if all(asp in a[k] and asp in b[k] for k in keys)]
    if not aspects:
        raise ValueError("the two outputs have no aspect in common")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), (n_boot, len(keys)))
    rows = {}
    for asp in aspects:
        va = np.array([a[k][asp] for k in keys])
        vb = np.array([b[k][asp] for k in keys])
        diff = vb - va
        boot = diff[picks].mean(axis=1)
        lo, hi = np.quantile(boot, [0.025, 0.975]) if n_boot else (math.nan, math.nan)
        p = (1 + int((boot <= 0).sum())) / (1 + n_boot) if n_boot else math.nan
        rows[asp] = (float(va.mean()), float(vb.mean()), float(diff.mean()), float(lo), float(hi), p)
    return Comparison(rows, len(keys), n_boot, len(a), len(b))


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
