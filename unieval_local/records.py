"""Reading input records for the CLI and batch scripts.

Input forms (an *input spec*, :data:`InputSpec`):

- a path to ``.jsonl`` (streamed, one JSON object per non-blank line; ``-`` reads JSONL
  from standard input), ``.json`` (a list of objects), ``.csv`` or ``.tsv`` (a header row
  of field names, one record per row);
- an :class:`AlignedInput`: line-aligned plain-text files (``--targets T.txt --sources
  S.txt ...``), one example per line.

What every reader guarantees:

- Text is UTF-8, with or without a byte-order mark (``utf-8-sig``); other bytes raise
  :class:`InputFileError` naming the file and the line.
- Only ``\\n`` ends a line (``\\r\\n`` files work too): a bare ``\\r`` inside a JSON string
  or a quoted CSV cell is part of the text, and JSON is parsed with ``strict=False``, so a
  raw control character inside a string value is read, not an error. Line numbers in
  messages count ``\\n``-terminated lines from 1.
- A record holding a UTF-16 surrogate code point (U+D800..U+DFFF, in a value or a field
  name, at any depth) is an error record (:func:`surrogate_error` names the field and the
  character position). ``json.loads`` accepts ``"\\ud83d"``, what JavaScript leaves when it
  cuts a string inside an emoji, but such a string is not Unicode: it cannot be tokenized nor
  written as UTF-8. Its ``data`` is kept with each surrogate written as the 6-character
  escape ``\\ud83d`` (:func:`escape_surrogates`), so its key, ``doc_id`` and ``system_id``
  can be written.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Union

from .errors import InputFileError
from .hashing import sha256_file, sha256_text
from .surrogates import escape_surrogates, find_surrogates, surrogate_error

__all__ = ["AlignedInput", "InputSpec", "Record", "count_records", "input_fingerprint", "iter_records",
           "read_records", "read_score_output", "record_error_type", "write_jsonl"]


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Record:
    """One input record: its 0-based ``index``, the parsed object, or why it cannot be used.

    Attributes:
        index: 0-based position in the input (JSONL: among non-blank lines; aligned files:
            the line; CSV/TSV: among non-blank rows after the header). Stable for a given
            input file: ``--resume`` and ``merge`` identify records by it.
        data: the parsed object (None when the line is not valid JSON or CSV). For a record
            holding a UTF-16 surrogate, a copy with each surrogate written as the 6-character
            escape ``\\udXXX`` (:func:`escape_surrogates`); ``error`` is then set.
        error: why the record cannot be scored (None when it can be, as far as reading goes);
            :func:`record_error_type` gives the output error record's type.
    """

    index: int
    data: Any = None
    error: str | None = None

    @property
    def key(self) -> Any:
        """The record's ``id`` when present, else its index. An ``id`` holding a UTF-16
        surrogate is the id with each surrogate written as its 6-character escape (``"a\\ud83d"``
        -> ``"a\\\\ud83d"``: ``data`` holds the escaped copy), so the key can always be
        written as UTF-8 and is the same on every read."""
        if isinstance(self.data, dict) and self.data.get("id") is not None:
            return self.data["id"]
        return self.index


#: (phrase in a reading error, the output error record's type), checked in order.
_ERROR_TYPES: tuple[tuple[str, str], ...] = (("UTF-16 surrogate", "InvalidText"), ("is not UTF-8 text", "InvalidText"),
                                             ("is not valid CSV", "InvalidCSV"),
                                             ("is not valid TSV", "InvalidCSV"), ("field 'id' must be", "InvalidId"))


def record_error_type(error: str) -> str:
    """The ``error.type`` of the output record of a Record whose ``error`` is ``error``:
    ``InvalidText`` (a UTF-16 surrogate, a line that is not UTF-8), ``InvalidCSV`` (a CSV or TSV row that cannot be
    read), else ``InvalidJSON``. Derived from the message, so that it survives a Record's
    trip through the Ray engine (which sends index, data and error)."""
    return next((kind for phrase, kind in _ERROR_TYPES if phrase in error), "InvalidJSON")


def _checked(index: int, data: Any, where: str = "") -> Record:
    """``Record(index, data)``, or an error record when ``data`` holds a UTF-16 surrogate
    (``where``, e.g. ``"line 3 of the file: "``, starts the message), or whose ``id`` is not a
    string or a number (a list or an object cannot be a key: the record's key is then its
    index)."""
    hits = find_surrogates(data)
    if hits:
        return Record(index, escape_surrogates(data), where + surrogate_error(hits))
    rid = data.get("id") if isinstance(data, dict) else None
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int, float))):
        return Record(index, {k: v for k, v in data.items() if k != "id"},
                      f"{where}field 'id' must be a string or a number (a record's key), got {type(rid).__name__}")
    return Record(index, data)


# ----------------------------------------------------------------------------- input specs
@dataclass(frozen=True)
class AlignedInput:
    """Line-aligned plain-text files (``score --targets T.txt --sources S.txt ...``): line i
    of each file is a field of example i (``index`` i, key i).

    Each file holds one example per line (UTF-8, optional BOM; only ``\\n`` ends a line,
    ``\\r\\n`` works too); a line's text is taken as it is, without its line ending. A blank
    line is an example with an empty text (which validation then refuses, as an empty target).
    Every file must have the same number of lines.

    Attributes:
        targets: the texts under evaluation (``target``).
        sources: ``source`` texts, or None.
        references: reference files, each giving one reference per example (several files:
            several references per example, in order); a str is one file.
        contexts: ``context`` texts, or None.
    """

    targets: str
    sources: str | None = None
    references: tuple[str, ...] = ()
    contexts: str | None = None

    def __post_init__(self):
        refs = self.references
        refs = () if refs is None else (refs,) if isinstance(refs, (str, os.PathLike)) else refs
        object.__setattr__(self, "references", tuple(os.fspath(r) for r in refs))
        object.__setattr__(self, "targets", os.fspath(self.targets))
        for name in ("sources", "contexts"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, os.fspath(getattr(self, name)))

    def files(self) -> list[tuple[str, str]]:
        """``(role, path)`` in order: targets, sources, each references file, contexts (roles
        are the CLI flags' names)."""
        out = [("targets", self.targets)]
        if self.sources is not None:
            out.append(("sources", self.sources))
        out += [("references", r) for r in self.references]
        if self.contexts is not None:
            out.append(("contexts", self.contexts))
        return out

    def __str__(self) -> str:
        return " ".join(f"--{role} {path}" for role, path in self.files())


#: What :func:`iter_records` reads: a path (``.jsonl``, ``.json``, ``.csv``, ``.tsv``; ``-``
#: for JSONL on stdin) or line-aligned text files.
InputSpec = Union[str, os.PathLike, AlignedInput]

#: the field each aligned file's role fills
_ALIGNED_FIELDS = {"targets": "target", "sources": "source", "references": "references", "contexts": "context"}


def _norm(spec: InputSpec) -> str | AlignedInput:
    return spec if isinstance(spec, AlignedInput) else os.fspath(spec)


def input_fingerprint(spec: InputSpec) -> dict | None:
    """What a run's sidecar records of its input, and what ``--resume`` and ``merge`` compare.

    Returns:
        ``None`` for stdin (``-``); for a file ``{"path": absolute path, "sha256": of its
        bytes}``; for an :class:`AlignedInput` ``{"path": "--targets /abs/T.txt --sources
        /abs/S.txt ...", "files": [{"role", "path", "sha256"}, ...], "sha256": SHA-256 of the
        lines "<role>\\t<sha256>\\n" over the files in order}`` (so a changed, swapped, added or
        removed file changes it).

    Raises:
        InputFileError: a file cannot be read.
    """
    spec = _norm(spec)
    try:
        if isinstance(spec, AlignedInput):
            files = [{"role": role, "path": os.path.abspath(path), "sha256": sha256_file(path)}
                     for role, path in spec.files()]
            return {"path": " ".join(f"--{f['role']} {f['path']}" for f in files), "files": files,
                    "sha256": sha256_text("".join(f"{f['role']}\t{f['sha256']}\n" for f in files))}
        if spec == "-":
            return None
        return {"path": os.path.abspath(spec), "sha256": sha256_file(spec)}
    except OSError as exc:
        raise InputFileError(f"cannot read the input {exc.filename!r}: {exc.strerror or exc}") from exc


# ----------------------------------------------------------------------------- lines
def _lines(stream: IO, name: str) -> Iterator[tuple[int, str]]:
    """``(line number, text with its line ending)`` of a binary stream split at ``\\n`` only,
    decoded as UTF-8 (a BOM at the start is dropped). A text stream (no ``buffer``, e.g. a
    StringIO) is taken as it is.

    Raises:
        InputFileError: a line is not UTF-8 (names ``name`` and the line).
    """
    for lineno, raw in enumerate(stream, 1):
        if isinstance(raw, str):
            yield lineno, raw.removeprefix("\ufeff") if lineno == 1 else raw
            continue
        try:
            yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            utf16 = (" (it starts with a UTF-16 byte-order mark)"
                     if lineno == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "")
            raise InputFileError(f"{name} is not UTF-8 text{utf16}: line {lineno}, byte {exc.start + 1} of the "
                                 f"line: {exc.reason}; save it as UTF-8") from None


def _strip_eol(text: str) -> str:
    if text.endswith("\n"):
        text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
    return text


def _count_lines(path: str) -> int:
    """Lines of a text file: ``\\n`` count, plus one for a last line without ``\\n``."""
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


# ----------------------------------------------------------------------------- readers
def _iter_jsonl(stream: IO, name: str = "the input") -> Iterator[Record]:
    """Records of a JSONL stream (binary preferred: only ``\\n`` ends a line)."""
    index = 0
    for lineno, raw in enumerate(stream, 1):
        if isinstance(raw, bytes):  # a line whose bytes are not UTF-8 is an error record; the others are read
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                if lineno == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
                    raise InputFileError(f"{name} is not UTF-8 text (it starts with a UTF-16 byte-order mark); "
                                         "save it as UTF-8") from None
                if raw.strip():
                    yield Record(index, None, f"line {lineno} of the file is not UTF-8 text (byte {exc.start + 1}: "
                                 f"{exc.reason}); save the file as UTF-8")
                    index += 1
                continue
        else:
            line = raw.removeprefix("\ufeff") if lineno == 1 else raw
        if not line.strip():
            continue
        try:
            data = json.loads(line, strict=False)
        except json.JSONDecodeError as exc:
            yield Record(index, None, f"line {lineno} of the file is not valid JSON: {exc.msg} (column {exc.colno})")
        else:
            yield _checked(index, data, f"line {lineno} of the file: ")
        index += 1


def _iter_json(p: Path, path: str) -> Iterator[Record]:
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputFileError(f"{path} is not UTF-8 text: line {line}: {exc.reason}; save it as UTF-8") from None
    try:
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, list):
        raise InputFileError(f"{path} must hold a JSON list of records, got {type(data).__name__}")
    for i, item in enumerate(data):
        yield _checked(i, item, f"record {i} of the list: ")


