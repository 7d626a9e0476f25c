"""Exceptions raised by unieval-local: every one, in one module.

Every error a user can cause is a subclass of :class:`UniEvalError`, and the input errors
are also :class:`ValueError` (the I/O ones :class:`OSError`) so that generic ``except
ValueError`` code keeps working. The CLI maps them to its exit statuses
(:mod:`unieval_local.cli`): input and usage errors 2, checkpoint errors 3, write errors 4,
model failures 5, interruptions 130/143.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["AspectsConfigError", "CacheUnusableWarning", "CheckpointError", "CheckpointNotFoundError",
           "ExampleProblem", "InputFileError", "InvalidExampleError", "LockFileError", "MergeError",
           "MissingExtraError", "ModelRuntimeError", "NonFiniteScoreError", "NothingToScoreError",
           "OutputLockedError", "OutputOpenError", "OutputWriteError", "RequestTooLargeError", "ResumeError",
           "RunInterrupted", "Terminated", "UniEvalError", "UnknownTaskError"]


class UniEvalError(Exception):
    """Base class of every error raised on purpose by unieval-local."""


@dataclass(frozen=True)
class ExampleProblem:
    """One problem with one example of a request.

    Attributes:
        index: 0-based position of the example in the request (or input row); None for a
            problem of the request as a whole (an empty request).
        field: the field at fault (``target``, ``source``, ``references`` ...).
        message: what is wrong and what the aspect needs.
        aspect: the aspect that needs the field, or ``None`` for problems that
            do not depend on the aspect (e.g. a record that is not an object).
    """

    index: int | None
    field: str
    message: str
    aspect: str | None = None

    def describe(self) -> str:
        """The problem without the example index: ``aspect 'x', field 'y': message``."""
        where = f"aspect {self.aspect!r}, " if self.aspect else ""
        return f"{where}field {self.field!r}: {self.message}"

    def __str__(self) -> str:
        return f"{'the request' if self.index is None else f'example {self.index}'}, {self.describe()}"


class InvalidExampleError(ValueError, UniEvalError):
    """Raised before any scoring when one or more examples are unusable.

    ``problems`` lists every bad example (not only the first), each naming the
    example index, the aspect, the field and what that aspect needs.
    """

    def __init__(self, problems: list[ExampleProblem]):
        self.problems = list(problems)
        n = len(self.problems)
        lines = [f"{n} problem{'' if n == 1 else 's'} in the input:"]
        lines += [f"  - {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  ... and {len(self.problems) - 50} more")
        super().__init__("\n".join(lines))


class RequestTooLargeError(ValueError, UniEvalError):
    """Raised when one request holds more examples than allowed (250)."""


class UnknownTaskError(ValueError, UniEvalError):
    """Raised for a task or aspect name that is not in the registry."""


class CheckpointNotFoundError(FileNotFoundError, UniEvalError):
    """Raised when a checkpoint cannot be found locally nor fetched."""


class CheckpointError(UniEvalError):
    """Raised when a checkpoint is found but cannot be used (bad files, bad vocab)."""


class NonFiniteScoreError(ArithmeticError, UniEvalError):
    """Raised when the model produced NaN or infinite logits for some examples.

    ``indices`` are the 0-based positions of the affected examples.
    """

    def __init__(self, message: str, indices: list[int]):
        self.indices = list(indices)
        super().__init__(message)


class ModelRuntimeError(RuntimeError, UniEvalError):
    """The model failed while scoring: out of memory on a single query (after the
    batch back-off), a CUDA/cuBLAS error, the CPU allocator's "can't allocate memory",
    or any other runtime error of torch. The CLI ends with exit status 5 and keeps the
    records written so far (rerun with ``--resume``)."""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process gets SIGTERM (what SLURM and most schedulers
    send on preemption) while the CLI scores: it stops the run like Ctrl-C, with the records
    written so far kept (exit status 143)."""


class ResumeError(ValueError, UniEvalError):
    """``--resume`` was refused: the output belongs to another run, or cannot be resumed."""


class OutputWriteError(OSError, UniEvalError):
    """Writing the output failed (e.g. disk full); what was written before is intact."""


