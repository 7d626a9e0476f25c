"""Offline batch runs that never lose work: the one pipeline behind ``unieval-local score``.

Input records are streamed (JSONL) and sent in requests of at most 250; after each
request the output records are appended to OUT, flushed and fsynced, and a sidecar
``OUT.meta.json`` records the run signature, the input fingerprint and the progress.

- ``resume=True`` skips records whose key is already in OUT, repairs a torn last line
  left by a kill, and refuses to go on when the signature or the input differ.
- ``shard=(K, N)`` keeps the records whose key hashes to K modulo N, so N array jobs
  cover the input exactly once; :func:`merge_outputs` joins and checks them.
- ``engine`` names a batch engine of :data:`BATCH_ENGINES`: ``local`` (this process)
  or ``ray`` (one Ray Data pipeline over the whole run: a pool of actors, each loading
  the model once); the driver still reads the input and writes OUT itself, so resume,
  error records and repair are this same code.
- ``output_format="hosted"`` writes one line per request instead of one per record, in
  the hosted UniEval metric's result schema (:func:`hosted_line`), for one aspect; the
  requests are scored by the same code. Such an output has no sidecar and no resume.

Keys: the record's ``id`` when present, else its 0-based record index in INPUT.

INPUT is any input spec of :mod:`unieval_local.records` (``.jsonl``, ``.json``, ``.csv``,
``.tsv``, ``-`` for JSONL on stdin, or line-aligned text files, :class:`~unieval_local.records.AlignedInput`);
its fingerprint for ``--resume`` and ``merge`` is :func:`~unieval_local.records.input_fingerprint`.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import stat
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from .config import MAX_EXAMPLES_PER_REQUEST
from .engine import Engine, RunStats, jobs_by_checkpoint
from .errors import (CheckpointError, CheckpointNotFoundError, ExampleProblem, ModelRuntimeError, Terminated,
                     UniEvalError)
from .hashing import sha256_text
from .progress import LogLines
from .validate import input_hint_counts, input_hint_message, validate_examples
from .records import (AlignedInput, InputFileError, InputSpec, Record, input_fingerprint, iter_records,
                      record_error_type, write_jsonl)


class ResumeError(ValueError, UniEvalError):
    """``--resume`` was refused: the output belongs to another run, or cannot be resumed."""


class OutputWriteError(OSError, UniEvalError):
    """Writing the output failed (e.g. disk full); what was written before is intact."""


class MergeError(ValueError, UniEvalError):
    """Shard outputs do not cover the input exactly once, or belong to different runs."""


def sidecar_path(output: str | os.PathLike) -> Path:
    """The sidecar of an output file: ``OUT.meta.json`` beside ``OUT``."""
    return Path(str(output) + ".meta.json")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"K/N"`` -> ``(K, N)`` with ``0 <= K < N``.

    Raises:
        ValueError: not of that form.
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise ValueError(f"--shard must be K/N with 0 <= K < N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def shard_of(key: Any, n: int) -> int:
    """The shard (0..n-1) of a record key: SHA-256 of ``str(key)`` modulo ``n`` (deterministic)."""
    return int(sha256_text(str(key))[:16], 16) % n


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def comparable_run(run: dict) -> dict:
    """A run identity without how the checkpoint's folder was spelled: ``signature.checkpoint``
    is a path for a folder without a hub id (``out/tck`` vs ``/abs/out/tck``, or a copy staged on
    another node), while ``checkpoint_fingerprints`` (the content) decides whether it is the same
    checkpoint (the same content under a hub id or a folder is the same model)."""
    out = json.loads(json.dumps(run))
    if out.get("checkpoint_fingerprints"):
        (out.get("signature") or {}).pop("checkpoint", None)
    return out


def run_differences(old: dict, new: dict) -> list[str]:
    """What differs between two run identities (a sidecar's ``run`` and this run's), one
    ``key: old -> new`` per setting, e.g. ``config.window_overlap: 1 -> 2``; [] when equal."""
    a, b = _flatten(old), _flatten(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _error(message: str, kind: str) -> dict[str, str]:
    return {"type": kind, "message": message}


#: Output formats of a batch run (``--output-format``): one line per record (``records``,
#: the default) or one line per request in the hosted metric's schema (``hosted``).
OUTPUT_FORMATS: tuple[str, ...] = ("records", "hosted")


@dataclass
class ChunkResult:
    """One request's output lines (in record order) and its engine counters.

    Attributes:
        lines: one output record per input record (see :func:`score_records`).
        stats: the engine counters of the request.
        reasons: per line, ``"<field>: <message>"`` when it is an error record (the
            hosted form's ``error``, :func:`hosted_line`), else None.
    """

    lines: list[dict[str, Any]]
    stats: RunStats = field(default_factory=RunStats)
    reasons: list[str | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the Ray engine sends results between processes)."""
        return {"lines": self.lines, "stats": self.stats.to_dict(), "reasons": self.reasons}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ChunkResult":
        """The inverse of :meth:`to_dict`."""
        return cls(list(d["lines"]), RunStats.from_dict(d["stats"]), list(d.get("reasons") or []))


def score_records(engine: Engine, chunk: Sequence[Record], task: str, aspects: Sequence[str],
                  evidence: bool = False, on_batch: Callable[[int, int], None] | None = None) -> ChunkResult:
    """Score one request of records; bad rows become error records, the others are scored.

    Args:
        engine: the :class:`~unieval_local.engine.Engine` (its registry knows ``task``).
        chunk: the request's records.
        task, aspects: what to score.
        evidence: add each scored record's evidence.
        on_batch: progress callback of :meth:`Engine.run <unieval_local.engine.Engine.run>`.

    Returns:
        :class:`ChunkResult`: one output dict per record, in order: ``{index, key, [doc_id,
        system_id], scores, [aspect_mean], [evidence]}`` or ``{index, key, ..., error: {type,
        message}}``, the pass's :class:`~unieval_local.engine.RunStats` (input hints included),
        and per record the ``"<field>: <message>"`` of its error (None when scored).
    """
    registry = engine.registry
    resolved = [registry.get_aspect(task, a) for a in aspects]
    examples, problems = validate_examples([r.data if r.error is None else None for r in chunk], resolved)
    hints = input_hint_counts(examples, resolved)
    results, stats = engine.run(jobs_by_checkpoint(resolved, examples), evidence=evidence, on_batch=on_batch)
    stats.hints = hints
    values = {a: v for r in results.values() for a, v in r.values.items()}
    ev = {a: v for r in results.values() for a, v in r.evidence.items()}
    errors: dict[int, list[ExampleProblem]] = defaultdict(list)
    for p in problems + [p for r in results.values() for p in r.problems]:
        errors[p.index].append(p)
    lines, reasons = [], []
    for i, rec in enumerate(chunk):
        line: dict[str, Any] = {"index": rec.index, "key": rec.key}
        reason = None
        if isinstance(rec.data, dict):
            for meta in ("doc_id", "system_id"):
                if meta in rec.data:
                    line[meta] = rec.data[meta]
        if rec.error is not None:
            duplicate = rec.error.startswith("duplicate id")
            line["error"] = _error(rec.error, "DuplicateKey" if duplicate else record_error_type(rec.error))
            reason = f"{'id' if duplicate else 'record'}: {rec.error}"
        elif i in errors:
            line["error"] = _error("; ".join(p.describe() for p in errors[i]), "InvalidExample")
            reason = "; ".join(f"{p.field}: {p.message}" for p in errors[i])
        else:
            row = {a: float(values[a][i]) for a in aspects}
            bad = [a for a, v in row.items() if not np.isfinite(v)]
            if bad:
                message = f"the model gave non-finite logits for {', '.join(bad)}"
                line["error"] = _error(message, "NonFiniteScore")
                reason = f"value: {message}"
            else:
                line["scores"] = row
                if len(aspects) > 1:
                    line["aspect_mean"] = float(np.mean(list(row.values())))
                if evidence:
                    line["evidence"] = {a: ev[a][i].model_dump(exclude_none=True) for a in aspects}
        lines.append(line)
        reasons.append(reason)
    return ChunkResult(lines, stats, reasons)


def hosted_line(result: ChunkResult, aspect: str) -> dict[str, Any]:
    """One request's answer in the hosted UniEval metric's schema (``--output-format hosted``).

    The hosted metric answers a request whole or not at all: its result is
    ``{"overall": {"value": number}, "examples": [{"value": number}, ...]}`` and validates
    against its JSON Schema, every value a number. So a request holding an example that cannot
    be scored is answered by ONE request-level error line naming every bad example and field,
    as the hosted metric (and ``score()``, with :class:`~unieval_local.errors.InvalidExampleError`)
    refuses such a request; never by examples with ``value: null``.

    Args:
        result: the request's :class:`ChunkResult` (from :func:`score_records`).
        aspect: the one aspect scored.

    Returns:
        ``{"overall": {"value": mean}, "examples": [{"value": v}, ...]}``, one example per
        record of the request in input order; or, when any record failed,
        ``{"error": {"type": "InvalidRequest", "message", "n_examples", "examples": [{"index",
        "record", "key", "field", "message"}]}}`` (``n_examples``: the request's size; ``examples``:
        the bad ones) with ``index`` the example's position in the request,
        ``record`` its index in the input, ``field`` the field at fault (``record`` for a line
        that is not JSON, ``id`` for a repeated id, ``value`` for a non-finite score).
    """
    examples: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for i, line in enumerate(result.lines):
        if "scores" in line:
            examples.append({"value": float(line["scores"][aspect])})
            continue
        reason = (result.reasons[i] if i < len(result.reasons) else None) or f"record: {line['error']['message']}"
        field, _, message = reason.partition(": ")
        bad.append({"index": i, "record": line["index"], "key": line["key"], "field": field, "message": message})
    if bad:
        return {"error": {"type": "InvalidRequest",
                          "message": f"{len(bad)} of {len(result.lines)} examples of this request cannot be scored, "
                                     "so the request is not answered (as the hosted metric answers a request whole "
                                     "or not at all); fix them, or use --output-format records to keep the others' "
                                     "scores",
                          "n_examples": len(result.lines), "examples": bad}}
    values = [e["value"] for e in examples]
    return {"overall": {"value": float(np.mean(values))}, "examples": examples}


# ----------------------------------------------------------------------------- output files
def _write_advice(exc: OSError, resumable: bool) -> str:
    """What to do after a failed write of a run's file: free space, or raise the file-size limit."""
    if exc.errno == errno.EFBIG:
        fix = "raise the file-size limit (ulimit -f) or write to another file system"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = "make the output's folder writable"
    else:
        fix = "free space"
    return (f"{fix} and rerun with --resume" if resumable else
            f"{fix} and score the records after them in a new run (--output-format hosted does not resume)")


def _write_failed(what: str | os.PathLike, exc: OSError, resumable: bool = True) -> "OutputWriteError":
    """The :class:`OutputWriteError` for a failed write of ``what`` (the output, its sidecar ...)."""
    return OutputWriteError(exc.errno, f"writing {what} failed: {exc.strerror or exc}; the records written before "
                            f"are intact; {_write_advice(exc, resumable)}")


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (fsynced, then ``os.replace``),
    keeping ``path``'s permission bits when it exists.

    Raises:
        OSError: the temporary file cannot be written or renamed (``path`` is unchanged; the
            temporary file is removed).
    """
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


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
            raise _write_failed(p, exc) from exc
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
    """Appends JSON lines; flushes and fsyncs after each request.

    Text the output cannot encode (a UTF-16 surrogate; a non-UTF-8 stdout) is written
    ASCII-escaped rather than failing with UnicodeEncodeError (:func:`_json_lines`).

    A file is written unbuffered (each request's lines in as few ``write`` calls as the OS
    takes), so a failed write leaves nothing pending: the lines written before are intact and
    at most the last one is torn (``--resume`` repairs it).

    Args:
        path: the output file (None: ``stream``, default stdout).
        stream: where to write without ``path``.
        resumable: whether the output can be continued with ``--resume`` (the write error's
            advice; False for ``--output-format hosted``).

    Raises:
        InputFileError: the output cannot be opened (missing folder, permission).
        OutputWriteError: on any write failure (:meth:`write`, :meth:`close`); earlier lines
            stay intact.
    """

    def __init__(self, path: str | os.PathLike | None, stream: TextIO | None = None, resumable: bool = True):
        self.path = Path(path) if path else None
        self.resumable = resumable
        try:
            self._fh = open(self.path, "ab", buffering=0) if self.path else (stream or sys.stdout)
        except OSError as exc:
            raise InputFileError(f"cannot write the output {str(path)!r}: {exc.strerror or exc}") from exc
        # fsync is for files (a device such as /dev/null refuses it with EINVAL)
        self._sync = self.path is not None and stat.S_ISREG(os.fstat(self._fh.fileno()).st_mode)

    def write(self, lines: Sequence[dict]) -> None:
        """Append ``lines`` (one JSON object each), then flush and fsync.

        Args:
            lines: JSON-ready dicts.

        Raises:
            OutputWriteError: the write, flush or fsync failed (disk full, file-size limit ...).
        """
        text = _json_lines(lines, "utf-8" if self.path else getattr(self._fh, "encoding", None))
        try:
            if self.path is None:
                self._fh.write(text)
                self._fh.flush()
                return
            view = memoryview(text.encode("utf-8"))
            while view:
                n = self._fh.write(view)
                if not n:
                    raise OSError(errno.EIO, "the write made no progress")
                view = view[n:]
            if self._sync:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            raise _write_failed(self.path or "stdout", exc, self.resumable) from exc

    def close(self) -> None:
        """Close the file (a stream is left open).

        Raises:
            OutputWriteError: closing failed (nothing is pending: writes are unbuffered).
        """
        if self.path and not self._fh.closed:
            try:
                self._fh.close()
            except OSError as exc:
                raise _write_failed(self.path, exc, self.resumable) from exc


#: a stop (Ctrl-C, SIGTERM) asked for by the CLI's signal handlers (:func:`request_stop`).
#: The handler raises too, but an exception raised while a ``__del__`` runs (garbage
#: collection, e.g. in the regex module) is printed and lost, and the run would go on to
#: the end; so the run also checks for it after every forward batch and request.
_STOP: list[BaseException] = []


def request_stop(exc: BaseException) -> None:
    """Ask the running :func:`run_batch` to stop with ``exc`` (a ``KeyboardInterrupt`` or
    :class:`~unieval_local.errors.Terminated`) at its next forward batch or request; for
    signal handlers, which should also raise ``exc`` themselves."""
    _STOP[:] = [exc]


def _check_stop() -> None:
    if _STOP:
        raise _STOP[0]


def is_stream_path(path: Path) -> bool:
    """Whether ``-o path`` names a stream rather than a file of its own: an existing device
    or pipe (``/dev/null``, a FIFO), or anything under ``/dev/`` or ``/proc/`` (``/dev/stdout``
    is a regular file when stdout is redirected to one). Such an output is written like
    stdout: no sidecar beside it, no ``--resume``."""
    return path.exists() and (not path.is_file() or str(path.absolute()).startswith(("/dev/", "/proc/")))


def _write_sidecar(output: Path, meta: dict) -> None:
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
        _replace_atomically(target, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise _write_failed(target, exc) from exc


# ----------------------------------------------------------------------------- summary
@dataclass
class BatchSummary:
    """What a batch run did.

    Attributes:
        aspects: the aspects scored.
        n_records: output records (including earlier ones kept by ``--resume``).
        n_failed: error records among them.
        n_skipped: records skipped because OUT already had them (``--resume``).
        means: aspect -> mean over the scored records.
        per_system: system id -> aspect -> mean, when records have ``system_id``.
        stats: the engine counters of this run (:class:`~unieval_local.engine.RunStats`:
            distinct queries, those cut by max_length or shortened by fit, cache hits and
            misses, model loads, input hints).
        cached: whether a score cache was in use (the summary then reports its hits).
        cache_disabled: ``"<cache file>: <reason>"`` when the score cache failed and the run
            went on without it; None otherwise.
        signature: the run signature (one line).
        hint_message: one sentence about inputs lacking the endings the checkpoint was trained with.
        max_lengths: checkpoint name -> tokens per query it read (for the truncation message).
        skipped_aspects: with ``--aspect all``, the aspects left out because no record
            has their fields (aspect -> why).
        n_non_latin: targets mostly in non-Latin script (the evaluators are English-only).
        failures: ``(reason, keys)`` of the error records, most frequent reason first.
        hosted: with ``--output-format hosted``: ``(requests, refused requests, records in them)``;
            ``means``, ``counts`` and ``per_system`` are then over the answered requests' records
            only (a refused request's line holds no value for any of its records).
    """

    aspects: list[str]
    n_records: int = 0
    n_failed: int = 0
    n_skipped: int = 0
    means: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    per_system: dict[str, dict[str, float]] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    cached: bool = False
    cache_disabled: str | None = None
    signature: str | None = None
    seconds: float = 0.0
    hint_message: str | None = None
    max_lengths: dict[str, int] = field(default_factory=dict)
    skipped_aspects: dict[str, str] = field(default_factory=dict)
    n_non_latin: int = 0
    failures: list[tuple[str, list]] = field(default_factory=list)
    hosted: tuple[int, int, int] | None = None


def summarize(lines: Sequence[dict], aspects: Sequence[str]) -> BatchSummary:
    """Overall per aspect (mean over scored records) and per ``system_id``."""
    values: dict[str, list[float]] = {a: [] for a in aspects}
    systems: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    failed = 0
    for line in lines:
        if "scores" not in line:
            failed += 1
            continue
        for a in aspects:
            v = line["scores"].get(a)
            if v is not None:
                values[a].append(v)
                if "system_id" in line:
                    systems[str(line["system_id"])][a].append(v)
    s = BatchSummary(list(aspects), n_records=len(lines), n_failed=failed)
    reasons: dict[str, list] = defaultdict(list)
    for line in lines:
        if "error" in line:
            reasons[f"{line['error']['type']}: {line['error']['message']}"].append(line["key"])
    s.failures = sorted(((msg, keys) for msg, keys in reasons.items()), key=lambda x: -len(x[1]))
    s.means = {a: (float(np.mean(v)) if v else math.nan) for a, v in values.items()}
    s.counts = {a: len(v) for a, v in values.items()}
    s.per_system = {k: {a: float(np.mean(v)) for a, v in d.items()} for k, d in systems.items()}
    return s


def format_summary(s: BatchSummary) -> str:
    """The stderr table: counts, mean per aspect, per system, signature."""
    out = [f"\nscored {s.n_records - s.n_failed} of {s.n_records} records ({s.n_failed} failed)"
           + (f"; {s.n_skipped} of them were already in the output (resumed), {s.n_records - s.n_skipped} "
              "written by this run" if s.n_skipped else "")]
    if s.hosted:
        n_req, n_refused, n_in_refused = s.hosted
        out[0] = (f"\nhosted: {n_req - n_refused} of {n_req} requests answered ({s.n_records - n_in_refused} records "
                  f"with a value); {n_refused} refused ({n_in_refused} records, {s.n_failed} of them cannot be scored: "
                  "a refused request's line holds no value for any of its records)") if n_refused else \
            f"\nhosted: {n_req} requests answered ({s.n_records} records)"
        if n_refused:
            out.append("means over the answered requests' records:")
    width = max(len(a) for a in s.aspects) + 2
    out.append(f"{'aspect':<{width}}{'n':>7}  {'mean':>9}")
    for a in s.aspects:
        m = s.means.get(a, math.nan)
        out.append(f"{a:<{width}}{s.counts.get(a, 0):>7}  {'nan' if math.isnan(m) else f'{m:.6f}':>9}")
    if s.per_system:
        sys_w = max(len("system"), *(len(k) for k in s.per_system)) + 2
        out.append("\nper system (mean)")
        out.append(f"{'system':<{sys_w}}" + "".join(f"{a:>{max(len(a), 9) + 2}}" for a in s.aspects))
        natural = lambda k: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", k)]  # noqa: E731
        for k in sorted(s.per_system, key=natural):
            cells = []
            for a in s.aspects:
                m = s.per_system[k].get(a, math.nan)
                cells.append(f"{'nan' if math.isnan(m) else f'{m:.6f}':>{max(len(a), 9) + 2}}")
            out.append(f"{k:<{sys_w}}" + "".join(cells))
    if s.failures:
        out.append(f"\nfailed records by reason ({len(s.failures)} distinct):")
        for msg, keys in s.failures[:5]:
            shown = ", ".join(str(k) for k in keys[:5]) + (" ..." if len(keys) > 5 else "")
            out.append(f"  {len(keys)} record(s): {msg} (keys {shown})")
        if len(s.failures) > 5:
            out.append(f"  ... and {len(s.failures) - 5} more reasons ({sum(len(k) for _, k in s.failures[5:])} records)")
    if s.stats.n_queries:
        out.append(f"\nqueries: {s.stats.n_queries} distinct (each scored once), {s.stats.n_truncated} of them cut "
                   "by max_length" + (" (records kept from the earlier run not counted)" if s.n_skipped else ""))
    if s.cached:
        out.append(f"\nscore cache: {s.stats.cache_hits} queries reused, {s.stats.cache_misses} scored"
                   + (f"; disabled ({s.cache_disabled}): scored without it" if s.cache_disabled else ""))
    if s.signature:
        out.append(f"\nsignature: {s.signature}")
    return "\n".join(out)


# ----------------------------------------------------------------------------- batch engines
class BatchEngine(Protocol):
    """Where a batch run's requests are scored. Registered by name in :data:`BATCH_ENGINES`;
    each takes the run's :class:`~unieval_local.engine.Engine` and its own options."""

    name: str

    def check(self, checkpoints: Sequence[str]) -> None:
        """Fail early (before any output is written) when a checkpoint is unusable."""
        ...

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int, int], None] | None = None) -> Iterator[ChunkResult]:
        """One :class:`ChunkResult` per request, in order; ``on_batch(k, done, total)`` reports
        progress inside request ``k`` where the engine can."""
        ...

    def close(self) -> None:
        """Release what the engine holds (a Ray instance it started)."""
        ...


