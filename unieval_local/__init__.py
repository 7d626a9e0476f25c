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

from ._version import __version__  # noqa: E402
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
