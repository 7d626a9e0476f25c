"""The custom runs of ``POST /runs/custom``, kept in memory for ``GET /runs/{id}``: a store with a
hard bound (:class:`RunStore`), the run object (:func:`new_run`) and its ``evaluations`` from the
reports of its metrics (:func:`run_evaluations`). The HTTP side is
:meth:`Service.custom_run <unieval_local.service.handlers.Service.custom_run>`."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from ..wire.custom_run import CUSTOM_RUN_NAMES, CustomRunGroup
from ..wire.client_fields import bracketed
from ..wire.shapes import rename_fields

__all__ = ["FINISHED", "RunStore", "new_run", "now", "run_evaluations"]

#: The statuses of a run that is over (it may be forgotten to make room).
FINISHED = ("completed", "failed")


def now() -> str:
    """The time now, UTC, ISO 8601 to the second (a run's ``created_at`` / ``completed_at``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunStore:
    """At most ``limit`` run objects by id, oldest first (thread-safe).

    Args:
        limit: the bound (``--max-runs``): the store never holds more.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, run: dict[str, Any]) -> bool:
        """Keep ``run``, forgetting the oldest finished runs (:data:`FINISHED`) first to make room;
        False (and nothing forgotten beyond the finished ones) when every kept run is still running."""
        with self._lock:
            if run["id"] in self.runs:
                return True
            while len(self.runs) >= self.limit:
                finished = next((k for k, r in self.runs.items() if r["status"] in FINISHED), None)
                if finished is None:
                    return False
                del self.runs[finished]
            self.runs[run["id"]] = run
            return True

    def forget(self, run_id: str) -> None:
        """Drop run ``run_id`` (no error when it is not kept)."""
        with self._lock:
            self.runs.pop(run_id, None)

    def get(self, run_id: str) -> dict[str, Any] | None:
        """A copy of run ``run_id``'s object, or None when it is not kept."""
        with self._lock:
            run = self.runs.get(run_id)
            return dict(run) if run is not None else None

    def running(self) -> int:
        """Runs kept whose status is not finished."""
        with self._lock:
            return sum(1 for r in self.runs.values() if r["status"] not in FINISHED)

    def __contains__(self, run_id: object) -> bool:
        with self._lock:
            return run_id in self.runs

    def __len__(self) -> int:
        with self._lock:
            return len(self.runs)


def new_run(body: Mapping[str, Any], notes: Sequence[str]) -> dict[str, Any]:
    """The object of a run accepted now: ``{"id": "run_<hex>", "object": "run", "status": "running",
    "created_at", "completed_at": None, "is_blocking", "data_collection_id", "threshold",
    "model_slug", "evaluations": [], "notes", "error": None}`` (the body's values as given)."""
    return {"id": f"run_{uuid.uuid4().hex}", "object": "run", "status": "running", "created_at": now(),
            "completed_at": None, "is_blocking": bool(body.get("is_blocking", True)),
            "data_collection_id": body.get("data_collection_id"), "threshold": body.get("threshold"),
            "model_slug": body.get("model_slug"), "evaluations": [], "notes": list(notes), "error": None}


def run_evaluations(groups: Sequence[CustomRunGroup], reports: Sequence[Any]) -> list[dict[str, Any]]:
    """A run object's ``evaluations``: per evaluation ``{"index", "threshold", "metrics": [{"metric":
    "summ", "metric_args", "aggregate", "results"}]}``, from each group's report file.

    Args:
        groups: the body's (evaluation, metric) groups (:func:`~unieval_local.wire.custom_run.plan_custom_run`).
        reports: per group its :class:`~unieval_local.reports.base.ReportFile`, or None for a group
            without rows.

    Returns:
        The evaluations in order; a row result is ``{"index", "id", **its summ report, ["notes"]}``
        (``notes``: the row's own, when it has any) or ``{"index", "id", "error": {"field",
        "message"}}`` in the custom run's field names (``output``, ``input``).
    """
    evaluations: dict[int, dict[str, Any]] = {}
    for g, out in zip(groups, reports):
        ev = evaluations.setdefault(g.evaluation, {"index": g.evaluation, "threshold": g.threshold, "metrics": []})
        results: list[dict[str, Any]] = []
        for r in out.reports if out is not None else ():
            head = {"index": r.index, "id": r.id}
            if r.error is not None:
                error = rename_fields(r.error, CUSTOM_RUN_NAMES)
                results.append({**head, "error": {"field": bracketed(error.field), "message": bracketed(error.message)}})
            else:
                results.append({**head, **r.report.model_dump(mode="json"),
                                **({"notes": list(r.notes)} if r.notes else {})})
        ev["metrics"].append({"metric": "summ", "metric_args": g.metric_args,
                              "aggregate": out.aggregate if out is not None else None, "results": results})
    return [evaluations[e] for e in sorted(evaluations)]
