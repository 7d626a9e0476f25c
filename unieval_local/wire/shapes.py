"""The pieces the external shapes share: ``N/A`` and percentages, a report whose ``details``
appear only when asked for, the row error of a report file, and a claim's source window."""

from __future__ import annotations

import re
from collections.abc import Mapping

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_serializer

__all__ = ["NA", "ClaimWindow", "Percent", "RowError", "WithOptionalDetails", "rename_fields"]


NA = "N/A"


class WithOptionalDetails(BaseModel):
    """A report whose ``details`` field (None unless the ``details`` option asked for it)
    is left out of the JSON when None, so the report has exactly the documented keys."""

    @model_serializer(mode="wrap")
    def _details_when_asked(self, handler):
        out = handler(self)
        if out.get("details") is None:
            out.pop("details", None)
        return out


#: A percentage in [0, 100], or "N/A" where the inputs do not allow the metric.
Percent = float | Literal["N/A"]


class RowError(BaseModel):
    """Why one record has no report: the field at fault and a message."""

    model_config = ConfigDict(frozen=True)

    field: str
    message: str


class ClaimWindow(BaseModel):
    """The part of the source that best supported a claim (chunked sources only).

    ``start``/``end`` are character offsets into the source; ``text`` the passage.
    """

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    text: str


def rename_fields(error: RowError, names: Mapping[str, str]) -> RowError:
    """``error`` with the fields in ``names`` (ours -> theirs) renamed in its field and message
    (quoted ``'source'`` and a leading ``source:`` of each part; our name in parentheses, as in
    ``the summary (target)``, is dropped)."""
    if not names:
        return error
    field_names = [names.get(f.strip(), f.strip()) for f in error.field.split(",")]
    message = error.message
    for ours, theirs in names.items():
        message = re.sub(rf"(^|; ){re.escape(ours)}(?=[:.])", rf"\g<1>{theirs}", message)
        message = message.replace(f"'{ours}'", f"'{theirs}'").replace(f" ({ours})", "")  # "the summary (target)"
    return RowError(field=", ".join(field_names), message=message)
