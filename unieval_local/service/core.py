"""The service's engine side: one :class:`~unieval_local.engine.Engine` and one
:class:`~unieval_local.requests.scheduler.Scheduler` per process, run by ONE worker thread
(:class:`BatchingWorker`); HTTP handlers only submit requests and wait on their futures.

Cross-request micro-batching: a request submitted while the engine is idle opens a window of
``max_wait_ms``; every request arriving inside it (until the window's requests hold
``max_batch_tokens`` estimated tokens or a pass's 250 examples) goes to the scheduler with it,
so they share one engine pass per stage and a prompt two clients share is scored once
(:meth:`Scheduler.tick <unieval_local.requests.scheduler.Scheduler.tick>`). Requests that
arrive while a pass runs join the next tick without waiting. ``max_wait_ms=0`` turns batching
off: one query per engine pass, in arrival order.

Back-pressure: at most ``max_queued_queries`` queries (scheduler requests of at most 250
examples each) wait or run at once; one more is refused (:class:`QueueFullError`, HTTP 429)
rather than queued without bound.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from ..errors import UniEvalError
from ..requests.base import Request
from ..requests.scheduler import Scheduler

__all__ = ["SERVICE_FLAGS", "BatchingWorker", "DrainingError", "QueueFullError", "ServiceLimits", "estimate_tokens"]


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
        max_wait_ms: the batching window in milliseconds (0: no window, batching off).
        max_batch_tokens: a window closes early once its requests hold this many estimated
            tokens (:func:`estimate_tokens`).
        max_queued_queries: queries waiting or running at once; one more gets HTTP 429.
        max_body_mb: the largest request body in MiB (HTTP 413 above, checked before parsing).
        request_timeout_s: a request not answered in this many seconds gets HTTP 504.
        max_runs: custom runs kept in memory for ``GET /runs/{id}`` (the oldest finished
            ones are forgotten first; all are lost when the process exits).

    Raises:
        ValueError: a negative or zero limit (named).
    """

    max_wait_ms: float = 10.0
    max_batch_tokens: int = 65536
    max_queued_queries: int = 256
    max_body_mb: float = 16.0
    request_timeout_s: float = 300.0
    max_runs: int = 1000

    def __post_init__(self) -> None:
        if self.max_wait_ms < 0 or not math.isfinite(self.max_wait_ms):
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms!r}")
        for name in ("max_batch_tokens", "max_queued_queries", "max_body_mb", "request_timeout_s", "max_runs"):
            value = getattr(self, name)
            if not value > 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be > 0, got {value!r}")

    @property
    def max_body_bytes(self) -> int:
        """:attr:`max_body_mb` in bytes."""
        return int(self.max_body_mb * 1024 * 1024)


#: The CLI flags of :class:`ServiceLimits` (field, flag, type, help), read by ``unieval-local serve``.
SERVICE_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("max_wait_ms", "--max-wait-ms", float, "batching window in ms: requests arriving within it share one "
                                            "engine pass (0: batching off, one query per pass; default {default:g})"),
    ("max_batch_tokens", "--max-batch-tokens", int, "close the window early once its requests hold this many "
                                                   "estimated tokens (default {default})"),
    ("max_queued_queries", "--max-queued-queries", int, "queries (of at most 250 examples) waiting or running at "
                                                       "once; one more gets 429 with Retry-After (default {default})"),
    ("max_body_mb", "--max-body-mb", float, "largest request body in MiB; larger gets 413 (default {default:g})"),
    ("request_timeout_s", "--request-timeout-s", float, "a request not answered in this many seconds gets 504 "
                                                       "(default {default:g})"),
    ("max_runs", "--max-runs", int, "custom runs kept in memory for GET /runs/{{id}} (default {default})"),
)


def estimate_tokens(obj: Any) -> int:
    """A cheap token estimate of a request's texts: characters / 4 over every string in
    ``obj`` (nested dicts and lists), at least 1. Used only to close a batching window early."""
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


@dataclass(eq=False)
class _Incoming:
    request: Request
    future: Future
    tokens: int
    at: float = field(default_factory=time.monotonic)