class LocalBatchEngine:
    """Scores requests in this process, one after the other, with the run's engine.

    Args:
        engine: the run's :class:`~unieval_local.engine.Engine`.
    """

    name = "local"

    def __init__(self, engine: Engine):
        self.engine = engine

    def check(self, checkpoints: Sequence[str]) -> None:
        """Load each checkpoint's runner now (this process uses them)."""
        for name in checkpoints:
            self.engine.runner(name)

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int, int], None] | None = None) -> Iterator[ChunkResult]:
        for k, chunk in enumerate(requests):
            cb = None if on_batch is None else (lambda done, total, k=k: on_batch(k, done, total))
            yield score_records(self.engine, chunk, task, aspects, evidence, on_batch=cb)

    def close(self) -> None:
        pass


class _RayScorerActor:
    """One Ray actor: one :class:`~unieval_local.engine.Engine` (its model loaded once, on the
    first request) scoring whole requests."""

    def __init__(self, settings: dict, task: str, aspects: list[str], evidence: bool):
        self.engine = Engine(**settings)
        self.task, self.aspects, self.evidence = task, aspects, evidence

    def __call__(self, batch: dict) -> dict:
        out = []
        for payload in batch["request"]:
            chunk = [Record(**r) for r in json.loads(payload)]
            out.append(json.dumps(score_records(self.engine, chunk, self.task, self.aspects, self.evidence).to_dict()))
        return {"rid": batch["rid"], "result": np.array(out, dtype=object)}


