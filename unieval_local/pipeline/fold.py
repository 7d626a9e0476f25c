"""Fold (fan-in): query scores back to one score per (aspect, example).

Reductions (UniEval, ``evaluator.py``): windows of a long field by the aspect's
``window_reduction`` (max for consistency-like aspects), then references by the run's
``reference_reduction`` (mean, the UniEval author's advice in issue #2 of the UniEval
repo, or max), then units by the aspect's ``reduction`` (mean over sentences; sum for
dialogue engagingness). A rating aspect (G-Eval, ``Aspect.scale`` K) is then put back on
its own scale: its queries' values are ``(E - 1) / (K - 1)`` in [0, 1] (what the runners and the
score cache hold), its example and sentence values ``1 + (K - 1) * v``, the expected rating in
[1, K]; every reduction here is a mean or a max, which commute with that increasing affine map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .planning import Plan

__all__ = ["Folded", "ReferenceReduction", "fold", "fold_all", "on_scale"]

ReferenceReduction = Literal["mean", "max"]

_REDUCE = {"mean": np.mean, "sum": np.sum, "min": np.min, "max": np.max}


def on_scale(value: float, scale: int) -> float:
    """A rating query's value ``(E - 1) / (K - 1)`` in [0, 1] back on its scale: ``E`` in
    [1, K] (G-Eval's expected rating, Liu et al., 2023, section 2.3). ``scale``: K, 2..9."""
    return 1.0 + (scale - 1) * float(value)


@dataclass
class Folded:
    """Scores per (aspect, example), and what evidence needs.

    ``values[aspect]``: shape ``(n_examples,)``, NaN where not planned or not finite.
    ``unit_values[aspect][i]``: per unit (sentence) of example ``i``, its value
    after reducing windows and references; ``best_window[aspect][i][u]``: the
    prompt index of the window that gave unit ``u`` its value (max reduction),
    else ``None``.
    """

    values: dict[str, np.ndarray]
    unit_values: dict[str, list[list[float] | None]]
    best_query: dict[str, list[list[int | None] | None]]


def fold_all(plan: Plan, p_yes: np.ndarray, reference_reduction: ReferenceReduction = "mean") -> Folded:
    """Reduce query scores: windows (the aspect's ``window_reduction``), then
    references (``reference_reduction``), then units (the aspect's ``reduction``).

    For the built-in aspects the order does not matter: no sentence-level
    aspect uses references (UniEval, ``evaluator.py``).

    Raises:
        ValueError: unknown ``reference_reduction``.
    """
    if reference_reduction not in ("mean", "max"):
        raise ValueError(f"reference_reduction must be 'mean' or 'max', got {reference_reduction!r}")
    values, unit_values, best = {}, {}, {}
    p_yes = np.asarray(p_yes, dtype=np.float64)
    for name, blocks in plan.blocks.items():
        aspect = plan.aspects[name]
        reduce_windows = _REDUCE[aspect.window_reduction]
        reduce_refs = _REDUCE[reference_reduction]
        reduce_units = _REDUCE[aspect.reduction]
        vals = np.full(len(blocks), np.nan, dtype=np.float64)
        per_unit: list[list[float] | None] = []
        per_best: list[list[int | None] | None] = []
        for i, b in enumerate(blocks):
            if b is None or not np.isfinite(p_yes[b.indices]).all():
                per_unit.append(None)
                per_best.append(None)
                continue
            n_units = len(b.grid[0])
            units, bests = [], []
            for u in range(n_units):
                by_ref = [reduce_windows(p_yes[row[u]]) for row in b.grid]
                units.append(float(reduce_refs(by_ref)))
                cells = [k for row in b.grid for k in row[u]]
                bests.append(max(cells, key=lambda k: p_yes[k]) if aspect.window_reduction == "max"
                             and len(b.grid) == 1 and len(cells) > 1 else None)
            if aspect.scale:
                units = [on_scale(u, aspect.scale) for u in units]
            vals[i] = float(reduce_units(units))
            per_unit.append(units)
            per_best.append(bests)
        values[name], unit_values[name], best[name] = vals, per_unit, per_best
    return Folded(values, unit_values, best)


def fold(plan: Plan, p_yes: np.ndarray, reference_reduction: ReferenceReduction = "mean") -> dict[str, np.ndarray]:
    """Reduce query scores to one score per (aspect, example) (see :func:`fold_all`).

    Args:
        plan: the plan the scores belong to.
        p_yes: float array, shape ``(len(plan.prompts),)``, one P(Yes) per prompt.
        reference_reduction: ``mean`` or ``max`` over references.

    Returns:
        ``{aspect: array of shape (n_examples,)}``; ``nan`` where an example was
        not planned, or where any of its queries is not finite.
    """
    return fold_all(plan, p_yes, reference_reduction).values
