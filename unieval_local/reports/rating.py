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

``judge: g-eval`` (``--judge g-eval``) rates the four metrics from summarization's G-Eval
aspects instead (``geval_<metric>``: the expected rating of the whole summary on [0, 1], one
query per metric and record; no claims, no key points), with the metric's cut points: the thirds
unless the config gives fitted ones, so not calibrated (the run's note says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..engine import Engine, Job, jobs_by_checkpoint
from ..analysis.cutpoints import to_rating
from ..requests.base import Request, Stage, StageGenerator
from ..wire.rating_evaluator import METRICS, MetricRating, RatingLabel, RatingSummary
from ..wire.shapes import RowError, WithOptionalDetails
from .base import ReportFlag, ReportPart, ReportRow
from .options import CONSISTENCY_FLAG, DETAILS_FLAG, N_KEY_POINTS_FLAG, resolve_consistency_aspect
from .rating_config import (
    CALIBRATED_FOR,
    DEFAULT_CUT_POINTS,
    DEFAULT_GOOD_RULES,
    DEFAULT_TEMPLATES,
    PLACEHOLDER_CUT_POINTS,
    RatingConfig,
    calibration_card,
    load_rating_config,
)
from .generated_points import write_points
from .queries import Coverage, key_point_json, problems_to_errors, short, support_aspect
from .records import parse_records, record_id, require_text

__all__ = ["CALIBRATED_FOR", "DEFAULT_CUT_POINTS", "DEFAULT_GOOD_RULES", "DEFAULT_TEMPLATES", "FLAGS",
           "PLACEHOLDER_CUT_POINTS", "MetricDetails", "RatingConfig", "RatingDetails", "RatingReport", "RatingRequest",
           "RuleOutcome", "apply_rules", "calibration_card", "card_checkpoint_note", "card_checkpoint_problem",
           "load_rating_config",
           "metric_aspect", "normalized_score", "placeholder_note", "rating_aggregate", "uncalibrated_metrics"]

_RATING_SCORE = {"good": 1.0, "incomplete": 0.5, "bad": 0.0}

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


class MetricDetails(BaseModel):
    """How one metric's rating was made (``details``, with the ``details`` option).

    Attributes:
        probability: what was mapped: the UniEval score in [0, 1], the key-point coverage
            share for relevance without a reference, or with the G-Eval judge the expected
            rating on [0, 1], ``(E - 1) / (K - 1)``.
        cut_points: the ``[low, high]`` used.
        placeholder_cut_points: True when those are the thirds of the range (0.3333, 0.6667),
            not fitted: relevance by key-point coverage, fluency (the card kept the thirds: the fit
            did not beat them), or thirds a config set.
        calibrated: True when they are the calibration card's for this metric's aspect, on a
            checkpoint of the card's evaluator and shape (unieval-sum, T5-large, identity
            verified or named: :func:`card_checkpoint_problem`, :func:`card_checkpoint_note`;
            ``unieval-local calibration``); False for
            relevance by key-point coverage, another aspect or checkpoint, and for cut points a
            config set (calibrated, if at all, by whoever set them).
        method: ``unieval:<task>/<aspect>`` (``minicheck:fact/support``, ``g-eval:summarization/geval_coherence``
            ...) or ``key_point_coverage``.
    """

    model_config = ConfigDict(frozen=True)

    probability: float
    cut_points: tuple[float, float]
    placeholder_cut_points: bool
    calibrated: bool = False
    method: str


class RatingDetails(BaseModel):
    """What is behind a rating: per metric its :class:`MetricDetails`; how relevance was
    measured (``reference``, ``key_point_coverage``, ``g-eval`` or None when not enabled); with
    key-point coverage, each key point with its coverage probability (``score``),
    ``covered`` and source offsets."""

    model_config = ConfigDict(frozen=True)

    metrics: dict[str, MetricDetails]
    relevance_method: Literal["reference", "key_point_coverage", "g-eval"] | None = None
    key_points: list[dict[str, Any]] | None = None


class RatingReport(WithOptionalDetails):
    """The ``rating`` report of one summary: ``{"summary": {...}}`` exactly as the rating
    format documents it, plus ``details`` (:class:`RatingDetails`) with the ``details`` option."""

    model_config = ConfigDict(frozen=True)

    summary: RatingSummary
    details: RatingDetails | None = None


def metric_aspect(config: RatingConfig, metric: str) -> str:
    """The ``task/aspect`` that answers ``metric`` under ``config`` (consistency: the
    ``consistency_aspect``; a metric of ``metric_aspects``: that aspect; the others:
    summarization's aspect of that name; with ``judge: g-eval``, ``summarization/geval_<metric>``)."""
    if config.judge == "g-eval":
        return f"summarization/geval_{metric}"
    if metric == "consistency":
        return config.consistency_aspect
    return config.metric_aspects.get(metric, f"summarization/{metric}")


def card_checkpoint_problem(engine: Engine, config: RatingConfig) -> str | None:
    """Why the checkpoint that answers the card's aspects (``unieval-sum``) is not the model the
    calibration card was fitted on, or None when it is (or when no enabled metric uses the
    card's cut points for the card's aspect, so nothing depends on it).

    The card holds for the official ``MingZhong/unieval-sum`` (T5-large). A folder whose
    identity is unverified (nothing in it names unieval-sum), or whose ``config.json`` differs
    from the card's ``checkpoint_config`` (``model_type``, ``d_model``, ``num_layers``: the
    generated test checkpoints, a smaller T5), is not that model. A folder whose identity is
    ``named`` (only its own ``config.json`` label says unieval-sum: a fine-tune, a copy without
    its download manifest) is accepted, with the note of :func:`card_checkpoint_note`: refusing
    it would mark the official weights uncalibrated wherever they were copied without their
    manifest. A fine-tune of the same shape cannot be told apart from the official weights this
    way (the card says so). No model is loaded.
    """
    uses_card = [m for m in config.enabled_metrics if metric_aspect(config, m) == CALIBRATED_FOR[m]
                 and tuple(config.cut_points[m]) == tuple(DEFAULT_CUT_POINTS[m])]
    if not uses_card:
        return None
    name = "unieval-sum"
    ckpt = engine.checkpoint(name)
    where = ckpt.hub_id or str(ckpt.path)
    if engine.identity(name) == "unverified":  # "named" is accepted: card_checkpoint_note says so
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


def card_checkpoint_note(engine: Engine, config: RatingConfig) -> str | None:
    """The run-level note when the card's cut points are applied to a ``unieval-sum`` folder whose
    identity is only ``named`` (:func:`~unieval_local.models.checkpoints.check_identity`) and that
    :func:`card_checkpoint_problem` accepts (the official shape): the ratings keep ``calibrated:
    true``, and the note says on what word. None otherwise (verified, or not accepted: that
    problem is the note). No model is loaded."""
    from ..models.checkpoints import named_by, read_identity

    uses_card = [m for m in config.enabled_metrics if metric_aspect(config, m) == CALIBRATED_FOR[m]
                 and tuple(config.cut_points[m]) == tuple(DEFAULT_CUT_POINTS[m])]
    name = "unieval-sum"
    if not uses_card or engine.identity(name) != "named" or card_checkpoint_problem(engine, config):
        return None
    ckpt = engine.checkpoint(name)
    return (f"the calibration card's ratings of {', '.join(uses_card)} are taken as calibrated for checkpoint "
            f"{name} ({ckpt.hub_id or ckpt.path}) on its own label: {named_by(read_identity(ckpt.path))}; they "
            "hold only if it holds the official unieval-sum weights (settings.checkpoints.unieval-sum.identity: "
            "named; `unieval-local download --checkpoint unieval-sum` stages a copy that verifies)")


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
        if config.judge == "g-eval" and cuts == PLACEHOLDER_CUT_POINTS:
            out[m] = "placeholders (thirds of the range), not fitted for the G-Eval judge"
        elif built_in and metric_aspect(config, m) != CALIBRATED_FOR[m]:
            out[m] = f"calibrated for {CALIBRATED_FOR[m]} (unieval-sum), not for {metric_aspect(config, m)}"
        elif built_in and checkpoint_problem:
            out[m] = f"calibrated for the official unieval-sum, but {checkpoint_problem}"
        elif not built_in and cuts == PLACEHOLDER_CUT_POINTS:
            out[m] = "the thirds of the range set by the rating config (placeholders, not fitted)"
    if coverage_used and config.judge == "unieval" and "relevance" in config.enabled_metrics and \
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
            + ": those 1-3 ratings are not calibrated. " + (
                "Give cut points fitted on your data in the rating config's cut_points (read on (rating - 1) / "
                "(K - 1) in [0, 1]; --config FILE in the CLI, config= in Python; docs/reports/rating.md)"
                if config.judge == "g-eval" else
                "Fit them on your data with scripts/fit_rating_cutpoints.py and pass the YAML as the rating config "
                "(--config FILE in the CLI, config= in Python; README, rating; `unieval-local calibration` prints "
                "the card)"))


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


