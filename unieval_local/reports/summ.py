"""The ``summ`` report: a 0-100 score from claim alignment and key-point coverage.

Per summary (all Boolean-QA queries in one engine pass):

* Claims: the summary's first ``max_n_claims`` sentences (each line on its own,
  then Punkt; list markers dropped). Each gets the consistency query against the
  source (UniEval's summarization consistency question, or unieval-fact's with
  ``consistency_aspect``: unieval-fact's ``fact/consistency``, or MiniCheck's ``fact/support``,
  which reads the source in its own 500-word chunks; long sources are read in windows with the
  engine's ``long_input="chunk"``, max over windows).
  ``alignment = #claims with P(Yes) >= alignment_threshold / #claims``.
* Key points: ``key_points`` of the record, or the ``n_key_points`` most
  central source sentences (LexRank, :func:`~unieval_local.text.keypoints.extract_key_points`;
  default :func:`~unieval_local.text.keypoints.default_n_key_points`). Each gets the
  consistency query with the key point as the claim and the summary as the
  document. ``coverage = #key points with P(Yes) >= coverage_threshold / #key points``.
* Heuristics (no model): ``redundancy_penalty = redundancy_weight * r`` where r
  is the share of summary sentences that nearly repeat an earlier one (TF-IDF
  cosine >= ``redundancy_threshold``); ``compression_penalty =
  compression_weight * min(1, max(0, c - max_compression_ratio) / (1 - max_compression_ratio))``
  with ``c = summary words / source words``; ``length_penalty = length_weight *
  min(1, max(0, w - max_words) / max_words)`` for a summary of w words when
  ``max_words`` is set.
* ``score = clip(100 * (alignment_weight * alignment + coverage_weight * coverage)
  - penalties, 0, 100)``; ``passed = score >= threshold`` (default 80).

Inputs: records with ``target`` and ``source``, or the hosted summ metric's rows
``{"input", "output"}``; a record's own ``n_key_points``, ``max_n_claims`` and
``threshold`` win over the options; a hosted custom-run request body is read by
:func:`read_custom_run`. ``eval_metadata`` gives ``missing_details`` and
``misaligned_details`` as sentences (the hosted metric's ``list[str]``) and the same
items structured under ``missing_key_points`` / ``misaligned_claims``.

The claim/coverage decomposition follows the QAG-style summarization metrics that
users know (alignment of summary claims with the source, coverage of the source's
key content by the summary); here each judgement is a UniEval query, not an LLM call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..engine import Engine, Job
from ..settings import number_type
from ..requests.base import Request, Stage, StageGenerator
from ..text.keypoints import redundant_sentences
from ..wire.shapes import ClaimWindow, RowError
from .base import ReportFlag, ReportPart, ReportRow
from .options import CONSISTENCY_FLAG, MAX_N_CLAIMS_FLAG, N_KEY_POINTS_FLAG, ConsistencyOption, resolve_consistency_aspect
from .generated_points import write_points
from .queries import Claims, Coverage, key_point_json, probability_name, problems_to_errors, short, support_aspect
from .records import parse_records, record_id, require_text

__all__ = ["FLAGS", "ClaimResult", "MisalignedDetail", "MissingDetail", "SummMetadata", "SummOptions", "SummReport",
           "SummRequest", "misaligned_sentence", "missing_sentence", "penalties", "summ_aggregate"]


class SummOptions(ConsistencyOption):
    """Settings of the ``summ`` report (formulas in the module docstring).

    Attributes:
        threshold: pass mark on the 0-100 score (default 80).
        max_n_claims: summary sentences checked against the source (default 50).
        n_key_points: key points to extract (None: from the source length).
        alignment_threshold, coverage_threshold: P(Yes) at which a claim is
            aligned / a key point covered (default 0.5).
        alignment_weight, coverage_weight: the blend (default 0.5 each; sum 1).
        redundancy_threshold: TF-IDF cosine at which two summary sentences are
            near duplicates (default 0.8); redundancy_weight: points for a fully
            redundant summary (default 20).
        max_compression_ratio: summary/source words above which the
            compression penalty starts (default 0.5); compression_weight: its
            maximum in points (default 20).
        max_words: summary words above which the length penalty starts
            (default None: no length penalty); length_weight: its maximum (default 10).
        consistency_aspect: ``task/aspect`` answering claims and key points
            (``summarization/consistency`` by default; ``fact/support`` for MiniCheck).

    Raises:
        pydantic.ValidationError: out-of-range values, or weights not summing to 1.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    threshold: float = Field(default=80.0, ge=0, le=100)
    max_n_claims: int = Field(default=50, ge=1)
    n_key_points: int | None = Field(default=None, ge=1)
    alignment_threshold: float = Field(default=0.5, ge=0, le=1)
    coverage_threshold: float = Field(default=0.5, ge=0, le=1)
    alignment_weight: float = Field(default=0.5, ge=0, le=1)
    coverage_weight: float = Field(default=0.5, ge=0, le=1)
    redundancy_threshold: float = Field(default=0.8, gt=0, le=1)
    redundancy_weight: float = Field(default=20.0, ge=0, le=100)
    max_compression_ratio: float = Field(default=0.5, gt=0, lt=1)
    compression_weight: float = Field(default=20.0, ge=0, le=100)
    max_words: int | None = Field(default=None, ge=1)
    length_weight: float = Field(default=10.0, ge=0, le=100)

    @model_validator(mode="after")
    def _weights(self) -> "SummOptions":
        if abs(self.alignment_weight + self.coverage_weight - 1) > 1e-9:
            raise ValueError(f"alignment_weight + coverage_weight must be 1, got "
                             f"{self.alignment_weight} + {self.coverage_weight}")
        return self


