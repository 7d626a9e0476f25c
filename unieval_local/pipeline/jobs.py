"""What an engine pass is made of and what it gives back: :class:`Job` (aspects of one
checkpoint over some examples), :class:`JobResult` (values, planning problems, evidence) and
:class:`RunStats` (the counters of one or more passes), and the one sentence every entry point
says about truncated queries (:func:`truncation_message`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..config import LONG_INPUT_MODES
from ..errors import ExampleProblem
from ..registry.tasks import Aspect
from ..schema import Evidence, UniEvalData
from .evidence import build_evidence
from .fold import Folded
from .planning import Plan

__all__ = ["SURFACES", "Job", "JobResult", "PassResult", "PlannedJob", "RunStats", "evidence_words", "jobs_by_checkpoint",
           "setting_words", "shortened_message", "truncation_message"]


@dataclass(frozen=True)
class Job:
    """Boolean-QA queries to run: some aspects (all of one checkpoint) over some examples.

    Attributes:
        aspects: the aspects (built-in, user-defined, or made on the fly by a report,
            e.g. a key-point coverage question); unique names.
        examples: the examples to plan them over (``None`` entries are skipped); they
            may be derived ones, e.g. ``{target: key point, source: summary}``.
        language: the language of every example (a report's request is of one language, and
            its derived examples, a sentence alone, are too short to tell); None: each example's
            own (:meth:`Engine.record_language <unieval_local.engine.Engine.record_language>`).
        long_input: how this job reads a field longer than the checkpoint's ``max_length``
            (``truncate``, ``fit`` or ``chunk``: :func:`~unieval_local.pipeline.planning.build_plan`);
            None: the engine's ``long_input`` (the HTTP service reads report requests in chunks and
            hosted-metric requests truncated, on one engine).
    """

    aspects: tuple[Aspect, ...]
    examples: Sequence[UniEvalData | None]
    language: str | None = None
    long_input: str | None = None

    def __post_init__(self) -> None:
        names = [a.name for a in self.aspects]
        if not names:
            raise ValueError("a job needs at least one aspect")
        if len(set(names)) != len(names):
            raise ValueError(f"aspect names repeat within one job: {names}")
        if len({a.checkpoint for a in self.aspects}) != 1:
            raise ValueError(f"the aspects of one job must share a checkpoint, got "
                             f"{sorted({a.checkpoint for a in self.aspects})}")
        if self.long_input is not None and self.long_input not in LONG_INPUT_MODES:
            raise ValueError(f"long_input must be one of {', '.join(LONG_INPUT_MODES)}, got {self.long_input!r}")

    @property
    def checkpoint(self) -> str:
        """The checkpoint name all the job's aspects use."""
        return self.aspects[0].checkpoint


def jobs_by_checkpoint(aspects: Sequence[Aspect], examples: Sequence[UniEvalData | None]) -> dict[str, Job]:
    """One :class:`Job` per checkpoint for ``aspects`` over the same ``examples``, named by
    the checkpoint (aspects in the given order within each job; jobs in order of first appearance);
    a decompose aspect (``fact/claims``, planned by :mod:`unieval_local.claims`) in a job of its
    own, named ``<checkpoint>/<aspect>``."""
    groups: dict[str, list[Aspect]] = {}
    for a in aspects:
        groups.setdefault(f"{a.checkpoint}/{a.name}" if a.decompose else a.checkpoint, []).append(a)
    return {name: Job(tuple(group), examples) for name, group in groups.items()}


