"""The service's engine side: one :class:`~unieval_local.engine.Engine` and one
:class:`~unieval_local.requests.scheduler.Scheduler` per process, run by ONE worker thread
(:class:`BatchingWorker`); HTTP handlers only prepare requests (off the event loop), submit them
and wait on their futures.

The scheduler scores the queries of every request it holds in micro-batches (about one forward
batch each) and answers each request as soon as its last query is scored, so a small request
never waits for a large one's work (the fairness rule is the scheduler's: shortest remaining
first, with ageing, and no request leads two micro-batches in a row while a smaller one waits).
A request that arrives while the worker is idle opens a window of ``max_wait_ms`` so that the
requests of a burst share their first micro-batches; ``max_wait_ms=0`` turns cross-request
batching off (each micro-batch holds one request's queries).

Admission is by cost in model queries (:attr:`Prepared.cost
<unieval_local.requests.scheduler.Prepared.cost>`: an upper bound before deduplication, chunk
windows and references included): a request over ``max_request_queries`` is refused (HTTP 413,
:class:`RequestTooCostlyError`), and one that would take the queries waiting or running over
``max_queued_queries`` gets HTTP 429 (:class:`QueueFullError`) with a ``Retry-After`` estimated
from the work left in the held requests that must be answered to make room for it (least work
left first, as the scheduler answers them) over the recent throughput in the same units
(:class:`ThroughputMeter`: cost units done per second of work over the last few seconds, so it
follows a mix that gets slower). A request whose future is cancelled (its client timed out or went
away) has its queued work dropped by the scheduler.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..errors import UniEvalError
from ..requests.base import Request
from ..requests.scheduler import Prepared, Scheduler

__all__ = ["SERVICE_FLAGS", "BatchingWorker", "DrainingError", "QueueFullError", "RequestTooCostlyError",
           "ServiceLimits", "ThroughputMeter", "estimate_tokens"]


class RequestTooCostlyError(UniEvalError):
    """A request asks for more model queries than ``max_request_queries`` (HTTP 413).

    Attributes:
        cost: its queries (an upper bound before deduplication). limit: the limit.
    """

    def __init__(self, cost: int, limit: int):
        super().__init__(f"the request asks for up to {cost} model queries (examples x aspects x sentences, "
                         f"references and document windows), over this service's limit of {limit} "
                         "(--max-request-queries); split it into smaller requests")
        self.cost, self.limit = cost, limit


class QueueFullError(UniEvalError):
    """The service holds ``max_queued_queries`` queries already (HTTP 429).

    Attributes:
        retry_after: seconds a client should wait before retrying (at least 1).
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class DrainingError(UniEvalError):
    """The service is shutting down (SIGTERM / Ctrl-C) and accepts no new request (HTTP 503)."""


@dataclass(frozen=True)
class ServiceLimits:
    """The service's own settings (the engine's are :class:`~unieval_local.settings.EngineSettings`).

    Attributes:
        max_wait_ms: how long an idle worker waits for more requests before its first
            micro-batch, in milliseconds (0: no wait, and no micro-batch mixes requests).
        max_step_ms: a micro-batch's target duration in milliseconds: where the model is slow (a
            CPU), micro-batches are cut to what it scores in about this long, so a request that
            arrives waits at most about this long for the one in progress (0: full batches,
            ``batch_tokens`` each, whatever they take).
        max_request_queries: the most model queries one HTTP request may cost (an upper bound
            before deduplication); more gets HTTP 413. The default 8,192 holds a 250-example,
            4-aspect request of 10-sentence summaries (250 x (2 + 2 x 10) = 5,500).
        max_queued_queries: model queries waiting or running at once, over all requests; a
            request that would go over gets HTTP 429 with Retry-After. At least
            ``max_request_queries`` (so that every admissible request fits an empty queue).
        max_body_mb: the largest request body in MiB (HTTP 413 above, checked before parsing).
        request_timeout_s: a request not answered in this many seconds gets HTTP 504 (its
            queued work is dropped).
        max_runs: custom runs kept in memory for ``GET /runs/{id}`` (a hard bound).
        max_batch_tokens: kept for old command lines: an idle worker's window also closes once
            the queries waiting hold about this many tokens (4 characters a token).

    Raises:
        ValueError: a negative or zero limit, or a queue smaller than one request (named).
    """

    max_wait_ms: float = 10.0
    max_step_ms: float = 100.0
    max_request_queries: int = 8192
    max_queued_queries: int = 32768
    max_body_mb: float = 16.0
    request_timeout_s: float = 300.0
    max_runs: int = 1000
    max_batch_tokens: int = 65536

    def __post_init__(self) -> None:
        for name in ("max_wait_ms", "max_step_ms"):
            value = getattr(self, name)
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        for name in ("max_request_queries", "max_queued_queries", "max_body_mb", "request_timeout_s", "max_runs",
                     "max_batch_tokens"):
            value = getattr(self, name)
            if not value > 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if self.max_queued_queries < self.max_request_queries:
            raise ValueError(f"max_queued_queries ({self.max_queued_queries}) must be at least max_request_queries "
                             f"({self.max_request_queries}): a request the service admits must fit its empty queue")

    @property
    def max_body_bytes(self) -> int:
        """:attr:`max_body_mb` in bytes."""
        return int(self.max_body_mb * 1024 * 1024)


