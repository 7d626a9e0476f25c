"""The Scheduler: many requests, one engine pass per stage.

Every entry point (``Scorer.score``/``evaluate``, batch runs, the report formats, the HTTP
service) hands its :class:`~unieval_local.requests.base.Request` objects to a
:class:`Scheduler`. One :meth:`Scheduler.tick` advances every submitted request by one
stage: the stages' jobs are packed into passes by the :class:`PassPolicy`, each pass is ONE
:meth:`Engine.plan <unieval_local.engine.Engine.plan>` + :meth:`Engine.execute
<unieval_local.engine.Engine.execute>` over the jobs of all its requests (names kept apart),
so a prompt that two requests share is scored once, and each request receives its own
results. A request whose input has problems (its generator raises, or a strict stage's
planning finds problems) fails alone; the others are answered. A failure of the pass itself
(a checkpoint that does not load, the model failing) fails every request of that pass.

Answers come back as :class:`concurrent.futures.Future` objects, so a thread that submits
(an HTTP handler) can wait for the answer while another thread ticks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine, RunStats
from .base import Request, Stage, StageGenerator, StageResult

__all__ = ["PassPolicy", "Scheduler"]

T = TypeVar("T")


@dataclass(frozen=True)
class PassPolicy:
    """How much work one engine pass holds: the one policy of every entry point.

    Attributes:
        max_examples: the most examples (records) in one pass, summed over the requests
            packed into it (default 250, the hosted metric's request cap). Entry points split
            their input into requests of at most this many (:meth:`split`); a request larger
            than this still runs, in a pass of its own. It bounds the prompts held in memory
            at once; it never changes a score.

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
class _Active:
    """One submitted request and where it is."""

    request: Request
    future: Future
    generator: StageGenerator | None = None
    stage: Stage | None = None


@dataclass(eq=False)
class _Pass:
    members: list[_Active] = field(default_factory=list)
    size: int = 0


class Scheduler:
    """Advances requests together, one engine pass per stage (see the module docstring).

    Args:
        engine: the :class:`~unieval_local.engine.Engine` every pass runs on.
        policy: the :class:`PassPolicy` (default: 250 examples per pass).

    Attributes:
        stats: the counters of every pass run so far (:class:`~unieval_local.engine.RunStats`).
        passes: engine passes run so far.

    Thread safety: :meth:`submit` may be called from any thread; :meth:`tick` from one
    thread at a time (it holds a lock while it runs).
    """

    def __init__(self, engine: Engine, policy: PassPolicy | None = None):
        self.engine = engine
        self.policy = policy or PassPolicy()
        self.stats = RunStats()
        self.passes = 0
        self._active: list[_Active] = []
        self._lock = threading.Lock()
        self._tick_lock = threading.Lock()
        self._work = threading.Condition(self._lock)

    # ------------------------------------------------------------------ submitting
    def submit(self, request: Request) -> Future:
        """Queue ``request`` for the next :meth:`tick`; its answer (or error) arrives in the
        returned future."""
        future: Future = Future()
        with self._work:
            self._active.append(_Active(request, future))
            self._work.notify_all()
        return future

    def pending(self) -> int:
        """Requests submitted and not yet answered."""
        with self._lock:
            return len(self._active)

    def wait_for_work(self, timeout: float | None = None) -> bool:
        """Block until a request is pending (True) or ``timeout`` seconds pass (False)."""
        with self._work:
            return self._work.wait_for(lambda: bool(self._active), timeout)

    # ------------------------------------------------------------------ running
    def run(self, requests: Iterable[Request], on_batch: Callable[[int, int], None] | None = None) -> list[Future]:
        """Submit ``requests`` and tick until every one is answered; their futures, in order
        (each holds an answer or an exception)."""
        futures = [self.submit(r) for r in requests]
        while not all(f.done() for f in futures):
            self.tick(on_batch)
        return futures

    def answer(self, request: Request, on_batch: Callable[[int, int], None] | None = None) -> Any:
        """Run one request to its answer.

        Raises:
            Whatever the request raised, or what failed its passes.
        """
        return self.run([request], on_batch)[0].result()

    def answers(self, requests: Sequence[Request], on_batch: Callable[[int, int], None] | None = None) -> list[Any]:
        """Run ``requests`` together; their answers in order.

        Raises:
            The first failed request's exception (in request order).
        """
        return [f.result() for f in self.run(requests, on_batch)]

    def tick(self, on_batch: Callable[[int, int], None] | None = None) -> int:
        """Advance every request submitted before this call by one stage.

        New requests start (their first stage is planned); the current stages of all of them
        are packed into passes (:class:`PassPolicy`) and each pass runs once on the engine;
        every request then receives its results and yields its next stage or its answer.

        Args:
            on_batch: progress callback of the engine passes ``(distinct queries done, total)``.

        Returns:
            The number of requests answered (or failed) in this tick.

        Raises:
            KeyboardInterrupt (and :class:`~unieval_local.errors.Terminated`): passed on; the
            requests of the interrupted pass fail with it first.
        """
        with self._tick_lock:
            with self._lock:
                batch = list(self._active)
            finished = 0
            started = []
            for a in batch:
                if a.generator is None:
                    if not a.future.set_running_or_notify_cancel():
                        self._finish(a)
                        finished += 1
                        continue
                    a.generator = a.request.stages(self.engine)
                    if self._advance(a, None):
                        finished += 1
                        continue
                started.append(a)
            for p in self._pack(started):
                finished += self._run_pass(p, on_batch)
            return finished

    # ------------------------------------------------------------------ internals
    def _pack(self, active: list[_Active]) -> list[_Pass]:
        """Consecutive requests into passes of at most ``policy.max_examples`` examples (a
        request larger than that alone in its pass)."""
        passes: list[_Pass] = []
        limit = self.policy.max_examples
        for a in active:
            size = max(int(a.request.size), 0)
            if not passes or (passes[-1].members and passes[-1].size + size > limit):
                passes.append(_Pass())
            passes[-1].members.append(a)
            passes[-1].size += size
        return passes

    def _run_pass(self, p: _Pass, on_batch: Callable[[int, int], None] | None) -> int:
        """Plan, run and deliver one pass; the number of requests it finished."""
        engine, planned, groups, evidence, members = self.engine, {}, {}, set(), []
        finished = 0
        for k, a in enumerate(p.members):
            jobs = {(k, name): job for name, job in a.stage.jobs.items()}
            try:
                mine = engine.plan(jobs)
            except Exception as exc:  # this request's input or checkpoint: it fails alone
                finished += self._fail(a, exc)
                continue
            if a.stage.strict and any(pj.problems for pj in mine.values()):
                from ..engine import JobResult

                refused = {name: JobResult(problems=list(mine[(k, name)].problems)) for name in a.stage.jobs}
                finished += self._advance(a, StageResult(refused, RunStats(), refused=True))
                continue
            planned.update(mine)
            groups.update({key: k for key in mine})
            if a.stage.evidence:
                evidence.update(mine)
            members.append((k, a))
        if not members:
            return finished
        try:
            result = engine.execute(planned, evidence=evidence, groups=groups, on_batch=on_batch)
        except Exception as exc:  # the pass failed (checkpoint, model): every request of it fails
            return finished + sum(self._fail(a, exc) for _, a in members)
        except BaseException as exc:  # Ctrl-C, SIGTERM: fail them, then pass it on
            for _, a in members:
                self._fail(a, exc)
            raise
        self.passes += 1
        self.stats += result.stats
        for k, a in members:
            mine = {name: result.results[(k, name)] for name in a.stage.jobs}
            finished += self._advance(a, StageResult(mine, result.group_stats.get(k, RunStats())))
        return finished

    def _advance(self, a: _Active, got: StageResult | None) -> bool:
        """Send ``got`` to the request (None starts it); True when it finished."""
        try:
            a.stage = a.generator.send(got) if got is not None else next(a.generator)
        except StopIteration as stop:
            a.future.set_result(stop.value)
            self._finish(a)
            return True
        except Exception as exc:
            return self._fail(a, exc)
        if not isinstance(a.stage, Stage):
            return self._fail(a, TypeError(f"a request must yield Stage objects, got {type(a.stage).__name__}"))
        return False

    def _fail(self, a: _Active, exc: BaseException) -> bool:
        if not a.future.done():
            a.future.set_exception(exc)
        if a.generator is not None:
            a.generator.close()
        self._finish(a)
        return True

    def _finish(self, a: _Active) -> None:
        with self._lock:
            if a in self._active:
                self._active.remove(a)
