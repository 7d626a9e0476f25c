"""The example fields and every other name they go by: the one alias table.

Our fields are ``target`` (the text under evaluation), ``source``, ``references`` and
``context`` (UniEval's, and the hosted metric's ``UniEvalData``). Other tools name them
differently; :data:`ALIASES` says, for each other name, which field it means and where it
is READ as that field:

* ``everywhere``: UniEval's own record names (``system_output``, ``reference``), read by
  every entry point (:class:`~unieval_local.schema.UniEvalData`).
* ``reports``: the other evaluators' names (``input``/``transcript`` for the source,
  ``summary``/``output`` for the target), read by the report formats, the rating
  evaluator's compat layer and the service's report endpoints; their errors are given back
  in the record's own names (:func:`user_names`).
* ``hint``: names that only earn a did-you-mean when the field is missing (``document``,
  ``prediction`` ...): reading them silently could pick the wrong text.

The rating evaluator (:mod:`unieval_local.compat`) speaks of ``input`` and ``summary``
(:data:`RATING_EVALUATOR_NAMES`). This module imports nothing of the package (a leaf), so
validation deep in the pipeline and the wire formats at the top read the same table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ALIASES", "AUTOEVAL_NAMES", "FIELDS", "HOSTED_SUMM_NAMES", "RATING_EVALUATOR_NAMES", "REPORT_NAMES", "Alias",
           "alias_hint", "hinted_field", "read_aliases", "record_names", "user_names"]

#: Our field names.
FIELDS: tuple[str, ...] = ("target", "source", "references", "context")


@dataclass(frozen=True)
class Alias:
    """One other name of a field.

    Attributes:
        name: the other name (``summary``).
        field: our field it means (``target``).
        read: where it is read as that field: ``everywhere``, ``reports`` or ``hint`` (only
            suggested; see the module docstring).
    """

    name: str
    field: str
    read: Literal["everywhere", "reports", "hint"]


#: Every other name of our fields (order kept: it is the order messages list them in).
ALIASES: tuple[Alias, ...] = (
    Alias("system_output", "target", "everywhere"), Alias("reference", "references", "everywhere"),
    Alias("input", "source", "reports"), Alias("transcript", "source", "reports"),
    Alias("summary", "target", "reports"), Alias("output", "target", "reports"),
    *(Alias(n, "target", "hint") for n in ("prediction", "hypothesis", "generated", "candidate", "response",
                                            "claim")),
    *(Alias(n, "source", "hint") for n in ("document", "article", "dialogue_history", "history")),
    Alias("refs", "references", "hint"), Alias("gold", "references", "hint"),
    Alias("fact", "context", "hint"), Alias("knowledge", "context", "hint"),
)

#: Our fields in the rating evaluator's words (its SummaryData has ``input`` and ``summary``).
RATING_EVALUATOR_NAMES: dict[str, str] = {"source": "input", "target": "summary"}
#: Our fields in autoeval's words (its records have ``transcript`` and ``summary``).
AUTOEVAL_NAMES: dict[str, str] = {"source": "transcript", "target": "summary"}
#: Our fields in the hosted summ metric's words (its rows are ``{"input", "output"}``).
HOSTED_SUMM_NAMES: dict[str, str] = {"source": "input", "target": "output"}
#: Per report format, our fields in the words of the tool whose records it reads.
REPORT_NAMES: dict[str, dict[str, str]] = {"rating": RATING_EVALUATOR_NAMES, "summ": HOSTED_SUMM_NAMES,
                                           "autoeval": AUTOEVAL_NAMES}

_HINTED = {a.name: a.field for a in ALIASES if a.read != "everywhere"}


def read_aliases(where: Literal["reports"] = "reports") -> dict[str, tuple[str, ...]]:
    """``{field: (other names read as it, in order)}`` for ``where`` (``reports``):
    ``{"source": ("input", "transcript"), "target": ("summary", "output")}``."""
    out: dict[str, tuple[str, ...]] = {}
    for a in ALIASES:
        if a.read == where:
            out[a.field] = out.get(a.field, ()) + (a.name,)
    return out


def hinted_field(name: str) -> str | None:
    """The field a record's key ``name`` probably means (case-insensitive; the names read by
    reports and the did-you-mean ones), or None."""
    return _HINTED.get(str(name).lower())


def alias_hint(field: str, present: Iterable[str]) -> str:
    """`` (the record has 'summary': did you mean 'target'? rename it)`` when ``present`` (a
    record's keys) holds another name of ``field``, or a misspelling of it or of one of its
    other names (``sumary``, ``targt``: ``difflib`` ratio >= 0.75), else ``""``."""
    present = [str(k) for k in present]
    names = [k for k in present if hinted_field(k) == field]
    if not names:
        import difflib

        spellings = [field, *(a.name for a in ALIASES if a.field == field and a.read != "everywhere")]
        known = {*FIELDS, *(a.name for a in ALIASES)}
        names = [k for k in present if k.lower() not in known
                 and difflib.get_close_matches(k.lower(), spellings, n=1, cutoff=0.75)]
    if not names:
        return ""
    return f" (the record has {', '.join(repr(n) for n in names)}: did you mean {field!r}? rename it)"


def user_names(record: Any, where: Literal["reports"] = "reports") -> dict[str, str]:
    """``{our field: the name this record gave it}`` for the fields a record gave under an
    alias read by ``where`` (a record with ``summary`` and no ``target``: ``{"target":
    "summary"}``), so that errors can be given back in the record's words."""
    if not isinstance(record, Mapping):
        return {}
    return {ours: alias for ours, aliases in read_aliases(where).items() for alias in aliases
            if alias in record and ours not in record}


def record_names(record: Any, report_format: str | None = None) -> dict[str, str]:
    """``{our field: the name to call it}`` for a record read by ``report_format`` (a key of
    :data:`REPORT_NAMES`): the fields it gave under another name (:func:`user_names`) and, when it
    gave any, the fields it lacks under every name, as that format's tool names them (a summ record
    ``{"output": ...}`` lacks ``input``, not ``source``); nothing for a record in our own words. A
    field the record has under a did-you-mean name (``document``) keeps ours: the hint names it.

    Example:
        >>> record_names({"output": "A summary."}, "summ")
        {'source': 'input', 'target': 'output'}
        >>> record_names({"target": "A summary."}, "summ")
        {}
        >>> record_names({"output": "A summary.", "document": "A text."}, "summ")
        {'target': 'output'}
    """
    given = user_names(record)
    if not given or report_format not in REPORT_NAMES:
        return given
    present = {f for f in FIELDS if f in record} | set(given) | {hinted_field(k) for k in record}
    return {**{f: n for f, n in REPORT_NAMES[report_format].items() if f not in present}, **given}
