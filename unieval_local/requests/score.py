"""The score requests: examples for the Python API and the service, records for batch runs.

* :class:`ScoreRequest`: examples (dicts or :class:`~unieval_local.schema.UniEvalData`) for
  some aspects of one task; any bad example fails the request with
  :class:`~unieval_local.errors.InvalidExampleError` listing every problem (the hosted
  metric's behaviour, and ``score()``'s); its answer is a :class:`ScoreAnswer`.
* :class:`RecordsRequest`: input records of a batch run (:class:`~unieval_local.records.Record`);
  a bad record becomes an error line and the others are scored; its answer is a
  :class:`ChunkResult` with one output line per record.

Both are one stage: one job per checkpoint over the examples
(:func:`~unieval_local.engine.jobs_by_checkpoint`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import notes
from ..engine import RunStats, jobs_by_checkpoint
from ..errors import ExampleProblem, InvalidExampleError, NonFiniteScoreError
from ..records import Record, record_error_type
from ..schema import EvaluationResult, ExampleScores, UniEvalResult, UniEvalStats
from ..pipeline.jobs import Job
from ..pipeline.validate import input_hint_counts, validate_examples, validate_with_skips
from ..registry.tasks import combined_value, mixed_scales_note
from .base import Request, Stage, StageGenerator, joined_evidence, joined_values

__all__ = ["ChunkResult", "RecordsRequest", "ScoreAnswer", "ScoreRequest", "answer_languages", "available_aspects",
           "evaluation_result", "evaluator_unavailable", "joined_answers", "joined_languages", "left_out_message",
           "score_requests", "unavailable_aspects"]


@dataclass(frozen=True)
class ScoreAnswer:
    """The answer of a :class:`ScoreRequest`.

    Attributes:
        values: aspect -> float64 array of shape ``(n_examples,)`` (NaN where the model gave
            non-finite logits; the caller decides what that means).
        evidence: aspect -> per example :class:`~unieval_local.schema.Evidence` (empty
            unless asked for).
        stats: the request's engine counters.
        languages: per example, the language it was read in.
    """

    values: dict[str, np.ndarray]
    evidence: dict[str, list]
    stats: RunStats
    languages: list[str | None] = field(default_factory=list)


@dataclass
class ScoreRequest(Request[ScoreAnswer]):
    """Score ``examples`` for ``aspects`` of ``task``; any bad example fails the request.

    Args:
        examples: dicts or :class:`~unieval_local.schema.UniEvalData` (validated here unless
            ``validated``).
        task, aspects: what to score (names in the engine's registry).
        evidence: also return each example's evidence.
        start: index of ``examples[0]`` in the caller's input: problems are numbered from it.
        validated: the examples are already parsed and checked for these aspects (the
            :class:`~unieval_local.Scorer` validates a whole call at once).

    Raises (from the scheduler's future):
        UnknownTaskError: unknown task or aspect.
        InvalidExampleError: a bad example, or a planning problem (every one listed).
    """

    examples: Sequence[Any]
    task: str
    aspects: Sequence[str]
    evidence: bool = False
    start: int = 0
    validated: bool = False

    def __post_init__(self) -> None:
        self.size = len(self.examples)

    def stages(self, engine) -> StageGenerator:
        resolved = [engine.registry.get_aspect(self.task, a) for a in self.aspects]
        examples = list(self.examples)
        if not self.validated:
            examples, problems = validate_examples(examples, resolved)
            if problems:
                raise InvalidExampleError(self._numbered(problems))
        got = yield Stage(jobs_by_checkpoint(resolved, examples), evidence=self.evidence, strict=True)
        if got.refused:
            raise InvalidExampleError(self._numbered(got.problems))
        return ScoreAnswer(joined_values(got.results), joined_evidence(got.results) if self.evidence else {},
                           got.stats, joined_languages(got.results, len(examples)))

    def _numbered(self, problems: Sequence[ExampleProblem]) -> list[ExampleProblem]:
        if not self.start:
            return list(problems)
        return [ExampleProblem(p.index + self.start, p.field, p.message, p.aspect) for p in problems]


def _error(message: str, kind: str) -> dict[str, str]:
    return {"type": kind, "message": message}


@dataclass
class ChunkResult:
    """One batch request's output lines (in record order) and its engine counters.

    Attributes:
        lines: one output record per input record (see :class:`RecordsRequest`).
        stats: the engine counters of the request (input hints included).
        reasons: per line, ``"<field>: <message>"`` when it is an error record (the
            hosted form's ``error``, :func:`~unieval_local.wire.hosted.hosted_line`), else None.
    """

    lines: list[dict[str, Any]]
    stats: RunStats = field(default_factory=RunStats)
    reasons: list[str | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the Ray engine sends results between processes)."""
        return {"lines": self.lines, "stats": self.stats.to_dict(), "reasons": self.reasons}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ChunkResult":
        """The inverse of :meth:`to_dict`."""
        return cls(list(d["lines"]), RunStats.from_dict(d["stats"]), list(d.get("reasons") or []))


@dataclass
class RecordsRequest(Request[ChunkResult]):
    """Score one request of a batch run's records; bad rows become error records.

    Args:
        records: the request's :class:`~unieval_local.records.Record` objects (a record read
            with an error, e.g. invalid JSON, becomes an error line as it is).
        task, aspects: what to score.
        evidence: add each scored record's evidence to its line.
        skip_missing: the aspects are a set (``all``, or none named), not named one by one: a
            record that lacks (absent or null) the fields of some of them, and can be scored for
            the others, is scored for those, with one note per aspect left out in its line's
            ``notes`` (``"relevance skipped: no references"``;
            :func:`~unieval_local.pipeline.validate.validate_with_skips`). Off: such a record is an
            error line (an aspect named is a number asked for).

    Answer: a :class:`ChunkResult`: one output dict per record, in order: ``{index, key,
    [doc_id, system_id], scores, [language], [aspect_mean], [notes], [evidence]}`` (a line with
    an aspect skipped has no ``aspect_mean``: it would average other aspects than the others') or
    ``{index, key, ..., error:
    {type, message}}`` (types ``InvalidExample``, ``NonFiniteScore``, ``DuplicateKey``,
    ``InvalidJSON``, ``InvalidText`` ...), the request's counters, and per record the
    ``"<field>: <message>"`` of its error (None when scored).
    """

    records: Sequence[Record]
    task: str
    aspects: Sequence[str]
    evidence: bool = False
    skip_missing: bool = False

    def __post_init__(self) -> None:
        self.size = len(self.records)

    def stages(self, engine) -> StageGenerator:
        aspects = list(self.aspects)
        resolved = [engine.registry.get_aspect(self.task, a) for a in aspects]
        self._scales = {a.name: a.scale for a in resolved}
        if mixed := mixed_scales_note(aspects, list(self._scales.values())):
            notes.note(mixed, warn=True, stacklevel=3)
        items = [r.data if r.error is None else None for r in self.records]
        if self.skip_missing:
            examples, problems, self._skips = validate_with_skips(items, resolved)
        else:
            (examples, problems), self._skips = validate_examples(items, resolved), {}
        hints = input_hint_counts(examples, resolved)
        got = yield Stage(_jobs(resolved, examples, self._skips), evidence=self.evidence)
        stats = got.stats
        stats.hints = hints
        values, ev = joined_values(got.results), joined_evidence(got.results)
        self._languages = joined_languages(got.results, len(self.records))
        errors: dict[int, list[ExampleProblem]] = defaultdict(list)
        for p in problems + got.problems:
            errors[p.index].append(p)
        lines, reasons = [], []
        for i, rec in enumerate(self.records):
            line, reason = self._line(i, rec, errors, values, ev, aspects)
            lines.append(line)
            reasons.append(reason)
        return ChunkResult(lines, stats, reasons)

    def _line(self, i: int, rec: Record, errors: Mapping[int, list[ExampleProblem]], values: Mapping[str, Any],
              ev: Mapping[str, Any], aspects: Sequence[str]) -> tuple[dict[str, Any], str | None]:
        """Record ``i``'s output line and the reason of its error (None when scored)."""
        line: dict[str, Any] = {"index": rec.index, "key": rec.key}
        if isinstance(rec.data, dict):
            for meta in ("doc_id", "system_id"):
                if meta in rec.data:
                    line[meta] = rec.data[meta]
        if rec.error is not None:
            duplicate = rec.error.startswith("duplicate id")
            line["error"] = _error(rec.error, "DuplicateKey" if duplicate else record_error_type(rec.error))
            return line, f"{'id' if duplicate else 'record'}: {rec.error}"
        if i in errors:
            line["error"] = _error("; ".join(p.describe() for p in errors[i]), "InvalidExample")
            return line, "; ".join(f"{p.field}: {p.message}" for p in errors[i])
        skipped = self._skips.get(i, {})
        row = {a: float(values[a][i]) for a in aspects if a not in skipped}
        bad = [a for a, v in row.items() if not np.isfinite(v)]
        if bad:
            judged = [a for a in bad if _reasons(self.task, a)]
            message = (f"no rating for {', '.join(judged)}: the judge wrote none (its answer hit max_new_tokens, "
                       "ended without the rating prefix, or the prompt was over the window; the warning counts "
                       "them)" if judged else f"the model gave non-finite logits for {', '.join(bad)}")
            line["error"] = _error(message, "NonFiniteScore")
            return line, f"value: {message}"
        line["scores"] = row
        if self._languages[i] is not None:
            line["language"] = self._languages[i]
        if len(aspects) > 1 and not skipped:  # the mean of every aspect of the run (aspect_mean_of), or none
            line["aspect_mean"] = combined_value(list(row.values()), [self._scales[a] for a in row])
        if skipped:
            line["notes"] = [f"{a} skipped: no {' and no '.join(fields)}" for a, fields in skipped.items()]
        if self.evidence:
            line["evidence"] = {a: ev[a][i].model_dump(exclude_none=True) for a in row}
        return line, None


def _jobs(resolved: Sequence[Any], examples: Sequence[Any], skips: Mapping[int, Mapping[str, Any]]) -> dict[str, Job]:
    """The stage's jobs: one per checkpoint (:func:`~unieval_local.engine.jobs_by_checkpoint`);
    an aspect some example is skipped for (``skips``) gets a job of its own, named
    ``<checkpoint>/<aspect>``, over the examples without those (the engine still scores the
    distinct prompts of one checkpoint together)."""
    partial = {a for s in skips.values() for a in s}
    jobs = jobs_by_checkpoint([a for a in resolved if a.name not in partial], examples)
    for a in resolved:
        if a.name in partial:
            jobs[f"{a.checkpoint}/{a.name}"] = Job((a,), [None if a.name in skips.get(i, ()) else ex
                                                         for i, ex in enumerate(examples)])
    return jobs


def joined_languages(results: Mapping[str, Any], n: int) -> list[str | None]:
    """Per example, its language as the stage's jobs read it (the first job that has one)."""
    out: list[str | None] = [None] * n
    for r in results.values():
        for i, lang in enumerate(r.languages[:n]):
            if out[i] is None:
                out[i] = lang
    return out


def _reasons(task: str, aspect: str) -> bool:
    """True for a built-in aspect answered by a judge that reasons (:mod:`unieval_local.text.judges`)."""
    from ..registry.evaluators import get_evaluator
    from ..registry.tasks import DEFAULT_REGISTRY
    from ..text.judges import JudgeFormat

    a = DEFAULT_REGISTRY.tasks.get(task)
    a = a.aspects.get(aspect) if a is not None else None
    return a is not None and isinstance(get_evaluator(a.checkpoint).prompt_format, JudgeFormat)


def evaluation_result(task: str, names: Sequence[str], values: Mapping[str, np.ndarray], evidence: Mapping[str, list],
                      signature: Any, dtype: str = "float32",
                      languages: Sequence[str | None] | None = None,
                      scales: Sequence[int | None] | None = None) -> EvaluationResult:
    """The :class:`~unieval_local.schema.EvaluationResult` of scored examples: what
    :meth:`Scorer.evaluate <unieval_local.Scorer.evaluate>` returns, and what the HTTP service's
    ``/v1/score`` answers from the shared scheduler.

    Args:
        task: the task. names: the aspects, in order.
        values: aspect -> float array ``(n_examples,)``. evidence: aspect -> per example
            :class:`~unieval_local.schema.Evidence`, or empty.
        signature: ``signature(task, aspect, languages)`` -> :class:`~unieval_local.schema.Signature`.
        dtype: named in the non-finite error.
        languages: per example, its language (in each example's result and the signature).
        scales: per aspect, its rating scale K or None (``Aspect.scale``): how ``aspect_mean``
            combines them (:func:`~unieval_local.registry.tasks.combined_value`; a note when it
            rescales). None: all probabilities.

    Raises:
        NonFiniteScoreError: some example has a non-finite value (the indices are listed).
    """
    bad = sorted({i for v in values.values() for i in np.flatnonzero(~np.isfinite(v)).tolist()})
    judged = [a for a in names if _reasons(task, a) and not np.isfinite(values[a]).all()]
    if judged:  # a judge that reasons wrote no rating (models/judging.py warned with the statuses)
        raise NonFiniteScoreError(
            f"no rating for examples {bad[:20]}: the judge of {', '.join(judged)} wrote none (its answer hit "
            "max_new_tokens, ended without the rating prefix, or the prompt was over the window: the warning "
            "counts them; unieval_local.judges.judge_examples gives each example's status and rationale)", bad)
    if bad:
        raise NonFiniteScoreError(
            f"the model gave non-finite logits for examples {bad[:20]} "
            f"(dtype {dtype}); try dtype='float32'", bad)
    ev = evidence
    n = len(next(iter(values.values()))) if values else 0
    langs = list(languages) if languages else [None] * n
    per_aspect = {
        a: UniEvalResult(overall=UniEvalStats(value=float(np.mean(values[a]))),
                         examples=[UniEvalStats(value=float(x), evidence=ev[a][i] if ev else None)
                                   for i, x in enumerate(values[a])],
                         signature=signature(task, a, langs) if languages else signature(task, a))
        for a in names
    }
    scales = list(scales) if scales is not None else [None] * len(names)
    if n and (mixed := mixed_scales_note(names, scales)):
        notes.note(mixed, warn=True, stacklevel=3)
    rows = [ExampleScores(scores={a: float(values[a][i]) for a in names},
                          aspect_mean=combined_value([values[a][i] for a in names], scales),
                          evidence={a: ev[a][i] for a in names} if ev else None, language=langs[i])
            for i in range(n)]
    return EvaluationResult(task=task, aspects=list(names), examples=rows, per_aspect=per_aspect)


def score_requests(examples: Sequence[Any], task: str, aspects: Sequence[str], evidence: bool,
                   policy) -> list[ScoreRequest]:
    """Validated ``examples`` as :class:`ScoreRequest` objects of the ``policy``'s pass size (a
    :class:`~unieval_local.requests.scheduler.RequestPolicy`), each numbered from its start."""
    return [ScoreRequest(part, task, list(aspects), evidence=evidence, start=at, validated=True)
            for at, part in policy.split(list(examples))]


def joined_answers(answers: Sequence[ScoreAnswer], aspects: Sequence[str],
                   evidence: bool) -> tuple[dict[str, np.ndarray], dict[str, list], RunStats]:
    """The answers of :func:`score_requests`, in order, joined: ``(values, evidence, stats)`` per
    aspect over all examples (their languages: :func:`answer_languages`)."""
    values = {a: np.concatenate([ans.values[a] for ans in answers]) for a in aspects}
    ev = {a: [e for ans in answers for e in ans.evidence.get(a, [])] for a in aspects} if evidence else {}
    stats = RunStats()
    for ans in answers:
        stats += ans.stats
    return values, ev, stats


def answer_languages(answers: Sequence[ScoreAnswer]) -> list[str | None]:
    """The answers of :func:`score_requests`, in order: each example's language."""
    return [lang for ans in answers for lang in ans.languages]


# ---------------------------------------------------------------------------------- availability
def evaluator_unavailable(name: str, model: Any) -> str | None:
    """Why checkpoint (evaluator) ``name`` cannot be used here without a download, or None when it
    can: it resolves offline (``model``, ``$UNIEVAL_LOCAL_HOME``, the HF cache:
    :func:`~unieval_local.models.checkpoints.resolve_checkpoint`) to a folder whose identity and
    ``model_type`` fit the evaluator (:func:`~unieval_local.models.checkpoints.check_identity`).
    Reads at most the folder's ``config.json`` and manifest: no model loads (well under a
    millisecond per evaluator). Never raises for a missing or unfit folder.

    Returns:
        None, ``"not found offline"``, ``"the folder given holds another model"`` or, for an
        evaluator with no default weights (``g-eval``) found neither in ``model`` (by its name)
        nor in ``$UNIEVAL_LOCAL_HOME/<name>``,
        ``"no default weights: name a local folder for it"``.
    """
    from ..errors import CheckpointError, CheckpointNotFoundError
    from ..models.checkpoints import check_identity, resolve_checkpoint
    from ..registry.evaluators import get_evaluator

    evaluator = get_evaluator(name)
    no_weights = "no default weights: name a local folder for it"
    if evaluator.hub_id is None and model is not None and not isinstance(model, Mapping):
        return no_weights  # g-eval: never one folder for every name (its own NAME=DIR, or the home folder's)
    try:
        check_identity(resolve_checkpoint(name, model, offline=True).path, evaluator)
    except CheckpointNotFoundError:
        return no_weights if evaluator.hub_id is None else "not found offline"
    except (CheckpointError, ValueError):
        return "the folder given holds another model"
    return None


def unavailable_aspects(registry: Any, task: str, names: Sequence[str], model: Any) -> dict[str, tuple[str, str]]:
    """aspect -> ``(evaluator, why)`` for the aspects of ``names`` whose evaluator is not the
    task's own (``Task.checkpoint``: unieval-sum for summarization, always asked for, and fetched
    where the run may) and cannot be used here without a download (:func:`evaluator_unavailable`;
    each evaluator checked once). The one check behind every entry point's default aspects
    (:func:`available_aspects`, batch runs)."""
    own = registry.get_task(task).checkpoint
    why: dict[str, str | None] = {}
    out: dict[str, tuple[str, str]] = {}
    for a in names:
        name = registry.get_aspect(task, a).checkpoint
        if name == own:
            continue
        if name not in why:
            why[name] = evaluator_unavailable(name, model)
        if why[name]:
            out[a] = (name, why[name])
    return out


def _evaluators_named(names: Sequence[str]) -> str:
    """The evaluators, each run of three or more that differ only after their last ``-`` written
    as one range (``seahorse-large-q1..q6``), the others as they are, comma-separated."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(name.rsplit("-", 1)[0], []).append(name)
    return ", ".join(f"{g[0]}..{g[-1][len(stem) + 1:]}" if len(g) > 2 else ", ".join(g)
                     for stem, g in groups.items())


def left_out_message(absent: Mapping[str, tuple[str, str]], *, cli: bool) -> str:
    """ONE line naming the aspects left out for want of their evaluator (``absent``, from
    :func:`unavailable_aspects`), why, and how to get them: the CLI's flags (``cli``) or the
    Python API's arguments."""
    from ..registry.evaluators import get_evaluator

    evaluators = [e for e, _ in absent.values()]
    by_reason: dict[str, list[str]] = {}
    for e, why in absent.values():
        by_reason.setdefault(why, []).append(e)
    first = next((e for e in evaluators if get_evaluator(e).hub_id), None)  # g-eval: nothing to download
    give = ("--model NAME=DIR gives one, --aspect NAME asks for it" if cli else
            f"model={{{evaluators[0]!r}: DIR, ...}} gives one, aspects=[NAME] asks for it")
    hub = sorted({e for e in evaluators if get_evaluator(e).hub_id})
    stage = (f"`unieval-local download --checkpoint {first}{' ...' if len(hub) > 1 else ''} --to DIR` stages "
             f"{'them' if len(hub) > 1 else 'it'}, " if first else "")
    reasons = "; ".join(f"{_evaluators_named(names)}: {why}" for why, names in by_reason.items())
    return (f"left out {len(absent)} aspect{'s' if len(absent) > 1 else ''} whose evaluators are not here: "
            f"{', '.join(absent)} ({reasons}; {stage}{give})")


def available_aspects(engine: Any, task: str, aspects: Sequence[str] | str | None, *, cli: bool = False) -> list[str]:
    """The aspects a call scores (:meth:`Registry.aspect_names
    <unieval_local.registry.tasks.Registry.aspect_names>`): those named, checked; ``None`` or
    ``"all"``: the task's own set (:meth:`~unieval_local.registry.tasks.Registry.own_aspects`,
    the same whatever is staged; a missing checkpoint of it raises, as a named aspect's does);
    a family group (``"geval"``): its aspects, as if named. ``"all+"``: every aspect of ``task``
    whose evaluator is here (:func:`unavailable_aspects`, no model loaded), the others named in
    ONE note (:func:`left_out_message`; a ``UserWarning``, and in the answer of a request that
    collects notes).

    Used by :meth:`Scorer.evaluate <unieval_local.Scorer.evaluate>` and the HTTP service's
    ``/v1/score``; batch runs use :func:`unavailable_aspects` beside their survey.

    Raises:
        UnknownTaskError: an unknown task or aspect (with the valid names).
    """
    names = engine.registry.aspect_names(task, aspects)
    optional = engine.registry.optional_aspects(task, aspects)
    absent = unavailable_aspects(engine.registry, task, optional, engine.model) if optional else {}
    if not absent or len(absent) == len(names):
        return names
    notes.note(left_out_message(absent, cli=cli), warn=True, stacklevel=3)
    return [a for a in names if a not in absent]