#: The CLI flags of :class:`ServiceLimits` (field, flag, type, help), read by ``unieval-local serve``.
SERVICE_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("max_wait_ms", "--max-wait-ms", float, "how long an idle worker waits for more requests before its first "
                                            "micro-batch, in ms (0: no wait, no micro-batch mixes requests; "
                                            "default {default:g})"),
    ("max_step_ms", "--max-step-ms", float, "a micro-batch's target duration in ms: on a slow device (a CPU) "
                                            "micro-batches are cut to what the model scores in about this long, so a "
                                            "new request waits at most about this long for the one in progress (0: "
                                            "full --batch-tokens batches; default {default:g})"),
    ("max_request_queries", "--max-request-queries", int,
     "most model queries one HTTP request may cost (examples x aspects x sentences, references and document "
     "windows, before deduplication); more gets 413 (default {default})"),
    ("max_queued_queries", "--max-queued-queries", int,
     "model queries waiting or running at once over all requests; a request that would go over gets 429 with "
     "Retry-After (default {default}; at least --max-request-queries)"),
    ("max_body_mb", "--max-body-mb", float, "largest request body in MiB; larger gets 413 (default {default:g})"),
    ("request_timeout_s", "--request-timeout-s", float, "a request not answered in this many seconds gets 504 and "
                                                       "its queued work is dropped (default {default:g})"),
    ("max_runs", "--max-runs", int, "custom runs kept in memory for GET /runs/{{id}}, at most (default {default})"),
    ("max_batch_tokens", "--max-batch-tokens", int, "the idle window (--max-wait-ms) also closes once the requests "
                                                   "waiting in it hold about this many tokens; not a forward batch's "
                                                   "size, which is --batch-tokens (default {default})"),
)


