"""Errors in the client's own words: each problem of a request names the field as the body the
client sent wrote it, never a name we read it under.

* :func:`body_path`: a validation error's location as a path into the body (``data[3]``,
  ``config.evaluation_aspect``, ``evaluations[0].data[2].input``).
* :func:`missing_key_hint`: a did-you-mean for a required key the body misspelt (``sumary``).
* :func:`client_problems`: per-example problems (our ``target``, ``source`` ...) renamed to the
  key each example used for that field (``system_output``, ``summary``, ``input``), or to the
  endpoint's own name for a field the example did not give at all.
* :func:`name_problems`: names given in a list (``aspects``, ``enabled_metrics``) checked one by
  one, each unknown one named by its position in the list the client sent.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from ..fields import ALIASES, FIELDS
from .shapes import RowError, rename_fields

__all__ = ["body_path", "bracketed", "client_loc", "client_problems", "missing_key_hint", "name_problems", "registry_problems",
           "score_name_problems", "unieval_name_problems"]


def body_path(loc: Iterable[str | int]) -> str:
    """A validation error's location (pydantic's ``loc``) as a path into the JSON body: keys
    joined by dots, list positions in brackets; ``body`` for the body itself.

    Example:
        >>> body_path(("data", 3, "target")), body_path(("config", "evaluation_aspect")), body_path(())
        ('data[3].target', 'config.evaluation_aspect', 'body')
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


_DOTTED_INDEX = re.compile(r"(?<=[A-Za-z_\]])\.(\d+)(?=[.,:;\s'\"]|$)")


def bracketed(text: str) -> str:
    """``text`` (a field path, or a message that names one) with dotted list positions in
    brackets, the one path style of the HTTP answers (:func:`body_path`'s): ``section_definitions.0.type``
    -> ``section_definitions[0].type``; numbers such as ``0.5`` are left alone.

    Example:
        >>> bracketed("section_definitions.0.type"), bracketed("references.1: bad; threshold 0.5")
        ('section_definitions[0].type', 'references[1]: bad; threshold 0.5')
    """
    return _DOTTED_INDEX.sub(r"[\1]", text) if isinstance(text, str) else text


#: The JSON type a pydantic union member's tag in a location stands for (``list[str]``, ``str``).
_TAGS = {"list": list, "str": str, "dict": dict, "int": int, "float": float, "bool": bool}


def client_loc(body: Any, loc: Sequence[str | int], drop: bool = True) -> list[str | int] | None:
    """A validation error's location without the union members' tags pydantic puts in it
    (``("enabled_metrics", "list[str]", 2)`` -> ``["enabled_metrics", 2]``), read against
    ``body`` (the parsed JSON); None for an error about a union member the value is not (a list
    sent where ``list[str] | str`` is read: the ``str`` member's error says nothing useful; with
    ``drop`` False, its location without the tag instead: for a value no member fits).

    Example:
        >>> body = {"enabled_metrics": ["coherence", 3]}
        >>> client_loc(body, ("enabled_metrics", "list[str]", 1)), client_loc(body, ("enabled_metrics", "str"))
        (['enabled_metrics', 1], None)
    """
    out: list[str | int] = []
    node, known = body, True
    for part in loc:
        if known and isinstance(part, str) and not isinstance(node, Mapping):  # a union member's tag
            kind = _TAGS.get(part.split("[", 1)[0])
            if drop and kind is not None and not isinstance(node, kind):
                return None
            continue
        out.append(part)
        if known and isinstance(part, str) and isinstance(node, Mapping) and part in node:
            node = node[part]
        elif known and isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            node = node[part]
        else:
            known = False
    return out


def _at(body: Any, loc: Sequence[str | int]) -> Any:
    """The value at ``loc`` in ``body`` (None where the path does not lead anywhere)."""
    for part in loc:
        if isinstance(part, int) and isinstance(body, list) and 0 <= part < len(body):
            body = body[part]
        elif isinstance(part, str) and isinstance(body, Mapping):
            body = body.get(part)
        else:
            return None
    return body


def missing_key_hint(body: Any, loc: Sequence[str | int], known: Collection[str] = ()) -> str:
    """For a required key missing at ``loc`` (``("summary",)``), a did-you-mean naming the keys
    of the object that held it which are close to it (:func:`difflib.get_close_matches`, ratio
    >= 0.75) and not among ``known`` (keys the endpoint reads for something else); ``""`` when none.

    Example:
        >>> missing_key_hint({"input": "x", "sumary": "y"}, ("summary",))
        " (the body has 'sumary': did you mean 'summary'?)"
    """
    if not loc or not isinstance(loc[-1], str):
        return ""
    holder = _at(body, loc[:-1])
    if not isinstance(holder, Mapping):
        return ""
    name = loc[-1]
    close = [k for k in holder if isinstance(k, str) and k != name and k not in known
             and difflib.get_close_matches(k.lower(), [name.lower()], n=1, cutoff=0.75)]
    if not close:
        return ""
    where = "the body" if len(loc) == 1 else body_path(loc[:-1])
    return f" ({where} has {', '.join(repr(k) for k in close)}: did you mean {name!r}?)"


def _read_names(where: str) -> dict[str, tuple[str, ...]]:
    """``{our field: the other names an endpoint reads as it}``: UniEval's names everywhere
    (``system_output``, ``reference``), the other evaluators' names too for ``reports``."""
    kinds = ("everywhere",) if where == "score" else ("everywhere", "reports")
    out: dict[str, tuple[str, ...]] = {}
    for alias in ALIASES:
        if alias.read in kinds:
            out[alias.field] = out.get(alias.field, ()) + (alias.name,)
    return out


