"""Text that is not Unicode: UTF-16 surrogate code points (U+D800..U+DFFF) in records.

``json.loads`` accepts ``"\\ud83d"``, what JavaScript leaves when it cuts a string inside an
emoji, but such a string cannot be tokenized nor written as UTF-8. :func:`find_surrogates`
finds them at any depth (values and field names), :func:`surrogate_error` and
:func:`surrogate_advice` say where and what to do, :func:`escape_surrogates` writes each as the
6-character escape so a record's key can still be written."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["SurrogateHit", "escape_surrogates", "find_surrogates", "surrogate_advice", "surrogate_error"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class SurrogateHit(NamedTuple):
    """Where a record holds a UTF-16 surrogate (see :func:`find_surrogates`).

    Attributes:
        field: the field's path, e.g. ``target``, ``references[1]``, ``meta.author``
            (``record`` when the record itself is a string); surrogates in names are
            written as their ``\\udXXX`` escape.
        position: 0-based character index of the first surrogate in that string.
        description: ``a lone UTF-16 surrogate U+D83D at character 17`` (or ``a UTF-16
            surrogate pair U+D83D U+DE00 ...``), with ``(and N more)`` when there are several.
        in_name: the surrogate is in the field's name, not its value.
        pair: the first surrogate is a high surrogate followed by a low one (a UTF-16 pair
            that was never joined; only Python strings hold those, JSON joins them).
    """

    field: str
    position: int
    description: str
    in_name: bool = False
    pair: bool = False


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text


def _hit(field: str, text: str, in_name: bool) -> SurrogateHit | None:
    m = _SURROGATE.search(text)
    if m is None:
        return None
    pos = m.start()
    c = ord(text[pos])
    pair = 0xD800 <= c <= 0xDBFF and pos + 1 < len(text) and 0xDC00 <= ord(text[pos + 1]) <= 0xDFFF
    n = len(_SURROGATE.findall(text)) - (2 if pair else 1)
    what = (f"a UTF-16 surrogate pair U+{c:04X} U+{ord(text[pos + 1]):04X}" if pair
            else f"a lone UTF-16 surrogate U+{c:04X}")
    more = f" (and {n} more surrogate{'s' if n > 1 else ''})" if n > 0 else ""
    return SurrogateHit(field, pos, f"{what} at character {pos}{more}", in_name, pair)


def find_surrogates(value: Any, path: str = "") -> list[SurrogateHit]:
    """Every string of ``value`` (a parsed record: dicts, lists, strings, numbers, at any
    depth; dict keys included) that holds a code point in U+D800..U+DFFF, one
    :class:`SurrogateHit` per string, in order; [] when there is none (the usual case).

    Args:
        value: the record (or any JSON-like value).
        path: the field path of ``value`` itself ("" for a whole record).
    """
    out: list[SurrogateHit] = []
    _walk(value, path, out)
    return out


def _walk(v: Any, where: str, out: list[SurrogateHit]) -> None:
    if isinstance(v, str):
        if (h := _hit(where or "record", v, False)) is not None:
            out.append(h)
    elif isinstance(v, dict):
        for k, x in v.items():
            name = _escaped(k) if isinstance(k, str) else str(k)
            sub = f"{where}.{name}" if where else name
            if isinstance(k, str) and (h := _hit(sub, k, True)) is not None:
                out.append(h)
            _walk(x, sub, out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            _walk(x, f"{where}[{i}]", out)


def surrogate_advice(hits: Sequence[SurrogateHit]) -> str:
    """What to do about ``hits``: ``not valid Unicode (a string cut inside an emoji?); fix the
    text`` for lone surrogates; how to join them for surrogate pairs (Python strings only)."""
    join = "text.encode('utf-16', 'surrogatepass').decode('utf-16')"
    if all(h.pair for h in hits):
        return f"not valid Unicode (two UTF-16 code units, not a character); join them: {join}"
    advice = "not valid Unicode (a string cut inside an emoji?); fix the text"
    return advice + (f"; join a surrogate pair with {join}" if any(h.pair for h in hits) else "")


def surrogate_error(hits: Sequence[SurrogateHit]) -> str:
    """One message for a record's :func:`find_surrogates` hits, e.g. ``field 'target' holds a
    lone UTF-16 surrogate U+D83D at character 17: not valid Unicode (a string cut inside an
    emoji?); fix the text`` (at most 3 fields named, then how many more)."""
    parts = [f"{'the field name' if h.in_name else 'field'} '{h.field}' holds {h.description}" for h in hits[:3]]
    if len(hits) > 3:
        parts.append(f"and {len(hits) - 3} more fields")
    return f"{', '.join(parts)}: {surrogate_advice(hits)}"


def escape_surrogates(value: Any) -> Any:
    """A copy of ``value`` with every surrogate code point (in strings and dict keys, at any
    depth) written as its 6-character escape (``"\\ud83d"``: a backslash, ``u`` and four hex
    digits), so that it can be encoded as UTF-8; other values are returned as they are."""
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, dict):
        return {(_escaped(k) if isinstance(k, str) else k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_surrogates(v) for v in value]
    if isinstance(value, tuple):
        return tuple(escape_surrogates(v) for v in value)
    return value
