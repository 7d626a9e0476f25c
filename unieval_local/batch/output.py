"""A batch run's output files: the JSONL (or, for an output named ``*.csv``, CSV:
:func:`csv_columns`, :func:`csv_rows`) written, flushed and fsynced per request
(:class:`OutputWriter`), read back with a torn last line repaired (:func:`read_output`), the
sidecar ``OUT.meta.json`` (run identity, input fingerprint, progress, counters) and atomic
rewrites; a failed write is an :class:`~unieval_local.errors.OutputWriteError` that says what to do."""

from __future__ import annotations

import csv
import errno
import io
import json
import logging
import os
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..atomic import replace_atomically
from ..errors import OutputOpenError, OutputWriteError, ResumeError
from ..locks import is_stream_path

__all__ = ["CSV_NO_RESUME", "HOSTED_NO_RESUME", "OutputWriter", "check_csv_output", "check_output", "count_csv_rows", "csv_columns",
           "csv_rows", "drop_duplicate_records", "errors_path", "is_csv_output", "read_output", "replace_atomically",
           "sidecar_path", "sort_by_index", "write_failed", "write_sidecar"]


def sidecar_path(output: str | os.PathLike) -> Path:
    """The sidecar of an output file: ``OUT.meta.json`` beside ``OUT``."""
    return Path(str(output) + ".meta.json")


def errors_path(output: str | os.PathLike) -> Path:
    """The errors file of an ``--output-format hosted`` output: ``OUT.errors.jsonl`` beside ``OUT``,
    holding the error line of each refused request (so every line of ``OUT`` is a result)."""
    return Path(str(output) + ".errors.jsonl")


#: why an output cannot be continued, as the write-failure advice and the interruption message say it
HOSTED_NO_RESUME = "--output-format hosted does not resume"
CSV_NO_RESUME = "a .csv output does not resume: write .jsonl for --resume"


def is_csv_output(output: str | os.PathLike | None) -> bool:
    """Whether a batch run writes ``output`` as CSV: its name ends in ``.csv`` (any case)."""
    return output is not None and Path(output).suffix.lower() == ".csv"


# ----------------------------------------------------------------------------- CSV output
def check_csv_output(output: str | os.PathLike | None, *, resume: bool, shard: tuple[int, int] | None,
                     hosted: bool) -> bool:
    """Whether a batch run writes ``output`` as CSV (:func:`is_csv_output`), after refusing what a
    CSV output does not take: ``--resume`` (a CSV is written once, not continued), ``--shard``
    (``merge`` joins JSONL shards) and ``--output-format hosted`` (JSON lines).

    Raises:
        ResumeError: ``resume`` with a CSV output.
        ValueError: ``shard`` or ``hosted`` with a CSV output.
    """
    if not is_csv_output(output):
        return False
    if resume:
        raise ResumeError(f"--resume continues a JSONL output, not {output} ({CSV_NO_RESUME})")
    if shard is not None:
        raise ValueError(f"--shard writes a part for merge, which joins JSONL outputs, not {output}: write "
                         "each shard to a .jsonl file")
    if hosted:
        raise ValueError(f"--output-format hosted writes JSON lines, not CSV: give an output that does not end in "
                         f".csv, not {output}")
    return True


def csv_columns(aspects: Sequence[str], *, fields: Any = (), evidence: bool = False) -> list[str]:
    """The header of a CSV output: ``index``, ``key``, ``doc_id`` and ``system_id`` where the
    input's ``fields`` (a mapping or set of field names; anything else: none) have them, one
    column per aspect (its score), ``aspect_mean`` (with more than one aspect, as in the JSONL),
    ``language``, ``error``, ``notes`` (why a record lacks an aspect's score: ``relevance skipped:
    no references``) and, with ``evidence``, ``evidence``.

    Example:
        >>> csv_columns(["coherence", "fluency"], fields={"target": 2, "system_id": 2})
        ['index', 'key', 'system_id', 'coherence', 'fluency', 'aspect_mean', 'language', 'error', 'notes']
    """
    meta = [f for f in ("doc_id", "system_id") if isinstance(fields, (Mapping, set, frozenset)) and f in fields]
    return ["index", "key", *meta, *aspects, *(["aspect_mean"] if len(aspects) > 1 else []), "language", "error",
            "notes", *(["evidence"] if evidence else [])]