class ClaimResult(BaseModel):
    """One claim (summary sentence): its consistency P(Yes) and whether it counts as aligned."""

    model_config = ConfigDict(frozen=True)

    claim: str
    score: float
    aligned: bool


class MissingDetail(BaseModel):
    """A key point the summary does not support: its coverage P(Yes) and source offsets
    (None for key points given by the user)."""

    model_config = ConfigDict(frozen=True)

    key_point: str
    score: float
    start: int | None = None
    end: int | None = None


class MisalignedDetail(BaseModel):
    """A claim the source does not support: its P(Yes), and the source window
    that supported it best (None when the whole source fit in one query)."""

    model_config = ConfigDict(frozen=True)

    claim: str
    score: float
    best_source_window: ClaimWindow | None = None


class SummMetadata(BaseModel):
    """Why the score is what it is.

    Attributes:
        missing_details: one sentence per key point the summary does not cover.
        misaligned_details: one sentence per claim the source does not support.
        missing_key_points: the same key points, structured (:class:`MissingDetail`).
        misaligned_claims: the same claims, structured (:class:`MisalignedDetail`).
    """

    model_config = ConfigDict(frozen=True)

    missing_details: list[str]
    misaligned_details: list[str]
    missing_key_points: list[MissingDetail]
    misaligned_claims: list[MisalignedDetail]


def missing_sentence(d: MissingDetail, threshold: float, p: str = "P(Yes)") -> str:
    """``missing_details`` text of one uncovered key point (``p``: how the checker's probability
    is named, ``P(Yes)`` or a classifier's ``P(entailment)``)."""
    return (f"The summary does not cover the key point \"{short(d.key_point, 200)}\" "
            f"(coverage {p} = {d.score:.2f} < {threshold:.2f}).")


def misaligned_sentence(d: MisalignedDetail, threshold: float, p: str = "P(Yes)") -> str:
    """``misaligned_details`` text of one unsupported claim (``p`` as in :func:`missing_sentence`)."""
    text = (f"The claim \"{short(d.claim, 200)}\" is not supported by the source "
            f"({p} = {d.score:.2f} < {threshold:.2f})")
    if d.best_source_window is not None:
        text += f"; the closest passage is \"{short(d.best_source_window.text, 160)}\""
    return text + "."