@dataclass
class _Plan:
    """The queries of one rating request: the records parsed, their errors so far, the aspect
    answering each enabled metric, the key points of relevance by coverage, and the jobs."""

    parsed: list[Any]
    errors: dict[int, RowError]
    uni: dict[str, Any]
    coverage: Coverage
    jobs: dict[str, Job]
    on_records: list[str]


def _plan_geval(parsed: list[Any], errors: dict[int, RowError], engine: Engine, config: RatingConfig) -> _Plan:
    """The G-Eval judge's queries: summarization's ``geval_<metric>`` of each enabled metric
    over the whole summary (a record without a source is an error row when an aspect needs it).

    Raises:
        CheckpointNotFoundError: no folder for the judge's evaluator (``g-eval`` has no default
            weights): the message says to give one (``--model g-eval=DIR``); nothing is loaded.
    """
    from ..errors import CheckpointNotFoundError
    from ..models.checkpoints import resolve_checkpoint

    uni = {m: engine.registry.get_aspect("summarization", f"geval_{m}") for m in config.enabled_metrics}
    for name in dict.fromkeys(a.checkpoint for a in uni.values()):
        try:
            resolve_checkpoint(name, engine.model, offline=True)
        except CheckpointNotFoundError as exc:
            raise CheckpointNotFoundError(
                f"the G-Eval judge (judge: g-eval) needs a local instruct model: give it with --model {name}=DIR "
                f"(model={{{name!r}: DIR}} in Python) or stage it as $UNIEVAL_LOCAL_HOME/{name}; {exc}") from None
    if any("source" in a.required_fields for a in uni.values()):
        for i, rec in enumerate(parsed):
            if rec is not None and (err := require_text(rec, "source", "the G-Eval rating (coherence, consistency, "
                                                                       "relevance)")):
                errors[i], parsed[i] = err, None
    jobs = jobs_by_checkpoint(list(uni.values()), parsed)
    return _Plan(parsed, errors, uni, Coverage(), jobs, list(jobs))