class RayBatchEngine:
    """Scores requests on ONE Ray Data pipeline for the whole run: ``map_batches`` over a
    pool of ``actors`` scorer actors, each building its own engine from the run's settings
    and loading the model once. Results stream back in request order
    (``preserve_order``); the driver loads no model (it only checks the checkpoint files).

    Args:
        engine: the run's engine (its ``settings`` build the actors' engines).
        actors: scorer actors (``--ray-actors``), >= 1.
        gpus_per_actor: GPUs per actor (``--gpus-per-actor``; 0 on CPU).
        address: an existing cluster (``--ray-address``); default a local Ray instance.

    Raises:
        MissingExtraError: Ray is not installed (the ``ray`` extra).
        ValueError: ``actors < 1`` or ``gpus_per_actor < 0``.
    """

    name = "ray"

    def __init__(self, engine: Engine, *, actors: int = 1, gpus_per_actor: float = 0.0, address: str | None = None):
        from .extras import MissingExtraError

        if not isinstance(actors, int) or actors < 1:
            raise ValueError(f"--ray-actors must be an integer >= 1, got {actors!r}")
        if gpus_per_actor < 0:
            raise ValueError(f"--gpus-per-actor must be >= 0, got {gpus_per_actor!r}")
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MissingExtraError("--engine ray needs Ray, not installed here: pip install 'unieval-local[ray]'"
                                    ) from exc
        self.engine, self.ray = engine, ray
        self.actors, self.gpus = actors, gpus_per_actor
        self._started = False
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(**kwargs)
            self._started = True
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False

    def check(self, checkpoints: Sequence[str]) -> None:
        """Resolve each checkpoint and open its weight files; no model is loaded here."""
        for name in checkpoints:
            self.engine.check_checkpoint(name)

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int, int], None] | None = None) -> Iterator[ChunkResult]:
        items = [{"rid": i, "request": json.dumps([{"index": r.index, "data": r.data, "error": r.error}
                                                   for r in chunk])}
                 for i, chunk in enumerate(requests)]
        if not items:
            return
        ds = self.ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            _RayScorerActor, batch_size=1, concurrency=self.actors, num_gpus=self.gpus or None,
            fn_constructor_kwargs={"settings": self.engine.settings, "task": task, "aspects": list(aspects),
                                   "evidence": evidence},
        )
        try:
            for row in ds.iter_rows():  # streamed in request order, one pipeline (one actor pool) for the run
                yield ChunkResult.from_dict(json.loads(row["result"]))
        except Exception as exc:  # an actor died or the model failed in it: Ray wraps the cause
            cause = getattr(exc, "cause", None) or exc
            if isinstance(cause, (CheckpointError, CheckpointNotFoundError, ModelRuntimeError)):
                raise type(cause)(str(cause)) from exc
            first = next((x.strip() for x in str(cause).splitlines() if x.strip()), type(cause).__name__)
            raise ModelRuntimeError(f"the Ray engine failed ({type(cause).__name__}: {first})") from exc

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