def _cell(value) -> str | int | float:
    """One CSV cell: a string or number as it is (a float by ``repr``: it reads back to the same
    float), nothing for None, anything else (a list, an object) as JSON."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return json.dumps(value, ensure_ascii=False)


def csv_rows(lines: Sequence[dict], columns: Sequence[str], header: bool = False) -> str:
    """Output lines (the JSONL records: ``{index, key, [doc_id, system_id], scores, [aspect_mean],
    [language], [evidence]}`` or ``{index, key, ..., error: {type, message}}``) as CSV rows
    (``csv`` module, ``\\n`` line ends, fields quoted where needed) in ``columns``
    (:func:`csv_columns`): an aspect's column holds ``scores[aspect]`` (empty for an error
    record), ``error`` holds ``"<type>: <message>"`` (empty when scored), ``notes`` the line's
    notes joined by ``"; "``, ``evidence`` the line's evidence as one JSON object. ``header``: the
    column names first."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for line in lines:
        scores, error = line.get("scores") or {}, line.get("error")
        cells = {**{c: line.get(c) for c in columns}, **scores,
                 "error": f"{error['type']}: {error['message']}" if error else None,
                 "notes": "; ".join(line["notes"]) if line.get("notes") else None}
        writer.writerow([_cell(cells.get(c)) for c in columns])
    return buf.getvalue()


def count_csv_rows(path: str | os.PathLike) -> int:
    """The records in a CSV output (its rows after the header; a text with line breaks is one
    quoted cell): what an interrupted run counts, since the signal may come between a write and
    its bookkeeping.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        return max(sum(1 for _ in csv.reader(fh)) - 1, 0)


# ----------------------------------------------------------------------------- output files
def _write_advice(exc: OSError, resumable: bool, no_resume: str = HOSTED_NO_RESUME) -> str:
    """What to do after a failed write of a run's file: free space, or raise the file-size limit."""
    if exc.errno == errno.EFBIG:
        fix = "raise the file-size limit (ulimit -f) or write to another file system"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = "make the output's folder writable"
    else:
        fix = "free space"
    return (f"{fix} and rerun with --resume" if resumable else
            f"{fix} and score the records after them in a new run ({no_resume})")


def write_failed(what: str | os.PathLike, exc: OSError, resumable: bool = True,
                 no_resume: str = HOSTED_NO_RESUME) -> "OutputWriteError":
    """The :class:`OutputWriteError` for a failed write of ``what`` (the output, its sidecar ...);
    ``no_resume``: why the output cannot be resumed, when not ``resumable``."""
    return OutputWriteError(exc.errno, f"writing {what} failed: {exc.strerror or exc}; the records written before "
                            f"are intact; {_write_advice(exc, resumable, no_resume)}")