def _plan(records: Sequence[Any], engine: Engine, config: RatingConfig) -> _Plan:
    parsed, errors = parse_records(records)
    if config.judge == "g-eval":
        return _plan_geval(parsed, errors, engine, config)
    enabled = config.enabled_metrics
    reg = engine.registry
    uni = {m: resolve_consistency_aspect(reg, metric_aspect(config, m)) for m in ("coherence", "fluency", "relevance")
           if m in enabled}
    if "consistency" in enabled:
        uni["consistency"] = resolve_consistency_aspect(reg, config.consistency_aspect)
    needs_source = any("source" in uni[m].required_fields for m in uni if m != "relevance")
    coverage, with_refs = Coverage(), []
    written = write_points(engine, [r if r is not None and not r.references else None for r in parsed], records,
                           config.n_key_points) if "relevance" in enabled else None
    coverage.notes.update(written.notes if written else {})  # a local model's key points (generated_points)
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
            err = coverage.plan(i, rec, config.n_key_points, engine.splitter, written.key_points.get(i))
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
    return _Plan(parsed, errors, uni, coverage, jobs, on_records)


@dataclass
class _Metric:
    """One metric of one record: its rating, and what is behind it."""

    rating: MetricRating
    details: MetricDetails
    method: str | None = None
    key_points: list[dict[str, Any]] | None = None


