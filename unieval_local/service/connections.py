"""Connection limits of ``unieval-local serve``: who may hold a socket, and for how long.

Clients that never finish a request (half a head, a body sent a byte a second) would hold
descriptors forever; at the file limit nothing is accepted (uvloop drops new connections,
asyncio logs a traceback per failed accept). So:

* **Head**: within ``header_timeout_s`` (default 10 s) of the accept or of the previous
  response's end (``keep_alive_s``, uvicorn's ``timeout_keep_alive``, default 5 s, closes an
  idle connection sooner, but any byte stops that timer). A partial head gets ``408``.
* **Body**: within ``body_timeout_s`` (default 30 s) of the head, plus one second per
  ``min_body_rate`` bytes received (default 10,000 B/s), as Apache's ``mod_reqtimeout``: a byte
  a second is cut off at about 30 s, 16 MiB at 10 kB/s gets about 30 min. Time while the
  server stopped reading (the app has not taken what came) is not counted.
* **Cap**: ``max_connections`` (:func:`connection_cap`: the soft ``RLIMIT_NOFILE``, raised to
  the hard limit at start, less the descriptors open and :data:`RESERVED_FDS`, at most
  :data:`MAX_DEFAULT_CONNECTIONS`). At the cap the server stops accepting (clients wait in the
  listen backlog); while one waits, the oldest connection still waiting for its head, once
  ``eviction_grace_s`` old, is closed to make room, so a client that sends its request at once
  gets in without waiting out the header timeouts of clients that send nothing (a complete
  head is never closed). ``EMFILE`` below the cap is handled the same way.
* **Logs**: accept errors and closed connections are counted (:class:`ConnectionStats`) and
  logged in one line at most once a minute (:data:`REPORT_INTERVAL_S`).

Why this layer: uvicorn 0.55 has no head or body read timeout and accepts through
``loop.create_server`` whenever the socket is readable. Granian and Hypercorn have read
timeouts, but switching would change the access log, the SIGTERM drain and the tests, and
neither stops accepting below the file limit. So the server stays uvicorn with its h11
protocol, whose parser state tells a connection waiting for a head from one sending a body or
waiting for our answer, and :func:`guarded_server_class` replaces only the listening part: our
sockets, our accept loop (``loop.sock_accept``, ``loop.connect_accepted_socket``) gated by the
cap, and one watchdog task sweeping the deadlines. HTTP, keep-alive, the access log and the
graceful shutdown stay uvicorn's (httptools parses faster than h11, but the model bounds this
service). Under ``--engine ray``, Ray Serve's proxy takes the connections instead.

Example:
    >>> limits = ConnectionLimits(header_timeout_s=2, body_timeout_s=5, min_body_rate=0)
    >>> limits.eviction_grace_s, body_deadline(limits, since=100.0, received=10_000)
    (1.0, 105.0)
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import logging
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ACCEPT_BACKOFF_S", "MAX_DEFAULT_CONNECTIONS", "REPORT_INTERVAL_S", "RESERVED_FDS", "ConnectionGuard",
           "ConnectionLimits", "ConnectionStats", "bind_listeners", "body_deadline", "connection_cap", "file_limit",
           "guarded_server_class", "open_descriptors", "raise_file_limit"]

log = logging.getLogger("unieval_local.service.connections")

#: Descriptors kept free under the file limit for what the process opens after start: checkpoint
#: and tokenizer files, the score cache's SQLite files, logs, threads' pipes, accepts in flight.
RESERVED_FDS = 64
#: The derived cap's ceiling: a connection may buffer about 80 KiB (16 KiB of head, 64 KiB of
#: body), about 650 MiB at this many.
MAX_DEFAULT_CONNECTIONS = 8192
#: Seconds between two log lines about connections.
REPORT_INTERVAL_S = 60.0
#: Seconds the accept loop waits after a failed accept (EMFILE...) before it tries again.
ACCEPT_BACKOFF_S = 0.5
#: Failed accepts that mean the process is out of a resource, not that one client left.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Sent to a connection that sent part of a request head but not all of it in time.
REQUEST_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                   b"connection: close\r\ncontent-length: 39\r\n\r\nthe request head did not arrive in time")

HEAD, BODY, BUSY, CLOSED = "head", "body", "busy", "closed"


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a connection may take, and how many may be open.

    Attributes:
        header_timeout_s: seconds for a complete request head after the accept or the previous
            response (> 0).
        body_timeout_s: seconds for a body after its head, plus one per ``min_body_rate`` bytes
            received (> 0).
        min_body_rate: bytes/s that extend the body timeout (>= 0; 0: a hard limit).
        keep_alive_s: seconds an idle keep-alive connection waits for a byte of its next
            request (uvicorn's ``timeout_keep_alive``; > 0; at most the header timeout counts).
        max_connections: connections open at once (>= 1); None: derived (:func:`connection_cap`).

    Raises:
        ValueError: a value out of its range (named).
    """

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    min_body_rate: float = 10_000.0
    keep_alive_s: float = 5.0
    max_connections: int | None = None

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s"):
            value = getattr(self, name)
            if not value > 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
        if not self.min_body_rate >= 0 or not math.isfinite(self.min_body_rate):
            raise ValueError(f"min_body_rate must be >= 0 bytes/s, got {self.min_body_rate!r}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {self.max_connections!r}")

    @property
    def eviction_grace_s(self) -> float:
        """Seconds a connection waiting for its head is safe from being closed to make room at
        the cap: half the header timeout, at most 1 s (time for a client's first packet)."""
        return min(1.0, self.header_timeout_s / 2)


