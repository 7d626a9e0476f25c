"""Exceptions raised by unieval-local.

Every error a user can cause is a subclass of :class:`UniEvalError`, and the
input errors are also :class:`ValueError` so that generic ``except ValueError``
code keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass


class UniEvalError(Exception):
    """Base class of every error raised on purpose by unieval-local."""


@dataclass(frozen=True)
class ExampleProblem:
    """One problem with one example of a request.

    Attributes:
        index: 0-based position of the example in the request (or input row).
        field: the field at fault (``target``, ``source``, ``references`` ...).
        message: what is wrong and what the aspect needs.
        aspect: the aspect that needs the field, or ``None`` for problems that
            do not depend on the aspect (e.g. a record that is not an object).
    """

    index: int
    field: str
    message: str
    aspect: str | None = None

    def describe(self) -> str:
        """The problem without the example index: ``aspect 'x', field 'y': message``."""
        where = f"aspect {self.aspect!r}, " if self.aspect else ""
        return f"{where}field {self.field!r}: {self.message}"

    def __str__(self) -> str:
        return f"example {self.index}, {self.describe()}"


class InvalidExampleError(ValueError, UniEvalError):
    """Raised before any scoring when one or more examples are unusable.

    ``problems`` lists every bad example (not only the first), each naming the
    example index, the aspect, the field and what that aspect needs.
    """

    def __init__(self, problems: list[ExampleProblem]):
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s) in the input:"]
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
