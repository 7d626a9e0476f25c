"""The hosted custom-run request body the ``summ`` format reads: ``{"threshold", "model_slug",
"evaluations": [{"metrics": [{"metric": "summ", "metric_args": {...}}], "threshold", "data":
[...]}]}``, turned into one record per data row (:func:`read_custom_run`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_custom_run", "read_custom_run"]


def is_custom_run(data: Any) -> bool:
    """Whether ``data`` is a hosted custom-run request body (a mapping with ``evaluations``)."""
    return isinstance(data, dict) and "evaluations" in data


def read_custom_run(body: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    """The records of a hosted custom-run request body, as the summ report reads them.

    The body is ``{"threshold", "model_slug", "evaluations": [{"metrics": [{"metric":
    "summ", "metric_args": {"n_key_points", "max_n_claims"}}], "threshold", "data":
    [{"input", "output", ...}]}]}``. Each data row becomes one record, in order; it takes
    its evaluation's ``n_key_points``, ``max_n_claims`` and ``threshold`` (the
    evaluation's, else the body's; on the 0-100 scale of the score) unless the row gives
    its own, and the id ``evaluations[E].data[J]`` unless it has one. ``model_slug`` (the
    body's, or an evaluation's) is ignored (claims and key points are checked by the local
    checkpoint), with a note.

    Returns:
        ``(records, notes)``: the records (a row that is not an object stays as it is, and
        becomes an error row), and notes for the report (ignored keys, a threshold that
        looks like a fraction).

    Raises:
        ValueError: the body's shape is wrong (no ``evaluations`` list, an evaluation
            without a ``data`` list, a metric other than ``summ``, bad metric_args); the
            message names the place, e.g. ``evaluations[1].metrics[0]``. Also a body with no
            work: ``evaluations`` empty, or every evaluation's ``data`` empty.
    """
    if not isinstance(body, Mapping) or not isinstance(body.get("evaluations"), list):
        keys = ", ".join(map(repr, body)) if isinstance(body, Mapping) else type(body).__name__
        raise ValueError(f"a custom-run request body needs 'evaluations': a list of evaluations "
                         f"(each with 'metrics' and 'data'); got {keys or 'an empty object'}")
    if not body["evaluations"]:
        raise ValueError("the custom-run request body has no evaluation ('evaluations' is empty): nothing to score")
    notes: list[str] = []
    if body.get("model_slug") is not None:
        notes.append(f"model_slug {body['model_slug']!r} is ignored: claims and key points are checked by the "
                     "local checkpoint of consistency_aspect (settings.checkpoints)")
    ignored = sorted(set(body) - {"threshold", "model_slug", "evaluations"})
    if ignored:
        notes.append(f"request body keys ignored: {', '.join(ignored)}")
    records: list[Any] = []
    for e, ev in enumerate(body["evaluations"]):
        where = f"evaluations[{e}]"
        if not isinstance(ev, Mapping) or not isinstance(ev.get("data"), list):
            raise ValueError(f"{where}: an evaluation needs 'data': a list of rows")
        if ev.get("model_slug") is not None:
            notes.append(f"{where}.model_slug {ev['model_slug']!r} is ignored: claims and key points are checked by "
                         "the local checkpoint of consistency_aspect (settings.checkpoints)")
        args: dict[str, Any] = {}
        for k, metric in enumerate(ev.get("metrics") or [{"metric": "summ"}]):
            if not isinstance(metric, Mapping) or metric.get("metric") != "summ":
                name = metric.get("metric") if isinstance(metric, Mapping) else metric
                raise ValueError(f"{where}.metrics[{k}]: metric {name!r} is not summ; this reads the summ "
                                 "metric only (report --format summ)")
            margs = metric.get("metric_args") or {}
            if not isinstance(margs, Mapping):
                raise ValueError(f"{where}.metrics[{k}].metric_args: must be an object")
            for key, value in margs.items():
                if key not in ("n_key_points", "max_n_claims"):
                    raise ValueError(f"{where}.metrics[{k}].metric_args: unknown key {key!r}; "
                                     "summ takes n_key_points and max_n_claims")
                if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                    raise ValueError(f"{where}.metrics[{k}].metric_args.{key}: a positive integer, got {value!r}")
                if value is not None:
                    args[key] = value
        threshold = ev.get("threshold", body.get("threshold"))
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 100:
                raise ValueError(f"{where}.threshold: a number in [0, 100] (the score's scale), got {threshold!r}")
            if 0 < threshold < 1:
                notes.append(f"{where}: threshold {threshold} is read on the 0-100 scale of the summ score "
                             f"(did you mean {threshold * 100:g}?)")
            args["threshold"] = threshold
        if not ev["data"]:
            notes.append(f"{where}.data is empty: that evaluation has no row to score")
        for j, row in enumerate(ev["data"]):
            if isinstance(row, Mapping):
                row = {**args, **dict(row)}
                row.setdefault("id", f"{where}.data[{j}]")
            records.append(row)
    if not records:
        raise ValueError("the custom-run request body holds no data row (every evaluations[i].data is empty): "
                         "nothing to score")
    return records, notes