@dataclass
class ConnectionStats:
    """Counters since start (for the log; ``/metrics`` may show them): connections ``open``
    now, ``peak_open``, ``accepted``; closed for ``header_timeouts``, ``body_timeouts``, or
    ``evicted`` (waiting for a head, to make room); failed ``accept_errors`` (the last one's
    reason in ``last_accept_error``)."""

    open: int = 0
    peak_open: int = 0
    accepted: int = 0
    header_timeouts: int = 0
    body_timeouts: int = 0
    evicted: int = 0
    accept_errors: int = 0
    last_accept_error: str = ""

    def snapshot(self) -> dict[str, Any]:
        """The counters as a plain dict (a copy)."""
        return dataclasses.asdict(self)


def body_deadline(limits: ConnectionLimits, since: float, received: int) -> float:
    """When a body that started at ``since`` (seconds, monotonic) and has ``received`` bytes so
    far must be complete: ``since + body_timeout_s + received / min_body_rate``."""
    extra = received / limits.min_body_rate if limits.min_body_rate > 0 else 0.0
    return since + limits.body_timeout_s + extra


# ----------------------------------------------------------------------------- the file limit
def file_limit() -> tuple[int, int] | None:
    """The ``RLIMIT_NOFILE`` (soft, hard) of this process, or None where the platform has none."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def raise_file_limit() -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (an unlimited one: to 65,536); the
    limits after, as :func:`file_limit`. A limit that cannot be raised is kept; never raises."""
    if (limits := file_limit()) is not None:
        import resource

        soft, hard = limits
        target = hard if hard != resource.RLIM_INFINITY else 65536
        try:
            if soft != resource.RLIM_INFINITY and soft < target:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):  # macOS caps some
            pass
    return file_limit()


