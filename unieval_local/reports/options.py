"""Report options: the consistency checker every format has (:class:`ConsistencyOption`),
the checks of option lists, and reading options from YAML plus flag overrides
(:func:`load_options`, errors naming the file key or the flag)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator, model_validator

from ..registry.tasks import Aspect
from .base import ReportFlag

__all__ = ["CONSISTENCY_FLAG", "DEFAULT_CONSISTENCY_ASPECT", "DETAILS_FLAG", "MAX_N_CLAIMS_FLAG", "N_KEY_POINTS_FLAG", "ConsistencyOption", "check_categorical", "check_consistency_aspect",
           "check_texts", "consistency_aspects", "describe_validation_error", "load_options",
           "migrate_consistency_task", "resolve_consistency_aspect"]

#: The default checker of consistency-like queries (claims, key points, support).
DEFAULT_CONSISTENCY_ASPECT = "summarization/consistency"


def consistency_aspects() -> list[str]:
    """The registry's claim-vs-document aspects (:attr:`Aspect.checks_claims
    <unieval_local.registry.tasks.Aspect.checks_claims>`), ``task/aspect``, e.g.
    ``summarization/consistency``, ``fact/consistency``, ``fact/support`` (MiniCheck)."""
    from ..registry.tasks import DEFAULT_REGISTRY

    return [f"{t.name}/{a.name}" for t in DEFAULT_REGISTRY.tasks.values() for a in t.aspects.values() if a.checks_claims]


def check_consistency_aspect(v: str) -> str:
    """``v`` unchanged when it names a claim-vs-document aspect (:func:`consistency_aspects`).

    Raises:
        ValueError: not ``TASK/ASPECT``, unknown, or not a claim-vs-document aspect
            (the message lists the valid ones).
    """
    valid = consistency_aspects()
    if not isinstance(v, str) or v not in valid:
        raise ValueError(f"must be one of {', '.join(valid)} (TASK/ASPECT), got {v!r}")
    return v


def resolve_consistency_aspect(registry, name: str) -> Aspect:
    """The :class:`~unieval_local.registry.tasks.Aspect` ``task/aspect`` from ``registry``."""
    task, _, aspect = name.partition("/")
    return registry.get_aspect(task, aspect)


def migrate_consistency_task(data: Any) -> Any:
    """Options written before ``consistency_aspect``: ``consistency_task: fact`` becomes
    ``consistency_aspect: fact/consistency`` (with a DeprecationWarning)."""
    if isinstance(data, dict) and "consistency_task" in data:
        import warnings

        data = dict(data)
        task = data.pop("consistency_task")
        warnings.warn("the option consistency_task is replaced by consistency_aspect (TASK/ASPECT); "
                      f"consistency_task: {task} reads as consistency_aspect: {task}/consistency",
                      DeprecationWarning, stacklevel=2)
        data.setdefault("consistency_aspect", f"{task}/consistency")
    return data


class ConsistencyOption(BaseModel):
    """The option every report format has: ``consistency_aspect``, the ``task/aspect``
    answering consistency-like queries (checked by :func:`check_consistency_aspect`; the
    older ``consistency_task`` key migrates with a DeprecationWarning)."""

    consistency_aspect: str = DEFAULT_CONSISTENCY_ASPECT

    @model_validator(mode="before")
    @classmethod
    def _old_key(cls, data: Any) -> Any:
        return migrate_consistency_task(data)

    @field_validator("consistency_aspect")
    @classmethod
    def _checker(cls, v: str) -> str:
        return check_consistency_aspect(v)


def check_texts(v: list[str] | None) -> list[str] | None:
    """``v`` unchanged; ValueError when an item is empty or whitespace-only."""
    if v is not None and any(not isinstance(x, str) or not x.strip() for x in v):
        raise ValueError("every item must be a non-empty string")
    return v


def check_categorical(v: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
    """``v`` unchanged; ValueError for a section without a name or without non-empty allowed values."""
    for name, allowed in (v or {}).items():
        if not name.strip():
            raise ValueError("a categorical section needs a name")
        if not allowed or any(not a.strip() for a in allowed):
            raise ValueError(f"categorical section {name!r} needs non-empty allowed values")
    return v


def describe_validation_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first error of ``exc`` as ``key: message``, without pydantic's prefixes; an
    unknown key lists the valid ones."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "config"
    if err["type"] == "extra_forbidden":
        return f"unknown option {loc!r}; valid options: {', '.join(model.model_fields)}"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("literal_error", "enum") and "input" in err:
        msg += f", got {err['input']!r}"
    return f"{loc}: {msg}"


def load_options(model: type[BaseModel], path: str | os.PathLike | None = None,
                 overrides: Mapping[str, Any] | None = None, flags: Mapping[str, str] | None = None):
    """A report's options: the YAML mapping at ``path`` (if any) updated with ``overrides``
    (None values ignored), validated by ``model``.

    Args:
        model: the options model (``RatingConfig``, ``SummOptions``, ``AutoevalOptions``).
        path: a YAML file of options, or None.
        overrides: option name -> value, e.g. from CLI flags.
        flags: option name -> CLI flag, so that an error in a value that came
            from a flag names the flag instead of the file.

    Raises:
        ValueError: unreadable file, YAML syntax, not a mapping, or an invalid
            option (the message names the file or flag, and the key).
    """
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh) or {}
        except OSError as exc:
            raise ValueError(f"{path}: cannot read options: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: invalid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: options must be a mapping of settings, got {type(data).__name__}")
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        text = describe_validation_error(exc, model)
        flag = (flags or {}).get(name) if name in (overrides or {}) else None
        if flag and text.startswith(name):  # "--flag: ..." (a list item's position dropped: the value says it)
            raise ValueError(flag + re.sub(r"^\.\d+(?=:)", "", text[len(name):])) from None
        raise ValueError(f"{path}: {text}" if path is not None else text) from None


def _shared_flags() -> tuple[ReportFlag, ...]:
    from ..settings import number_type

    return (
        ReportFlag("consistency_aspect", "--consistency-aspect",
                   "the aspect that answers consistency-like queries (claims, key points, support): "
                   "summarization/consistency (unieval-sum, default), fact/consistency (unieval-fact), "
                   "fact/support (MiniCheck-Flan-T5, its own protocol), fact/sentence_support ...; choices: %(choices)s",
                   {"choices": consistency_aspects(), "metavar": "TASK/ASPECT"}),
        ReportFlag("details", "--details", "also write each report's details (probabilities, cut points, windows, "
                   "offsets) beside the documented fields", {"action": "store_const", "const": True}),
        ReportFlag("n_key_points", "--n-key-points", "key points to extract (default clamp(round(sqrt(candidate "
                   "sentences)), 5, 15))", {"type": number_type(int, 1)}),
        ReportFlag("max_n_claims", "--max-n-claims", "summary sentences checked (default 50)",
                   {"type": number_type(int, 1)}),
    )


#: The flags several formats share (one object each, so the CLI adds each once).
CONSISTENCY_FLAG, DETAILS_FLAG, N_KEY_POINTS_FLAG, MAX_N_CLAIMS_FLAG = _shared_flags()
