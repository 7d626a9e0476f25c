"""The ``rating`` report: 1-3 per metric from UniEval probabilities, and a rule engine.

Per enabled metric (coherence, consistency, relevance, fluency) the UniEval
score p in [0, 1] (summarization aspects; consistency from unieval-fact when
``consistency_aspect``, e.g. ``fact/consistency`` or MiniCheck's ``fact/support``) becomes a rating by the metric's cut points
``(low, high)``: 1 if p < low, 2 if low <= p < high, 3 if p >= high. Without a
reference, relevance is the key-point coverage share of the ``summ`` report
(key points supported by the summary / key points) with its own cut points
(``relevance_coverage``), and the output says so (``relevance_method``).

Rule engine (:func:`apply_rules`) over the enabled metrics only: ``good`` when
every metric meets its ``good_rules`` minimum (default coherence >= 2,
consistency >= 3, relevance >= 3, fluency >= 2); ``bad`` when any metric is at
most ``bad_at_most`` (default 1); otherwise ``incomplete``. ``score`` is 1 /
0.5 / 0, ``binary_score`` 1 only for good, ``avg_score`` the mean of the
normalized scores ``score / 3`` (the rating format's own definition: 3 -> 1.0,
2 -> 0.67; ratings 3, 3, 3, 2 give 0.92).

A report is ``{"summary": {global_explanation, relevancy_rating, score,
possible_issues, binary_score, avg_score, <metric>: {score, explanation,
normalized_score}}}`` with the enabled metrics only (:class:`RatingSummary`);
the ``details`` option adds ``details`` (probabilities, cut points, method, key
points). Input fields ``input`` and ``summary`` (the rating format's names) are
read as ``source`` and ``target``.

Defaults live in :class:`RatingConfig` and, identically, in ``configs/rating.yaml``;
``scripts/fit_rating_cutpoints.py`` fits cut points on data with human scores.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from ..engine import Engine, Job, RunStats, jobs_by_checkpoint
from ..cutpoints import to_rating
from .common import (
    DEFAULT_CONSISTENCY_ASPECT,
    check_consistency_aspect,
    migrate_consistency_task,
    resolve_consistency_aspect,
    Coverage,
    WithOptionalDetails,
    ReportRow,
    RowError,
    key_point_json,
    load_options,
    problems_to_errors,
    record_id,
    require_text,
    short,
    support_aspect,
)

Metric = Literal["coherence", "consistency", "relevance", "fluency"]
METRICS: tuple[str, ...] = ("coherence", "consistency", "relevance", "fluency")
RatingLabel = Literal["good", "incomplete", "bad"]
_RATING_SCORE = {"good": 1.0, "incomplete": 0.5, "bad": 0.0}

#: English and French explanation templates (``str.format`` fields in braces).
DEFAULT_TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "label_coherence": "Coherence", "label_consistency": "Consistency",
        "label_relevance": "Relevance", "label_fluency": "Fluency",
        "metric": "{label}: {score}/3 (probability {probability:.2f}). {detail}",
        "metric_coverage": "{label}: {score}/3 (share of key points covered {probability:.2f}). {detail}",
        "sentences_low": "{n_low} of {n} sentences scored below {threshold:.2f}; the lowest is \"{text}\" ({value:.2f}).",
        "sentences_ok": "All {n} sentences scored at least {threshold:.2f}; the lowest is \"{text}\" ({value:.2f}).",
        "sentence_one": "Its one sentence scored {value:.2f} (threshold {threshold:.2f}).",
        "whole_document": "Scored on the whole summary against the source.",
        "whole_references": "Scored on the whole summary against {n} reference(s) (mean over references).",
        "coverage": "No reference was given, so relevance is key-point coverage: {covered} of {n} key points "
                    "of the source are supported by the summary.",
        "coverage_missing": " Least supported: \"{text}\" ({value:.2f}).",
        "issue_below": "{label} is {score}/3; a good summary needs at least {needed}.",
        "issue_bad": "{label} is {score}/3, at most {bad}: the summary is rated bad.",
        "global_good": "All metrics met the expected values.",
        "global_incomplete": "Incomplete: {n_issues} rule(s) not met, none at the lowest rating "
                             "(mean normalized score {avg_score:.2f}).",
        "global_bad": "Bad: {n_bad} metric(s) at the lowest rating (mean normalized score {avg_score:.2f}).",
    },
    "fr": {
        "label_coherence": "Cohérence", "label_consistency": "Fidélité",
        "label_relevance": "Pertinence", "label_fluency": "Fluidité",
        "metric": "{label} : {score}/3 (probabilité {probability:.2f}). {detail}",
        "metric_coverage": "{label} : {score}/3 (part des points clés couverts {probability:.2f}). {detail}",
        "sentences_low": "{n_low} phrase(s) sur {n} sous {threshold:.2f} ; la plus basse : « {text} » ({value:.2f}).",
        "sentences_ok": "Les {n} phrases atteignent au moins {threshold:.2f} ; la plus basse : « {text} » ({value:.2f}).",
        "sentence_one": "Son unique phrase obtient {value:.2f} (seuil {threshold:.2f}).",
        "whole_document": "Évalué sur tout le résumé par rapport à la source.",
        "whole_references": "Évalué sur tout le résumé par rapport à {n} référence(s) (moyenne).",
        "coverage": "Sans référence, la pertinence est la couverture des points clés : {covered} sur {n} "
                    "points clés de la source sont confirmés par le résumé.",
        "coverage_missing": " Le moins confirmé : « {text} » ({value:.2f}).",
        "issue_below": "{label} vaut {score}/3 ; un bon résumé demande au moins {needed}.",
        "issue_bad": "{label} vaut {score}/3, au plus {bad} : le résumé est jugé mauvais.",
        "global_good": "Toutes les métriques atteignent les valeurs attendues.",
        "global_incomplete": "Incomplet : {n_issues} règle(s) non satisfaite(s), aucune au plus bas "
                             "(score normalisé moyen {avg_score:.2f}).",
        "global_bad": "Mauvais : {n_bad} métrique(s) au plus bas (score normalisé moyen {avg_score:.2f}).",
    },
}
TEMPLATE_KEYS = tuple(DEFAULT_TEMPLATES["en"])
#: The fields each template may use.
_TEMPLATE_FIELDS: dict[str, set[str]] = {
    **{f"label_{m}": set() for m in ("coherence", "consistency", "relevance", "fluency")},
    "metric": {"label", "score", "probability", "detail"},
    "metric_coverage": {"label", "score", "probability", "detail"},
    "sentences_low": {"n_low", "n", "threshold", "text", "value"},
    "sentences_ok": {"n_low", "n", "threshold", "text", "value"},
    "sentence_one": {"threshold", "text", "value"},
    "whole_document": set(), "whole_references": {"n"},
    "coverage": {"covered", "n"}, "coverage_missing": {"text", "value"},
    "issue_below": {"label", "score", "needed", "bad"}, "issue_bad": {"label", "score", "needed", "bad"},
    "global_good": {"avg_score", "n_issues", "n_bad"}, "global_incomplete": {"avg_score", "n_issues", "n_bad"},
    "global_bad": {"avg_score", "n_issues", "n_bad"},
}
_TEMPLATE_SAMPLE: dict[str, Any] = {"label": "Coherence", "score": 2, "probability": 0.5, "detail": "x", "n_low": 1,
                                    "n": 2, "threshold": 0.5, "text": "x", "value": 0.5, "covered": 1, "needed": 3,
                                    "bad": 1, "avg_score": 0.5, "n_issues": 1, "n_bad": 1}

#: The thirds of the probability range: the placeholder cut points of what no calibration covers.
PLACEHOLDER_CUT_POINTS: tuple[float, float] = (round(1 / 3, 4), round(2 / 3, 4))

def calibration_card() -> dict:
    """The calibration card of the built-in cut points (``unieval_local/data/
    calibration_unieval_sum.json``, written by ``scripts/fit_calibration.py``): data set, n,
    bins, cut points, cross-validated agreement with intervals, what it holds for (the
    checkpoint's evaluator and shape, ``checkpoint_config``).

    Raises:
        OSError: the card is missing from the installation.
    """
    import json
    from importlib import resources

    return json.loads(resources.files("unieval_local").joinpath("data/calibration_unieval_sum.json").read_text())


#: Default cut points (low, high) per metric: read from the calibration card (the one source:
#: ``unieval_local/data/calibration_unieval_sum.json``, :func:`calibration_card`), fitted by
#: ``scripts/fit_calibration.py`` on the official unieval-sum's SummEval scores against the
#: binned expert ratings (quadratic-kappa objective, 10-fold CV by document). Fluency keeps the
#: thirds: the fit did not beat them. ``relevance_coverage`` (relevance by key-point coverage,
#: without a reference) is not calibrated: the thirds, as placeholders.
DEFAULT_CUT_POINTS: dict[str, tuple[float, float]] = {
    **{m: tuple(calibration_card()["metrics"][m]["cut_points"]) for m in METRICS},
    "relevance_coverage": PLACEHOLDER_CUT_POINTS,
}

#: The metric -> the ``task/aspect`` the calibration card holds for (its checkpoint: unieval-sum).
CALIBRATED_FOR: dict[str, str] = {m: f"summarization/{m}" for m in METRICS}
DEFAULT_GOOD_RULES: dict[str, int] = {"coherence": 2, "consistency": 3, "relevance": 3, "fluency": 2}


class RatingConfig(BaseModel):
    """Settings of the ``rating`` report (``configs/rating.yaml`` holds the defaults).

    Attributes:
        enabled_metrics: the metrics to rate (a subset of coherence,
            consistency, relevance, fluency); only their rules apply.
        cut_points: metric -> ``[low, high]`` in [0, 1], low <= high; key
            ``relevance_coverage`` for relevance without a reference.
        good_rules: metric -> the least rating (1-3) a good summary needs.
        bad_at_most: a metric rated at most this makes the summary bad.
        sentence_threshold: sentences below this probability are "low" in explanations.
        coverage_threshold: a key point counts as covered at this probability.
        n_key_points: key points to extract (None: from the source length,
            :func:`~unieval_local.keypoints.default_n_key_points`).
        consistency_aspect: ``task/aspect`` that answers the consistency queries (a
            claim-vs-document aspect: ``summarization/consistency`` (default),
            ``fact/consistency`` (unieval-fact), ``fact/support`` (MiniCheck) ...).
        language: the template set for explanations (a key of ``templates``).
        templates: language -> template name -> ``str.format`` text.
        details: also write each report's ``details`` (probabilities, cut points, method,
            key points); off by default, so a report is exactly ``{"summary": {...}}``.

    Raises:
        pydantic.ValidationError: an unknown metric, bad cut points, a missing
            template or an unknown language.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled_metrics: list[Metric] = Field(default_factory=lambda: list(METRICS), min_length=1)
    cut_points: dict[str, tuple[float, float]] = Field(default_factory=lambda: dict(DEFAULT_CUT_POINTS))
    good_rules: dict[Metric, int] = Field(default_factory=lambda: dict(DEFAULT_GOOD_RULES))
    bad_at_most: int = Field(default=1, ge=1, le=3)
    sentence_threshold: float = Field(default=0.5, ge=0, le=1)
    coverage_threshold: float = Field(default=0.5, ge=0, le=1)
    n_key_points: int | None = Field(default=None, ge=1)
    consistency_aspect: str = DEFAULT_CONSISTENCY_ASPECT
    language: str = "en"
    templates: dict[str, dict[str, str]] = Field(default_factory=lambda: {k: dict(v) for k, v in DEFAULT_TEMPLATES.items()})
    details: bool = False

    @model_validator(mode="before")
    @classmethod
    def _merge_defaults(cls, data: Any) -> Any:
        """A config gives only what it changes: ``cut_points`` and ``good_rules`` entries
        override the defaults one metric at a time, and ``templates`` override them one
        language (and within a language, one template) at a time."""
        if not isinstance(data, dict):
            return data
        data = dict(migrate_consistency_task(data))
        if isinstance(data.get("cut_points"), dict):
            data["cut_points"] = {**DEFAULT_CUT_POINTS, **data["cut_points"]}
        if isinstance(data.get("good_rules"), dict):
            data["good_rules"] = {**DEFAULT_GOOD_RULES, **data["good_rules"]}
        if isinstance(data.get("templates"), dict):
            merged = {k: dict(v) for k, v in DEFAULT_TEMPLATES.items()}
            for lang, table in data["templates"].items():
                merged[lang] = {**merged.get(lang, {}), **table} if isinstance(table, dict) else table
            data["templates"] = merged
        return data

    @field_validator("enabled_metrics", mode="before")
    @classmethod
    def _one_string(cls, v: Any) -> Any:
        """``"coherence"`` or ``"coherence,fluency"`` (one string) reads as a list of metrics."""
        return [m.strip() for m in v.split(",") if m.strip()] if isinstance(v, str) else v

    @field_validator("enabled_metrics")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))

    @field_validator("consistency_aspect")
    @classmethod
    def _checker(cls, v: str) -> str:
        return check_consistency_aspect(v)

    @field_validator("cut_points")
    @classmethod
    def _cuts(cls, v: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (low, high) in v.items():
            if name not in (*METRICS, "relevance_coverage"):
                raise ValueError(f"cut_points: unknown metric {name!r}")
            if not 0 <= low <= high <= 1:
                raise ValueError(f"cut_points.{name}: need 0 <= low <= high <= 1, got [{low}, {high}]")
        return v

    @field_validator("good_rules")
    @classmethod
    def _rules(cls, v: dict[str, int]) -> dict[str, int]:
        for name, needed in v.items():
            if needed not in (1, 2, 3):
                raise ValueError(f"good_rules.{name}: a rating 1, 2 or 3, got {needed!r}")
        return v

    @model_validator(mode="after")
    def _complete(self) -> "RatingConfig":
        missing = [m for m in (*METRICS, "relevance_coverage") if m not in self.cut_points]
        if missing:
            raise ValueError(f"cut_points lacks {', '.join(missing)}")
        if self.language not in self.templates:
            raise ValueError(f"language {self.language!r} has no templates; have {', '.join(self.templates)}")
        for lang, table in self.templates.items():
            absent = [k for k in TEMPLATE_KEYS if k not in table]
            if absent:
                raise ValueError(f"templates.{lang} lacks {', '.join(absent)}")
            for key, text in table.items():
                if key not in _TEMPLATE_FIELDS:
                    raise ValueError(f"templates.{lang}.{key}: unknown template; the templates are "
                                     f"{', '.join(TEMPLATE_KEYS)}")
                try:
                    text.format(**_TEMPLATE_SAMPLE)
                except Exception as exc:  # KeyError, IndexError, ValueError, TypeError, AttributeError ...
                    fields = ", ".join("{" + f + "}" for f in sorted(_TEMPLATE_FIELDS.get(key, _TEMPLATE_SAMPLE)))
                    raise ValueError(f"templates.{lang}.{key}: cannot fill {text!r} ({type(exc).__name__}: {exc}); "
                                     f"fields: {fields}") from None
                used = {f for _, f, _, _ in string.Formatter().parse(text) if f}
                unknown = used - _TEMPLATE_FIELDS.get(key, set())
                if unknown:
                    raise ValueError(f"templates.{lang}.{key}: unknown field(s) {', '.join(sorted(unknown))}; "
                                     f"this template may use "
                                     f"{', '.join(sorted(_TEMPLATE_FIELDS.get(key, ()))) or 'no field'}")
        return self

    def t(self, key: str, **values: Any) -> str:
        """Template ``key`` of the chosen language, filled with ``values``."""
        return self.templates[self.language][key].format(**values)


def load_rating_config(path: str | os.PathLike, **overrides: Any) -> RatingConfig:
    """Read a rating YAML (keys of :class:`RatingConfig`), then apply ``overrides``
    (None values ignored); see :func:`~unieval_local.reports.common.load_options`.

    Raises:
        ValueError: unreadable file, YAML syntax, or an invalid setting (the
            message names the file and key).
    """
    return load_options(RatingConfig, path, overrides)


class RuleOutcome(BaseModel):
    """The rule engine's verdict.

    Attributes:
        rating: ``good``, ``incomplete`` or ``bad``.
        score: 1 (good), 0.5 (incomplete), 0 (bad).
        binary_score: 1 only for good.
        avg_score: mean over the rated metrics of the normalized score ``score / 3``
            (:func:`normalized_score`), in [1/3, 1].
        failed: per failed rule ``(metric, rating, needed, is_bad)``, in metric order.
    """

    model_config = ConfigDict(frozen=True)

    rating: RatingLabel
    score: float
    binary_score: int
    avg_score: float
    failed: list[tuple[str, int, int, bool]]


def normalized_score(rating: int) -> float:
    """A 1-3 rating on [0, 1] as the rating format documents it: ``rating / 3``
    (3 -> 1.0, 2 -> 0.6667, 1 -> 0.3333)."""
    return rating / 3


def apply_rules(ratings: Mapping[str, int], good_rules: Mapping[str, int] | None = None,
                bad_at_most: int = 1) -> RuleOutcome:
    """Apply the good/incomplete/bad rules to the enabled metrics' ratings.

    Args:
        ratings: metric -> rating in {1, 2, 3}, only the enabled metrics.
        good_rules: metric -> least rating for good (default coherence 2,
            consistency 3, relevance 3, fluency 2); metrics without a rule need 1.
        bad_at_most: any rating at most this is bad (default 1).

    Returns:
        :class:`RuleOutcome`; ``avg_score`` is the mean of ``rating / 3`` (ratings 3, 3, 3, 2
        give 0.9167).

    Raises:
        ValueError: no rating, or a rating outside {1, 2, 3}.
    """
    rules = DEFAULT_GOOD_RULES if good_rules is None else good_rules
    if not ratings:
        raise ValueError("no metric to rate: enable at least one")
    for m, r in ratings.items():
        if r not in (1, 2, 3):
            raise ValueError(f"rating of {m} must be 1, 2 or 3, got {r!r}")
    failed = []
    for m, r in ratings.items():
        needed = rules.get(m, 1)
        if r < needed or r <= bad_at_most:
            failed.append((m, r, needed, r <= bad_at_most))
    rating: RatingLabel = "bad" if any(f[3] for f in failed) else "incomplete" if failed else "good"
    avg = float(np.mean([normalized_score(r) for r in ratings.values()]))
    return RuleOutcome(rating=rating, score=_RATING_SCORE[rating], binary_score=int(rating == "good"),
                       avg_score=avg, failed=failed)


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


class MetricDetails(BaseModel):
    """How one metric's rating was made (``details``, with the ``details`` option).

    Attributes:
        probability: what was mapped: the UniEval score in [0, 1], or the
            key-point coverage share for relevance without a reference.
        cut_points: the ``[low, high]`` used.
        placeholder_cut_points: True when those are the thirds of the range (0.3333, 0.6667),
            not fitted: relevance by key-point coverage, fluency (the card kept the thirds: the fit
            did not beat them), or thirds a config set.
        calibrated: True when they are the calibration card's for this metric's aspect, on a
            checkpoint of the card's evaluator and shape (unieval-sum, T5-large, identity
            verified; :func:`card_checkpoint_problem`; ``unieval-local calibration``); False for
            relevance by key-point coverage, another aspect or checkpoint, and for cut points a
            config set (calibrated, if at all, by whoever set them).
        method: ``unieval:<task>/<aspect>`` (``minicheck:fact/support`` ...) or ``key_point_coverage``.
    """

    model_config = ConfigDict(frozen=True)

    probability: float
    cut_points: tuple[float, float]
    placeholder_cut_points: bool
    calibrated: bool = False
    method: str


class RatingDetails(BaseModel):
    """What is behind a rating: per metric its :class:`MetricDetails`; how relevance was
    measured (``reference``, ``key_point_coverage`` or None when not enabled); with
    key-point coverage, each key point with its coverage probability (``score``),
    ``covered`` and source offsets."""

    model_config = ConfigDict(frozen=True)

    metrics: dict[str, MetricDetails]
    relevance_method: Literal["reference", "key_point_coverage"] | None = None
    key_points: list[dict[str, Any]] | None = None


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


class RatingReport(WithOptionalDetails):
    """The ``rating`` report of one summary: ``{"summary": {...}}`` exactly as the rating
    format documents it, plus ``details`` (:class:`RatingDetails`) with the ``details`` option."""

    model_config = ConfigDict(frozen=True)

    summary: RatingSummary
    details: RatingDetails | None = None


def metric_aspect(config: RatingConfig, metric: str) -> str:
    """The ``task/aspect`` that answers ``metric`` under ``config`` (consistency: the
    ``consistency_aspect``; the others: summarization's aspect of that name)."""
    return config.consistency_aspect if metric == "consistency" else f"summarization/{metric}"


def card_checkpoint_problem(engine: Engine, config: RatingConfig) -> str | None:
    """Why the checkpoint that answers the card's aspects (``unieval-sum``) is not the model the
    calibration card was fitted on, or None when it is (or when no enabled metric uses the
    card's cut points for the card's aspect, so nothing depends on it).

    The card holds for the official ``MingZhong/unieval-sum`` (T5-large). A folder whose
    identity is unverified (nothing in it names unieval-sum), or whose ``config.json`` differs
    from the card's ``checkpoint_config`` (``model_type``, ``d_model``, ``num_layers``: the
    generated test checkpoints, a smaller T5), is not that model. A fine-tune of the same shape
    cannot be told apart from the official weights this way (the card says so). No model is loaded.
    """
    uses_card = [m for m in config.enabled_metrics if metric_aspect(config, m) == CALIBRATED_FOR[m]
                 and tuple(config.cut_points[m]) == tuple(DEFAULT_CUT_POINTS[m])]
    if not uses_card:
        return None
    name = "unieval-sum"
    ckpt = engine.checkpoint(name)
    where = ckpt.hub_id or str(ckpt.path)
    if engine.identity(name) != "verified":
        return f"checkpoint {name} ({where}) does not say it is unieval-sum (identity unverified)"
    want = calibration_card().get("checkpoint_config") or {}
    try:
        import json

        got = json.loads((ckpt.path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        got = {}
    differ = [f"{k} {got.get(k)!r}, not {v!r}" for k, v in want.items() if got.get(k) != v]
    if differ:
        return (f"checkpoint {name} ({where}) is not the shape of the official model the card was fitted on "
                f"({'; '.join(differ)})")
    return None


def uncalibrated_metrics(config: RatingConfig, coverage_used: bool = True,
                         checkpoint_problem: str | None = None) -> dict[str, str]:
    """The enabled metrics whose 1-3 ratings no calibration covers, and why:

    * ``relevance_coverage`` (with relevance measured by key-point coverage): placeholders;
    * a metric with the card's cut points answered by another aspect than the one the card
      was fitted for (consistency by ``fact/support``, MiniCheck, or ``fact/consistency``);
    * a metric a config set to the thirds of the range (placeholders, not fitted; fluency's
      calibrated choice IS the thirds, so not fluency);
    * with ``checkpoint_problem`` (:func:`card_checkpoint_problem`), every metric with the card's
      cut points: the checkpoint is not the one they were fitted for.

    Other cut points a config sets are the user's own and are not listed. ``coverage_used``:
    False when every record has references (relevance is then measured against them)."""
    out: dict[str, str] = {}
    for m in config.enabled_metrics:
        cuts = tuple(config.cut_points[m])
        built_in = cuts == tuple(DEFAULT_CUT_POINTS[m])
        if built_in and metric_aspect(config, m) != CALIBRATED_FOR[m]:
            out[m] = f"calibrated for {CALIBRATED_FOR[m]} (unieval-sum), not for {metric_aspect(config, m)}"
        elif built_in and checkpoint_problem:
            out[m] = f"calibrated for the official unieval-sum, but {checkpoint_problem}"
        elif not built_in and cuts == PLACEHOLDER_CUT_POINTS:
            out[m] = "the thirds of the range set by the rating config (placeholders, not fitted)"
    if coverage_used and "relevance" in config.enabled_metrics and \
            tuple(config.cut_points["relevance_coverage"]) == PLACEHOLDER_CUT_POINTS:
        out["relevance_coverage"] = "placeholders (thirds of the range), not fitted: key-point coverage, used " \
                                    "for relevance without a reference"
    return out


def placeholder_note(config: RatingConfig, coverage_used: bool = True,
                     checkpoint_problem: str | None = None) -> str | None:
    """The run-level note naming every metric whose ratings are not calibrated
    (:func:`uncalibrated_metrics`), metrics with one reason named together; None when there is
    none (the four calibrated metrics answered by the official unieval-sum give no note)."""
    names = uncalibrated_metrics(config, coverage_used, checkpoint_problem)
    if not names:
        return None
    by_reason: dict[str, list[str]] = {}
    for m, why in names.items():
        by_reason.setdefault(why, []).append(m)
    return ("the rating cut points of " + "; ".join(f"{', '.join(ms)} are {why}"
                                                    for why, ms in by_reason.items())
            + ": those 1-3 ratings are not calibrated. Fit them on your data with scripts/fit_rating_cutpoints.py "
            "and pass the YAML as the rating config (--config FILE in the CLI, config= in Python; README, rating; "
            "`unieval-local calibration` prints the card)")


def _sentence_detail(config: RatingConfig, ev) -> str:
    sents = ev.sentences if ev is not None else None
    if not sents:
        return config.t("whole_document")
    lowest = min(sents, key=lambda s: s.value)
    if len(sents) == 1:
        return config.t("sentence_one", threshold=config.sentence_threshold, text=short(lowest.text, 120),
                        value=lowest.value)
    n_low = sum(s.value < config.sentence_threshold for s in sents)
    key = "sentences_low" if n_low else "sentences_ok"
    return config.t(key, n_low=n_low, n=len(sents), threshold=config.sentence_threshold,
                    text=short(lowest.text, 120), value=lowest.value)


def rating_rows(records: Sequence[Any], engine: Engine, config: RatingConfig,
                start: int = 0) -> tuple[list[ReportRow[RatingReport]], RunStats]:
    """Rate each record: all queries through :meth:`Engine.run <unieval_local.engine.Engine.run>` in one pass.

    Args:
        records: dicts (fields of :class:`~unieval_local.reports.common.ReportRecord`).
        engine: the engine (its ``long_input`` applies; reports default to ``chunk``).
        config: :class:`RatingConfig`.
        start: index of ``records[0]`` in the whole input (for ``ReportRow.index``).

    Returns:
        ``(rows, stats)``: one :class:`ReportRow` per record, an error row for a
        bad record (the others are rated), and the engine pass's counts.
    """
    from .common import parse_records

    parsed, errors = parse_records(records)
    enabled = config.enabled_metrics
    reg = engine.registry
    uni = {m: reg.get_aspect("summarization", m) for m in ("coherence", "fluency", "relevance") if m in enabled}
    if "consistency" in enabled:
        uni["consistency"] = resolve_consistency_aspect(reg, config.consistency_aspect)
    needs_source = bool({"coherence", "consistency"} & set(enabled))
    coverage, with_refs = Coverage(), []
    for i, rec in enumerate(parsed):
        if rec is None:
            with_refs.append(None)
            continue
        if needs_source or ("relevance" in enabled and not rec.references):
            err = require_text(rec, "source", "the rating report (coherence, consistency, relevance without reference)")
            if err:
                errors[i] = err
                parsed[i] = None
                with_refs.append(None)
                continue
        has_refs = "relevance" in enabled and bool(rec.references)
        with_refs.append(rec if has_refs else None)
        if "relevance" in enabled and not has_refs:
            err = coverage.plan(i, rec, config.n_key_points, engine.splitter)
            if err:
                errors[i], parsed[i], with_refs[-1] = err, None, None
    # the jobs of UniEval aspects over the records themselves, named by checkpoint, then relevance
    jobs = jobs_by_checkpoint([uni[m] for m in ("coherence", "consistency", "fluency") if m in uni], parsed)
    if "relevance" in uni:
        jobs["relevance"] = Job((uni["relevance"],), with_refs)
    on_records = list(jobs)
    if coverage.flat.examples:
        cons = resolve_consistency_aspect(reg, config.consistency_aspect)
        jobs["coverage"] = Job((support_aspect(cons, "key_point_coverage"),), coverage.flat.examples)
    results, stats = engine.run(jobs, evidence=True)
    values, evidence = {}, {}
    for name in on_records:
        values.update(results[name].values)
        evidence.update(results[name].evidence)
        problems_to_errors(results[name].problems, {i: i for i in range(len(parsed))}, errors)
    if "coverage" in results:
        problems_to_errors(results["coverage"].problems, coverage.flat.positions(), errors)

    rows: list[ReportRow[RatingReport]] = []
    checkpoint_problem = card_checkpoint_problem(engine, config) if any(r is not None for r in parsed) else None
    for i, rec in enumerate(parsed):
        rid = record_id(records[i])
        if i in errors or rec is None:
            rows.append(ReportRow[RatingReport](index=start + i, id=rid, error=errors[i]))
            continue
        metrics: dict[str, MetricRating] = {}
        details: dict[str, MetricDetails] = {}
        key_points = None
        method = None
        failed = None
        for m in enabled:
            detail: str
            if m == "relevance" and not rec.references:
                vals = coverage.values(i, results["coverage"])
                if not np.isfinite(vals).all():
                    failed = m
                    break
                points = coverage.key_points[i]
                covered = [v >= config.coverage_threshold for v in vals]
                p = float(np.mean(covered))
                cut_name = "relevance_coverage"
                detail = config.t("coverage", covered=sum(covered), n=len(points))
                if not all(covered):
                    low = int(np.argmin(vals))
                    detail += config.t("coverage_missing", text=short(points[low].text, 120), value=vals[low])
                method_name, method = "key_point_coverage", "key_point_coverage"
                key_points = [key_point_json(kp, v, config.coverage_threshold) for kp, v in zip(points, vals)]
            else:
                p = float(values[uni[m].name][i])  # the metric's aspect (consistency may be fact/support)
                if not np.isfinite(p):
                    failed = m
                    break
                cut_name = m
                a = uni[m]
                method_name = f"{a.checkpoint.split('-')[0]}:{a.task}/{a.name}"  # unieval:..., minicheck:...
                if m == "relevance":
                    method = "reference"
                    detail = config.t("whole_references", n=len(rec.references))
                elif a.granularity == "sentence":
                    detail = _sentence_detail(config, evidence[uni[m].name][i])
                else:
                    detail = config.t("whole_document")
            cuts = tuple(config.cut_points[cut_name])
            score = to_rating(p, cuts)
            label = config.t(f"label_{m}")
            template = "metric_coverage" if method_name == "key_point_coverage" else "metric"
            metrics[m] = MetricRating(
                score=score, explanation=config.t(template, label=label, score=score, probability=p, detail=detail),
                normalized_score=normalized_score(score))
            calibrated = (cut_name != "relevance_coverage" and cuts == tuple(DEFAULT_CUT_POINTS[cut_name])
                          and metric_aspect(config, m) == CALIBRATED_FOR[m] and checkpoint_problem is None)
            details[m] = MetricDetails(probability=p, cut_points=cuts, placeholder_cut_points=cuts == PLACEHOLDER_CUT_POINTS,
                                       calibrated=calibrated, method=method_name)
        if failed:
            rows.append(ReportRow[RatingReport](index=start + i, id=rid, error=RowError(
                field=failed, message=f"the model gave a non-finite score for {failed}; try dtype float32")))
            continue
        outcome = apply_rules({m: metrics[m].score for m in enabled}, config.good_rules, config.bad_at_most)
        issues = [config.t("issue_bad" if bad else "issue_below", label=config.t(f"label_{m}"), score=r,
                           needed=needed, bad=config.bad_at_most) for m, r, needed, bad in outcome.failed]
        n_bad = sum(1 for f in outcome.failed if f[3])
        global_explanation = config.t(f"global_{outcome.rating}", avg_score=outcome.avg_score,
                                      n_issues=len(issues), n_bad=n_bad)
        summary = RatingSummary(
            global_explanation=global_explanation, relevancy_rating=outcome.rating, score=outcome.score,
            possible_issues=issues, binary_score=outcome.binary_score, avg_score=outcome.avg_score, **metrics)
        extra = (RatingDetails(metrics=details, relevance_method=method, key_points=key_points)
                 if config.details else None)
        rows.append(ReportRow[RatingReport](index=start + i, id=rid, report=RatingReport(summary=summary, details=extra),
                                            notes=coverage.notes.get(i, [])))
    return rows, stats


def rating_aggregate(rows: Sequence[ReportRow[RatingReport]]) -> dict[str, float | None]:
    """File-level means: ``score``, ``binary_score``, ``avg_score``, the share of
    ``good``/``incomplete``/``bad``, and ``mean_<metric>`` (mean rating); None where
    there is no report (or the metric was not enabled)."""
    reps = [r.report.summary for r in rows if r.report is not None]

    def mean(values: list) -> float | None:
        return float(np.mean(values)) if values else None

    out: dict[str, float | None] = {
        "score": mean([r.score for r in reps]),
        "binary_score": mean([r.binary_score for r in reps]),
        "avg_score": mean([r.avg_score for r in reps]),
    }
    for label in ("good", "incomplete", "bad"):
        out[f"share_{label}"] = mean([r.relevancy_rating == label for r in reps])
    for m in METRICS:
        out[f"mean_{m}"] = mean([r.metrics[m].score for r in reps if m in r.metrics])
    return out