class SummReport(BaseModel):
    """The ``summ`` report of one summary.

    Attributes:
        score: 0-100 (formula in :mod:`unieval_local.reports.summ`).
        passed: ``score >= threshold``.
        threshold: the pass mark used.
        alignment_score: share of aligned claims, in [0, 1].
        coverage_score: share of covered key points, in [0, 1].
        redundancy_penalty, compression_penalty, length_penalty: points subtracted.
        compression_ratio: summary words / source words.
        n_claims: claims checked; n_sentences: sentences of the summary (more
            than ``n_claims`` when capped by ``max_n_claims``).
        key_point_source: ``given`` (the record's ``key_points``), ``extracted`` (LexRank) or
            ``generated`` (a local model's: :mod:`~unieval_local.reports.generated_points`).
        claims: per claim its score and verdict.
        key_points: per key point its coverage ``score``, ``covered`` and source offsets.
        redundant_sentences: ``{sentence, repeats}`` (indices into the summary's sentences).
        eval_metadata: :class:`SummMetadata`.
    """

    model_config = ConfigDict(frozen=True)

    score: float
    passed: bool
    threshold: float
    alignment_score: float
    coverage_score: float
    redundancy_penalty: float
    compression_penalty: float
    length_penalty: float
    compression_ratio: float
    n_claims: int
    n_sentences: int
    key_point_source: Literal["given", "extracted", "generated"]
    claims: list[ClaimResult]
    key_points: list[dict[str, Any]]
    redundant_sentences: list[dict[str, int]]
    eval_metadata: SummMetadata


def penalties(options: SummOptions, sentences: Sequence[str], summary: str, source: str) -> dict[str, Any]:
    """The heuristic penalties (points) of one summary, and what they were computed from."""
    repeats = redundant_sentences(sentences, options.redundancy_threshold)
    redundant = [{"sentence": i, "repeats": j} for i, j in enumerate(repeats) if j is not None]
    share = len(redundant) / len(sentences) if sentences else 0.0
    words, source_words = len(summary.split()), max(1, len(source.split()))
    ratio = words / source_words
    m = options.max_compression_ratio
    compression = options.compression_weight * min(1.0, max(0.0, ratio - m) / (1 - m))
    length = 0.0
    if options.max_words is not None:
        length = options.length_weight * min(1.0, max(0, words - options.max_words) / options.max_words)
    return {"redundant": redundant, "redundancy_penalty": options.redundancy_weight * share,
            "compression_ratio": ratio, "compression_penalty": compression, "length_penalty": length}


def _summ_report(i: int, rec: Any, checked: Sequence[tuple[str, float, Any]], kp_values: Sequence[float],
                 claims: Claims, coverage: Coverage, options: SummOptions, p: str = "P(Yes)",
                 generated: bool = False) -> SummReport:
    """Record ``i``'s report from its claims' and key points' probabilities (module docstring)."""
    claim_rows = [ClaimResult(claim=t, score=v, aligned=v >= options.alignment_threshold) for t, v, _ in checked]
    points = coverage.key_points[i]
    kps = [key_point_json(kp, v, options.coverage_threshold) for kp, v in zip(points, kp_values)]
    alignment = sum(c.aligned for c in claim_rows) / len(claim_rows)
    covered = sum(k["covered"] for k in kps) / len(kps)
    pen = penalties(options, claims.sentences[i], rec.target, rec.source)
    raw = 100 * (options.alignment_weight * alignment + options.coverage_weight * covered)
    score = float(np.clip(raw - pen["redundancy_penalty"] - pen["compression_penalty"] - pen["length_penalty"],
                          0, 100))
    missing = [MissingDetail(key_point=k["key_point"], score=k["score"], start=k["start"], end=k["end"])
               for k in kps if not k["covered"]]
    misaligned = [MisalignedDetail(claim=t, score=v, best_source_window=w)
                  for t, v, w in checked if v < options.alignment_threshold]
    meta = SummMetadata(
        missing_details=[missing_sentence(d, options.coverage_threshold, p) for d in missing],
        misaligned_details=[misaligned_sentence(d, options.alignment_threshold, p) for d in misaligned],
        missing_key_points=missing, misaligned_claims=misaligned)
    threshold = rec.threshold if rec.threshold is not None else options.threshold
    return SummReport(
        score=score, passed=score >= threshold, threshold=threshold,
        alignment_score=alignment, coverage_score=covered,
        redundancy_penalty=pen["redundancy_penalty"], compression_penalty=pen["compression_penalty"],
        length_penalty=pen["length_penalty"], compression_ratio=pen["compression_ratio"],
        n_claims=len(claim_rows), n_sentences=len(claims.sentences[i]),
        key_point_source="given" if rec.key_points else "generated" if generated else "extracted", claims=claim_rows, key_points=kps,
        redundant_sentences=pen["redundant"], eval_metadata=meta)