def _raise_csv_field_limit() -> None:
    """csv's default limit is 131,072 characters per cell: a long transcript is more."""
    if csv.field_size_limit() < 2**31 - 1:
        csv.field_size_limit(2**31 - 1)


def _references_cell(cell: str) -> tuple[Any, str | None]:
    """A ``references`` cell: a JSON list of strings when it looks like one (``[...]``), else one text."""
    s = cell.strip()
    if not (s.startswith("[") and s.endswith("]")):
        return [cell], None
    try:
        value = json.loads(s, strict=False)
    except json.JSONDecodeError as exc:
        return None, (f"the 'references' cell looks like a JSON list but is not valid JSON ({exc.msg}, "
                      f"column {exc.colno})")
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        return None, "the 'references' cell looks like a JSON list but is not a list of strings"
    return value, None


def _iter_csv(p: Path, path: str, delimiter: str) -> Iterator[Record]:
    """Records of a CSV (``delimiter=","``) or TSV (``"\\t"``) file: a header row of field names,
    then one record per row (the semantics of ``csv.DictReader``, read with ``csv.reader`` so that
    each row's line and cell count are known)."""
    _raise_csv_field_limit()
    what = "TSV" if delimiter == "\t" else "CSV"
    with open(p, "rb") as fh:
        reader = csv.reader((text for _, text in _lines(fh, path)), delimiter=delimiter, strict=True)
        try:
            header = next(reader)
            while not header:  # blank lines before the header
                header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputFileError(f"{path}: the header row (line {reader.line_num}) is not valid {what}: "
                                 f"{exc}") from None
        names = [h.strip() for h in header]
        seen: set[str] = set()
        dups = sorted({n for n in names if n and (n in seen or seen.add(n))})
        if dups:
            raise InputFileError(f"{path}: the header row (line {reader.line_num}) names "
                                 f"{', '.join(repr(d) for d in dups)} more than once; field names must be unique")
        if not seen:
            raise InputFileError(f"{path}: the header row (line {reader.line_num}) holds no field names; the first "
                                 f"row of a .{what.lower()} file names the fields (target, source, references, ...)")
        index, prev = 0, reader.line_num
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                yield Record(index, None, f"line {prev + 1} of the file is not valid {what}: {exc}")
                index, prev = index + 1, reader.line_num
                continue
            start, prev = prev + 1, reader.line_num
            if not row:  # a blank line
                continue
            where = f"line {start} of the file"
            if len(row) > len(names) and any(c.strip() for c in row[len(names):]):
                yield Record(index, None, f"{where} is not valid {what}: it has {len(row)} cells, the header row "
                             f"{len(names)}")
                index += 1
                continue
            data: dict[str, Any] = {}
            problem = None
            for name, cell in zip(names, row):
                if not name or cell == "":  # an unnamed column; an empty cell is a missing field
                    continue
                if name == "references":
                    cell, problem = _references_cell(cell)
                    if problem:
                        break
                data[name] = cell
            if problem:
                yield Record(index, None, f"{where} is not valid {what}: {problem}; write one reference as plain "
                             'text, several as a JSON list ["a", "b"]')
            else:
                yield _checked(index, data, f"{where}: ")
            index += 1


