"""The hosted UniEval metric's shapes: its config, its request naming, its result and its
request-level error.

* :class:`UniEvalConfig` ``(task, evaluation_aspect)`` and :func:`resolve_task_aspect`: which
  (task, aspect) a call names, in our words or the hosted metric's (``evaluation_aspect=``,
  ``config=``).
* :func:`hosted_result`: ``{"overall": {"value"}, "examples": [{"value"}, ...]}``, the
  result schema (every value a number).
* :func:`hosted_line`: one batch request's answer in that schema, or ONE request-level
  error naming every bad example and field (the hosted metric answers a request whole or
  not at all), for ``score --output-format hosted`` and the service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationInfo, model_validator

if TYPE_CHECKING:
    from ..registry.tasks import Registry
    from ..requests.score import ChunkResult

__all__ = ["DEFAULT_ASPECT", "DEFAULT_TASK", "UniEvalConfig", "hosted_line", "hosted_result", "resolve_task_aspect"]

#: The task and aspect scored when none is named (the hosted metric's defaults, UniEvalConfig's).
DEFAULT_TASK, DEFAULT_ASPECT = "summarization", "coherence"

#: The keys a ``config`` dict may hold (UniEvalConfig's fields; ``aspect`` is its alias).
_CONFIG_KEYS = ("task", "evaluation_aspect", "aspect")


class UniEvalConfig(BaseModel):
    """Which (task, aspect) to score.

    ``evaluation_aspect`` is the hosted schema's name; ``aspect=`` is accepted
    too and ``config.aspect`` reads it. Both names are validated against the
    registry (:mod:`unieval_local.registry.tasks`): the built-ins, or the one passed as
    ``UniEvalConfig.model_validate(data, context={"registry": scorer.registry})``
    to accept user-defined aspects.

    Raises:
        pydantic.ValidationError: unknown task or aspect (the message lists valid names).
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    task: str = DEFAULT_TASK
    evaluation_aspect: str = Field(
        default=DEFAULT_ASPECT, validation_alias=AliasChoices("evaluation_aspect", "aspect")
    )

    @model_validator(mode="after")
    def _known(self, info: ValidationInfo) -> "UniEvalConfig":
        from ..registry.tasks import DEFAULT_REGISTRY

        registry = (info.context or {}).get("registry", DEFAULT_REGISTRY)
        registry.get_aspect(self.task, self.evaluation_aspect)
        return self

    @property
    def aspect(self) -> str:
        """The aspect name (same as ``evaluation_aspect``)."""
        return self.evaluation_aspect