#: Batch engines by name (``--engine``): each is made as ``cls(engine, **options)``.
BATCH_ENGINES: dict[str, type] = {"local": LocalBatchEngine, "ray": RayBatchEngine}


def make_batch_engine(name: str, engine: Engine, options: Mapping[str, Any] | None = None) -> BatchEngine:
    """The batch engine ``name`` of :data:`BATCH_ENGINES` over ``engine``, with its ``options``.

    Raises:
        ValueError: unknown name (the valid ones are listed), or options it does not take.
    """
    if name not in BATCH_ENGINES:
        raise ValueError(f"engine must be one of {', '.join(BATCH_ENGINES)}, got {name!r}")
    try:
        return BATCH_ENGINES[name](engine, **dict(options or {}))
    except TypeError as exc:
        raise ValueError(f"engine {name!r}: {exc}") from None


# ----------------------------------------------------------------------------- before the run
class NothingToScoreError(ValueError, UniEvalError):
    """No record of the input can be scored for the asked aspects (checked before any model
    is loaded); the message names the fields the records have and the fix."""


class RunInterrupted(UniEvalError):
    """A batch run stopped early (Ctrl-C, or a runtime failure of the model): what was written
    is intact and ``--resume`` continues it.

    Attributes:
        cause: the ``KeyboardInterrupt`` (:class:`~unieval_local.errors.Terminated` for SIGTERM)
            or :class:`~unieval_local.errors.ModelRuntimeError`.
        written: output records in OUT (those kept from earlier runs included); with
            ``--output-format hosted``, the records of the request lines written.
        total: records to write in this run's shard (None when unknown, e.g. stdin).
        output: the output path (None for stdout).
        resumable: False for ``--output-format hosted`` (no ``--resume``: the records written
            are the first ``written`` of the input).
    """

    def __init__(self, cause: BaseException, written: int, total: int | None, output: Path | None,
                 resumable: bool = True):
        self.cause, self.written, self.total, self.output = cause, written, total, output
        self.resumable = resumable
        where = str(output) if output is not None else "stdout"
        of = f" of {total}" if total is not None else ""
        hint = "; rerun with --resume" if output is not None else ""
        if not resumable:
            hint = (f" (the first {written} records of the input); --output-format hosted does not resume: score "
                    "the others in a new run, or use --output-format records for batch runs")
        what = ("terminated (SIGTERM)" if isinstance(cause, Terminated) else "interrupted"
                if isinstance(cause, KeyboardInterrupt) else f"stopped: {cause}")
        super().__init__(f"{what}: {written}{of} records written to {where}{hint}")


@dataclass
class Survey:
    """What a first pass over the input found, before any model is loaded.

    Attributes:
        n_records: records in the input; ``n_in_shard`` of them in this run's shard.
        fields: field name -> records of the shard that have it (objects only).
        scorable: aspect -> records of the shard whose fields that aspect can use.
        n_non_latin: targets mostly in non-Latin script (the evaluators are English-only).
        n_unreadable: records of the shard that could not be read (invalid JSON or CSV, a
            UTF-16 surrogate); ``first_unreadable``: the first one's ``record N: <error>``.
    """

    n_records: int = 0
    n_in_shard: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    scorable: dict[str, int] = field(default_factory=dict)
    n_non_latin: int = 0
    n_unreadable: int = 0
    first_unreadable: str | None = None


