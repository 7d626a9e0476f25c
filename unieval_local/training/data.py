"""Labelled records for training: read, checked, split.

Reads the formats ``benchmark labelled`` reads (``.jsonl``, ``.json``, ``.csv``, ``.tsv``,
parquet), with the same field rules: the text under evaluation from ``target`` (else ``claim``,
``system_output``, ``summary``, ``hypothesis``; ``--target-field`` names another), the document
from ``source`` (else ``doc``, ``document``, ``premise``; ``--source-field``), ``references`` and
``context`` where the aspect needs them, dotted names reading nested objects; the label from
``--label-field`` through the one label reader
(:func:`~unieval_local.analysis.label_values.labels_from_values`, ``--positive-label``), or a
human score made binary by ``--label-threshold`` (``score >= T`` is 1).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.label_values import labels_from_values, plural
from ..batch.benchmark import SOURCE_FIELDS, TARGET_FIELDS, _field, _read_parquet  # benchmark labelled's field rules
from ..errors import InputFileError

__all__ = ["MIN_PER_CLASS", "LabelledRows", "check_classes", "data_fingerprint", "held_out_split", "overlap",
           "read_labelled"]

#: Fewest rows of each class (label 1 and label 0) the training rows must hold: below it a model
#: cannot learn the boundary and the dev figures mean nothing.
MIN_PER_CLASS = 8

@dataclass(frozen=True)
class LabelledRows:
    """Records (``target``, and ``source`` / ``references`` / ``context`` where present) and their 0/1 labels.

    Attributes:
        records: one dict per row, the package's field names. labels: ``(n,)`` int8.
        where: per row, how messages name it (``FILE: row i``). files: the files read.
    """

    records: list[dict[str, Any]]
    labels: np.ndarray
    where: list[str]
    files: tuple[str, ...]

    def subset(self, rows: Sequence[int]) -> "LabelledRows":
        """The rows ``rows`` (in that order)."""
        rows = list(rows)
        return LabelledRows([self.records[i] for i in rows], self.labels[rows], [self.where[i] for i in rows],
                            self.files)


def _rows(path: Path) -> list[Any]:
    if not path.exists():
        raise InputFileError(f"{path}: no such file")
    if path.suffix == ".parquet":
        return _read_parquet(path)
    from ..records import read_records

    return read_records(str(path))


def _label_values(values: list[Any], where: list[str], label_field: str, positive_label: str | None,
                  label_threshold: float | None) -> np.ndarray:
    if label_threshold is None:
        try:
            return labels_from_values(values, where, positive_label=positive_label, option="--positive-label")
        except ValueError as exc:
            raise InputFileError(str(exc)) from None
    out = np.empty(len(values), dtype=np.int8)
    for i, v in enumerate(values):
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(v, bool) or not math.isfinite(x):
            raise InputFileError(f"{where[i]}: {label_field} {v!r} is not a finite number (--label-threshold reads "
                                 "human scores: score >= threshold is label 1)")
        out[i] = int(x >= label_threshold)
    return out


def read_labelled(files: Sequence[str | os.PathLike], *, label_field: str = "label", positive_label: str | None = None,
                  label_threshold: float | None = None, target_field: str | None = None,
                  source_field: str | None = None) -> LabelledRows:
    """Read labelled rows from ``files`` (in order).

    Returns:
        :class:`LabelledRows`.

    Raises:
        InputFileError: an unreadable file; a row without its target or label (the message names
            the file, the row and the field, and the flag that names another field); a label that
            does not read (every bad row is listed, up to 10); no rows.
    """
    records, values, where, problems = [], [], [], []
    for f in files:
        path = Path(f)
        for i, row in enumerate(_rows(path)):
            at = f"{path}: row {i}"
            if not isinstance(row, Mapping):
                problems.append(f"{at}: not an object of fields")
                continue
            t_name = target_field or next((k for k in TARGET_FIELDS if k in row), TARGET_FIELDS[0])
            s_name = source_field or next((k for k in SOURCE_FIELDS if k in row), None)
            rec: dict[str, Any] = {}
            try:
                rec["target"] = _field(row, t_name)
            except KeyError:
                problems.append(f"{at}: no field {t_name!r} for the target (" + (
                    "name yours with --target-field" if not target_field else "the --target-field given") + ")")
                continue
            if s_name is not None:
                try:
                    rec["source"] = _field(row, s_name)
                except KeyError:
                    problems.append(f"{at}: no field {s_name!r} (the --source-field given)")
                    continue
            for name in ("references", "context", "language"):
                if name in row and row[name] is not None:
                    rec[name] = row[name]
            if "references" not in rec and isinstance(row.get("reference"), str):
                rec["references"] = [row["reference"]]
            try:
                values.append(_field(row, label_field))
            except KeyError:
                problems.append(f"{at}: no field {label_field!r} for the label (name yours with --label-field; "
                                f"fields: {', '.join(map(str, row))})")
                continue
            records.append(rec)
            where.append(f"{at}: {label_field}")
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise InputFileError(f"{plural(len(problems), 'row')} cannot be used{more}:\n  " + "\n  ".join(problems[:10]))
    if not records:
        raise InputFileError(f"{', '.join(map(str, files))}: no rows")
    labels = _label_values(values, where, label_field, positive_label, label_threshold)
    return LabelledRows(records, labels, [w.rpartition(":")[0] for w in where], tuple(str(f) for f in files))


def check_classes(rows: LabelledRows, what: str, minimum: int = MIN_PER_CLASS) -> None:
    """Refuse ``rows`` holding fewer than ``minimum`` rows of either class.

    Raises:
        ValueError: the counts of both classes and the minimum.
    """
    pos = int(rows.labels.sum())
    neg = len(rows.labels) - pos
    if pos < minimum or neg < minimum:
        raise ValueError(f"the {what} rows hold {plural(pos, 'row')} labelled 1 and {plural(neg, 'row')} labelled 0: "
                         f"at least {minimum} of each are needed to learn from (docs/training.md)")


def held_out_split(n: int, labels: np.ndarray, share: float, seed: int) -> tuple[list[int], list[int]]:
    """``(train_rows, dev_rows)``: a seeded split holding out ``share`` of each class
    (``numpy.random.default_rng(seed)``; at least one row of each class on each side when the class
    has two or more), both in the original order."""
    if not 0 < share < 1:
        raise ValueError(f"the dev share must lie in (0, 1), got {share}")
    rng = np.random.default_rng(seed)
    dev: list[int] = []
    for c in (0, 1):
        idx = np.flatnonzero(labels == c)
        if len(idx) < 2:
            continue
        k = min(len(idx) - 1, max(1, int(round(share * len(idx)))))
        dev += rng.choice(idx, size=k, replace=False).tolist()
    chosen = set(dev)
    return [i for i in range(n) if i not in chosen], sorted(dev)


def _key(record: Mapping[str, Any]) -> str:
    return json.dumps([record.get("target"), record.get("source")], ensure_ascii=False)


def overlap(a: LabelledRows, b: LabelledRows) -> int:
    """How many rows of ``b`` have the (target, source) of a row of ``a``."""
    keys = {_key(r) for r in a.records}
    return sum(_key(r) in keys for r in b.records)


def data_fingerprint(rows: LabelledRows) -> str:
    """SHA-256 (hex) of the rows as training reads them (records and labels, in order)."""
    h = hashlib.sha256()
    for r, y in zip(rows.records, rows.labels):
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\x00%d\n" % int(y))
    return h.hexdigest()
