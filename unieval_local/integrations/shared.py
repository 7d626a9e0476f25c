"""One :class:`~unieval_local.api.Scorer` per process and setting, shared by the framework hooks.

The frameworks call a metric once per batch (``evaluate``), once per sample (Inspect AI) or
once per document then once to aggregate (lm-evaluation-harness); each call here reuses the
scorer built for the same settings, so a checkpoint loads once per process. The cache key is
every setting passed (STYLE 6: never part of the config). Scorers built here are offline:
the package's own checkpoint resolution (a folder, ``$UNIEVAL_LOCAL_HOME``, the HF cache),
never a download.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import Scorer
from ..schema import EvaluationResult

__all__ = ["MODEL_ENV", "aspect_columns", "check_on_invalid", "clear_scorers", "recall_values", "remember_values",
           "scorer_key", "shared_scorer"]

#: The environment variable the hooks read for the model when none is passed: a checkpoint folder
#: (named after its evaluator, e.g. ``.../unieval-sum``) or a JSON object ``{evaluator: folder}``.
#: Unset: the package's resolution (``$UNIEVAL_LOCAL_HOME/<evaluator>``, then the HF cache).
MODEL_ENV = "UNIEVAL_LOCAL_MODEL"

_SCORERS: dict[str, Scorer] = {}
#: Values of batches already scored, by (scorer key, task, aspect, examples): lm-eval's stderr
#: aggregation reuses its mean aggregation's batch. At most _KEEP batches, oldest dropped first.
_VALUES: dict[tuple, list[float]] = {}
_KEEP = 64
_LOCK = threading.Lock()


def _model_from_env() -> Any:
    raw = os.environ.get(MODEL_ENV)
    if not raw:
        return None
    return json.loads(raw) if raw.lstrip().startswith("{") else raw


def _key(settings: Mapping[str, Any]) -> str:
    def norm(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
        return v if isinstance(v, (int, float, bool, type(None))) else str(v)
    return json.dumps({k: norm(v) for k, v in sorted(settings.items())}, sort_keys=True)


def scorer_key(*, model: Any = None, device: str | None = None, **settings: Any) -> str:
    """The cache key of :func:`shared_scorer` for these settings (the model from
    ``$UNIEVAL_LOCAL_MODEL`` when none is given), a JSON string."""
    if model is None:
        model = _model_from_env()
    return _key(dict(settings, model=model, device=device, offline=True))


def shared_scorer(*, model: Any = None, device: str | None = None, **settings: Any) -> Scorer:
    """The process's :class:`Scorer` for these settings, built on first use (offline).

    Args:
        model: a checkpoint folder, or ``{evaluator: folder}``; ``None``: ``$UNIEVAL_LOCAL_MODEL``
            (:data:`MODEL_ENV`), else the package's resolution.
        device: ``cpu``, ``cuda``, ``cuda:N``; ``None``: CUDA when available.
        settings: any other :class:`Scorer` keyword (``dtype``, ``max_length``, ...); all of them
            are part of the cache key. ``offline`` is always ``True``.

    Returns:
        A :class:`Scorer`, the same object for the same settings.

    Raises:
        TypeError, ValueError: as :class:`Scorer` for an unknown or invalid setting.
    """
    if model is None:
        model = _model_from_env()
    full = dict(settings, model=model, device=device, offline=True)
    key = scorer_key(**full)
    with _LOCK:
        scorer = _SCORERS.get(key)
        if scorer is None:
            scorer = _SCORERS[key] = Scorer(**full)
    return scorer


def clear_scorers() -> None:
    """Forget every shared scorer (tests; frees the loaded checkpoints once nothing else holds them)."""
    with _LOCK:
        _SCORERS.clear()
        _VALUES.clear()


def remember_values(key: tuple, values: list[float]) -> None:
    """Keep one scored batch's values under ``key`` (hashable) for :func:`recall_values`."""
    with _LOCK:
        if len(_VALUES) >= _KEEP:
            _VALUES.pop(next(iter(_VALUES)))
        _VALUES[key] = list(values)


def recall_values(key: tuple) -> list[float] | None:
    """The values kept under ``key``, or None."""
    with _LOCK:
        values = _VALUES.get(key)
    return None if values is None else list(values)


def aspect_columns(result: EvaluationResult, aspects: Sequence[str]) -> dict[str, list[float]]:
    """``{aspect: [value per example]}`` of a multi-aspect result, in input order."""
    return {a: [float(e.value) for e in result.per_aspect[a].examples] for a in aspects}


def check_on_invalid(value: Any, words: Sequence[str]) -> Any:
    """``value`` unchanged when it is one of ``words`` or a finite number (a hook's ``on_invalid``:
    what an example the aspect cannot score gets).

    Raises:
        ValueError: anything else (a bool included), naming the valid choices.
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number and value not in words:
        raise ValueError(f"on_invalid must be {', '.join(repr(w) for w in words)} or a finite number, got {value!r}")
    return value