@dataclass
class SummRequest(Request[ReportPart]):
    """Score records: one stage with every claim and coverage query of the request.

    Args:
        records: dicts with ``target`` (the summary), ``source`` and optionally
            ``key_points`` / ``n_key_points``.
        options: :class:`SummOptions`.
        start: index of ``records[0]`` in the whole input.

    Answer: a :class:`~unieval_local.reports.base.ReportPart`: one :class:`ReportRow` per
    record (an error row for a bad record; the others are scored) and the request's counters.
    """

    records: Sequence[Any]
    options: SummOptions
    start: int = 0

    def __post_init__(self) -> None:
        self.size = len(self.records)

    def stages(self, engine: Engine) -> StageGenerator:
        options = self.options
        parsed, errors = parse_records(self.records)
        cons = resolve_consistency_aspect(engine.registry, options.consistency_aspect)
        claims, coverage = Claims(), Coverage()
        written = write_points(engine, parsed, self.records, options.n_key_points, claims=True)
        coverage.notes.update(written.notes)  # what a local model wrote, what fell back: row notes
        for i, rec in enumerate(parsed):
            if rec is None:
                continue
            err = (require_text(rec, "source", "the summ report (claim alignment)")
                   or claims.plan(i, rec, engine.splitter, rec.max_n_claims or options.max_n_claims,
                                  generated=written.claims.get(i))
                   or coverage.plan(i, rec, options.n_key_points, engine.splitter, written.key_points.get(i)))
            if err:
                errors[i], parsed[i] = err, None
        jobs = {"claims": Job((support_aspect(cons, "claim"),), claims.flat.examples)}
        if coverage.flat.examples:
            jobs["coverage"] = Job((support_aspect(cons, "key_point_coverage"),), coverage.flat.examples)
        got = yield Stage(jobs, evidence=True)
        results = got.results
        problems_to_errors(results["claims"].problems, claims.flat.positions(), errors)
        if "coverage" in results:
            problems_to_errors(results["coverage"].problems, coverage.flat.positions(), errors)
        rows: list[ReportRow[SummReport]] = []
        for i, rec in enumerate(parsed):
            row = ReportRow[SummReport](index=self.start + i, id=record_id(self.records[i]))
            if i in errors or rec is None:
                rows.append(row.model_copy(update={"error": errors[i]}))
                continue
            checked = claims.read(i, results["claims"], rec.source)
            kp_values = coverage.values(i, results["coverage"])
            if not np.isfinite([v for _, v, _ in checked]).all() or not np.isfinite(kp_values).all():
                rows.append(row.model_copy(update={"error": RowError(
                    field="target", message="the model gave a non-finite score; try dtype float32")}))
                continue
            report = _summ_report(i, rec, checked, kp_values, claims, coverage, options, probability_name(cons),
                                  i in written.key_points)
            rows.append(row.model_copy(update={"report": report, "notes": coverage.notes.get(i, [])}))
        return ReportPart(rows, got.stats)


def summ_aggregate(rows: Sequence[ReportRow[SummReport]]) -> dict[str, float | None]:
    """File-level means of ``score``, ``alignment_score``, ``coverage_score`` and the pass
    rate (None each when no record has a report)."""
    reps = [r.report for r in rows if r.report is not None]
    return {name: float(np.mean([getattr(r, field) for r in reps])) if reps else None
            for name, field in (("score", "score"), ("pass_rate", "passed"), ("alignment_score", "alignment_score"),
                                ("coverage_score", "coverage_score"))}


#: The summ format's CLI flags (``unieval-local report --format summ``).
FLAGS: tuple[ReportFlag, ...] = (
    ReportFlag("threshold", "--threshold", "pass mark on the 0-100 score (default 80)",
               {"type": number_type(float, 0, high=100)}),
    N_KEY_POINTS_FLAG, MAX_N_CLAIMS_FLAG, CONSISTENCY_FLAG,
)