def resolve_task_aspect(registry: "Registry", *, task: str | None = None, aspect: str | None = None,
                        evaluation_aspect: str | None = None,
                        config: UniEvalConfig | Mapping[str, Any] | None = None) -> tuple[str, str]:
    """The ``(task, aspect)`` a call names, from our names or the hosted metric's.

    ``None`` means "not given" for every argument. ``evaluation_aspect`` is an alias of
    ``aspect``; ``config`` is a :class:`UniEvalConfig` or a dict of it, whose ``task`` /
    ``evaluation_aspect`` apply where the keywords are not given. With nothing given:
    :data:`DEFAULT_TASK`, :data:`DEFAULT_ASPECT`. The names are not looked up here unless
    ``config`` is a dict (the scorer checks them when it scores).

    Args:
        registry: validates a ``config`` dict (user-defined aspects included).
        task, aspect, evaluation_aspect, config: as in :meth:`Scorer.score <unieval_local.Scorer.score>`.

    Returns:
        ``(task, aspect)``.

    Raises:
        ValueError: ``aspect`` and ``evaluation_aspect`` given with different values;
            ``task`` or the aspect given beside ``config`` with a value other than its
            own (the message names both); a dict ``config`` with keys other than
            ``task``, ``evaluation_aspect``, ``aspect``, or with ``aspect`` and
            ``evaluation_aspect`` that differ; ``config`` of another type.
        pydantic.ValidationError: a dict ``config`` naming an unknown task or aspect (a
            ``ValueError``; the message lists the valid names).
    """
    if aspect is not None and evaluation_aspect is not None and aspect != evaluation_aspect:
        raise ValueError(f"aspect={aspect!r} and evaluation_aspect={evaluation_aspect!r} differ; "
                         "they are two names of one argument: give one of them")
    name, given_as = (aspect, "aspect") if aspect is not None else (evaluation_aspect, "evaluation_aspect")
    if config is None:
        return (task if task is not None else DEFAULT_TASK), (name if name is not None else DEFAULT_ASPECT)
    if isinstance(config, Mapping):
        unknown = [str(k) for k in config if k not in _CONFIG_KEYS]
        if unknown:
            raise ValueError(f"config has unknown key(s) {', '.join(map(repr, unknown))}; a UniEvalConfig holds "
                             "'task' and 'evaluation_aspect' (or 'aspect')")
        if "aspect" in config and "evaluation_aspect" in config and config["aspect"] != config["evaluation_aspect"]:
            raise ValueError(f"config['aspect']={config['aspect']!r} and config['evaluation_aspect']="
                             f"{config['evaluation_aspect']!r} differ; give one of them")
        config = UniEvalConfig.model_validate(dict(config), context={"registry": registry})
    elif not isinstance(config, UniEvalConfig):
        raise ValueError(f"config must be a UniEvalConfig or a dict, got {type(config).__name__}")
    if task is not None and task != config.task:
        raise ValueError(f"task={task!r} and config.task={config.task!r} differ; give the task once")
    if name is not None and name != config.evaluation_aspect:
        raise ValueError(f"{given_as}={name!r} and config.evaluation_aspect={config.evaluation_aspect!r} differ; "
                         "give the aspect once")
    return config.task, config.evaluation_aspect


def hosted_result(values: Sequence[float]) -> dict[str, Any]:
    """``{"overall": {"value": mean}, "examples": [{"value": v}, ...]}``: the hosted metric's
    result schema for one request's values (every value a float)."""
    examples = [{"value": float(v)} for v in values]
    return {"overall": {"value": float(np.mean([e["value"] for e in examples]))}, "examples": examples}


def hosted_line(result: "ChunkResult", aspect: str) -> dict[str, Any]:
    """One request's answer in the hosted UniEval metric's schema (``--output-format hosted``).

    The hosted metric answers a request whole or not at all: its result is
    ``{"overall": {"value": number}, "examples": [{"value": number}, ...]}`` and validates
    against its JSON Schema, every value a number. So a request holding an example that cannot
    be scored is answered by ONE request-level error line naming every bad example and field,
    as the hosted metric (and ``score()``, with :class:`~unieval_local.errors.InvalidExampleError`)
    refuses such a request; never by examples with ``value: null``.

    Args:
        result: the request's :class:`~unieval_local.requests.score.ChunkResult`.
        aspect: the one aspect scored.

    Returns:
        ``{"overall": {"value": mean}, "examples": [{"value": v}, ...]}``, one example per
        record of the request in input order; or, when any record failed,
        ``{"error": {"type": "InvalidRequest", "message", "n_examples", "examples": [{"index",
        "record", "key", "field", "message"}]}}`` (``n_examples``: the request's size; ``examples``:
        the bad ones) with ``index`` the example's position in the request,
        ``record`` its index in the input, ``field`` the field at fault (``record`` for a line
        that is not JSON, ``id`` for a repeated id, ``value`` for a non-finite score).
    """
    values: list[float] = []
    bad: list[dict[str, Any]] = []
    for i, line in enumerate(result.lines):
        if "scores" in line:
            values.append(float(line["scores"][aspect]))
            continue
        reason = (result.reasons[i] if i < len(result.reasons) else None) or f"record: {line['error']['message']}"
        field, _, message = reason.partition(": ")
        bad.append({"index": i, "record": line["index"], "key": line["key"], "field": field, "message": message})
    if bad:
        return {"error": {"type": "InvalidRequest",
                          "message": f"{len(bad)} of {len(result.lines)} examples of this request cannot be scored, "
                                     "so the request is not answered (as the hosted metric answers a request whole "
                                     "or not at all); fix them, or use --output-format records to keep the others' "
                                     "scores",
                          "n_examples": len(result.lines), "examples": bad}}
    return hosted_result(values)
