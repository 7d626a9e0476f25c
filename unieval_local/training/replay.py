"""Replay: keep what a several-aspect base knew while one of its aspects is trained.

UniEval trains one evaluator on several aspects at once and keeps earlier tasks with a share of
their examples (Zhong et al., 2022, section 3.3, "continual learning": 20% replay). Here the base's
OTHER aspects of the trained task (the registry's aspects scored by the same evaluator, in [0, 1],
whose fields the training records have) are asked of the user's training records, each labelled
with the base's own score before training (a soft target: binary cross-entropy with a label in
[0, 1]), so the base keeps answering them as it did. ``share`` of the training items are replay
items (a seeded choice among all such queries). A base that scores one aspect (MiniCheck,
FactCG) has nothing to replay: a no-op, noted.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["other_aspects", "replay_items"]


def other_aspects(registry, task: str, aspect, evaluator: str, records: list[dict[str, Any]]) -> list:
    """The aspects of ``task`` scored by ``evaluator`` asking another question than ``aspect`` (MiniCheck's
    sentence-level variants ask its own: nothing to replay; fact/claims decomposes: not one question),
    probabilities (mean/max/min
    folds, no rating scale), whose required fields every record has, in registry order."""
    out = []
    for a in registry.get_task(task).aspects.values():
        if (a.question == aspect.question or a.checkpoint != evaluator or a.scale or a.decompose
                or a.reduction not in ("mean", "max", "min")):
            continue
        if all(all(r.get(f) not in (None, "", []) for f in a.required_fields) for r in records):
            out.append(a)
    return out


def replay_items(trainable, registry, task: str, aspect, evaluator: str, rows, n_train: int, share: float,
                 seed: int, max_length: int, settings, make_items: Callable, log: Callable[[str], None]):
    """``(items, summary)``: ``round(share / (1 - share) * n_train)`` replay items (so they are ``share``
    of all training items; fewer where fewer queries exist), each labelled with the base's own score,
    and a JSON-ready summary (``aspects``, ``items``, ``share``, or ``note`` when nothing is replayed).

    Raises:
        ValueError: ``share`` outside ``[0, 1)``.
    """
    from ..models.train.trainer import item_scores

    if not 0 <= share < 1:
        raise ValueError(f"replay must lie in [0, 1), got {share}")
    if share == 0:
        return [], {"note": "replay off (--replay 0)"}
    others = other_aspects(registry, task, aspect, evaluator, rows.records)
    if not others:
        note = (f"replay: {evaluator} scores no other aspect of {task} on these records (a single-aspect base, or "
                "fields missing): nothing replayed")
        log(note)
        return [], {"note": note}
    pool = []
    for a in others:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            items, _, _ = make_items(trainable, a, rows, max_length, None, f"replay {a.name}", log)
        pool += [dataclasses.replace(it, reductions=(a.reduction, a.window_reduction)) for it in items]
    want = min(len(pool), int(round(share / (1 - share) * n_train)))
    chosen = sorted(np.random.default_rng(seed).choice(len(pool), size=want, replace=False).tolist())
    picked = [pool[i] for i in chosen]
    soft = item_scores(trainable, picked, settings)
    picked = [dataclasses.replace(it, label=s) for it, s in zip(picked, soft)]
    log(f"replay: {len(picked)} items of {', '.join(a.name for a in others)} with the base's own scores "
        f"({len(picked) / (len(picked) + n_train):.0%} of the training items)")
    return picked, {"aspects": [a.name for a in others], "items": len(picked), "share": share,
                    "mean_target": float(np.mean(soft)) if soft else None}