def read_output(path: str | os.PathLike, repair: bool = False) -> tuple[list[dict], bool]:
    """Records of an output JSONL, and whether its last line was torn (cut by a kill).

    Args:
        path: the output file (a missing one has no records).
        repair: remove a torn last line from the file (it is rewritten when that record is
            scored again).

    Returns:
        ``(records, torn)``: the parsed lines in file order, and whether the last line was torn.

    Raises:
        ResumeError: a line before the last one is not JSON (not an unieval-local output).
        OutputWriteError: ``repair`` and the truncation failed (the file is unchanged).
        OSError: the file cannot be read.
    """
    p = Path(path)
    if not p.exists():
        return [], False
    data = p.read_bytes()
    good_end = data.rfind(b"\n") + 1
    torn = good_end < len(data)
    lines = []
    for lineno, raw in enumerate(data[:good_end].split(b"\n"), 1):
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError as exc:
                raise ResumeError(f"{p} is damaged: line {lineno} is not one JSON record ({exc.msg} at column "
                                  f"{exc.colno}; two lines written into one?); only a torn LAST line can be repaired: "
                                  "remove or fix that line, or write to a new output") from None
    if torn and repair:
        try:
            with open(p, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise write_failed(p, exc) from exc
    return lines, torn


def _json_lines(lines: Sequence[dict], encoding: str | None) -> str:
    """``lines`` as JSON lines, not ASCII-escaped, unless some text cannot be encoded in
    ``encoding`` (a UTF-16 surrogate, which the input readers already turn into error records;
    a non-UTF-8 stdout): then ASCII-escaped (``\\ud83d``: the same JSON values), with a
    warning. The output writer's last line of defence: it never raises UnicodeEncodeError."""
    text = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    if encoding:
        try:
            text.encode(encoding)
        except UnicodeEncodeError as exc:
            logging.getLogger("unieval_local").warning(
                "some output text cannot be encoded as %s (%s); this request's lines are written ASCII-escaped",
                encoding, exc.reason)
            return "".join(json.dumps(x) + "\n" for x in lines)
        except LookupError:
            pass
    return text


class OutputWriter:
    """Appends JSON lines: each :meth:`write` reaches the operating system at once (a killed
    process loses nothing written), and the file is fsynced at most once a second
    (``sync_seconds``) and when it is closed (a batch run writes each record as soon as it is
    scored: an fsync per record would cost more than the record on a fast GPU).

    Text the output cannot encode (a UTF-16 surrogate; a non-UTF-8 stdout) is written
    ASCII-escaped rather than failing with UnicodeEncodeError (:func:`_json_lines`).

    A file is written unbuffered (each request's lines in as few ``write`` calls as the OS
    takes), so a failed write leaves nothing pending: the lines written before are intact and
    at most the last one is torn (``--resume`` repairs it).

    Args:
        path: the output file (None: ``stream``, default stdout).
        stream: where to write without ``path``.
        resumable: whether the output can be continued with ``--resume`` (the write error's
            advice; False for ``--output-format hosted`` and CSV).
        sync_seconds: the most seconds between a write and its fsync (0: fsync after every write).
        csv_columns: write CSV rows in these columns (:func:`csv_rows`; the header first) instead
            of JSON lines.
        no_resume: why the output does not resume (the write error's advice, when not ``resumable``).

    Raises:
        OutputOpenError: the output cannot be opened (missing folder, permission).
        OutputWriteError: on any write failure (:meth:`write`, :meth:`close`); earlier lines
            stay intact.
    """

    def __init__(self, path: str | os.PathLike | None, stream: TextIO | None = None, resumable: bool = True,
                 sync_seconds: float = 1.0, *, csv_columns: Sequence[str] | None = None,
                 no_resume: str = HOSTED_NO_RESUME):
        self.path = Path(path) if path else None
        self.resumable = resumable
        self.no_resume = no_resume
        self.csv_columns = list(csv_columns) if csv_columns is not None else None
        self.sync_seconds = sync_seconds
        self._synced = time.monotonic()
        self._dirty = False
        try:
            self._fh = open(self.path, "ab", buffering=0) if self.path else (stream or sys.stdout)
        except OSError as exc:
            raise OutputOpenError(exc.errno, f"cannot write the output {str(path)!r}: {exc.strerror or exc}") from exc
        # fsync is for files (a device such as /dev/null refuses it with EINVAL)
        self._sync = self.path is not None and stat.S_ISREG(os.fstat(self._fh.fileno()).st_mode)
        if self.csv_columns is not None:
            self._put(csv_rows([], self.csv_columns, header=True))

    def write(self, lines: Sequence[dict]) -> None:
        """Append ``lines`` (one JSON object each), then flush (and fsync when the last fsync is
        ``sync_seconds`` old).

        Args:
            lines: JSON-ready dicts.

        Raises:
            OutputWriteError: the write, flush or fsync failed (disk full, file-size limit ...).
        """
        if self.csv_columns is not None:
            self._put(csv_rows(lines, self.csv_columns))
        else:
            self._put(_json_lines(lines, "utf-8" if self.path else getattr(self._fh, "encoding", None)))

    def _put(self, text: str) -> None:
        """Write ``text`` unbuffered (to a file: as UTF-8, a lone surrogate ``\\ud83d``-escaped),
        flush, fsync when due.

        Raises:
            OutputWriteError: the write, flush or fsync failed.
        """
        try:
            if self.path is None:
                self._fh.write(text)
                self._fh.flush()
                return
            view = memoryview(text.encode("utf-8", "backslashreplace"))
            while view:
                n = self._fh.write(view)
                if not n:
                    raise OSError(errno.EIO, "the write made no progress")
                view = view[n:]
            self._dirty = True
            if self._sync and time.monotonic() - self._synced >= self.sync_seconds:
                self.sync()
        except OSError as exc:
            raise write_failed(self.path or "stdout", exc, self.resumable, self.no_resume) from exc

    def sync(self) -> None:
        """fsync what was written (a file; nothing for a stream or device).

        Raises:
            OSError: the fsync failed.
        """
        if self._sync and self._dirty:
            os.fsync(self._fh.fileno())
            self._dirty = False
        self._synced = time.monotonic()

    def close(self) -> None:
        """fsync and close the file (a stream is left open).

        Raises:
            OutputWriteError: the fsync or closing failed (nothing is pending: writes are unbuffered).
        """
        if self.path and not self._fh.closed:
            try:
                self.sync()
                self._fh.close()
            except OSError as exc:
                raise write_failed(self.path, exc, self.resumable, self.no_resume) from exc


def write_sidecar(output: Path, meta: dict) -> None:
    """Replace ``OUT.meta.json`` atomically with ``meta`` (a temporary file beside it, fsynced,
    then renamed).

    Args:
        output: the output file whose sidecar it is.
        meta: the sidecar's content (JSON-ready).

    Raises:
        OutputWriteError: the write failed (disk full, file-size limit ...); the previous
            sidecar is intact.
    """
    target = sidecar_path(output)
    try:
        replace_atomically(target, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise write_failed(target, exc) from exc


def drop_duplicate_records(path: Path) -> tuple[list[dict], int]:
    """Keep the first line of each record index in ``path`` and drop the later ones, rewriting
    the file atomically (a temporary file beside it, fsynced, then ``os.replace``); the lines
    kept are byte for byte the ones that were there.

    Args:
        path: an output without a torn last line (:func:`read_output` repaired it).

    Returns:
        ``(records kept, in file order, lines dropped)``.

    Raises:
        OutputWriteError: the rewrite failed (the file is unchanged).
    """
    keep, records, seen, dropped = [], [], set(), 0
    for raw in path.read_bytes().splitlines(keepends=True):
        if not raw.strip():
            continue
        rec = json.loads(raw)
        if rec["index"] in seen:
            dropped += 1
            continue
        seen.add(rec["index"])
        keep.append(raw)
        records.append(rec)
    try:
        replace_atomically(path, b"".join(keep))
    except OSError as exc:
        raise write_failed(path, exc) from exc
    return records, dropped


def sort_by_index(path: Path) -> bool:
    """Put a finished output's lines in input order (by ``index``) when they are not: an
    interrupted run writes every record that was complete, some after a gap, and ``--resume``
    appends the gap's records at the end. The lines are kept byte for byte; the file is replaced
    atomically. True when it was rewritten.

    Raises:
        OutputWriteError: the rewrite failed (the file is unchanged).
    """
    lines = [raw for raw in path.read_bytes().splitlines(keepends=True) if raw.strip()]
    indices = [json.loads(raw)["index"] for raw in lines]
    if all(a < b for a, b in zip(indices, indices[1:])):
        return False
    order = sorted(range(len(lines)), key=lambda k: indices[k])
    try:
        replace_atomically(path, b"".join(lines[k] for k in order))
    except OSError as exc:
        raise write_failed(path, exc) from exc
    return True


def check_output(output: str | os.PathLike | None, *, hosted: bool, resume: bool, input_path: Any,
                  csv_out: bool = False) -> None:
    """Refuse what cannot be written or resumed, before anything is read (and before any
    checkpoint is looked up: these exit 2 even where the checkpoint is missing).

    Raises:
        ResumeError: an output (a regular file, not empty) that exists without ``resume`` (or
            at all, hosted or CSV); ``resume`` without an output, or from stdin.
    """
    regular = output is not None and not is_stream_path(Path(output))
    output = Path(output) if output is not None else None
    if regular and csv_out and output.exists() and output.stat().st_size > 0:
        raise ResumeError(f"{output} already exists; remove it or write to a new output ({CSV_NO_RESUME})")
    if (regular and not hosted and not resume and Path(output).exists() and Path(output).stat().st_size > 0):
        raise ResumeError(f"{output} already exists; pass --resume to continue it, or remove it")
    for path in ((output, errors_path(output)) if hosted and regular else ()):
        if path.exists() and path.stat().st_size > 0:
            raise ResumeError(f"{path} already exists; remove it or write to a new output (--output-format hosted "
                              "does not resume)")
    if resume and output is None:
        raise ResumeError("--resume needs --output")
    if resume and input_path == "-":
        raise ResumeError("--resume cannot check an input read from stdin; give the file")
