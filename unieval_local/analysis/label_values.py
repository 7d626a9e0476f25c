"""Reading binary labels: the one place a label value becomes 0 or 1 (``meta --labels``,
``benchmark``, and the ``train`` command to come, each with ``--positive-label``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["labels_from_values", "parse_label", "plural"]

_WORDS = {"0": 0, "1": 1, "false": 0, "true": 1}


def parse_label(value: Any, where: str = "label") -> int:
    """0 or 1 from ``0``/``1`` (int or float), ``true``/``false`` (bool, or a string in any case);
    ValueError for anything else, the message starting with ``where`` (the record and field)."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, float, np.integer, np.floating)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    raise ValueError(f"{where}: {value!r} is not a label (0/1/true/false)")


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"1 group"``, ``"2 groups"`` (``words``: the plural when it is not ``word + "s"``)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def _label_text(value: Any) -> str:
    """How a label value compares with a positive label given as text: ``true``/``false`` for a
    bool, ``1`` for an integral number, else ``str(value)``."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.integer, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def labels_from_values(values: Sequence[Any], where: Sequence[str], *, positive_label: str | None = None,
                       option: str = "positive_label") -> np.ndarray:
    """0/1 labels from a column of raw label values: the one place label values are read (``meta
    --labels``, ``benchmark``, and the ``train`` command to come, each with ``--positive-label``).

    Args:
        values: the raw values, one per row (numbers, bools, strings).
        where: for each row, how an error names it (its file, record and field).
        positive_label: None: each value must be 0/1/true/false (:func:`parse_label`). Else the
            value meaning "supported": a value whose text (``true``/``false`` for a bool, ``1`` for
            an integral number, else ``str(value)``) equals it is 1, any other value 0.
        option: how the reader names ``positive_label`` (``"--positive-label"`` on the CLI).

    Returns:
        ``(len(values),)`` int8 array of 0/1.

    Raises:
        ValueError: without ``positive_label``, a value not 0/1/true/false (the message names the
            first such row, lists the distinct values seen and names ``option``); with it, a
            missing (null) value, or ``positive_label`` equal to none of the values (every row
            would be 0).
    """
    if len(values) != len(where):
        raise ValueError(f"{len(values)} label values but {len(where)} row names")

    def seen() -> str:
        distinct = sorted({_label_text(v) for v in values if v is not None})
        return (f"{distinct[:20]}" + (f" and {len(distinct) - 20} more" if len(distinct) > 20 else "")
                + f" ({plural(len(distinct), 'distinct value')})")

    if positive_label is None:
        out = np.empty(len(values), dtype=np.int8)
        for i, v in enumerate(values):
            try:
                out[i] = parse_label(v, where[i])
            except ValueError as exc:
                raise ValueError(f"{exc}; the labels hold {seen()}: name the value that means supported with "
                                 f"{option} VALUE (values equal to it are 1, any other 0)") from None
        return out
    missing = next((i for i, v in enumerate(values) if v is None), None)
    if missing is not None:
        raise ValueError(f"{where[missing]}: no label (null)")
    out = np.array([_label_text(v) == positive_label for v in values], dtype=np.int8)
    if len(out) and not out.any():
        raise ValueError(f"{option} {positive_label!r} equals none of the labels, which hold {seen()}")
    return out