def _rate_geval(m: str, i: int, plan: _Plan, config: RatingConfig, values: Mapping[str, Any]) -> _Metric | None:
    """Metric ``m`` of record ``i`` by the G-Eval judge: its ``geval_<m>`` value, the expected
    rating E on the aspect's 1-K scale, placed on [0, 1] as p = (E - 1) / (K - 1) (so that one set
    of cut points serves fluency's 1-3 and the others' 1-5) and mapped by the metric's cut points,
    the explanation giving E; None when the model gave a non-finite score."""
    a = plan.uni[m]
    rating = float(values[a.name][i])
    if not np.isfinite(rating):
        return None
    p = (rating - 1.0) / (a.scale - 1)
    cuts = tuple(config.cut_points[m])
    score = to_rating(p, cuts)
    text = config.t("metric_geval", label=config.t(f"label_{m}"), score=score, rating=rating,
                    scale=a.scale, probability=p)
    rating = MetricRating(score=score, explanation=text, normalized_score=normalized_score(score))
    details = MetricDetails(probability=p, cut_points=cuts, placeholder_cut_points=cuts == PLACEHOLDER_CUT_POINTS,
                            calibrated=False, method=f"g-eval:{a.task}/{a.name}")
    return _Metric(rating, details, "g-eval" if m == "relevance" else None)


def _rate_metric(m: str, i: int, rec: Any, plan: _Plan, config: RatingConfig, values: Mapping[str, Any],
                 evidence: Mapping[str, Any], results: Mapping[str, Any], checkpoint_problem: str | None,
                 ) -> _Metric | None:
    """Metric ``m`` of record ``i``, or None when the model gave a non-finite score."""
    if config.judge == "g-eval":
        return _rate_geval(m, i, plan, config, values)
    method = key_points = None
    if m == "relevance" and not rec.references:
        vals = plan.coverage.values(i, results["coverage"])
        if not np.isfinite(vals).all():
            return None
        points = plan.coverage.key_points[i]
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
        a = plan.uni[m]
        p = float(values[a.name][i])  # the metric's aspect (consistency may be fact/support)
        if not np.isfinite(p):
            return None
        cut_name = m
        method_name = f"{a.checkpoint.split('-')[0]}:{a.task}/{a.name}"  # unieval:..., minicheck:...
        if m == "relevance":
            method = "reference"
            detail = config.t("whole_references", n=len(rec.references))
        elif a.granularity == "sentence":
            detail = _sentence_detail(config, evidence[a.name][i])
        else:
            detail = config.t("whole_document")
    cuts = tuple(config.cut_points[cut_name])
    score = to_rating(p, cuts)
    label = config.t(f"label_{m}")
    template = "metric_coverage" if method_name == "key_point_coverage" else "metric"
    rating = MetricRating(score=score, explanation=config.t(template, label=label, score=score, probability=p,
                                                            detail=detail), normalized_score=normalized_score(score))
    calibrated = (cut_name != "relevance_coverage" and cuts == tuple(DEFAULT_CUT_POINTS[cut_name])
                  and metric_aspect(config, m) == CALIBRATED_FOR[m] and checkpoint_problem is None)
    details = MetricDetails(probability=p, cut_points=cuts, placeholder_cut_points=cuts == PLACEHOLDER_CUT_POINTS,
                            calibrated=calibrated, method=method_name)
    return _Metric(rating, details, method, key_points)