@dataclass
class JobResult:
    """What one :class:`Job` gave.

    Attributes:
        values: aspect -> float64 array of shape ``(len(examples),)``; NaN where an example
            was skipped, had a planning problem or a non-finite score.
        problems: planning problems (example index, field, message).
        evidence: aspect -> per example :class:`~unieval_local.schema.Evidence` (only when
            asked for).
        languages: per example, its language (``zh``, ``en``, ``und`` ...; None for a skipped
            example): what chose its sentence splitter.
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    problems: list[ExampleProblem] = field(default_factory=list)
    evidence: dict[str, list[Evidence | None]] = field(default_factory=dict)
    languages: list[str | None] = field(default_factory=list)


@dataclass
class RunStats:
    """The counters of one or more engine passes (they add up with ``+``).

    Attributes:
        n_queries: distinct queries scored (per checkpoint and pass).
        n_truncated: of those, the ones longer than ``max_length`` that lost their end.
        n_shortened: queries whose long field ``long_input="fit"`` shortened.
        cache_hits, cache_misses: queries answered by the score cache / scored anew.
        model_loads: runners (models) loaded by these passes.
        hints: field -> examples lacking the ending their checkpoint was trained with
            (:func:`~unieval_local.pipeline.validate.input_hint_counts`).
        truncated_fields: field -> truncated distinct queries whose cut fell in that field
            (``source``, ``target`` ...; the fields after it were lost too).
        truncated_by: checkpoint name -> its truncated distinct queries.
        queries_by: checkpoint name -> the distinct queries it scored (which checkpoints a run used).
    """

    n_queries: int = 0
    n_truncated: int = 0
    n_shortened: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    model_loads: int = 0
    hints: dict[str, int] = field(default_factory=dict)
    truncated_fields: dict[str, int] = field(default_factory=dict)
    truncated_by: dict[str, int] = field(default_factory=dict)
    queries_by: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: "RunStats") -> "RunStats":
        def added(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + v
            return out

        return RunStats(self.n_queries + other.n_queries, self.n_truncated + other.n_truncated,
                        self.n_shortened + other.n_shortened, self.cache_hits + other.cache_hits,
                        self.cache_misses + other.cache_misses, self.model_loads + other.model_loads,
                        added(self.hints, other.hints), added(self.truncated_fields, other.truncated_fields),
                        added(self.truncated_by, other.truncated_by), added(self.queries_by, other.queries_by))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for the Ray engine, which sends stats between processes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunStats":
        """The inverse of :meth:`to_dict`."""
        return cls(**{**d, **{k: dict(d.get(k, {})) for k in ("hints", "truncated_fields", "truncated_by", "queries_by")}})


#: How each surface names a setting and asks for evidence: Python keywords, the CLI's flags, the
#: HTTP service's (the server's ``serve`` flags; ``evidence`` is a field of a ``/v1/score`` body).
SURFACES = ("python", "cli", "http")


def setting_words(name: str, value: str | None, surface: str) -> str:
    """A setting as ``surface`` (:data:`SURFACES`) sets it: ``long_input='chunk'`` and
    ``chunk_words=N`` (a metavariable stays bare) in Python, ``--long-input chunk`` in the CLI,
    ``serve --long-input chunk`` over HTTP; ``value`` None: the name alone.

    Example:
        >>> [setting_words("chunk_words", "N", s) for s in SURFACES]
        ['chunk_words=N', '--chunk-words N', 'serve --chunk-words N']
    """
    flag = f"--{name.replace('_', '-')}"
    if surface == "python":
        return name if value is None else f"{name}={value}" if value.isupper() else f"{name}={value!r}"
    words = flag if value is None else f"{flag} {value}"
    return f"serve {words}" if surface == "http" else words


def evidence_words(surface: str) -> str:
    """How ``surface`` asks for the windows and sentences behind a score."""
    return {"python": "evidence=True", "cli": "--evidence",
            "http": '"evidence": true in a /v1/score body'}[surface]


def truncation_message(stats: RunStats, max_lengths: Mapping[str, int], long_input: str, *, cli: bool = False,
                       surface: str | None = None, evidence: bool = True,
                       field_names: Mapping[str, str] | None = None) -> str:
    """One sentence on the queries that lost their end to ``max_length`` (``stats.n_truncated``),
    for every entry point: how many, each checkpoint's limit, the field the cut fell in, and
    what helps, in the words of the surface that reads it.

    Args:
        stats: the run's counters (``n_truncated``, ``truncated_by``, ``truncated_fields``).
        max_lengths: checkpoint name -> its tokens per query (:meth:`Engine.max_length`).
        long_input: the run's long-input mode.
        cli: name flags (``--long-input chunk``) instead of keywords (``long_input='chunk'``).
        surface: ``python``, ``cli`` or ``http`` (:data:`SURFACES`; default from ``cli``): the
            service names its ``serve`` flags and the ``evidence`` field of a request body.
        evidence: whether the entry point can show evidence (``score``: ``--evidence``); False
            (the reports, which have no such option) leaves that advice out.
        field_names: our field -> the name the reader's input gave it (a report file with
            ``input`` for the source), for the fields the cut fell in.
    """
    surface = surface or ("cli" if cli else "python")

    def opt(name: str, value: str) -> str:
        return setting_words(name, value, surface)

    limits = ", ".join(f"{n} {max_lengths.get(n, '?')} tokens" for n in (stats.truncated_by or max_lengths))
    names = field_names or {}
    where = ", ".join(f"{names.get(f, f)} ({k})"
                      for f, k in sorted(stats.truncated_fields.items(), key=lambda x: -x[1]))
    text = (f"{stats.n_truncated} of {stats.n_queries} distinct queries were longer than max_length ({limits}) and "
            f"lost their end" + (f"; the cut fell in: {where}" if where else ""))
    from ..registry.evaluators import get_evaluator

    advice = []
    chunking = [n for n in stats.truncated_by if get_evaluator(n).prompt_format.own_chunking]
    others = [n for n in stats.truncated_by if n not in chunking]
    for name in chunking:  # each in its own words: only MiniCheck has fact/sentence_support
        advice.append(f"{name} reads the document in chunks of {opt('chunk_words', 'N')} words "
                      f"whatever {setting_words('long_input', None, surface)} says, each "
                      f"cut to fit the window, so the claim alone nearly fills it: {_claim_advice(name)}")
    if others or not chunking:
        if set(stats.truncated_fields) <= {"target", "prompt"} and stats.truncated_fields:
            advice.append("the target alone is too long: no long-input mode helps (split the target, or raise "
                          f"{opt('max_length', 'N')} up to what the model was trained for)")
        elif long_input == "truncate":
            advice.append(f"{opt('long_input', 'chunk')} reads long fields whole in windows ({opt('long_input', 'fit')} "
                          "keeps their beginning)")
        else:
            advice.append("a summary sentence, key point or instruction alone is that long")
    if evidence:
        advice.append(f"{evidence_words(surface)} shows which")
    return text + "; " + "; ".join(advice)


def _claim_advice(checkpoint: str) -> str:
    """How to read long claims whole with a self-chunking evaluator: a built-in sentence-level
    aspect of it where there is one (MiniCheck: ``fact/sentence_support``; mdeberta-nli's
    ``fact/nli_support`` already is one: shorter sentences), else a user-defined aspect on it with
    ``granularity: sentence`` (FactCG, Granite Guardian)."""
    from ..registry.tasks import aspects_of

    own = aspects_of(checkpoint)
    sentence = [f"{a.task}/{a.name}" for a in own if a.granularity == "sentence"]
    if own and len(sentence) == len(own):
        return f"split the target's long sentences ({', '.join(sentence)} checks each sentence)"
    if sentence:
        return f"check long claims sentence by sentence ({sentence[0]})"
    return (f"split long claims into shorter ones (a user-defined aspect on {checkpoint} with granularity: "
            "sentence checks each sentence)")


def shortened_message(stats: RunStats, surface: str = "python") -> str:
    """One sentence on the queries whose long field ``long_input='fit'`` shortened
    (``stats.n_shortened``), for every entry point that warns or notes it, in ``surface``'s words."""
    return (f"{stats.n_shortened} of {stats.n_queries} distinct queries had a long field shortened to fit "
            f"max_length ({setting_words('long_input', 'fit', surface)}: only the beginning of that field was read; "
            f"{setting_words('long_input', 'chunk', surface)} reads all of it); {evidence_words(surface)} shows "
            "the windows")


