"""Reading input records (JSONL streamed, or a JSON list) for the CLI and batch scripts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


class InputFileError(ValueError):
    """The input file cannot be read at all (missing, unknown format, not a list)."""


@dataclass(frozen=True)
class Record:
    """One input record: its 0-based ``index``, the parsed object, or why it failed to parse."""

    index: int
    data: Any = None
    error: str | None = None

    @property
    def key(self) -> Any:
        """The record's ``id`` when present, else its index."""
        if isinstance(self.data, dict) and self.data.get("id") is not None:
            return self.data["id"]
        return self.index


def _iter_jsonl(stream: TextIO) -> Iterator[Record]:
    index = 0
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            yield Record(index, json.loads(line))
        except json.JSONDecodeError as exc:
            yield Record(index, None, f"line {lineno} of the file is not valid JSON: {exc.msg} (column {exc.colno})")
        index += 1


def count_records(path: str) -> int | None:
    """Number of records in ``path`` (non-blank lines for JSONL), or None for stdin."""
    if path == "-":
        return None
    p = Path(path)
    if p.suffix == ".jsonl":
        with open(p, encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())
    return None


def read_records(path: str | os.PathLike) -> list[Any]:
    """All records of a ``.jsonl`` or ``.json`` file (see :func:`iter_records`).

    Raises:
        InputFileError: the file cannot be read, or a record is not valid JSON
            (the message names the file and the record index).
    """
    out = []
    for rec in iter_records(str(path)):
        if rec.error is not None:
            raise InputFileError(f"{path}: record {rec.index}: {rec.error}")
        out.append(rec.data)
    return out


def write_jsonl(path: str | os.PathLike, records: Iterable[Any]) -> int:
    """Write ``records`` to ``path``, one JSON object per line (UTF-8, not ASCII-escaped),
    creating the parent folder if it is missing; returns how many were written."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n


def iter_records(path: str) -> Iterator[Record]:
    """Yield the records of ``path`` in order.

    ``.jsonl`` (or ``-`` for standard input) is streamed: one JSON object per
    non-blank line; a line that is not valid JSON becomes a Record with
    ``error`` set, and reading goes on. ``.json`` must hold a list of objects
    (UniEval's reproduce files load as they are).

    Raises:
        InputFileError: the file is missing, has another extension, or a
            ``.json`` file does not hold a list.
    """
    if path == "-":
        yield from _iter_jsonl(sys.stdin)
        return
    p = Path(path)
    if p.is_dir():
        raise InputFileError(f"input {path!r} is a folder; give a .jsonl or .json file")
    if not p.is_file():
        raise InputFileError(f"input file {path!r} does not exist")
    if p.suffix == ".jsonl":
        with open(p, encoding="utf-8") as fh:
            try:
                yield from _iter_jsonl(fh)
            except UnicodeDecodeError as exc:
                raise InputFileError(f"{path} is not UTF-8 text: {exc}") from None
    elif p.suffix == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{path} is not valid JSON: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise InputFileError(f"{path} is not UTF-8 text: {exc}") from None
        if not isinstance(data, list):
            raise InputFileError(f"{path} must hold a JSON list of records, got {type(data).__name__}")
        for i, item in enumerate(data):
            yield Record(i, item)
    else:
        raise InputFileError(f"input must be .jsonl or .json (or - for JSONL on stdin), got {path!r}")


def read_score_output(path: str | os.PathLike, command: str = "this command") -> list[dict]:
    """The records of a ``unieval-local score`` output, checked to be one.

    Every record must be an object with a ``key`` and either ``scores`` (a mapping of
    aspect to number) or ``error``, as ``score`` writes them.

    Raises:
        InputFileError: unreadable file, or a record that is not a score output record
            (the message names the file, the record and what is missing; a score INPUT,
            with ``target`` but no ``scores``, is named as such).
    """
    rows = read_records(path)
    if not rows:
        raise InputFileError(f"{path} holds no records; {command} takes a unieval-local score output")
    for i, row in enumerate(rows):
        ok = (isinstance(row, dict) and "key" in row
              and (isinstance(row.get("scores"), dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                              for v in row["scores"].values())
                   or isinstance(row.get("error"), dict)))
        if not ok:
            looks = (" (it looks like a score input: run `unieval-local score` on it first)"
                     if isinstance(row, dict) and ("target" in row or "system_output" in row) else "")
            raise InputFileError(f"{path}: record {i} is not a unieval-local score output record (it needs a key "
                                 f"and scores or error){looks}; {command} takes the output of `unieval-local score`")
    return rows