def _iter_aligned(spec: AlignedInput) -> Iterator[Record]:
    files = spec.files()
    for role, path in files:
        if Path(path).is_dir():
            raise InputFileError(f"--{role} {path!r} is a folder; give a text file with one example per line")
        if not Path(path).is_file():
            raise InputFileError(f"--{role} file {path!r} does not exist")
    counts = [_count_lines(path) for _, path in files]
    if len(set(counts)) > 1:
        listed = ", ".join(f"--{role} {path} has {n} line{'s' if n != 1 else ''}"
                           for (role, path), n in zip(files, counts))
        raise InputFileError(f"the line-aligned input files differ in length: {listed}; each must hold one "
                             "example per line, the same number of lines")
    with ExitStack() as stack:
        streams = [_lines(stack.enter_context(open(path, "rb")), f"--{role} {path}") for role, path in files]
        for index, lines in enumerate(zip(*streams)):
            data: dict[str, Any] = {}
            for (role, _), (_, text) in zip(files, lines):
                text = _strip_eol(text)
                if role == "references":
                    data.setdefault("references", []).append(text)
                else:
                    data[_ALIGNED_FIELDS[role]] = text
            yield _checked(index, data, f"line {index + 1}: ")


def count_records(path: InputSpec) -> int | None:
    """Number of records in ``path``: non-blank lines for JSONL, lines for an
    :class:`AlignedInput`; None for stdin and the other forms (not counted without parsing).

    Raises:
        InputFileError: a JSONL line is not UTF-8.
        OSError: the file cannot be read.
    """
    path = _norm(path)
    if isinstance(path, AlignedInput):
        return _count_lines(path.targets)
    if path == "-":
        return None
    p = Path(path)
    if p.suffix.lower() == ".jsonl":
        with open(p, "rb") as fh:
            return sum(1 for _, line in _lines(fh, path) if line.strip())
    return None


