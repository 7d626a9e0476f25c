"""Progress of long work: a tqdm bar on a terminal, else log lines (SLURM and other batch
logs, where a bar does not show), through :class:`Progress`: the batch runner's records and
the scheduler's queries (``unieval_local`` logger, INFO; the CLI routes it to stderr as
``unieval-local: <message>``)."""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["LOG_EVERY_S", "LogLines", "Progress"]

#: seconds between two progress log lines
LOG_EVERY_S = 30.0


class LogLines:
    """``<what> done/total (pct%), rate <what>/s, about M min left`` at most every ``every``
    seconds (``<what> done, rate <what>/s`` when the total is unknown).

    Args:
        what: the unit, e.g. ``records`` or ``queries``.
        total: how many there are (None when unknown).
        initial: how many were done before this run (a resumed run); the rate counts only
            this run's.
        every: seconds between lines (default :data:`LOG_EVERY_S`).
        announce: log ``<what> 0/total`` at once, so a log shows how much there is to do
            before the first interval has passed.
    """

    def __init__(self, what: str, total: int | None, initial: float = 0.0, every: float | None = None,
                 announce: bool = False):
        self.what, self.total, self.start = what, total, float(initial)
        self.every = LOG_EVERY_S if every is None else every
        self.t0 = self.last = time.monotonic()
        self.log = logging.getLogger("unieval_local")
        if announce:
            self.log.info("%s %d/%s", what, int(initial), "?" if total is None else total)

    def set(self, done: float) -> None:
        """``done`` are finished (fractions allowed); logs when ``every`` seconds have passed
        since the last line."""
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        rate = (done - self.start) / max(now - self.t0, 1e-9)
        if self.total:
            eta = (self.total - done) / rate if rate > 0 else float("inf")
            left = f", about {eta / 60:.1f} min left" if eta != float("inf") else ""
            shown = f"{done:.1f}" if done != int(done) and self.total < 100 else f"{int(done)}"  # 0.6/1, not 0/1
            self.log.info("%s %s/%d (%.0f%%), %.2f %s/s%s", self.what, shown, self.total,
                          100 * done / self.total, rate, self.what, left)
        else:
            self.log.info("%s %d, %.2f %s/s", self.what, int(done), rate, self.what)


class Progress:
    """``what`` done: a tqdm bar on a terminal, else a log line every ``every`` seconds
    (:class:`LogLines`), through the ``unieval_local`` logger.

    Args:
        total: how many there will be (None when unknown; :meth:`set_total` when it grows).
        initial: how many were done before (kept by ``--resume``).
        enabled: ``None`` (bar on a terminal, log lines otherwise), True (always a bar)
            or False (nothing).
        every: seconds between log lines when stderr is not a terminal.
        what: the unit (``records``, ``queries``).
    """

    def __init__(self, total: int | None, initial: int = 0, enabled: bool | None = None,
                 every: float | None = None, what: str = "records"):
        from tqdm.auto import tqdm

        self.done = float(initial)
        tty = sys.stderr.isatty()
        self.bar = None
        self.lines = LogLines(what, total, initial, every) if enabled is None and not tty else None
        if enabled or (enabled is None and tty):
            unit = {"records": "rec", "queries": "q"}.get(what, what)
            self.bar = tqdm(total=total, initial=initial, desc=what, unit=unit, dynamic_ncols=True,
                            leave=what == "records",
                            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")

    def set_total(self, total: int) -> None:
        """The total became known, or grew (a request's next stage was planned)."""
        if self.bar is not None and self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()
        if self.lines is not None:
            self.lines.total = total

    def set(self, done: float) -> None:
        """Move to ``done`` (fractions allowed)."""
        done = max(done, self.done)
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done = done
        if self.lines is not None:
            self.lines.set(done)

    def close(self) -> None:
        """End the bar (log lines need no ending)."""
        if self.bar is not None:
            self.bar.close()
