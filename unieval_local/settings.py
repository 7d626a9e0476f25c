"""One declaration of the engine settings: the keyword arguments of :class:`~unieval_local.Scorer`
and :class:`~unieval_local.engine.Engine`, the CLI flags of ``score``, ``report`` and ``serve``,
the Ray actors' engines, and (for those that change a score) the run configuration, the
signature, the score-cache key and the resume identity all come from :data:`SETTINGS`.

Each :class:`Setting` says once: its name, default, help text, CLI flag (or none: a
Python-only setting such as a runner factory), whether it can change a score (then it is a
field of :class:`~unieval_local.config.RunConfig`), and how to check a value.
:class:`EngineSettings` is the frozen value an engine is made from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, make_dataclass, replace
from typing import Any

from .config import DTYPES, LONG_INPUT_MODES, REFERENCE_REDUCTIONS, check_dtype

__all__ = ["SETTINGS", "EngineSettings", "Setting", "cli_settings", "setting"]


def _positive_int(name: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return check


def _optional_positive_int(name: str, low: int = 1, what: str = "") -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise ValueError(f"{name} must be an integer >= {low}{what}, got {v!r}")
    return check


def _positive_number(name: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    return check


def _non_negative_int(name: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
    return check


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {v!r}")
    return check


@dataclass(frozen=True)
class Setting:
    """One engine setting, declared once.

    Attributes:
        name: the keyword (``batch_tokens``).
        default: its default (the one place it is written).
        help: what it does, for docstrings and ``--help`` (``{default}`` is filled in).
        flag: its CLI flag (``--batch-tokens``), or None for a Python-only setting.
        changes_score: whether a different value can change a score (then it is part of the
            :class:`~unieval_local.config.RunConfig`, the signature and the cache key).
        check: raises ``ValueError`` (naming the setting) for a bad value; None: any value.
        metavar, choices, cli_type: argparse details (``cli_type``: the parser of a flag's text).
        negative_flag: for a boolean whose default is True, the flag that turns it off
            (``--no-fast-forward``), instead of ``flag``.
    """

    name: str
    default: Any
    help: str
    flag: str | None = None
    changes_score: bool = False
    check: Callable[[Any], None] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    cli_type: Callable[[str], Any] | None = None
    negative_flag: str | None = None

    def validate(self, value: Any) -> None:
        """Check ``value``; ``ValueError`` naming the setting when it is bad."""
        if self.check is not None:
            self.check(value)


#: Every engine setting, in the documented keyword order of ``Scorer``.
SETTINGS: tuple[Setting, ...] = (
    Setting("model", None, "checkpoint folder or hub id for every evaluator, or NAME=DIR per evaluator "
            "(a mapping in Python); default: $UNIEVAL_LOCAL_HOME, the HF cache, the hub", flag="--model",
            metavar="DIR|HUB_ID|NAME=DIR"),
    Setting("device", None, "cpu, cuda or cuda:N (default: cuda when available)", flag="--device"),
    Setting("dtype", "float32", "float32 (UniEval parity, default) or bfloat16 (GPU); float16 is refused "
            "(T5 overflows to NaN)", flag="--dtype", changes_score=True, check=check_dtype, choices=DTYPES),
    Setting("max_length", None, "tokens per query (default: the evaluator's own, 1024 for UniEval, 2048 for "
            "MiniCheck)", flag="--max-length", changes_score=True,
            check=_optional_positive_int("max_length", 8, " (or None: each evaluator's default)")),
    Setting("batch_tokens", 8192, "most padded tokens (rows x longest prompt) per forward pass (default {default})",
            flag="--batch-tokens", check=_positive_int("batch_tokens")),
    Setting("attention_mib", 1024, "most MiB of encoder attention per forward pass, counting the mask and the "
            "scores (2 x rows x heads x longest^2 x bytes; default {default}): bounds memory for long prompts, "
            "which --batch-tokens alone does not", flag="--attention-mib", check=_positive_number("attention_mib")),
    Setting("reference_reduction", "mean", "combine scores over several references: mean (default) or max",
            flag="--reference-reduction", changes_score=True, choices=REFERENCE_REDUCTIONS,
            check=_choice("reference_reduction", REFERENCE_REDUCTIONS)),
    Setting("offline", None, "never use the network (as HF_HUB_OFFLINE=1)", flag="--offline"),
    Setting("splitter", None, "sentence splitter (default NLTK English Punkt, UniEval's); Python only"),
    Setting("progress", False, "a progress bar over queries (None: on a terminal); the CLI's --no-progress"),
    Setting("fast_forward", True, "our exact single-step forward (default) or the model's own (slower; for "
            "checking)", changes_score=True, negative_flag="--no-fast-forward"),
    Setting("cache_dir", None, "persistent score cache folder (SQLite): queries scored before with the same "
            "checkpoint content and settings are not run again; a cache that fails is skipped with one warning",
            flag="--cache-dir", metavar="DIR"),
    Setting("aspects_config", None, "YAML file of user-defined aspects (see configs/aspects.example.yaml)",
            flag="--aspects-config", metavar="FILE"),
    Setting("long_input", "truncate", "prompts over --max-length: truncate (UniEval: the end is cut; default), fit "
            "(shorten the document/reference/history, never the target) or chunk (score against windows of the "
            "long field and combine)", flag="--long-input", changes_score=True, choices=LONG_INPUT_MODES,
            check=_choice("long_input", LONG_INPUT_MODES)),
    Setting("window_overlap", 1, "sentences (dialogue turns) shared by consecutive windows in chunk mode "
            "(default {default})", flag="--window-overlap", changes_score=True,
            check=_non_negative_int("window_overlap")),
    Setting("chunk_words", 500, "words per document chunk for evaluators that chunk the document themselves "
            "(MiniCheck's chunk_size; default {default})", flag="--chunk-words", changes_score=True,
            check=_positive_int("chunk_words")),
    Setting("merge_punctuation", False, "sentence-level aspects: a piece without letters ('?', '1.', '!!') joins a "
            "neighbouring sentence instead of being scored as one (default: scored, as UniEval does)",
            flag="--merge-punctuation", changes_score=True),
    Setting("threads", None, "CPU threads for the model (torch.set_num_threads; default: torch's, one per core); "
            "on a machine shared with other jobs, give your share of the cores", flag="--threads",
            check=_optional_positive_int("threads", 1, " (or None: torch's default)")),
    Setting("runner_factory", None, "advanced/testing: f(ResolvedCheckpoint, fingerprint, Evaluator) -> Runner; "
            "Python only"),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The :class:`Setting` named ``name``.

    Raises:
        KeyError: no such setting.
    """
    return _BY_NAME[name]


def cli_settings() -> list[Setting]:
    """The settings that have a CLI flag, in declaration order."""
    return [s for s in SETTINGS if s.flag or s.negative_flag]


class _EngineSettingsMethods:
    """The methods of :class:`EngineSettings` (its fields come from :data:`SETTINGS`)."""

    def __post_init__(self) -> None:
        for s in SETTINGS:
            s.validate(getattr(self, s.name))

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None, **more: Any) -> "EngineSettings":
        """Settings from a mapping and/or keywords (unknown names refused).

        Raises:
            TypeError: an unknown setting name (the message lists the known ones).
            ValueError: a bad value, naming the setting.
        """
        given = {**dict(values or {}), **more}
        unknown = sorted(set(given) - set(_BY_NAME))
        if unknown:
            raise TypeError(f"unknown engine setting(s) {', '.join(unknown)}; the settings are "
                            f"{', '.join(_BY_NAME)}")
        return cls(**given)

    def replace(self, **changes: Any) -> "EngineSettings":
        """A copy with ``changes`` (checked)."""
        return replace(self, **changes)

    def as_kwargs(self) -> dict[str, Any]:
        """``{name: value}`` of every setting, in declaration order."""
        return {s.name: getattr(self, s.name) for s in SETTINGS}

    def score_settings(self) -> dict[str, Any]:
        """The settings that can change a score (``changes_score``), by name."""
        return {s.name: getattr(self, s.name) for s in SETTINGS if s.changes_score}


#: The settings an engine is made from: a frozen dataclass with one field per :data:`SETTINGS`
#: entry, in order, with its declared default (generated from the declaration, so defaults are
#: written once). ``EngineSettings.of(mapping, **kw)`` refuses unknown names; ``.replace(**kw)``
#: gives a checked copy; ``.as_kwargs()`` the keyword arguments (a Ray actor rebuilds its engine
#: from them). Construction checks every value (``ValueError`` naming the setting).
EngineSettings = make_dataclass(
    "EngineSettings",
    [(s.name, Any, field(default=s.default, compare=s.name != "runner_factory")) for s in SETTINGS],
    bases=(_EngineSettingsMethods,), frozen=True)
EngineSettings.__module__ = __name__
EngineSettings.__doc__ = _EngineSettingsMethods.__doc__.replace("The methods of", "The settings of") + (
    "\n\n    Fields: " + ", ".join(f"``{s.name}`` (default ``{s.default!r}``)" for s in SETTINGS) + ".")