@dataclass(frozen=True)
class PlannedJob:
    """One job after planning: its prompts and queries (:class:`~unieval_local.pipeline.planning.Plan`)
    and the problems planning found (a target without sentences, one too long for fit/chunk, a
    language ``strict_language`` refuses), and each example's language (None for a None example)."""

    job: Job
    plan: Plan
    problems: list[ExampleProblem] = field(default_factory=list)
    languages: list[str | None] = field(default_factory=list)

    def values_of(self, folded: Folded) -> dict[str, np.ndarray]:
        """The job's values from its folded plan: aspect -> shape ``(n_examples,)`` (a job whose
        plan runs over derived examples, ``fact/claims``', folds them back to its own)."""
        return folded.values

    def evidence_of(self, folded: Folded, p_yes: np.ndarray, n_tokens: np.ndarray, max_length: int,
                    counter: Any = None) -> dict[str, list[Evidence | None]]:
        """The job's evidence (:func:`~unieval_local.pipeline.evidence.build_evidence`) from its
        plan's scores (``p_yes``, ``n_tokens`` per prompt) and folded values."""
        return build_evidence(self.plan, folded, p_yes, n_tokens, self.job.examples, max_length, counter)


@dataclass
class PassResult:
    """What one :meth:`Engine.execute` gave.

    Attributes:
        results: job name -> :class:`~unieval_local.pipeline.jobs.JobResult`.
        stats: the pass's :class:`~unieval_local.pipeline.jobs.RunStats` (distinct queries over all jobs).
    """

    results: dict[Hashable, JobResult]
    stats: RunStats
