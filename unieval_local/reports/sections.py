"""Finding a summary's sections: ``<name>:`` headings (markdown bullets, bold, full lines; the
colon ASCII ``:`` or full-width ``：``), bracketed headings (``【原因】``, ``[Reason]``, ``「原因」``,
``〔原因〕``, a colon after them optional), a section's text up to the next heading, and a
categorical section's value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SectionSpan", "categorical_value", "heading_pattern", "locate_sections", "matches_allowed",
           "section_text"]


_HEADING = (r"^[ \t]*(?:[#>*_\-\u2022]+[ \t]*)?(?P<open>[\u3010\[\u300c\u3014][ \t]*)?{name}[ \t]*"
            r"(?(open)[\u3011\]\u300d\u3015][ \t]*(?:\*\*|__)?[ \t]*[:\uff1a]?|(?:\*\*|__)?[ \t]*[:\uff1a])"
            r"[ \t]*(?:\*\*|__)?[ \t]*")


def heading_pattern(names: Sequence[str]) -> re.Pattern | None:
    """A multiline pattern of a line starting with ``<name>:`` or ``<name>：`` for any of
    ``names``, or with the name in brackets (``【name】``, ``[name]``, ``「name」``, ``〔name〕``,
    then an optional colon); case-insensitive; markdown ``#``, ``-``, ``**`` around the name
    allowed; group ``name`` is the name as written."""
    if not names:
        return None
    alt = "|".join(re.escape(n.strip()) for n in sorted(names, key=len, reverse=True))
    return re.compile(_HEADING.format(name=f"(?P<name>{alt})"), re.I | re.M)


@dataclass(frozen=True)
class SectionSpan:
    """Where a section is in the target: the heading ``[head_start, start)`` and the
    content ``[start, end)`` (to the next section heading)."""

    head_start: int
    start: int
    end: int


def locate_sections(target: str, names: Sequence[str]) -> dict[str, SectionSpan]:
    """Lower-cased section name -> :class:`SectionSpan` of its first heading in ``target``."""
    pattern = heading_pattern(names)
    if pattern is None:
        return {}
    heads = list(pattern.finditer(target))
    out: dict[str, SectionSpan] = {}
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(target)
        out.setdefault(m.group("name").lower(), SectionSpan(m.start(), m.end(), len(target[:end].rstrip())))
    return out


def section_text(target: str, name: str, sections: dict[str, str] | None,
                 spans: dict[str, SectionSpan]) -> str | None:
    """The summary's content of section ``name``: ``sections[name]`` (name matched
    case-insensitively), else the located content, else None."""
    for key, value in (sections or {}).items():
        if key.strip().lower() == name.strip().lower():
            return value.strip()
    span = spans.get(name.strip().lower())
    return target[span.start:span.end].strip() if span is not None else None


def categorical_value(target: str, name: str, sections: dict[str, str] | None,
                      spans: dict[str, SectionSpan]) -> str | None:
    """The summary's value of categorical section ``name``: its content's first line,
    trimmed (None when the section is absent or empty)."""
    text = section_text(target, name, sections, spans)
    if not text:
        return None
    return text.splitlines()[0].strip().strip("*_").strip() or None


def matches_allowed(value: str | None, allowed: Sequence[str]) -> str | None:
    """The allowed value ``value`` equals, ignoring case and surrounding spaces, else None."""
    if value is None:
        return None
    key = value.strip().casefold()
    return next((a for a in allowed if a.strip().casefold() == key), None)