def _registry(aspects_config: str | os.PathLike | None):
    """The built-in registry, with the aspects of ``aspects_config`` (a YAML file) when given
    (the same registry the run's :class:`~unieval_local.engine.Engine` builds).

    Raises:
        AspectsConfigError: an invalid aspects config (a ValueError).
    """
    from .tasks import DEFAULT_REGISTRY

    if aspects_config is None:
        return DEFAULT_REGISTRY
    from .aspects_config import load_aspects_config

    return DEFAULT_REGISTRY.with_aspects(load_aspects_config(aspects_config, DEFAULT_REGISTRY))


def survey_input(path: InputSpec, registry, task: str, aspects: Sequence[str],
                 shard: tuple[int, int] | None = None) -> Survey:
    """Parse every record of ``path`` once and count, per aspect, the records it can score
    (:func:`~unieval_local.validate.check_example`; sentence splitting is not run). Cheap: no model.

    Args:
        path: an input spec of :func:`~unieval_local.records.iter_records` (a file path, not
            ``-``: stdin cannot be read twice; or an :class:`~unieval_local.records.AlignedInput`).
        registry, task, aspects: what would be scored.
        shard: ``(K, N)``: count only the records of that shard.

    Returns:
        A :class:`Survey`. Records read with an error (invalid JSON/CSV, a UTF-16 surrogate)
        count in ``n_records`` / ``n_in_shard`` but have no fields and score nothing.

    Raises:
        InputFileError: the input cannot be read (:func:`~unieval_local.records.iter_records`).
    """
    from .validate import check_example, non_latin_share, parse_example

    resolved = {a: registry.get_aspect(task, a) for a in aspects}
    s = Survey(scorable={a: 0 for a in aspects})
    fields: dict[str, int] = defaultdict(int)
    for rec in iter_records(path):
        s.n_records += 1
        if shard is not None and shard_of(rec.key, shard[1]) != shard[0]:
            continue
        s.n_in_shard += 1
        if rec.error is not None:
            s.n_unreadable += 1
            s.first_unreadable = s.first_unreadable or f"record {rec.index}: {rec.error}"
            continue
        if not isinstance(rec.data, dict):
            continue
        for k, v in rec.data.items():
            if v is not None:
                fields[k] += 1
        ex, problems = parse_example(rec.index, rec.data)
        if ex is None:
            continue
        for a, asp in resolved.items():
            if not check_example(rec.index, ex, [asp]):
                s.scorable[a] += 1
        if non_latin_share(ex.target) > 0.5:
            s.n_non_latin += 1
    s.fields = dict(fields)
    return s


def nothing_to_score_message(survey: Survey, registry, task: str, aspects: Sequence[str], path: InputSpec) -> str:
    """One line: no record of ``path`` can be scored for ``aspects``; the fields found, what each
    aspect needs, the renames that would help (:data:`~unieval_local.validate.FIELD_ALIASES`),
    the aspects that could run, and how many records could not be read (with the first one's
    error)."""
    from .validate import FIELD_ALIASES

    found = ", ".join(sorted(survey.fields)) or "none"
    needs = "; ".join(f"{a} needs {', '.join(registry.get_aspect(task, a).required_fields)}" for a in aspects)
    renames = [f"'{k}' to '{FIELD_ALIASES[k.lower()]}'" for k in sorted(survey.fields)
               if k.lower() in FIELD_ALIASES and FIELD_ALIASES[k.lower()] not in survey.fields]
    fix = f" Did you mean: rename {', '.join(renames)}?" if renames else ""
    can = [a for a in registry.get_task(task).aspects if a not in aspects and survey.scorable.get(a, 0) > 0]
    if can:
        fix += " These aspects can run on these records: " + " ".join(f"--aspect {a}" for a in can) + "."
    if survey.n_unreadable:
        fix += (f" {survey.n_unreadable} of the {survey.n_in_shard} records could not be read (first: "
                f"{survey.first_unreadable}).")
    return (f"no record of {path} can be scored for {', '.join(aspects)} ({survey.n_in_shard} records): the records "
            f"have fields {found}; {needs}.{fix}")


