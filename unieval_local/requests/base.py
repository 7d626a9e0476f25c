"""Two-phase requests: a :class:`Request` yields the jobs of a stage, receives their results,
and yields its next stage or returns its answer.

A request is written as a generator (:meth:`Request.stages`)::

    def stages(self, engine):
        jobs = ...                                  # plan this stage's jobs
        got = yield Stage(jobs, evidence=True)      # the scheduler runs them (with others')
        more = ...                                  # a second stage from the first's results
        got2 = yield Stage(more)
        return answer                               # the request's answer

so the :class:`~unieval_local.requests.scheduler.Scheduler` can advance many requests
together: it plans each stage, scores the prompts of all of them in shared micro-batches, and
sends each request its results as soon as its stage's last prompt is scored. A request never runs the
engine itself: the engine it receives is for its registry, splitter and limits
(``engine.registry``, ``engine.splitter``, ``engine.max_length``). An exception raised by the
generator fails that request alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Job, JobResult, RunStats

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["Answer", "Prepared", "Request", "RequestPolicy", "Stage", "StageResult", "StageGenerator"]

Answer = TypeVar("Answer")
T = TypeVar("T")


@dataclass(frozen=True)
class Stage:
    """The jobs of one stage of a request.

    Attributes:
        jobs: name -> :class:`~unieval_local.engine.Job` (names are the request's own: the
            scheduler keeps them apart from other requests' names).
        evidence: also build per-example evidence for these jobs.
        strict: when planning finds a problem in any of these jobs (a target without
            sentences, one too long for fit/chunk), score none of them: the request gets
            the problems back (:attr:`StageResult.refused`) before its model runs.
    """

    jobs: Mapping[str, Job]
    evidence: bool = False
    strict: bool = False


@dataclass(frozen=True)
class StageResult:
    """What a stage gave back to its request.

    Attributes:
        results: job name -> :class:`~unieval_local.engine.JobResult` (values, planning
            problems, evidence); with ``refused``, values are empty and only problems are set.
        stats: this request's counters for the stage (its distinct queries, truncations ...;
            the pass's model loads and cache counts go with the first request of the pass,
            so the sums over requests are the pass totals).
        refused: a strict stage with planning problems: nothing was scored.
    """

    results: Mapping[str, JobResult] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    refused: bool = False

    @property
    def problems(self) -> list:
        """Every planning problem of the stage's jobs, in job order."""
        return [p for r in self.results.values() for p in r.problems]


#: A request's stage generator: yields :class:`Stage`, receives :class:`StageResult`, returns the answer.
StageGenerator = Generator[Stage, StageResult, Answer]


class Request(ABC, Generic[Answer]):
    """One unit of work with an answer: a score request, a batch request of records, one
    report request. Subclasses set :attr:`size` and implement :meth:`stages`.

    Attributes:
        size: the examples (records) the request holds: the unit of the scheduler's
            :class:`~unieval_local.requests.scheduler.RequestPolicy`.
        later_queries: an upper bound of the model queries of the stages after the first (0 for
            one-stage requests), known once the first stage is planned (a two-stage request sets
            it before it yields its first stage): with the first stage's queries it is the
            request's cost (:meth:`Scheduler.prepare <unieval_local.requests.scheduler.Scheduler.prepare>`).
    """

    size: int = 0
    later_queries: int = 0

    @property
    def notes(self) -> list[str]:
        """What the request's work told its user besides the numbers (a language outside an
        evaluator's training, input hints ...: :func:`~unieval_local.notes.note`), in order, each
        once: the scheduler collects them while it plans and advances the request, so an answer
        given for someone else (the HTTP service) can carry them."""
        return self.__dict__.setdefault("_notes", [])

    @abstractmethod
    def stages(self, engine: "Engine") -> StageGenerator:
        """The request's stages (a generator, see the module docstring).

        Args:
            engine: the engine whose registry, splitter and limits the request plans with.

        Returns:
            A generator that yields :class:`Stage`, receives :class:`StageResult` and
            returns the answer. Exceptions it raises fail this request alone.
        """


def joined_values(results: Mapping[str, JobResult]) -> dict[str, Any]:
    """``{aspect: values}`` over every job of a stage (aspect names are unique across the
    jobs of one request)."""
    return {a: v for r in results.values() for a, v in r.values.items()}


def joined_evidence(results: Mapping[str, JobResult]) -> dict[str, Sequence]:
    """``{aspect: evidence list}`` over every job of a stage."""
    return {a: v for r in results.values() for a, v in r.evidence.items()}


@dataclass(frozen=True)
class RequestPolicy:
    """How an entry point cuts its input into requests (the unit of an answer, of fairness and
    of a batch run's hosted line).

    Attributes:
        max_examples: the most examples (records) in one request (default 250, the hosted
            metric's request cap). It bounds the prompts planned at once; it never changes a score.

    Raises:
        ValueError: ``max_examples`` < 1.
    """

    max_examples: int = MAX_EXAMPLES_PER_REQUEST

    def __post_init__(self) -> None:
        if isinstance(self.max_examples, bool) or not isinstance(self.max_examples, int) or self.max_examples < 1:
            raise ValueError(f"max_examples must be a positive integer, got {self.max_examples!r}")

    def split(self, items: Sequence[T]) -> list[tuple[int, Sequence[T]]]:
        """``items`` cut into consecutive parts of at most :attr:`max_examples`, each with the
        index of its first item: ``[(0, items[0:250]), (250, items[250:500]), ...]``."""
        n = self.max_examples
        return [(at, items[at:at + n]) for at in range(0, len(items), n)]


@dataclass(eq=False)
class Prepared:
    """A request whose first stage is planned (:meth:`Scheduler.prepare`), with its cost.

    Attributes:
        request: the request. cost: an upper bound of the model queries it will ask for, before
            deduplication: its first stage's queries (chunk windows and references included) plus
            :attr:`~unieval_local.requests.base.Request.later_queries`.
        future: its answer (or error), once submitted.
    """

    request: Request
    cost: int = 0
    future: Future = field(default_factory=Future)
    generator: StageGenerator | None = None
    stage: Stage | None = None
    planned: dict | None = None
    answer: Any = None
    answered: bool = False
    # --- while it waits in the scheduler
    seq: int = 0
    entered: int = 0
    todo: dict[str, dict[str, None]] = field(default_factory=dict)
    scored: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    remaining: int = 0
    pooled: int = 0
    done: bool = False
