"""unieval-local: UniEval-exact multi-aspect evaluation of generated text, on local checkpoints.

``from unieval_local import score, Scorer`` is the public surface; see README.md.
Importing this package loads neither torch nor transformers.
"""

__version__ = "0.1.0"

from .api import MAX_EXAMPLES_PER_REQUEST, Scorer, score  # noqa: E402
from .errors import (  # noqa: E402
    CheckpointError,
    CheckpointNotFoundError,
    ExampleProblem,
    InvalidExampleError,
    NonFiniteScoreError,
    RequestTooLargeError,
    UniEvalError,
    UnknownTaskError,
)
from .schema import Signature, UniEvalConfig, UniEvalData, UniEvalResult, UniEvalStats  # noqa: E402

__all__ = [
    "__version__",
    "MAX_EXAMPLES_PER_REQUEST",
    "Scorer",
    "score",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ExampleProblem",
    "InvalidExampleError",
    "NonFiniteScoreError",
    "RequestTooLargeError",
    "UniEvalError",
    "UnknownTaskError",
    "Signature",
    "UniEvalConfig",
    "UniEvalData",
    "UniEvalResult",
    "UniEvalStats",
]