class MergeError(ValueError, UniEvalError):
    """Shard outputs do not cover the input exactly once, or belong to different runs."""


class NothingToScoreError(ValueError, UniEvalError):
    """No record of the input can be scored for the asked aspects (checked before any model
    is loaded); the message names the fields the records have and the fix."""


class RunInterrupted(UniEvalError):
    """A batch run stopped early (Ctrl-C, or a runtime failure of the model): what was written
    is intact and ``--resume`` continues it.

    Attributes:
        cause: the ``KeyboardInterrupt`` (:class:`~unieval_local.errors.Terminated` for SIGTERM)
            or :class:`~unieval_local.errors.ModelRuntimeError`.
        written: output records in OUT (those kept from earlier runs included); with
            ``--output-format hosted``, the records of the request lines written.
        total: records to write in this run's shard (None when unknown, e.g. stdin).
        output: the output path (None for stdout).
        resumable: False for ``--output-format hosted`` (no ``--resume``: the records written
            are the first ``written`` of the input) and for a CSV output.
        no_resume: with ``resumable`` False, why the output does not resume, said instead of the
            hosted format's hint (a CSV output: its ``index`` column says which records it holds).
    """

    def __init__(self, cause: BaseException, written: int, total: int | None, output: Path | None,
                 resumable: bool = True, no_resume: str | None = None):
        self.cause, self.written, self.total, self.output = cause, written, total, output
        self.resumable = resumable
        where = str(output) if output is not None else "stdout"
        of = f" of {total}" if total is not None else ""
        hint = "; rerun with --resume" if output is not None else ""
        if not resumable and no_resume:
            hint = f"; {no_resume} (its index column says which records it holds)"
        elif not resumable:
            hint = (f" (the first {written} records of the input); --output-format hosted does not resume: score "
                    "the others in a new run, or use --output-format records for batch runs")
        what = ("terminated (SIGTERM)" if isinstance(cause, Terminated) else "interrupted"
                if isinstance(cause, KeyboardInterrupt) else f"stopped: {cause}")
        super().__init__(f"{what}: {written}{of} records written to {where}{hint}")


class LockFileError(OSError, UniEvalError):
    """The lock file of an output cannot be created, opened or locked (e.g. its folder is
    missing or read-only): nothing was written. ``str()`` is the whole message."""

    def __init__(self, errno_: int | None, message: str):
        super().__init__(errno_, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OutputLockedError(UniEvalError):
    """Another process is writing the same output (it holds ``OUT.lock``).

    Attributes:
        output: the output path asked for.
        lock_path: the lock file.
        holder: what the holder wrote into the lock file (``pid``, ``host``, ``since``,
            ``command``); empty when it could not be read.
        who: the holder in words (:func:`~unieval_local.locks.describe_holder`).
    """

    def __init__(self, output: Path, lock_path: Path, holder: dict, who: str):
        self.output, self.lock_path, self.holder = output, lock_path, dict(holder)
        super().__init__(f"{output} is being written by another process ({who}; lock {lock_path}); "
                         "wait for it to end or stop it, or write to another output")


class CacheUnusableWarning(RuntimeWarning):
    """The score cache failed (at open, read or write) and is disabled for the rest of the
    run; the run goes on without it, with the same scores. Given once per cache (per engine);
    the message names the cache file, the reason and the fix."""


class AspectsConfigError(ValueError, UniEvalError):
    """The aspects config file is unreadable or invalid; the message names the key and line."""


class MissingExtraError(ImportError, UniEvalError):
    """A feature's optional libraries are not installed; the message gives the pip command."""


class InputFileError(ValueError, UniEvalError):
    """The input cannot be read at all (missing, unknown format, not a list, not UTF-8,
    aligned files of different lengths, a CSV header that cannot be used)."""


class OutputOpenError(OSError, UniEvalError):
    """The output cannot be opened for writing (a missing or read-only folder, a folder given
    as the file): nothing was written. CLI exit status 2. ``str()`` is the whole message."""

    def __init__(self, errno_: int | None, message: str):
        super().__init__(errno_, message)
        self.message = message

    def __str__(self) -> str:
        return self.message