class Progress:
    """Records done: a tqdm bar on a terminal, else a log line every ``every`` seconds
    (SLURM logs), through the ``unieval_local`` logger.

    Args:
        total: records this run will end with (None when unknown).
        initial: records already done (kept by ``--resume``).
        enabled: ``None`` (bar on a terminal, log lines otherwise), True (always a bar)
            or False (nothing).
        every: seconds between log lines when stderr is not a terminal.
    """

    def __init__(self, total: int | None, initial: int = 0, enabled: bool | None = None,
                 every: float | None = None):
        from tqdm.auto import tqdm

        self.done = float(initial)
        tty = sys.stderr.isatty()
        self.bar = None
        self.lines = LogLines("records", total, initial, every) if enabled is None and not tty else None
        if enabled or (enabled is None and tty):
            self.bar = tqdm(total=total, initial=initial, desc="records", unit="rec", dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")

    def set(self, done: float) -> None:
        """Move to ``done`` records (fractions allowed: progress within a request)."""
        done = max(done, self.done)
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done = done
        if self.lines is not None:
            self.lines.set(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------------- the run
def _holding_output_lock(run: Callable[..., BatchSummary]) -> Callable[..., BatchSummary]:
    """Make ``run(input, output, **kwargs)`` hold ``output``'s lock
    (:func:`~unieval_local.locks.output_lock`) for its whole life: taken before anything
    else (before any model load), released when it returns or raises. No lock for stdout
    (``None``, ``"-"``), devices and pipes.

    The wrapped function raises, besides its own errors, :class:`~unieval_local.locks.OutputLockedError`
    (another process writes ``output``) and :class:`~unieval_local.locks.LockFileError`
    (the lock file cannot be created).
    """
    import functools

    @functools.wraps(run)
    def locked(input, output=None, **kwargs):
        from .locks import output_lock

        with output_lock(output):
            return run(input, output, **kwargs)

    return locked


@_holding_output_lock
def run_batch(
    input: InputSpec,
    output: str | os.PathLike | None = None,
    *,
    task: str = "summarization",
    aspects: Sequence[str] | str | None = None,
    settings: Mapping[str, Any] | None = None,
    resume: bool = False,
    shard: tuple[int, int] | str | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    evidence: bool = False,
    progress: bool | None = None,
    stream: TextIO | None = None,
    output_format: str = "records",
) -> BatchSummary:
    """Score every record of ``input`` and write one output line per record (the CLI's ``score``).

    Args:
        input: an input spec (:func:`~unieval_local.records.iter_records`): ``.jsonl``
            (streamed; ``-`` = stdin), a ``.json`` list, ``.csv`` / ``.tsv`` (a header row), or an
            :class:`~unieval_local.records.AlignedInput` of line-aligned text files. Records
            that cannot be read (not valid JSON/CSV, text holding a UTF-16 surrogate) become
            error records; the others are scored. The sidecar records its
            :func:`~unieval_local.records.input_fingerprint`.
        output: the output JSONL; ``None`` (or ``"-"``) writes to ``stream`` (stdout),
            without sidecar or resume.
        task, aspects: what to score. ``"all"``: every aspect of the task that some record can
            be scored for; ``None``: every aspect that all the records can be scored for that
            any aspect can (as UniEval's ``evaluate`` scores every dimension, without one
            aspect's missing field turning a record into an error line; the others are named in
            ``summary.skipped_aspects``); for stdin, which is read once, both mean the aspects
            the first record has the fields for.
        settings: keyword arguments of :class:`~unieval_local.engine.Engine` (the same as
            :class:`~unieval_local.Scorer`'s: model, device, dtype, max_length ...).
        resume: keep the records already in ``output`` and score the rest.
        shard: ``(K, N)`` or ``"K/N"``: only the records whose key hashes to K.
        engine: a batch engine of :data:`BATCH_ENGINES` (``local`` or ``ray``).
        engine_options: that engine's options (``ray``: ``actors``, ``gpus_per_actor``, ``address``).
        evidence: add evidence to each output line.
        progress: progress bar on a terminal, log lines every 30 s otherwise (``None``);
            True always a bar; False nothing.
        stream: where to write when ``output`` is None (default stdout).
        output_format: ``records`` (default: one line per record, as above) or ``hosted``:
            one line per request of at most 250 records, as the hosted UniEval metric answers
            it (:func:`hosted_line`), written and flushed as each request finishes. ``hosted``
            needs exactly one aspect, named (``aspects`` not None nor expanding to several),
            and takes no ``resume``, ``shard``, ``evidence`` nor engine other than ``local``;
            it writes no sidecar and never appends to an existing ``output``.

    Returns:
        A :class:`BatchSummary` over every record in the output (per record, in both formats).

    Raises:
        InputFileError, ValueError: unreadable input (missing, not UTF-8, unknown extension,
            aligned files of different line counts, an unusable CSV header), bad options,
            unknown aspects, an option ``output_format="hosted"`` does not take (the message
            names the flag).
        NothingToScoreError: no record can be scored for the aspects (a ValueError; before
            any model is loaded).
        ResumeError: the output exists without ``resume`` (or at all, with ``hosted``), or
            belongs to another run (signature or input fingerprint differ; for aligned files
            the changed ones are named).
        OutputWriteError: a write of the output, its sidecar or a resume repair failed (disk
            full, file-size limit ...); earlier records are intact.
        OutputLockedError: another process is writing ``output`` (it holds ``OUT.lock``, held
            by this run from its start to its end); refused before any model is loaded.
        LockFileError: ``OUT.lock`` cannot be created (e.g. a missing folder; an ``OSError``).
        RunInterrupted: Ctrl-C, SIGTERM (through the CLI) or a runtime failure of the
            model stopped the run; what was written is intact.
        CheckpointNotFoundError, CheckpointError: no usable checkpoint.

    With ``resume``, duplicate lines of one record in ``output`` (left by two runs writing it
    at once) are repaired: the first line of each record index is kept, the file rewritten
    atomically, and one warning logged with how many were dropped. A score cache that fails
    is disabled with one warning and the run goes on (``summary.cache_disabled``).
    """
    t0 = time.perf_counter()
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    hosted = output_format == "hosted"
    if hosted:
        _check_hosted_options(resume=resume, shard=shard, engine=engine, evidence=evidence)
    settings = dict(settings or {})
    # the task, aspects and input are checked before the engine is made (it imports torch: seconds)
    registry = _registry(settings.get("aspects_config"))
    if hosted:
        _check_hosted_aspects(aspects, registry.aspect_names(task, aspects) if aspects is not None else [])
    expand_all = aspects is None or aspects == "all" or aspects == ["all"]
    names = registry.aspect_names(task, None if expand_all else aspects)
    input_path: str | AlignedInput = input if isinstance(input, AlignedInput) else os.fspath(input)
    if output is not None and str(output) == "-":
        output = None
    if (hosted and output is not None and not is_stream_path(Path(output)) and Path(output).exists()
            and Path(output).stat().st_size > 0):
        raise ResumeError(f"{output} already exists; remove it or write to a new output (--output-format hosted "
                          "does not resume)")
    if resume and output is None:
        raise ResumeError("--resume needs --output")
    if resume and input_path == "-":
        raise ResumeError("--resume cannot check an input read from stdin; give the file")
    records = iter_records(input_path)
    first = next(records, None)
    if first is None:
        raise InputFileError(f"{input_path} holds no records")
    survey = None
    skipped_aspects: dict[str, str] = {}
    if input_path != "-":  # a first pass, before any model is loaded: can anything be scored?
        survey = survey_input(input_path, registry, task, list(registry.get_task(task).aspects), shard)
        if expand_all:
            # --aspect all: every aspect some record can be scored for. No --aspect: those that every
            # record can be scored for that any aspect can (so no record loses all its scores to one
            # aspect it lacks a field for; the others are named, with how to score them)
            best = max((survey.scorable[a] for a in names), default=0)
            for a in names:
                missing = [f for f in registry.get_aspect(task, a).required_fields if f not in survey.fields]
                if survey.scorable[a] == 0:
                    skipped_aspects[a] = (f"needs {', '.join(repr(f) for f in missing)}; no record has it"
                                          if missing else "no record can be scored for it")
                elif aspects is None and survey.scorable[a] < best:
                    lacking = [f for f in registry.get_aspect(task, a).required_fields if f != "target"]
                    skipped_aspects[a] = (f"only {survey.scorable[a]} of the {best} scorable records have "
                                          f"{', '.join(repr(f) for f in lacking) or 'its fields'}; --aspect {a} "
                                          "scores it (records without them become error lines)")
            if len(skipped_aspects) < len(names):
                names = [a for a in names if a not in skipped_aspects]
            else:
                skipped_aspects = {}
        if survey.n_in_shard and all(survey.scorable[a] == 0 for a in names):
            raise NothingToScoreError(nothing_to_score_message(survey, registry, task, names, input_path))
    elif expand_all and isinstance(first.data, dict):  # stdin: the aspects the first record has the fields for
        from .validate import check_example, parse_example

        ex, _ = parse_example(first.index, first.data)
        can = [a for a in names if ex is not None and not check_example(first.index, ex, [registry.get_aspect(task, a)])]
        skipped_aspects = {a: "the first record (stdin) lacks its fields" for a in names if a not in can}
        names = can or names
    core = Engine(**{**settings, "progress": False})
    eng = make_batch_engine(engine, core, engine_options)
    checkpoints = list(dict.fromkeys(registry.get_aspect(task, a).checkpoint for a in names))
    loads_before = core.model_loads
    try:
        eng.check(checkpoints)  # fail early on a missing or unloadable checkpoint
    except BaseException:
        eng.close()
        raise
    stats = RunStats(model_loads=core.model_loads - loads_before)  # the local engine loads its models here
    signature = core.signature(task, names[0]).model_copy(update={"aspect": "+".join(names)})
    run_id = {"signature": signature.model_dump(), "config": core.config.as_dict(),
              "checkpoint_fingerprints": {name: core.fingerprint(name) for name in checkpoints},
              "aspect_hashes": {a: h for a in names if (h := core.aspect_hash(task, a))},
              "evidence": evidence}
    try:
        input_fp = input_fingerprint(input_path)  # None for stdin
    except BaseException:
        eng.close()
        raise
    done: set = set()
    kept: list[dict] = []
    out_path = Path(output) if output is not None else None
    # a device or pipe (-o /dev/null, a FIFO, /dev/stdout even when it is redirected to a
    # file) is written like stdout: no sidecar beside it, no resume
    special = out_path is not None and is_stream_path(out_path)
    if special and resume:
        eng.close()
        raise ResumeError(f"{output} is not a regular file (a device or pipe); --resume needs a file")
    sidecar = out_path is not None and not hosted and not special  # a hosted output is not resumable
    if sidecar:
        try:
            kept, done = _resumable(out_path, resume, run_id, input_fp, shard)
        except BaseException:
            eng.close()
            raise
    try:
        writer = OutputWriter(out_path, stream, resumable=not hosted)
    except BaseException:
        eng.close()
        raise
    meta = {"run": run_id, "input": input_fp, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "progress": {"records_seen": 0, "records_in_shard": 0, "written": len(kept), "complete": False}}
    if sidecar:
        try:
            _write_sidecar(out_path, meta)
        except BaseException:
            writer.close()
            eng.close()
            raise
    written = list(kept)
    skipped = 0
    total = survey.n_in_shard if survey is not None else None
    bar = Progress(total, initial=len(kept), enabled=progress)
    sizes: list[int] = []  # records per request, as the requests are made

    def requests() -> Iterator[list[Record]]:
        """The records to score, in requests of at most 250 (shard, resume and duplicate ids applied)."""
        nonlocal skipped
        chunk: list[Record] = []
        first_index: dict[str, int] = {}
        for rec in _chain_first(first, records):
            meta["progress"]["records_seen"] += 1
            key = json.dumps(rec.key)
            if key in first_index and rec.error is None:
                rec = Record(rec.index, rec.data, f"duplicate id {rec.key!r} (first at record "
                             f"{first_index[key]}); ids must be unique")
            first_index.setdefault(key, rec.index)
            if shard is not None and shard_of(rec.key, shard[1]) != shard[0]:
                continue
            meta["progress"]["records_in_shard"] += 1
            if rec.index in done:
                skipped += 1
                continue
            chunk.append(rec)
            if len(chunk) == MAX_EXAMPLES_PER_REQUEST:
                sizes.append(len(chunk))
                yield chunk
                chunk = []
        if chunk:
            sizes.append(len(chunk))
            yield chunk

    def on_batch(k: int, done_q: int, total_q: int) -> None:  # request k, done_q of its total_q queries
        _check_stop()
        bar.set(len(written) + sizes[k] * done_q / max(total_q, 1))

    refused: tuple[list[int], list[int]] = ([], [])  # hosted: records per refused / answered request
    answered: list[dict] = []  # hosted: the records of answered requests
    _STOP.clear()
    try:
        for res in eng.map(requests(), task, names, evidence, on_batch):
            _check_stop()
            if hosted:
                line = hosted_line(res, names[0])
                writer.write([line])
                refused[0 if "error" in line else 1].append(len(res.lines))
                if "error" not in line:
                    answered.extend(res.lines)
            else:
                writer.write(res.lines)
            written.extend(res.lines)
            stats += res.stats
            meta["stats"] = stats.to_dict()  # this run's distinct queries (a resumed run: its own only)
            meta["progress"]["written"] = len(written)
            bar.set(len(written))
            if sidecar:
                _write_sidecar(out_path, meta)
        meta["progress"]["complete"] = True
        if sidecar:
            _write_sidecar(out_path, meta)
    except (KeyboardInterrupt, ModelRuntimeError) as exc:
        n_done = len(written)
        if out_path is not None:
            writer.close()
            try:  # count what is in the file: the signal may have come between a write and its bookkeeping
                in_file = read_output(out_path)[0]
                n_done = (sum(len(x["examples"]) if "examples" in x else x["error"]["n_examples"]
                              for x in in_file) if hosted else len(in_file))
                meta["progress"]["written"] = n_done
                if sidecar:
                    _write_sidecar(out_path, meta)
            except (OSError, ResumeError, KeyError, TypeError):
                pass
        raise RunInterrupted(exc, n_done, total, out_path, resumable=not hosted) from exc
    finally:
        _STOP.clear()
        bar.close()
        writer.close()
        eng.close()
    summary = summarize(written, names)
    if hosted:  # the means are over the records of answered requests: the others have no value in the output
        answered_summary = summarize(answered, names)
        summary.means, summary.counts = answered_summary.means, answered_summary.counts
        summary.per_system = answered_summary.per_system
        summary.hosted = (len(refused[0]) + len(refused[1]), len(refused[0]), sum(refused[0]))
    summary.n_skipped = skipped
    summary.stats = stats
    summary.max_lengths = {name: core.max_length(name) for name in checkpoints}
    summary.cached = core.cache is not None and core.config.dtype != "bfloat16"
    if core.cache is not None and core.cache.disabled is not None:
        summary.cache_disabled = f"{core.cache.path}: {core.cache.disabled}"
    summary.signature = str(signature)
    summary.seconds = time.perf_counter() - t0
    summary.skipped_aspects = skipped_aspects
    summary.n_non_latin = survey.n_non_latin if survey is not None else 0
    if stats.hints:
        summary.hint_message = input_hint_message([registry.get_aspect(task, a) for a in names], stats.hints)
    return summary


def _check_hosted_options(*, resume: bool, shard: tuple[int, int] | None, engine: str, evidence: bool) -> None:
    """Refuse the batch options ``--output-format hosted`` does not take (one line per request:
    nothing to resume, shard or merge, and no place for evidence).

    Raises:
        ValueError: one of them is set; the message names each and points to ``records``.
    """
    given = [flag for flag, on in (("--resume", resume), ("--shard", shard is not None),
                                   (f"--engine {engine}", engine != "local"), ("--evidence", evidence)) if on]
    if given:
        raise ValueError(f"--output-format hosted writes one line per request (at most "
                         f"{MAX_EXAMPLES_PER_REQUEST} records) and does not take {' or '.join(given)}; use "
                         "--output-format records for batch runs (resume, shards, Ray, evidence)")


def _check_hosted_aspects(aspects: Sequence[str] | str | None, names: Sequence[str]) -> None:
    """``--output-format hosted`` answers for one aspect, named (the hosted metric's ``evaluation_aspect``).

    Raises:
        ValueError: no aspect named, or several (given, or ``all`` / an aspects config resolving to several).
    """
    why = None
    if aspects is None:
        why = "no --aspect was given"
    elif len(names) != 1:
        asked = [aspects] if isinstance(aspects, str) else list(aspects)
        why = (f"--aspect all resolves to {len(names)} aspects ({', '.join(names)})" if "all" in asked
               else f"{len(names)} aspects were given ({', '.join(names)})")
    if why:
        raise ValueError(f"--output-format hosted scores exactly one aspect per run (the hosted metric's "
                         f"evaluation_aspect), but {why}; give one --aspect, or use --output-format records "
                         "for several")


def _chain_first(first: Record, rest: Iterator[Record]) -> Iterator[Record]:
    yield first
    yield from rest


def _input_change(old: dict, new: dict) -> str:
    """What differs between the sidecar's input fingerprint and this run's
    (:func:`~unieval_local.records.input_fingerprint`); for line-aligned files, which ones."""
    if "files" in old and "files" in new:
        before = [(f["role"], f["path"], f["sha256"]) for f in old["files"]]
        now = [(f["role"], f["path"], f["sha256"]) for f in new["files"]]
        if [x[:2] for x in before] == [x[:2] for x in now]:
            changed = [f"--{r} {p}" for (r, p, a), (_, _, b) in zip(before, now) if a != b]
            return (f"the input file{'s' if len(changed) > 1 else ''} {', '.join(changed)} changed since the run "
                    "started")
        return f"the input files differ from the run's ({old.get('path')} then, {new.get('path')} now)"
    return (f"the input file changed since the run started (sha256 {str(old.get('sha256', '?'))[:12]} != "
            f"{new['sha256'][:12]})")


def _resumable(out_path: Path, resume: bool, run_id: dict, input_fp: dict | None,
               shard: tuple[int, int] | None) -> tuple[list[dict], set]:
    """The records already in ``out_path`` and their input indices, after checking that the
    output may be continued (same run settings, same input, same shard); a torn last line is
    repaired.

    Raises:
        ResumeError: it exists without ``resume``, has no sidecar, or belongs to another run
            (settings, shard, or input fingerprint differ; :func:`_input_change` says which
            aligned input files changed).
    """
    existing = out_path.exists() and out_path.stat().st_size > 0
    if not existing:
        return [], set()
    if not resume:
        raise ResumeError(f"{out_path} already exists; pass --resume to continue it, or remove it")
    meta_file = sidecar_path(out_path)
    if not meta_file.is_file():
        raise ResumeError(f"{out_path} has no sidecar {meta_file.name}; it cannot be resumed safely")
    meta = json.loads(meta_file.read_text())
    diffs = run_differences(comparable_run(meta["run"]), comparable_run(run_id))
    if diffs:
        raise ResumeError(f"refusing to resume {out_path}: the run settings differ ({'; '.join(diffs)}); "
                          "rerun with the original settings, or write to a new output")
    old_fp = meta.get("input") or {}
    if old_fp.get("sha256") != input_fp["sha256"]:
        raise ResumeError(f"refusing to resume {out_path}: {_input_change(old_fp, input_fp)}")
    if meta.get("shard") != (f"{shard[0]}/{shard[1]}" if shard else None):
        raise ResumeError(f"refusing to resume {out_path}: it is shard {meta.get('shard')}, not "
                          f"{f'{shard[0]}/{shard[1]}' if shard else None}")
    kept, torn = read_output(out_path, repair=True)
    if torn:
        logging.getLogger("unieval_local").warning("repaired a torn last line in %s", out_path)
    if len({x["index"] for x in kept}) < len(kept):  # two runs wrote OUT at once (before the output lock)
        kept, dropped = _drop_duplicate_records(out_path)
        logging.getLogger("unieval_local").warning(
            "repaired %s: dropped %d duplicate record line(s) (two runs wrote it at once); each record is "
            "kept once, as first written", out_path, dropped)
    return kept, {x["index"] for x in kept}  # the input is unchanged (checked above): index identifies a record


def _drop_duplicate_records(path: Path) -> tuple[list[dict], int]:
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
        _replace_atomically(path, b"".join(keep))
    except OSError as exc:
        raise _write_failed(path, exc) from exc
    return records, dropped


# ----------------------------------------------------------------------------- merge
def merge_outputs(paths: Sequence[str | os.PathLike], output: str | os.PathLike, *, force: bool = False) -> BatchSummary:
    """Join shard outputs into one file, in input order, after checking coverage.

    Checks: every shard has a sidecar from the same run and input, the shards are
    ``0/N`` ... ``N-1/N`` each exactly once and complete, no key appears twice (across
    shards or within one shard file, as two runs writing one shard at once left it),
    and the shards together hold every input record (records are identified by
    their index in the common input file). ``output`` is not overwritten unless ``force``.

    The output is written atomically (a temporary file beside it, fsynced, then renamed),
    under the output's lock (:func:`~unieval_local.locks.output_lock`) held from before the
    checks until it is written.

    Args:
        paths: the shard outputs.
        output: the merged JSONL (a device or pipe is written to as it is).
        force: overwrite an existing ``output``.

    Returns:
        The :class:`BatchSummary` of the merged records (no signature).

    Raises:
        MergeError: any check fails; nothing is written.
        OutputLockedError: another process is writing ``output``; nothing is written.
        LockFileError: the lock file cannot be created (e.g. a missing folder; an ``OSError``).
        OutputWriteError: writing ``output`` failed (it is unchanged).
    """
    from .locks import output_lock

    if not is_stream_path(Path(output)):
        Path(output).parent.mkdir(parents=True, exist_ok=True)  # the lock file goes beside it
    with output_lock(output):
        return _merge_outputs(paths, output, force=force)


def _merge_outputs(paths: Sequence[str | os.PathLike], output: str | os.PathLike, *, force: bool) -> BatchSummary:
    """:func:`merge_outputs` once its output lock is held."""
    if Path(output).exists() and not force and not is_stream_path(Path(output)):
        raise MergeError(f"{output} already exists; remove it or pass --force")
    metas, lines_by = [], []
    for p in paths:
        meta_file = sidecar_path(p)
        if not meta_file.is_file():
            raise MergeError(f"{p} has no sidecar {meta_file.name}: not an unieval-local output")
        metas.append(json.loads(meta_file.read_text()))
        lines, torn = read_output(p)
        if torn:
            raise MergeError(f"{p} ends with a torn line: resume that shard first")
        lines_by.append(lines)
    problems = []
    runs = [json.dumps(comparable_run(m["run"]), sort_keys=True) for m in metas]
    if len(set(runs)) > 1:
        odd = [str(p) for p, r in zip(paths, runs) if r != runs[0]]
        problems.append(f"the outputs come from different runs (signature, checkpoint or aspects differ): "
                        f"{', '.join(odd)} differ from {paths[0]}")
    inputs = {(m.get("input") or {}).get("sha256") for m in metas}
    if len(inputs) > 1:
        problems.append("the outputs were made from different input files")
    shards = [m.get("shard") for m in metas]
    ns = {int(s.split("/")[1]) for s in shards if s}
    if None in shards or len(ns) != 1:
        problems.append(f"every output must be a shard K/N of the same N; got {shards}")
    else:
        n = ns.pop()
        ks = [int(s.split("/")[0]) for s in shards]
        missing = sorted(set(range(n)) - set(ks))
        dup = sorted({k for k in ks if ks.count(k) > 1})
        if missing:
            problems.append(f"missing shard(s) {', '.join(f'{k}/{n}' for k in missing)}")
        if dup:
            problems.append(f"shard(s) given more than once: {', '.join(f'{k}/{n}' for k in dup)}")
    for p, m in zip(paths, metas):
        if not m["progress"].get("complete"):
            problems.append(f"{p} is incomplete (the run stopped early): resume it first")
    seen: dict[int, str] = {}
    dups = []
    given: dict[str, int] = {}
    for p in paths:  # the same file given twice is named once above (its shard repeats), not record by record
        given[os.path.realpath(p)] = given.get(os.path.realpath(p), 0) + 1
    distinct = [(p, lines) for p, lines in zip(paths, lines_by) if given.pop(os.path.realpath(p), 0)]
    for p, lines in distinct:
        for line in lines:
            k = line["index"]
            if k in seen:
                dups.append(f"record {k} (key {line['key']!r}) is twice in {p} (two runs wrote it at once: "
                            "rerun that shard with --resume, which repairs it)" if seen[k] == str(p) else
                            f"record {k} (key {line['key']!r}) is in both {seen[k]} and {p}")
            seen[k] = str(p)
    problems += dups[:10] + ([f"... and {len(dups) - 10} more duplicated records"] if len(dups) > 10 else [])
    if not problems and metas:
        expected = metas[0]["progress"]["records_seen"]
        if len(seen) != expected:
            problems.append(f"the shards hold {len(seen)} records but the input has {expected}")
    if problems:
        raise MergeError("cannot merge:\n  " + "\n  ".join(problems[:20]))
    merged = sorted((x for lines in lines_by for x in lines), key=lambda x: x["index"])
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in merged).encode("utf-8")
    target = Path(output)
    try:
        if is_stream_path(target):
            with open(target, "wb") as fh:
                fh.write(data)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            _replace_atomically(Path(os.path.realpath(target)), data)
    except OSError as exc:
        raise OutputWriteError(exc.errno, f"writing {output} failed: {exc.strerror or exc}; the shards are "
                               "unchanged: fix the cause and merge again") from exc
    aspects = metas[0]["run"]["signature"]["aspect"].split("+")
    summary = summarize(merged, aspects)
    summary.signature = None
    return summary