class BatchingWorker:
    """The one thread that runs the model: it moves submitted requests into the scheduler at
    the end of a batching window and ticks it (module docstring).

    Args:
        scheduler: the process's :class:`~unieval_local.requests.scheduler.Scheduler`.
        limits: :class:`ServiceLimits`.
        on_tick: called after every tick with ``(requests answered, seconds)`` (metrics).

    Thread safety: :meth:`submit` from any thread (the event loop's); the rest runs in the
    worker thread, started by :meth:`start`.
    """

    def __init__(self, scheduler: Scheduler, limits: ServiceLimits,
                 on_tick: Callable[[int, float], None] | None = None):
        self.scheduler = scheduler
        self.limits = limits
        self.on_tick = on_tick
        self._incoming: deque[_Incoming] = deque()
        self._in_scheduler = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pass_seconds = deque(maxlen=32)

    # ------------------------------------------------------------------ any thread
    def queued(self) -> int:
        """Queries waiting for a window or in the scheduler (not yet answered)."""
        with self._cond:
            return len(self._incoming) + self._in_scheduler

    def submit(self, requests: Sequence[Request], tokens: int = 1) -> list[Future]:
        """Queue ``requests`` (one HTTP request's queries) for the next window, all or none.

        Args:
            requests: the queries of one HTTP request.
            tokens: their estimated tokens in all (:func:`estimate_tokens`).

        Returns:
            One future per request: its answer or its error. Cancelling a future before its
            query reaches the scheduler drops the query.

        Raises:
            QueueFullError: they would take the queries over ``max_queued_queries``.
            DrainingError: the worker is stopping.
        """
        futures = [Future() for _ in requests]
        with self._cond:
            if self._stopping:
                raise DrainingError("the service is shutting down and accepts no new request; retry on another "
                                    "replica or after it restarts")
            held = len(self._incoming) + self._in_scheduler
            if held + len(requests) > self.limits.max_queued_queries:
                raise QueueFullError(
                    f"the service holds {held} queries already (--max-queued-queries "
                    f"{self.limits.max_queued_queries}); retry after the Retry-After seconds", self.retry_after())
            share = max(1, tokens // max(1, len(requests)))
            self._incoming.extend(_Incoming(r, f, share) for r, f in zip(requests, futures))
            self._cond.notify_all()
        return futures

    def retry_after(self) -> int:
        """Seconds until the queue is likely to have room: the mean recent pass time (at least 1)."""
        recent = list(self._pass_seconds)
        return max(1, math.ceil(sum(recent) / len(recent))) if recent else 1

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
    def _window(self) -> list[_Incoming]:
        """Wait for work; then, when the scheduler is idle, hold the window open; the requests to release."""
        limits = self.limits
        with self._cond:
            while not self._incoming and not self.scheduler.pending():
                if self._stopping:
                    return []
                self._cond.wait(0.5)
            if self._incoming and not self.scheduler.pending() and limits.max_wait_ms > 0:
                deadline = self._incoming[0].at + limits.max_wait_ms / 1000.0
                while not self._stopping:
                    tokens = sum(i.tokens for i in self._incoming)
                    examples = sum(int(i.request.size) for i in self._incoming)
                    left = deadline - time.monotonic()
                    if left <= 0 or tokens >= limits.max_batch_tokens or \
                            examples >= self.scheduler.policy.max_examples:
                        break
                    self._cond.wait(left)
            if limits.max_wait_ms > 0:
                batch = list(self._incoming)
                self._incoming.clear()
            else:  # batching off: one query per pass
                batch = [self._incoming.popleft()] if self._incoming and not self.scheduler.pending() else []
            batch = [i for i in batch if not i.future.cancelled()]
            self._in_scheduler += len(batch)
            return batch

    def _release(self, item: _Incoming) -> None:
        inner = self.scheduler.submit(item.request)

        def done(f: Future, outer: Future = item.future) -> None:
            with self._cond:
                self._in_scheduler -= 1
            try:
                if f.cancelled():
                    outer.cancel()
                elif f.exception() is not None:
                    outer.set_exception(f.exception())
                else:
                    outer.set_result(f.result())
            except InvalidStateError:  # the handler gave up on it (timeout, disconnect)
                pass

        inner.add_done_callback(done)
        item.future.add_done_callback(lambda f, inner=inner: inner.cancel() if f.cancelled() else None)

    def _loop(self) -> None:
        while True:
            batch = self._window()
            for item in batch:
                self._release(item)
            if not self.scheduler.pending():
                with self._cond:
                    if self._stopping and not self._incoming:
                        return
                continue
            started = time.perf_counter()
            try:
                answered = self.scheduler.tick()
            except BaseException:  # noqa: BLE001  the pass's requests have failed with it; keep serving
                answered = 0
            seconds = time.perf_counter() - started
            self._pass_seconds.append(seconds)
            if self.on_tick is not None:
                self.on_tick(answered, seconds)
