"""One writer per output file: an OS lock on ``OUT.lock``, held for the whole run.

``unieval-local score -o OUT``, ``report -o OUT`` and ``merge -o OUT`` (and
:func:`~unieval_local.batch.run_batch` / :func:`~unieval_local.batch.merge_outputs`) hold
:func:`output_lock` on OUT from before the first model load until OUT is written. A
second writer of the same OUT is refused at once with :class:`OutputLockedError`, which
names the holder (pid, host, since when) and the lock file.

The lock is ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``OUT.lock`` beside OUT (beside the
file OUT resolves to, so a link and its target share one lock). The kernel releases it
when its holder exits in any way (SIGKILL, a crash, a preempted node on a shared file
system once the lease ends), so a lock left by a dead process is free: a requeued job
just runs. The holder writes ``{"pid", "host", "since", "command"}`` into the lock file,
only for the message a refused writer prints. At the end the holder unlinks the lock
file while it still holds the lock; a process that locked a file that was unlinked
meanwhile (the path no longer names the inode it locked) retries on the new file.

Streams take no lock: stdout (``None`` or ``"-"``), devices and pipes
(:func:`~unieval_local.batch.is_stream_path`). On a file system without ``flock``
support (``ENOLCK``, ``EOPNOTSUPP``, ...) the run goes on unlocked after one warning.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LockFileError, OutputLockedError

#: flock errors that mean "this file system cannot lock", not "someone holds it"
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL}


def describe_holder(holder: dict) -> str:
    """``pid 123 on host node1 since 2024-05-01 10:00:00 UTC, unieval-local score`` from what a
    holder wrote into a lock file (``holder unknown`` when nothing could be read)."""
    if not holder.get("pid"):
        return "holder unknown"
    parts = [f"pid {holder['pid']}"]
    if holder.get("host"):
        parts.append(f"on host {holder['host']}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    text = " ".join(parts)
    return f"{text}, {holder['command']}" if holder.get("command") else text


def lock_path_for(output: str | os.PathLike) -> Path:
    """The lock file of an output: ``OUT.lock`` beside the file ``output`` resolves to."""
    return Path(os.path.realpath(output) + ".lock")


def _read_holder(fd: int, attempts: int = 25) -> dict:
    """What the holder wrote in the lock file; retried briefly, since the holder writes it just
    after taking the lock. ``{}`` when empty or unreadable."""
    for attempt in range(attempts):
        try:
            raw = os.pread(fd, 4096, 0)
            if raw.strip():
                return json.loads(raw.decode("utf-8", "replace"))
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return {}


def _command() -> str:
    argv = sys.argv or ["python"]
    name = os.path.basename(argv[0]) or "python"
    sub = next((a for a in argv[1:] if not a.startswith("-")), "")
    return f"{name} {sub}".strip()


@contextmanager
def output_lock(output: str | os.PathLike | None) -> Iterator[Path | None]:
    """Hold the lock of ``output`` for the ``with`` block: one writer per output.

    Args:
        output: the output file; ``None``, ``"-"`` (stdout), a device or a pipe take no lock.

    Yields:
        The lock file held (removed at the end of the block), or ``None`` when no lock was
        taken (a stream, or a file system that cannot lock: one ``RuntimeWarning``).

    Raises:
        OutputLockedError: another live process holds the lock (refused at once, no waiting).
        LockFileError: the lock file cannot be created or opened (an ``OSError``; e.g. the
            output's folder is missing or read-only); nothing was written.
    """
    if output is None or str(output) == "-":
        yield None
        return
    if is_stream_path(Path(output)):
        yield None
        return
    path = lock_path_for(output)
    fd = _acquire(Path(output), path)
    if fd is None:
        yield None
        return
    try:
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "command": _command()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        except OSError:
            pass  # only a refused writer's message reads it
        yield path
    finally:
        try:  # unlinked while we hold the lock, and only if the path still names our file
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                os.unlink(path)
        except OSError:
            pass
        os.close(fd)


def _acquire(output: Path, path: Path) -> int | None:
    """Open and ``flock`` the lock file ``path``; the locked descriptor, or None where the file
    system cannot lock (after one warning).

    Raises:
        OutputLockedError: another process holds it.
        LockFileError: it cannot be created or opened.
    """
    import fcntl

    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise LockFileError(exc.errno, f"cannot write the output {str(output)!r}: cannot create its lock "
                                f"file {path}: {exc.strerror or exc}") from None
        unsupported = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise OutputLockedError(output, path, holder, describe_holder(holder)) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno not in _UNSUPPORTED:
                raise LockFileError(exc.errno, f"cannot lock {path}: {exc.strerror or exc}") from None
            unsupported = exc
        if unsupported is not None:
            warnings.warn(f"cannot lock {path} ({unsupported.strerror or unsupported}): this file system does "
                          f"not support flock, so a second writer of {output} would not be refused",
                          RuntimeWarning, stacklevel=4)
            return None
        try:  # the previous holder may have unlinked the file between our open and our lock
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


__all__ = ["LockFileError", "OutputLockedError", "describe_holder", "lock_path_for", "output_lock"]


def is_stream_path(path: Path) -> bool:
    """Whether ``-o path`` names a stream rather than a file of its own: an existing device
    or pipe (``/dev/null``, a FIFO), or anything under ``/dev/`` or ``/proc/`` (``/dev/stdout``
    is a regular file when stdout is redirected to one). Such an output is written like
    stdout: no sidecar beside it, no ``--resume``."""
    return path.exists() and (not path.is_file() or str(path.absolute()).startswith(("/dev/", "/proc/")))