def client_problems(problems: Sequence[Mapping[str, Any]], record: Callable[[int | None], Any], where: str,
                    canonical: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Per-example problems (``{"index", "field", "message"}``, fields in our names) in the
    client's words.

    Args:
        problems: the problems, as :func:`~unieval_local.service.errors.service_error` gives them.
        record: index -> the example the client sent at that index (a mapping; anything else
            leaves the problem as it is).
        where: ``score`` (the endpoint reads UniEval's other names: ``system_output``,
            ``reference``) or ``reports`` (also ``summary``/``output``, ``input``/``transcript``).
        canonical: our field -> the endpoint's own name for it, for a field the example gave under
            no name (the rating evaluator: ``target`` -> ``summary``, ``source`` -> ``input``), unless
            the example writes another field in our names (``source``): then ours (``target``).

    Returns:
        The problems with each field (and the field's name in the message: quoted, or leading a
        part) renamed to the key the example used for it, else to ``canonical``'s name; fields
        the example wrote as we do, and problems of no example, unchanged.
    """
    read = _read_names(where)
    out = []
    for problem in problems:
        example = record(problem.get("index"))
        if not isinstance(example, Mapping) or not isinstance(problem.get("field"), str):
            out.append(dict(problem))
            continue
        names: dict[str, str] = {}
        own_words = any(f in example for f in FIELDS)  # an example in our names keeps them for what it lacks
        for ours in (f.strip() for f in problem["field"].split(",")):
            if ours in example:
                continue
            given = next((n for n in read.get(ours, ()) if n in example), None)
            theirs = given or (None if own_words else (canonical or {}).get(ours))
            if theirs and theirs != ours:
                names[ours] = theirs
        renamed = rename_fields(RowError(field=problem["field"], message=str(problem.get("message", ""))), names)
        out.append({**problem, "field": renamed.field, "message": renamed.message})
    return out


def name_problems(value: Any, field: str, valid: Sequence[str], kind: str) -> list[dict[str, Any]]:
    """The unknown names in ``value`` (a list of names, or one comma-separated string), each a
    problem ``{"index": None, "field", "message"}`` naming its place in what the client sent:
    ``field[i]`` for a list's item ``i``, ``field`` for a string; with a did-you-mean and the
    valid names. ``[]`` when every name is valid (or ``value`` is None).

    Example:
        >>> name_problems(["coherence", "fluensy"], "enabled_metrics", ["coherence", "fluency"], "metric")[0]["field"]
        'enabled_metrics[1]'
    """
    if value is None:
        return []
    items = list(enumerate(value)) if isinstance(value, list) else \
        [(None, n.strip()) for n in str(value).split(",") if n.strip()]
    if not items:
        return [{"index": None, "field": field, "message": f"give at least one {kind}; valid: {', '.join(valid)}"}]
    problems = []
    for i, name in items:
        if isinstance(name, str) and name in valid:
            continue
        close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append({"index": None, "field": field if i is None else f"{field}[{i}]",
                         "message": f"unknown {kind} {name!r}{hint}; valid {kind}s: {', '.join(valid)}"})
    return problems


def registry_problems(registry: Any, task: tuple[str, Any], aspects: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """A request's task and aspect names checked against ``registry`` (a
    :class:`~unieval_local.registry.tasks.Registry`), each unknown one a problem ``{"index": None,
    "field", "message"}`` naming the field the client wrote it in.

    Args:
        task: ``(field, name)``: ``("config.task", "summarization")``.
        aspects: ``(field, name)`` each: ``("aspects[1]", "fluensy")``; a group name (``"all"``, ``"all+"``, ``"geval"`` ...) stands for its aspects.

    Returns:
        The registry's message for each unknown name (did-you-mean, the valid names); only the
        task's problem when the task is unknown (its aspects cannot be checked).
    """
    from ..errors import UnknownTaskError

    try:
        registry.get_task(task[1])
    except UnknownTaskError as exc:
        return [{"index": None, "field": task[0], "message": str(exc)}]
    problems = []
    for field, name in aspects:
        if isinstance(name, str) and name in registry.aspect_groups(task[1]):
            continue
        try:
            registry.get_aspect(task[1], name)
        except UnknownTaskError as exc:
            problems.append({"index": None, "field": field, "message": str(exc)})
    return problems


def unieval_name_problems(registry: Any, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`registry_problems` of a ``/v1/unieval`` body (valid against its model): its
    ``config.task`` and ``config.evaluation_aspect`` (or ``config.aspect``, as the client wrote it)."""
    from .hosted import DEFAULT_ASPECT, DEFAULT_TASK

    config = body.get("config") if isinstance(body.get("config"), Mapping) else {}
    key = "aspect" if "aspect" in config and "evaluation_aspect" not in config else "evaluation_aspect"
    return registry_problems(registry, ("config.task", config.get("task", DEFAULT_TASK)),
                             [(f"config.{key}", config.get(key, DEFAULT_ASPECT))])


def score_name_problems(registry: Any, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`registry_problems` of a ``/v1/score`` body (valid against its model): its ``task``
    and each of its ``aspects`` (``aspects[i]`` for a list's item, ``aspects`` for one name)."""
    from .hosted import DEFAULT_TASK

    aspects = body.get("aspects")
    named = [(f"aspects[{i}]", a) for i, a in enumerate(aspects)] if isinstance(aspects, list) else \
        [("aspects", aspects)] if isinstance(aspects, str) else []
    return registry_problems(registry, ("task", body.get("task", DEFAULT_TASK)), named)
