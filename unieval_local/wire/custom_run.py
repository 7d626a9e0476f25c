"""The hosted custom-run request body the ``summ`` format reads: ``{"threshold", "model_slug",
"evaluations": [{"metrics": [{"metric": "summ", "metric_args": {...}}], "threshold", "data":
[...]}]}``, turned into one record per data row (:func:`read_custom_run`), or into rows per metric
(:func:`plan_custom_run`, the HTTP service's ``/runs/custom``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .http import ignored_keys_note

__all__ = ["CUSTOM_RUN_NAMES", "CustomRunError", "CustomRunGroup", "is_custom_run", "plan_custom_run",
           "read_custom_run"]

#: our field names -> a custom-run row's (for the errors of its rows)
CUSTOM_RUN_NAMES = {"target": "output", "source": "input"}


class CustomRunError(ValueError):
    """A custom-run body of the wrong shape; ``problems`` names every place: ``[(place, message)]``
    (``threshold``, ``evaluations[1].metrics[0]`` ...). The message lists them all."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__("; ".join(f"{place}: {message}" for place, message in self.problems))


def is_custom_run(data: Any) -> bool:
    """Whether ``data`` is a hosted custom-run request body (a mapping with ``evaluations``)."""
    return isinstance(data, dict) and "evaluations" in data


@dataclass(frozen=True)
class CustomRunGroup:
    """The rows of one metric of one evaluation of a custom-run body.

    Attributes:
        evaluation: ``E`` of ``evaluations[E]``. metric: ``K`` of ``evaluations[E].metrics[K]``
            (0 for an evaluation that names no metric: summ).
        metric_args: that metric's ``metric_args`` (``n_key_points``, ``max_n_claims``), given ones only.
        threshold: the evaluation's threshold, else the body's (0-100), or None.
        records: one record per data row: the row with ``metric_args`` and ``threshold`` filled in
            where the row gives none, and the id ``evaluations[E].data[J]`` unless it has one (a
            row that is not an object stays as it is).
    """

    evaluation: int
    metric: int
    metric_args: dict[str, Any]
    threshold: float | None
    records: list[Any] = field(default_factory=list)


def _metric_args(where: str, k: int, metric: Any) -> dict[str, Any]:
    """The given ``metric_args`` of ``evaluations[E].metrics[K]`` (ValueError naming the place)."""
    if not isinstance(metric, Mapping) or metric.get("metric") != "summ":
        name = metric.get("metric") if isinstance(metric, Mapping) else metric
        raise ValueError(f"{where}.metrics[{k}]: metric {name!r} is not summ; this reads the summ "
                         "metric only (report --format summ)")
    margs = metric.get("metric_args") or {}
    if not isinstance(margs, Mapping):
        raise ValueError(f"{where}.metrics[{k}].metric_args: must be an object")
    args: dict[str, Any] = {}
    for key, value in margs.items():
        if key not in ("n_key_points", "max_n_claims"):
            raise ValueError(f"{where}.metrics[{k}].metric_args: unknown key {key!r}; "
                             "summ takes n_key_points and max_n_claims")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{where}.metrics[{k}].metric_args.{key}: a positive integer, got {value!r}")
        if value is not None:
            args[key] = value
    return args