def read_records(path: InputSpec) -> list[Any]:
    """All records of an input (see :func:`iter_records`).

    Raises:
        InputFileError: the input cannot be read, or a record cannot be used (not valid
            JSON/CSV, or it holds a UTF-16 surrogate; the message names the file, the record
            index and the field).
    """
    out = []
    for rec in iter_records(path):
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


def iter_records(path: InputSpec) -> Iterator[Record]:
    """Yield the records of an input, in order (a generator: errors are raised on the first
    ``next``).

    Args:
        path: an input spec (:data:`InputSpec`):

            - ``.jsonl`` (or ``-`` for standard input) is streamed: one JSON object per
              non-blank line; a line that is not valid JSON becomes a Record with ``error``
              set, and reading goes on.
            - ``.json`` must hold a list of objects (UniEval's reproduce files load as they are).
            - ``.csv`` / ``.tsv``: the first row names the fields; each further non-blank row
              is a record of its non-empty cells (an empty cell is a missing field; unnamed
              columns are ignored; cells quoted as Excel and Python's csv module write them).
              A ``references`` cell is one reference text, or several as a JSON list
              ``["a", "b"]``. A row that cannot be parsed (bad quoting, more cells than the
              header, a broken references list) is an error record naming its line.
            - an :class:`AlignedInput`: line i of every file is example i.

            In every form, a record holding a UTF-16 surrogate becomes an error record
            (module docstring), and only ``\\n`` ends a line.

    Raises:
        InputFileError: the file is missing, a folder, has another extension, is not UTF-8
            (file and line named), a ``.json`` file is not valid JSON or not a list, a CSV
            header row is unusable (duplicate or no names), or aligned files differ in line
            count (each named with its count).
    """
    path = _norm(path)
    if isinstance(path, AlignedInput):
        yield from _iter_aligned(path)
        return
    if path == "-":
        yield from _iter_jsonl(getattr(sys.stdin, "buffer", sys.stdin), "standard input")
        return
    p = Path(path)
    if p.is_dir():
        raise InputFileError(f"input {path!r} is a folder; give a .jsonl, .json, .csv or .tsv file")
    if not p.is_file():
        raise InputFileError(f"input file {path!r} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".jsonl":
        with open(p, "rb") as fh:
            yield from _iter_jsonl(fh, path)
    elif suffix == ".json":
        yield from _iter_json(p, path)
    elif suffix in (".csv", ".tsv"):
        yield from _iter_csv(p, path, "\t" if suffix == ".tsv" else ",")
    else:
        hint = (" (line-aligned text files: score --targets FILE [--sources FILE] [--references FILE] "
                "[--contexts FILE])" if suffix in (".txt", "") else "")
        raise InputFileError(f"input must be .jsonl, .json, .csv or .tsv (or - for JSONL on stdin), got "
                             f"{path!r}{hint}")


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