def _summary(metrics: Mapping[str, MetricRating], config: RatingConfig) -> RatingSummary:
    """The record's summary: the rule engine over the enabled metrics' ratings."""
    outcome = apply_rules({m: metrics[m].score for m in config.enabled_metrics}, config.good_rules, config.bad_at_most)
    issues = [config.t("issue_bad" if bad else "issue_below", label=config.t(f"label_{m}"), score=r,
                       needed=needed, bad=config.bad_at_most) for m, r, needed, bad in outcome.failed]
    n_bad = sum(1 for f in outcome.failed if f[3])
    global_explanation = config.t(f"global_{outcome.rating}", avg_score=outcome.avg_score,
                                  n_issues=len(issues), n_bad=n_bad)
    return RatingSummary(
        global_explanation=global_explanation, relevancy_rating=outcome.rating, score=outcome.score,
        possible_issues=issues, binary_score=outcome.binary_score, avg_score=outcome.avg_score, **metrics)


@dataclass
class RatingRequest(Request[ReportPart]):
    """Rate records: one stage with every query of the request (evidence on, for the sentence
    details).

    Args:
        records: dicts (fields of :class:`~unieval_local.reports.records.ReportRecord`).
        config: :class:`RatingConfig`.
        start: index of ``records[0]`` in the whole input (for ``ReportRow.index``).

    Answer: a :class:`~unieval_local.reports.base.ReportPart`: one :class:`ReportRow` per
    record, an error row for a bad record (the others are rated), and the request's counters.
    """

    records: Sequence[Any]
    config: RatingConfig
    start: int = 0

    def __post_init__(self) -> None:
        self.size = len(self.records)

    def stages(self, engine: Engine) -> StageGenerator:
        config = self.config
        plan = _plan(self.records, engine, config)
        got = yield Stage(plan.jobs, evidence=True)
        results, errors = got.results, plan.errors
        values, evidence = {}, {}
        for name in plan.on_records:
            values.update(results[name].values)
            evidence.update(results[name].evidence)
            problems_to_errors(results[name].problems, {i: i for i in range(len(plan.parsed))}, errors)
        if "coverage" in results:
            problems_to_errors(results["coverage"].problems, plan.coverage.flat.positions(), errors)
        checkpoint_problem = (card_checkpoint_problem(engine, config) if any(r is not None for r in plan.parsed)
                              else None)
        rows: list[ReportRow[RatingReport]] = []
        for i, rec in enumerate(plan.parsed):
            row = ReportRow[RatingReport](index=self.start + i, id=record_id(self.records[i]))
            if i in errors or rec is None:
                rows.append(row.model_copy(update={"error": errors[i]}))
                continue
            rated = {}
            for m in config.enabled_metrics:
                rated[m] = _rate_metric(m, i, rec, plan, config, values, evidence, results, checkpoint_problem)
                if rated[m] is None:
                    rows.append(row.model_copy(update={"error": RowError(
                        field=m, message=f"the model gave a non-finite score for {m}; try dtype float32")}))
                    break
            else:
                summary = _summary({m: r.rating for m, r in rated.items()}, config)
                method = next((r.method for r in rated.values() if r.method), None)
                key_points = next((r.key_points for r in rated.values() if r.key_points is not None), None)
                extra = (RatingDetails(metrics={m: r.details for m, r in rated.items()}, relevance_method=method,
                                       key_points=key_points) if config.details else None)
                rows.append(row.model_copy(update={"report": RatingReport(summary=summary, details=extra),
                                                   "notes": plan.coverage.notes.get(i, [])}))
        return ReportPart(rows, got.stats)


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


def _metric_list(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


#: The rating format's CLI flags (``unieval-local report --format rating``).
FLAGS: tuple[ReportFlag, ...] = (
    ReportFlag("enabled_metrics", "--enabled-metrics", "metrics to rate, comma-separated (default "
               "coherence,consistency,relevance,fluency)", {"metavar": "M1,M2"}, parse=_metric_list),
    N_KEY_POINTS_FLAG, DETAILS_FLAG, CONSISTENCY_FLAG,
    ReportFlag("judge", "--judge", "what rates the four metrics: unieval (default: UniEval aspects, claims, key "
               "points) or g-eval (the G-Eval aspects of the whole summary, a local instruct model given by "
               "--model g-eval=DIR; cut points the thirds unless the config fits them: not calibrated)",
               {"choices": ["unieval", "g-eval"]}),
)