def _bad_threshold(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100


def _rows(where: str, data: list, args: Mapping[str, Any]) -> list[Any]:
    out = []
    for j, row in enumerate(data):
        if isinstance(row, Mapping):
            row = {**args, **dict(row)}
            row.setdefault("id", f"{where}.data[{j}]")
        out.append(row)
    return out


def plan_custom_run(body: Mapping[str, Any], consumed: Collection[str] = ()) -> tuple[list[CustomRunGroup], list[str]]:
    """A custom-run body's rows per (evaluation, metric): what the HTTP service answers
    metric by metric (:func:`read_custom_run` joins an evaluation's metrics into one record per row).

    Args:
        body: the request body (see :func:`read_custom_run`).
        consumed: top-level keys the caller reads itself (the service: ``is_blocking``,
            ``data_collection_id``): not noted as ignored.

    Returns:
        ``(groups, notes)``: one :class:`CustomRunGroup` per metric of each evaluation, in
        order, and the notes of :func:`read_custom_run`.

    Raises:
        CustomRunError: the body's shape is wrong: every place named (``threshold``,
            ``evaluations[1].metrics[0]`` ...), not only the first (a ``ValueError``).
        ValueError: no ``evaluations`` list, or no work (as :func:`read_custom_run`).
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
    ignored = ignored_keys_note(sorted(body), {"threshold", "model_slug", "evaluations", *consumed})
    if ignored:
        notes.append(ignored)
    problems: list[tuple[str, str]] = []
    top = body.get("threshold")
    if top is not None and _bad_threshold(top):
        problems.append(("threshold", f"a number in [0, 100] (the score's scale), got {top!r}"))
    groups: list[CustomRunGroup] = []
    for e, ev in enumerate(body["evaluations"]):
        where = f"evaluations[{e}]"
        if not isinstance(ev, Mapping) or not isinstance(ev.get("data"), list):
            problems.append((where, "an evaluation needs 'data': a list of rows"))
            continue
        if ev.get("model_slug") is not None:
            notes.append(f"{where}.model_slug {ev['model_slug']!r} is ignored: claims and key points are checked by "
                         "the local checkpoint of consistency_aspect (settings.checkpoints)")
        metrics = ev.get("metrics") or [{"metric": "summ"}]
        if not isinstance(metrics, list):
            problems.append((f"{where}.metrics", "must be a list of metrics"))
            continue
        per_metric = []
        for k, metric in enumerate(metrics):
            try:
                per_metric.append(_metric_args(where, k, metric))
            except ValueError as exc:
                place, _, message = str(exc).partition(": ")
                problems.append((place, message))
        threshold = ev.get("threshold", top)
        if threshold is not None:
            if _bad_threshold(threshold):
                if "threshold" in ev:
                    problems.append((f"{where}.threshold", f"a number in [0, 100] (the score's scale), got "
                                                          f"{threshold!r}"))
                continue
            if 0 < threshold < 1:
                notes.append(f"{where}: threshold {threshold} is read on the 0-100 scale of the summ score "
                             f"(did you mean {threshold * 100:g}?)")
        if not ev["data"]:
            notes.append(f"{where}.data is empty: that evaluation has no row to score")
        for k, args in enumerate(per_metric):
            full = {**args, **({"threshold": threshold} if threshold is not None else {})}
            groups.append(CustomRunGroup(e, k, args, threshold, _rows(where, ev["data"], full)))
    if problems:
        raise CustomRunError(problems)
    if not any(g.records for g in groups):
        raise ValueError("the custom-run request body holds no data row (every evaluations[i].data is empty): "
                         "nothing to score")
    return groups, notes


def read_custom_run(body: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    """The records of a hosted custom-run request body, as the summ report reads them.

    The body is ``{"threshold", "model_slug", "evaluations": [{"metrics": [{"metric":
    "summ", "metric_args": {"n_key_points", "max_n_claims"}}], "threshold", "data":
    [{"input", "output", ...}]}]}``. Each data row becomes one record, in order; it takes
    its evaluation's ``n_key_points``, ``max_n_claims`` and ``threshold`` (the
    evaluation's, else the body's; on the 0-100 scale of the score) unless the row gives
    its own (an evaluation naming summ more than once: the later metric's args win), and the
    id ``evaluations[E].data[J]`` unless it has one. ``model_slug`` (the body's, or an
    evaluation's) is ignored (claims and key points are checked by the local checkpoint),
    with a note.

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
    groups, notes = plan_custom_run(body)
    records: list[Any] = []
    for e, ev in enumerate(body["evaluations"]):
        mine = [g for g in groups if g.evaluation == e]
        args: dict[str, Any] = {}
        for g in mine:
            args.update(g.metric_args)
        if mine[0].threshold is not None:
            args["threshold"] = mine[0].threshold
        records.extend(_rows(f"evaluations[{e}]", ev["data"], args))
    return records, notes
