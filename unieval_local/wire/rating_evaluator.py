"""The summary-rating evaluator's shapes: its input (:class:`SummaryData`: ``input``,
``summary``), its answer (``{"summary": {...}}``: :class:`RatingSummary` of
:class:`MetricRating`, only the enabled metrics, ``normalized_score`` and ``avg_score`` rounded
to two decimals as its documented example shows them: :func:`evaluator_result`), and its
errors in its own field names (:func:`evaluator_error`). Computed by
:mod:`unieval_local.reports.rating`; spoken by :mod:`unieval_local.compat`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, model_serializer

from ..fields import RATING_EVALUATOR_NAMES
from .shapes import RowError, rename_fields

__all__ = ["METRICS", "Metric", "MetricRating", "RatingLabel", "RatingSummary", "SummaryData", "evaluator_error",
           "evaluator_result"]

Metric = Literal["coherence", "consistency", "relevance", "fluency"]
#: The evaluator's metrics, in its order.
METRICS: tuple[str, ...] = ("coherence", "consistency", "relevance", "fluency")
RatingLabel = Literal["good", "incomplete", "bad"]


class MetricRating(BaseModel):
    """One metric's rating, as the rating format shows it.

    Attributes:
        score: 1, 2 or 3.
        explanation: from the evidence (lowest sentences, covered key points),
            in the chosen language.
        normalized_score: ``score / 3``: 0.3333, 0.6667 or 1.0.
    """

    model_config = ConfigDict(frozen=True)

    score: int
    explanation: str
    normalized_score: float


class RatingSummary(BaseModel):
    """The ``summary`` object of the rating format: the verdict, then one entry per
    enabled metric (absent metrics are left out of the JSON, not null).

    Attributes:
        global_explanation: one line on the verdict.
        relevancy_rating: ``good``, ``incomplete`` or ``bad`` (rule engine).
        score: 1 (good), 0.5 (incomplete), 0 (bad).
        possible_issues: one line per failed rule.
        binary_score: 1 only for good.
        avg_score: mean of the enabled metrics' ``normalized_score``, in [1/3, 1].
        coherence, consistency, relevance, fluency: :class:`MetricRating`, or None when not enabled.
    """

    model_config = ConfigDict(frozen=True)

    global_explanation: str
    relevancy_rating: RatingLabel
    score: float
    possible_issues: list[str]
    binary_score: int
    avg_score: float
    coherence: MetricRating | None = None
    consistency: MetricRating | None = None
    relevance: MetricRating | None = None
    fluency: MetricRating | None = None

    @model_serializer(mode="wrap")
    def _enabled_only(self, handler):
        return {k: v for k, v in handler(self).items() if not (k in METRICS and v is None)}

    @property
    def metrics(self) -> dict[str, MetricRating]:
        """The enabled metrics' ratings, metric -> :class:`MetricRating`."""
        return {m: getattr(self, m) for m in METRICS if getattr(self, m) is not None}


class SummaryData(BaseModel):
    """One summary to rate, under the rating evaluator's field names.

    Attributes:
        input: the source the summary was made from (a document or a meeting transcript).
        summary: the summary under evaluation.
        references: optional reference summaries; relevance then uses UniEval's relevance
            against them instead of key-point coverage of ``input``.

    Fields read as attributes or, as the evaluator's dataset rows are read, by key:
    ``data["input"]``.
    """

    model_config = ConfigDict(frozen=True)

    input: StrictStr
    summary: StrictStr
    references: list[StrictStr] | None = None

    def __getitem__(self, key: str) -> Any:
        """``data["input"]``: a field by name (KeyError for another name)."""
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        """The field names, so ``dict(data)`` and ``**data`` work as for a dict row."""
        return list(type(self).model_fields)


def _rounded(summary: dict[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    """The rating summary with ``avg_score`` and each metric's ``normalized_score`` rounded to
    two decimals, as the evaluator's documented example shows them (0.67, 0.92)."""
    out = dict(summary)
    if isinstance(out.get("avg_score"), float):
        out["avg_score"] = round(out["avg_score"], 2)
    for m in metrics:
        if isinstance(out.get(m), dict) and isinstance(out[m].get("normalized_score"), float):
            out[m] = {**out[m], "normalized_score": round(out[m]["normalized_score"], 2)}
    return out


def evaluator_result(summary: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    """The evaluator's answer ``{"summary": {...}}`` from a rating report's dumped ``summary``
    (``RatingReport.model_dump(mode="json")["summary"]``): ``avg_score`` and each of ``metrics``'
    ``normalized_score`` rounded to two decimals (:func:`_rounded`)."""
    return {"summary": _rounded(dict(summary), metrics)}


def evaluator_error(error: RowError) -> dict[str, Any]:
    """``{"error": {field, message}}`` of a record without a rating, in the evaluator's field
    names (``source`` -> ``input``, ``target`` -> ``summary``: :data:`RATING_EVALUATOR_NAMES`)."""
    return {"error": rename_fields(error, RATING_EVALUATOR_NAMES).model_dump()}