def estimate_tokens(obj: Any) -> int:
    """A cheap token estimate of a request's texts: characters / 4 over every string in
    ``obj`` (nested dicts and lists), at least 1."""
    total, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            stack.extend(v for v in getattr(item, "__dict__", {}).values() if isinstance(v, (str, list, dict)))
    return max(1, total // 4)


class ThroughputMeter:
    """The recent throughput of the worker in the units the queue is counted in: request cost
    units (:attr:`Prepared.cost <unieval_local.requests.base.Prepared.cost>`, model queries before
    deduplication) done per second of work, for a ``Retry-After`` that is the queries held over it.

    Each micro-batch records its duration and the cost units it did (answered requests' costs,
    and the share of a request's cost whose queries it scored: progress between answers, so a
    large request in progress counts at once). The rate is over the micro-batches that ended in
    the last ``window_s`` seconds of ``clock``, extended to older ones until they hold at least
    ``min_busy_s`` of work (after an idle spell, the last work done). When the mix of queries gets
    slower (longer texts, a slower aspect), the rate follows within ``window_s``; a rate over all
    history, or in other units (distinct prompts scored, while the queue counts costs), was
    0.05-1.1x the real wait after such a change.

    Args:
        window_s: seconds of recent micro-batches the rate is taken over (> 0).
        min_busy_s: at least this many seconds of work in the rate (older steps are added).
        clock: monotonic seconds (a fake one in tests).
        keep: micro-batches kept.

    Example:
        >>> now = [0.0]
        >>> meter = ThroughputMeter(window_s=2.0, min_busy_s=0.5, clock=lambda: now[0])
        >>> for _ in range(10):
        ...     now[0] += 0.1; meter.record(0.1, 10)   # 100 units/s
        >>> for _ in range(30):
        ...     now[0] += 0.1; meter.record(0.1, 2)    # the mix got 5x slower
        >>> round(meter.rate(), 6)
        20.0
    """

    def __init__(self, window_s: float = 5.0, min_busy_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 keep: int = 1024):
        if not window_s > 0 or min_busy_s < 0:
            raise ValueError(f"window_s must be > 0 and min_busy_s >= 0, got {window_s!r}, {min_busy_s!r}")
        self.window_s, self.min_busy_s, self.clock = window_s, min_busy_s, clock
        self._steps: deque[tuple[float, float, float]] = deque(maxlen=keep)  # (end, seconds, cost units done)
        self._lock = threading.Lock()

    def record(self, seconds: float, done: float) -> None:
        """One micro-batch of ``seconds`` that did ``done`` cost units (negative counts as 0)."""
        with self._lock:
            self._steps.append((self.clock(), max(0.0, seconds), max(0.0, done)))

    def rate(self) -> float | None:
        """Cost units per second of work over the recent micro-batches; None before any work
        was measured (no step, or none that did anything)."""
        with self._lock:
            steps = list(self._steps)
        since = self.clock() - self.window_s
        busy = done = 0.0
        for end, seconds, units in reversed(steps):
            if end < since and busy >= self.min_busy_s:
                break
            busy += seconds
            done += units
        return done / busy if busy > 0 and done > 0 else None


def _work_left(p: Prepared) -> float:
    """The cost units of held request ``p`` not yet done: its cost less the scored share of its
    current stage's queries (as :meth:`Scheduler.partial_cost
    <unieval_local.requests.scheduler.Scheduler.partial_cost>` counts the share done); its whole
    cost while it waits to enter the scheduler. Read without the scheduler's lock: an estimate."""
    pooled, remaining = p.pooled, p.remaining
    if not pooled or p.done:
        return float(p.cost) if not p.done else 0.0
    return p.cost * min(1.0, max(0.0, remaining / pooled))


class BatchingWorker:
    """The one thread that runs the model: it moves admitted requests into the scheduler and
    steps it, one micro-batch at a time (module docstring).

    Args:
        scheduler: the process's :class:`~unieval_local.requests.scheduler.Scheduler`.
        limits: :class:`ServiceLimits`.
        on_step: called after every step with ``(requests answered, seconds)`` (metrics).

    Thread safety: :meth:`submit` from any thread; the rest runs in the worker thread, started
    by :meth:`start`.
    """

    def __init__(self, scheduler: Scheduler, limits: ServiceLimits,
                 on_step: Callable[[int, float], None] | None = None):
        self.scheduler = scheduler
        self.limits = limits
        self.on_step = on_step
        self._incoming: deque[Prepared] = deque()
        self._held = 0  # model queries admitted and not yet answered (costs, before deduplication)
        self._tokens = 0  # estimated tokens of the requests waiting for the window
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.meter = ThroughputMeter()  # cost units done per second of work, recently
        self._retired = 0  # cost of the requests answered (not cancelled) so far
        self._admitted: dict[int, Prepared] = {}  # id -> the requests held (admitted, not yet answered)

    # ------------------------------------------------------------------ any thread
    def queued(self) -> int:
        """Model queries admitted and not yet answered (their costs)."""
        with self._cond:
            return self._held

    def submit(self, requests: Sequence[Request | Prepared], tokens: int = 0) -> list[Future]:
        """Admit one HTTP request's scheduler requests, all or none, and queue them.

        Args:
            requests: prepared ones (:meth:`Scheduler.prepare
                <unieval_local.requests.scheduler.Scheduler.prepare>`, with their cost), or plain
                requests (cost 0: prepared by the worker).
            tokens: their estimated tokens (:func:`estimate_tokens`), for the idle window.

        Returns:
            One future per request: its answer or its error. Cancelling one drops its work.

        Raises:
            RequestTooCostlyError: their cost is over ``max_request_queries`` (HTTP 413).
            QueueFullError: they would take the queued queries over ``max_queued_queries`` (429).
            DrainingError: the worker is stopping (503).
        """
        prepared = [r if isinstance(r, Prepared) else Prepared(r) for r in requests]
        cost = sum(p.cost for p in prepared)
        limits = self.limits
        if cost > limits.max_request_queries:
            raise RequestTooCostlyError(cost, limits.max_request_queries)
        with self._cond:
            if self._stopping:
                raise DrainingError("the service is shutting down and accepts no new request; retry on another "
                                    "replica or after it restarts")
            if self._held + cost > limits.max_queued_queries:
                raise QueueFullError(
                    f"the service holds {self._held} model queries already and this request asks for up to {cost} "
                    f"(--max-queued-queries {limits.max_queued_queries}); retry after the Retry-After seconds",
                    self._retry_after(cost))
            self._held += cost
            self._admitted.update((id(p), p) for p in prepared)
            self._tokens += tokens
            self._incoming.extend(prepared)
            self._cond.notify_all()
        for p in prepared:
            p.future.add_done_callback(lambda f, c=p.cost, k=id(p): self._release(c, f.cancelled(), k))
        return [p.future for p in prepared]

    def _release(self, cost: int, cancelled: bool = False, key: int | None = None) -> None:
        with self._cond:
            self._held -= cost
            self._admitted.pop(key, None)
            if not cancelled:  # dropped work is not work done
                self._retired += cost

    def throughput(self) -> float | None:
        """Cost units (the queue's: model queries before deduplication) done per second of work
        over the recent micro-batches (:class:`ThroughputMeter`); None before any."""
        return self.meter.rate()

    def _done(self) -> float:
        """Cost units done so far: the answered requests' costs and the scored share of the others'."""
        with self._cond:
            retired = self._retired
        return retired + self.scheduler.partial_cost()

    def _retry_after(self, cost: int) -> int:
        """Seconds until a request of ``cost`` is likely admitted: the work (cost units) left in
        the held requests that must be answered first to make room for it, over the recent
        throughput in the same units (:meth:`throughput`); at least 1, at most 3,600 (1 before
        anything was measured). Called with the lock held.

        Room comes back in steps of whole requests (a request's queries are released when it is
        answered), and the scheduler answers the request with the least work left first, so the
        held requests are taken in that order, their work left added up, until the costs they
        release make room for ``cost`` under ``max_queued_queries``: one large request holding
        the queue is waited for whole (a client told 1 s while one did came back 25 times), while
        a queue of many small ones makes room when the first are answered (``bench_service.py
        --scenarios retry``: the queue's whole work over the rate said 1-32 s against real waits
        of 0.02-3.5 s, ratios 0.29-153; this estimate said 1 s against 0.00-1.85 s)."""
        rate = self.throughput()
        if not rate:
            return 1
        need = self._held + cost - self.limits.max_queued_queries  # cost units to be released
        work = 0.0
        for left, held in sorted((_work_left(p), p.cost) for p in self._admitted.values()):
            if need <= 0:
                break
            work += left
            need -= held
        return max(1, min(3600, math.ceil(work / rate)))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the worker thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="unieval-local-worker", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Accept no new request, answer every accepted one, then end the thread.

        Returns:
            True when the thread ended within ``timeout`` seconds (None: wait for it).
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called (the service is draining)."""
        return self._stopping

    # ------------------------------------------------------------------ the worker thread
    def _window(self) -> list[Prepared]:
        """Wait for work; when the scheduler is idle, hold the window open; the requests to release."""
        limits = self.limits
        with self._cond:
            while not self._incoming and not self.scheduler.pending():
                if self._stopping:
                    return []
                self._cond.wait(0.5)
            if self._incoming and not self.scheduler.pending() and limits.max_wait_ms > 0:
                deadline = time.monotonic() + limits.max_wait_ms / 1000.0
                while not self._stopping and self._tokens < limits.max_batch_tokens:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            batch = list(self._incoming)
            self._incoming.clear()
            self._tokens = 0
            return batch

    def _loop(self) -> None:
        while True:
            for p in self._window():
                self.scheduler.submit(p)
            if not self.scheduler.pending():
                with self._cond:
                    if self._stopping and not self._incoming:
                        return
                continue
            done_before = self._done()
            started = time.perf_counter()
            try:
                answered = self.scheduler.step()
            except BaseException:  # noqa: BLE001  the waiting requests have failed with it; keep serving
                answered = 0
            seconds = time.perf_counter() - started
            self.meter.record(seconds, self._done() - done_before)
            if self.on_step is not None:
                self.on_step(answered, seconds)
