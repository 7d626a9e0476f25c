"""unieval-local: UniEval-exact multi-aspect evaluation of generated text, on local checkpoints.

``from unieval_local import score, Scorer`` is the public surface; see README.md. The result
types they return (:class:`UniEvalResult`, :class:`EvaluationResult` ...) and the errors they
raise are exported here too. Importing this package loads neither torch nor transformers.
"""

from ._version import __version__
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
