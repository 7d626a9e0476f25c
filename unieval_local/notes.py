"""Notes: what a run tells its user besides the numbers (a language outside an evaluator's
training, an input hint, truncation, an ignored option ...), collected per request.

The Python API and the CLI give such a note as a ``UserWarning`` (once per engine where the
message says so). A caller that answers one request for someone else (the HTTP service) needs
the notes of THAT request in its answer, not in the server log: it opens a sink with
:func:`collecting` around the work of the request (the
:class:`~unieval_local.requests.scheduler.Scheduler` does so while it plans and advances each
request), and the code that warns calls :func:`note`, which appends the message to the sink of
the current context (a :mod:`contextvars` variable: each thread and task has its own), whether
or not it also warns::

    with collecting() as sink:
        ...                      # note("...") anywhere below lands in sink
    sink                         # ['...'] in the order given, each message once
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["collecting", "note", "sink"]

_SINK: ContextVar[list[str] | None] = ContextVar("unieval_local_notes", default=None)


def sink() -> list[str] | None:
    """The list notes of the current context go to, or None when nothing collects them."""
    return _SINK.get()


@contextmanager
def collecting(into: list[str] | None = None) -> Iterator[list[str]]:
    """Collect the notes given in this context (:func:`note`) into ``into`` (a new list by
    default), which is yielded; the previous sink is restored on exit (sinks nest: an inner
    one takes the notes while it is open)."""
    target = [] if into is None else into
    token = _SINK.set(target)
    try:
        yield target
    finally:
        _SINK.reset(token)


def note(message: str, *, warn: bool = True, category: type[Warning] = UserWarning, stacklevel: int = 2) -> None:
    """Give ``message`` to the current sink (once per sink: a repeated message is kept once)
    and, with ``warn``, as a warning of ``category`` (``stacklevel`` counted from the caller
    of :func:`note`)."""
    target = _SINK.get()
    if target is not None and message not in target:
        target.append(message)
    if warn:
        warnings.warn(message, category, stacklevel=stacklevel + 1)
