"""unieval-local: UniEval-exact multi-aspect evaluation of generated text, on local checkpoints.

``from unieval_local import score, Scorer`` is the public surface; see README.md. The result
types they return (:class:`UniEvalResult`, :class:`EvaluationResult` ...) and the errors they
raise are exported here too. Importing this package loads neither torch nor transformers.
"""

import os as _os
import sys as _sys

# OpenMP threads (torch's CPU operators) sleep at a barrier instead of spinning. On a machine
# other jobs share, spinning threads burn the cores they wait for: with torch's default of one
# thread per core and 4 busy processes on 2 cores, scoring cost several times the CPU seconds of
# one thread; with PASSIVE, no more than one thread's (scripts/bench_threads.py; README, Threads).
# OpenMP reads the variable once, when torch is first imported: importing this package before
# torch is what makes it apply (the CLI, the service and batch workers always do); a value the
# user set is kept.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from typing import TYPE_CHECKING as _TYPE_CHECKING  # noqa: E402

from ._version import __version__  # noqa: E402

if _TYPE_CHECKING:  # what the lazy names below are, for type checkers and readers
    from .api import MAX_EXAMPLES_PER_REQUEST, Scorer, score
    from .errors import (
        CheckpointError,
        CheckpointNotFoundError,
        ExampleProblem,
        InvalidExampleError,
        ModelRuntimeError,
        NonFiniteScoreError,
        RequestTooLargeError,
        UniEvalError,
        UnknownTaskError,
    )
    from .schema import (
        EvaluationResult,
        Evidence,
        ExampleScores,
        QueryEvidence,
        SentenceEvidence,
        Signature,
        UniEvalData,
        UniEvalResult,
        UniEvalStats,
    )
    from .settings import EngineSettings
    from .wire.hosted import UniEvalConfig

#: Public name -> the module that defines it, imported on first use (PEP 562), so that
#: ``import unieval_local`` and ``unieval-local --help`` load neither pydantic nor numpy.
_LAZY = {
    **dict.fromkeys(("MAX_EXAMPLES_PER_REQUEST", "Scorer", "score"), "api"),
    **dict.fromkeys(("CheckpointError", "CheckpointNotFoundError", "ExampleProblem", "InvalidExampleError",
                     "ModelRuntimeError", "NonFiniteScoreError", "RequestTooLargeError", "UniEvalError",
                     "UnknownTaskError"), "errors"),
    **dict.fromkeys(("EvaluationResult", "Evidence", "ExampleScores", "QueryEvidence", "SentenceEvidence",
                     "Signature", "UniEvalData", "UniEvalResult", "UniEvalStats"), "schema"),
    "EngineSettings": "settings",
    "UniEvalConfig": "wire.hosted",
}


def __getattr__(name: str):
    """A public name (:data:`_LAZY`) or a submodule (``unieval_local.api``), imported on first use
    and kept in the module's namespace; AttributeError for anything else."""
    import importlib
    import importlib.util

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "__version__",
    "MAX_EXAMPLES_PER_REQUEST",
    "Scorer",
    "score",
    "EngineSettings",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ExampleProblem",
    "InvalidExampleError",
    "ModelRuntimeError",
    "NonFiniteScoreError",
    "RequestTooLargeError",
    "UniEvalError",
    "UnknownTaskError",
    "EvaluationResult",
    "Evidence",
    "ExampleScores",
    "QueryEvidence",
    "SentenceEvidence",
    "Signature",
    "UniEvalConfig",
    "UniEvalData",
    "UniEvalResult",
    "UniEvalStats",
]