def open_descriptors() -> int:
    """How many file descriptors this process has open (0 where the platform cannot tell)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        if os.path.isdir(folder):
            return max(0, len(os.listdir(folder)) - 1)  # less the one listdir itself opened
    return 0


def connection_cap(requested: int | None, *, limit: int | None = None, in_use: int | None = None) -> int:
    """The connection cap: ``requested`` (``--max-connections``), or None: derived from ``limit``,
    the soft file limit (default: this process's), and ``in_use`` descriptors (default: as now).

    Returns:
        ``requested``, or ``min(limit - in_use - RESERVED_FDS, MAX_DEFAULT_CONNECTIONS)``
        (:data:`MAX_DEFAULT_CONNECTIONS` without a file limit).

    Raises:
        ValueError: ``requested``, or any connection, does not fit (the message says what to raise).

    Example:
        >>> connection_cap(None, limit=1024, in_use=20)
        940
    """
    limit = limit if limit is not None else (file_limit() or (None, None))[0]
    if limit is None or limit < 0:  # no file limit here (or RLIM_INFINITY)
        return requested or MAX_DEFAULT_CONNECTIONS
    in_use = open_descriptors() if in_use is None else in_use
    room = limit - in_use - RESERVED_FDS
    if requested is not None:
        if requested > room:
            raise ValueError(f"--max-connections {requested} does not fit under the file limit: {limit} descriptors, "
                             f"{in_use} open, {RESERVED_FDS} kept for files; at most {max(room, 0)} (raise the limit: "
                             f"ulimit -n)")
        return requested
    if room < 1:
        raise ValueError(f"the file limit ({limit} descriptors, {in_use} open) leaves no room for connections after "
                         f"{RESERVED_FDS} kept for files: raise it (ulimit -n)")
    return min(room, MAX_DEFAULT_CONNECTIONS)


# ----------------------------------------------------------------------------- sockets
def bind_listeners(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening, non-blocking TCP sockets on every address ``host`` resolves to (as asyncio's
    ``create_server`` binds them: ``SO_REUSEADDR``, IPv6 sockets IPv6-only).

    Raises:
        OSError: an address cannot be resolved or bound (the sockets bound so far are closed).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


# ----------------------------------------------------------------------------- the guard
@dataclass(eq=False)
class _Track:
    """A connection's phase (HEAD, BODY, BUSY, CLOSED), since, body bytes, last sweep (monotonic s)."""

    phase: str
    since: float
    received: int = 0
    checked: float = 0.0


class ConnectionGuard:
    """The cap, the deadlines and the counts of one server's connections (module docstring):
    the server runs :meth:`accept_loop` per listening socket between :meth:`start` and
    :meth:`stop`; each protocol calls :meth:`opened`, :meth:`observe` (after each read and
    response) and :meth:`closed`. ``cap``: connections open at once (>= 1, :func:`connection_cap`);
    ``stats``: where to count (a new :class:`ConnectionStats` by default)."""

    def __init__(self, limits: ConnectionLimits, cap: int, stats: ConnectionStats | None = None):
        if cap < 1:
            raise ValueError(f"the connection cap must be >= 1, got {cap}")
        self.limits, self.cap = limits, cap
        self.stats = stats if stats is not None else ConnectionStats()
        self.heads: dict[Any, None] = {}   # connections waiting for a request head, oldest first
        self.bodies: dict[Any, None] = {}  # connections sending a request body
        self.wake: asyncio.Event | None = None
        self._watch: asyncio.Task | None = None
        self._reported = self.stats.snapshot()
        self._report_at = -math.inf
        self._counting_since = time.monotonic()

    def opened(self, proto: Any) -> None:
        """A connection was accepted: it waits for its first request head from now."""
        proto.track = _Track(HEAD, time.monotonic())
        self.heads[proto] = None

    def observe(self, proto: Any, received: int) -> None:
        """After a read of ``received`` bytes (0: a response was completed): follow the phase."""
        import h11

        track, state = proto.track, proto.conn.their_state  # the h11 parser's view of the client
        if track.phase == CLOSED:
            return
        phase = HEAD if state is h11.IDLE else BODY if state is h11.SEND_BODY else BUSY
        if phase != track.phase:
            self.heads.pop(proto, None)
            self.bodies.pop(proto, None)
            now = time.monotonic()
            track.phase, track.since, track.received, track.checked = phase, now, 0, now
            if phase == HEAD:
                self.heads[proto] = None
            elif phase == BODY:
                self.bodies[proto] = None
        elif phase == BODY:
            track.received += received

    def closed(self, proto: Any) -> None:
        """The connection is gone: its slot is free."""
        proto.track.phase = CLOSED
        self.heads.pop(proto, None)
        self.bodies.pop(proto, None)
        self._release()

    # -- the watchdog
    def sweep(self, now: float) -> None:
        """Close the connections past their deadline at ``now`` (monotonic seconds)."""
        while self.heads:
            proto = next(iter(self.heads))
            if now - proto.track.since < self.limits.header_timeout_s:
                break
            self._expire(proto, "header_timeouts")
        for proto in list(self.bodies):
            track = proto.track
            if proto.flow is not None and proto.flow.read_paused:  # the server stopped reading: not counted
                track.since += now - track.checked
            track.checked = now
            if now >= body_deadline(self.limits, track.since, track.received):
                self._expire(proto, "body_timeouts")

    def report(self, now: float, force: bool = False) -> None:
        """Log one line with what happened since the previous line, at most one per
        :data:`REPORT_INTERVAL_S` (``force``: now, if anything happened)."""
        if now - self._report_at < REPORT_INTERVAL_S and not force:
            return
        snap = self.stats.snapshot()
        new = {k: snap[k] - self._reported[k] for k in ("header_timeouts", "body_timeouts", "evicted", "accept_errors")}
        if not any(new.values()):
            return
        texts = {"header_timeouts": f"closed without a complete request head within {self.limits.header_timeout_s:g} "
                                    f"s (--header-timeout-s)",
                 "body_timeouts": f"closed sending a request body too slowly (--body-timeout-s "
                                  f"{self.limits.body_timeout_s:g}, --min-body-rate {self.limits.min_body_rate:g})",
                 "evicted": "closed to make room for waiting clients (each was still waiting for a request head)",
                 "accept_errors": f"accept() calls failed, the last with {snap['last_accept_error']} (waiting "
                                  f"clients stay in the listen backlog)"}
        parts = [f"{n} {texts[k]}" for k, n in new.items() if n]
        log.log(logging.WARNING if new["accept_errors"] else logging.INFO,
                "connections in the last %.0f s: %s; %d open now (at most %d at once so far, cap %d)",
                now - max(self._report_at, self._counting_since), "; ".join(parts), self.stats.open,
                snap["peak_open"], self.cap)
        self._reported, self._report_at = snap, now

    async def _run_watch(self) -> None:
        import asyncio  # here, not at the top: `unieval-local --help` reads ConnectionLimits

        # an eighth of the shortest timeout, in [0.05, 0.5] s
        interval = max(0.05, min(0.5, self.limits.header_timeout_s / 8, self.limits.body_timeout_s / 8))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            self.report(now)  # first: what the previous sweep closed is gone by now
            self.sweep(now)

    def start(self) -> None:
        """Start the watchdog (in the running event loop)."""
        import asyncio

        self.wake = asyncio.Event()
        self._watch = asyncio.get_running_loop().create_task(self._run_watch())

    async def stop(self) -> None:
        """Stop the watchdog; log what is left to report."""
        if (watch := self._watch) is not None:
            self._watch = None
            watch.cancel()
            await _Listener(watch).wait_closed()
        self.report(time.monotonic(), force=True)

    # -- accepting
    async def accept_loop(self, sock: socket.socket, factory: Any) -> None:
        """Accept on the listening ``sock`` (closed on return) while fewer than the cap are
        open, a ``factory()`` protocol for each; at the cap, :meth:`_make_room`. Runs until
        cancelled; raises only for a bug (not an ``OSError`` of accept or attach)."""
        import asyncio

        loop = asyncio.get_running_loop()
        try:
            while True:
                if self.stats.open >= self.cap:
                    await self._make_room(loop, sock)
                    continue
                try:
                    conn, _ = await loop.sock_accept(sock)
                except OSError as exc:
                    if exc.errno not in (errno.ECONNABORTED, errno.EPROTO, errno.EAGAIN, errno.EINTR):
                        await self._accept_failed(exc)
                    continue
                self.stats.open += 1
                self.stats.accepted += 1
                self.stats.peak_open = max(self.stats.peak_open, self.stats.open)
                made: list[Any] = []
                try:
                    await loop.connect_accepted_socket(lambda: made.append(factory()) or made[-1], conn)
                except OSError as exc:  # the client left before we could attach (ECONNRESET...)
                    conn.close()
                    if not made or getattr(made[0], "track", None) is None:  # else connection_lost released it
                        self._release()
        finally:
            sock.close()

    async def _make_room(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        """At the cap: return once a slot is free; while a client waits in the listen backlog,
        close connections waiting for a head, oldest first, one at a time (:meth:`_evict_oldest`)."""
        fd, state = sock.fileno(), {"waiting": False, "reader": False}

        def readable() -> None:
            state.update(waiting=True, reader=False)
            loop.remove_reader(fd)
            self.wake.set()

        try:
            while self.stats.open >= self.cap:
                timeout = None
                if state["waiting"]:
                    timeout = self._evict_oldest()
                elif not state["reader"]:
                    loop.add_reader(fd, readable)
                    state["reader"] = True
                await self._wait(timeout)
        finally:
            if state["reader"]:
                loop.remove_reader(fd)

    async def _wait(self, timeout: float | None) -> None:
        """Until a slot is freed or the listening socket is readable, at most ``timeout`` seconds."""
        import asyncio

        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def _release(self) -> None:
        self.stats.open -= 1
        if self.wake is not None:
            self.wake.set()

    def _evict_oldest(self) -> float | None:
        """Close the oldest connection waiting for a head if ``eviction_grace_s`` old; seconds to
        wait: for its slot (1.0: its release wakes us), for it to come of age; None: nobody."""
        oldest = next(iter(self.heads), None)
        if oldest is None:
            return None
        wait_s = oldest.track.since + self.limits.eviction_grace_s - time.monotonic()
        if wait_s > 0:
            return wait_s
        self._expire(oldest, "evicted")
        return 1.0  # its connection_lost frees the slot at the next loop turn and wakes us

    async def _accept_failed(self, exc: OSError) -> None:
        """Count a failed accept; out of descriptors (EMFILE...) below the cap, make room as at
        the cap; then wait for a slot, at most :data:`ACCEPT_BACKOFF_S`."""
        self.stats.accept_errors += 1
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        self.stats.last_accept_error = f"{name} ({exc.strerror or exc})"
        wait_s = self._evict_oldest() if exc.errno in RESOURCE_ERRNOS else None
        await self._wait(ACCEPT_BACKOFF_S if wait_s is None else min(wait_s, 1.0))

    def _expire(self, proto: Any, reason: str) -> None:
        """Close ``proto``'s connection, counted under ``reason`` (a :class:`ConnectionStats`
        field); a partial request head gets 408 first."""
        import h11

        track = proto.track
        self.heads.pop(proto, None)
        self.bodies.pop(proto, None)
        partial_head = track.phase == HEAD and bool(proto.conn.trailing_data[0]) and proto.conn.our_state is h11.IDLE
        track.phase = CLOSED
        setattr(self.stats, reason, getattr(self.stats, reason) + 1)
        transport = proto.transport
        if transport is None or transport.is_closing():
            return
        if partial_head:
            transport.write(REQUEST_TIMEOUT)
        if transport.get_write_buffer_size():  # a client that reads nothing: do not wait to flush
            transport.abort()
        else:
            transport.close()


# ----------------------------------------------------------------------------- uvicorn
class _Listener:
    """An entry of uvicorn's ``Server.servers``: ``close()`` cancels the accept loop (which
    closes its socket), ``wait_closed()`` waits for it."""

    def __init__(self, task: asyncio.Task):
        self.task = task

    def close(self) -> None:
        self.task.cancel()

    async def wait_closed(self) -> None:
        import asyncio

        await asyncio.gather(self.task, return_exceptions=True)



@functools.cache
def _protocol_class() -> type:
    """uvicorn's h11 protocol, reporting to a :class:`ConnectionGuard` (keyword ``guard``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol that tells its guard when it opens, reads, answers and closes."""

        def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.guard = guard

        def connection_made(self, transport: Any) -> None:  # noqa: D102
            super().connection_made(transport)
            self.guard.opened(self)

        def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
            try:
                super().connection_lost(exc)
            finally:
                self.guard.closed(self)

        def data_received(self, data: bytes) -> None:  # noqa: D102
            if self.track.phase == CLOSED:  # closed by the guard: what still arrives is dropped
                return
            super().data_received(data)
            self.guard.observe(self, len(data))

        def on_response_complete(self) -> None:  # noqa: D102
            super().on_response_complete()
            self.guard.observe(self, 0)

    return GuardedH11Protocol


@functools.cache
def guarded_server_class() -> type:
    """``GuardedServer(config, limits, cap=None, stats=None)``: a ``uvicorn.Server`` whose
    listening part is ours (module docstring); ``server.guard`` is its :class:`ConnectionGuard`.
    ``config.http`` is not read (uvicorn's h11 protocol always; say ``http="h11", ws="none"``),
    the keep-alive is ``config.timeout_keep_alive``, ``cap`` defaults to :func:`connection_cap`.

    Raises:
        MissingExtraError: uvicorn is not installed (the ``serve`` extra), when called.
    """
    from ..extras import require

    require("serve")
    import asyncio

    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    protocol_class = _protocol_class()
    uvicorn_log = logging.getLogger("uvicorn.error")

    class GuardedServer(uvicorn.Server):
        """uvicorn's server with our sockets, accept loop, cap and deadlines."""

        def __init__(self, config: Any, limits: ConnectionLimits, cap: int | None = None,
                     stats: ConnectionStats | None = None):
            super().__init__(config)
            self.guard = ConnectionGuard(limits, cap if cap is not None else connection_cap(limits.max_connections),
                                         stats)

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:  # noqa: D102
            await self.lifespan.startup()
            if self.lifespan.should_exit:
                sys.exit(STARTUP_FAILURE)
            config, loop = self.config, asyncio.get_running_loop()
            try:
                listeners = list(sockets) if sockets else bind_listeners(config.host, config.port, config.backlog)
            except OSError as exc:
                uvicorn_log.error(exc)
                await self.lifespan.shutdown()
                sys.exit(STARTUP_FAILURE)
            factory = functools.partial(protocol_class, config=config, server_state=self.server_state,
                                        app_state=self.lifespan.state, _loop=loop, guard=self.guard)
            self.guard.start()
            self.servers = []
            for sock in listeners:
                sock.setblocking(False)
                task = loop.create_task(self.guard.accept_loop(sock, factory))
                task.add_done_callback(self._accept_loop_done)
                self.servers.append(_Listener(task))
            self._log_started_message(listeners)
            self.started = True

        def _accept_loop_done(self, task: asyncio.Task) -> None:
            if not task.cancelled() and task.exception() is not None:  # a bug: stop rather than go deaf
                uvicorn_log.error("the accept loop stopped: %r; shutting down", task.exception())
                self.should_exit = True

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:  # noqa: D102
            try:
                await super().shutdown(sockets=sockets)
            finally:
                await self.guard.stop()

    return GuardedServer
