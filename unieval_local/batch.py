"""Offline batch runs that never lose work: the one pipeline behind ``unieval-local score``.

Input records are streamed (JSONL) and sent in requests of at most 250; after each
request the output records are appended to OUT, flushed and fsynced, and a sidecar
``OUT.meta.json`` records the run signature, the input fingerprint and the progress.

- ``resume=True`` skips records whose key is already in OUT, repairs a torn last line
  left by a kill, and refuses to go on when the signature or the input differ.
- ``shard=(K, N)`` keeps the records whose key hashes to K modulo N, so N array jobs
  cover the input exactly once; :func:`merge_outputs` joins and checks them.
- ``engine="ray"`` scores the requests on a Ray Data pipeline (a pool of scorer
  actors, one model each); the driver still reads the input and writes OUT itself,
  so resume, error records and repair are this same code.

Keys: the record's ``id`` when present, else its 0-based record index in INPUT.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .api import MAX_EXAMPLES_PER_REQUEST, Scorer
from .errors import ModelRuntimeError, Terminated, UniEvalError
from .hashing import sha256_file, sha256_text
from .validate import input_hint_counts, input_hint_message, validate_examples
from .records import InputFileError, Record, iter_records, write_jsonl


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


def run_differences(old: dict, new: dict) -> list[str]:
    """What differs between two run identities (a sidecar's ``run`` and this run's), one
    ``key: old -> new`` per setting, e.g. ``config.window_overlap: 1 -> 2``; [] when equal."""
    a, b = _flatten(old), _flatten(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _error(message: str, kind: str) -> dict[str, str]:
    return {"type": kind, "message": message}


@dataclass
class ChunkResult:
    """Output lines of one request and what the run summary needs."""

    lines: list[dict[str, Any]]
    n_queries: int = 0
    n_truncated: int = 0
    hints: dict[str, int] = field(default_factory=dict)
    n_shortened: int = 0


def score_records(scorer: Scorer, chunk: Sequence[Record], task: str, aspects: Sequence[str],
                  evidence: bool = False, on_batch=None) -> ChunkResult:
    """Score one request of records; bad rows become error records, the others are scored.

    Returns:
        One output dict per record, in order: ``{index, key, [doc_id, system_id],
        scores, [aspect_mean], [evidence]}`` or ``{index, key, ..., error: {type, message}}``.
    """
    registry = scorer.registry
    resolved = [registry.get_aspect(task, a) for a in aspects]
    examples, problems = validate_examples([r.data for r in chunk], resolved)
    hints = input_hint_counts(examples, registry.get_task(task), resolved)
    run = scorer._run(examples, task, aspects, strict=False, evidence=evidence, on_batch=on_batch)
    errors: dict[int, list[str]] = defaultdict(list)
    for p in problems + run.problems:
        errors[p.index].append(p.describe())
    lines = []
    for i, rec in enumerate(chunk):
        line: dict[str, Any] = {"index": rec.index, "key": rec.key}
        if isinstance(rec.data, dict):
            for meta in ("doc_id", "system_id"):
                if meta in rec.data:
                    line[meta] = rec.data[meta]
        if rec.error is not None:
            line["error"] = _error(rec.error, "DuplicateKey" if rec.error.startswith("duplicate id") else "InvalidJSON")
        elif i in errors:
            line["error"] = _error("; ".join(errors[i]), "InvalidExample")
        else:
            row = {a: float(run.values[a][i]) for a in aspects}
            bad = [a for a, v in row.items() if not np.isfinite(v)]
            if bad:
                line["error"] = _error(f"the model gave non-finite logits for {', '.join(bad)}", "NonFiniteScore")
            else:
                line["scores"] = row
                if len(aspects) > 1:
                    line["aspect_mean"] = float(np.mean(list(row.values())))
                if evidence:
                    line["evidence"] = {a: run.evidence[a][i].model_dump(exclude_none=True) for a in aspects}
        lines.append(line)
    return ChunkResult(lines, run.n_queries, run.n_truncated, hints, run.n_shortened)


# ----------------------------------------------------------------------------- output files
def read_output(path: str | os.PathLike, repair: bool = False) -> tuple[list[dict], bool]:
    """Records of an output JSONL, and whether its last line was torn (cut by a kill).

    With ``repair=True`` a torn last line is removed from the file (it is rewritten
    when that record is scored again).
    """
    p = Path(path)
    if not p.exists():
        return [], False
    data = p.read_bytes()
    good_end = data.rfind(b"\n") + 1
    torn = good_end < len(data)
    lines = []
    for raw in data[:good_end].splitlines():
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError as exc:
                raise ResumeError(f"{p} has a corrupt line in the middle ({exc}); it is not an unieval-local output") from None
    if torn and repair:
        with open(p, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return lines, torn


class OutputWriter:
    """Appends JSON lines; flushes and fsyncs after each request.

    Raises:
        OutputWriteError: on any write failure (disk full, ...); earlier lines stay intact.
    """

    def __init__(self, path: str | os.PathLike | None, stream: TextIO | None = None):
        self.path = Path(path) if path else None
        try:
            self._fh = open(self.path, "a", encoding="utf-8") if self.path else (stream or sys.stdout)
        except OSError as exc:
            raise InputFileError(f"cannot write the output {str(path)!r}: {exc.strerror or exc}") from exc

    def write(self, lines: Sequence[dict]) -> None:
        try:
            self._fh.write("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
            self._fh.flush()
            if self.path:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            raise OutputWriteError(
                exc.errno, f"writing {self.path or 'stdout'} failed: {exc.strerror or exc}; the records "
                "written before are intact; free space and rerun with --resume") from exc

    def close(self) -> None:
        if self.path and not self._fh.closed:
            self._fh.close()


def _write_sidecar(output: Path, meta: dict) -> None:
    tmp = Path(str(sidecar_path(output)) + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, sidecar_path(output))


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
        n_queries / n_truncated: distinct queries run this time, and those cut by max_length.
        signature: the run signature (one line).
        skipped_aspects: with ``--aspect all``, the aspects left out because no record
            has their fields (aspect -> why).
        n_non_latin: targets mostly in non-Latin script (the evaluators are English-only).
        failures: ``(reason, keys)`` of the error records, most frequent reason first.
    """

    aspects: list[str]
    n_records: int = 0
    n_failed: int = 0
    n_skipped: int = 0
    means: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    per_system: dict[str, dict[str, float]] = field(default_factory=dict)
    n_queries: int = 0
    n_truncated: int = 0
    n_shortened: int = 0
    hints: dict[str, int] = field(default_factory=dict)
    signature: str | None = None
    seconds: float = 0.0
    hint_message: str | None = None
    cache: dict[str, int] | None = None
    skipped_aspects: dict[str, str] = field(default_factory=dict)
    n_non_latin: int = 0
    failures: list[tuple[str, list]] = field(default_factory=list)


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
    if s.cache is not None:
        out.append(f"\nscore cache: {s.cache['hits']} queries reused, {s.cache['misses']} scored")
    if s.signature:
        out.append(f"\nsignature: {s.signature}")
    return "\n".join(out)


# ----------------------------------------------------------------------------- engines
class LocalEngine:
    """Scores requests in this process."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer

    def map(self, requests: Sequence[list[Record]], task: str, aspects: Sequence[str],
            evidence: bool, on_batch=None) -> Iterator[ChunkResult]:
        for k, chunk in enumerate(requests):
            cb = None if on_batch is None else (lambda done, total, k=k: on_batch(k, done, total))
            yield score_records(self.scorer, chunk, task, aspects, evidence, on_batch=cb)

    def close(self) -> None:
        pass


class _RayScorerActor:
    """One Ray actor: one Scorer (one model) scoring whole requests."""

    def __init__(self, scorer_kwargs: dict, task: str, aspects: list[str], evidence: bool):
        self.scorer = Scorer(**scorer_kwargs)
        self.task, self.aspects, self.evidence = task, aspects, evidence

    def __call__(self, batch: dict) -> dict:
        out = []
        for payload in batch["request"]:
            chunk = [Record(**r) for r in json.loads(payload)]
            res = score_records(self.scorer, chunk, self.task, self.aspects, self.evidence)
            out.append(json.dumps({"lines": res.lines, "n_queries": res.n_queries, "n_truncated": res.n_truncated,
                                   "hints": res.hints, "n_shortened": res.n_shortened}))
        return {"rid": batch["rid"], "result": np.array(out, dtype=object)}


class RayEngine:
    """Scores requests on a Ray Data pipeline: ``map_batches`` over a pool of scorer actors.

    Args:
        scorer_kwargs: how each actor builds its :class:`Scorer` (one model per actor).
        actors: number of actors (``--ray-actors``).
        gpus_per_actor: GPUs per actor (``--gpus-per-actor``; 0 on CPU).
        address: an existing cluster (``--ray-address``); default a local Ray instance.
        window: requests in flight per round trip (default ``2 * actors``).
    """

    def __init__(self, scorer_kwargs: dict, *, actors: int = 1, gpus_per_actor: float = 0.0,
                 address: str | None = None, window: int | None = None):
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ValueError("--engine ray needs Ray: pip install 'unieval-local[ray]'") from exc
        self.ray = ray
        self.scorer_kwargs = scorer_kwargs
        self.actors, self.gpus = actors, gpus_per_actor
        self.window = window or 2 * actors
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

    def map(self, requests: Sequence[list[Record]], task: str, aspects: Sequence[str],
            evidence: bool, on_batch=None) -> Iterator[ChunkResult]:
        items = [{"rid": i, "request": json.dumps([{"index": r.index, "data": r.data, "error": r.error}
                                                   for r in chunk])}
                 for i, chunk in enumerate(requests)]
        ds = self.ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            _RayScorerActor, batch_size=1, concurrency=self.actors, num_gpus=self.gpus or None,
            fn_constructor_kwargs={"scorer_kwargs": self.scorer_kwargs, "task": task,
                                   "aspects": list(aspects), "evidence": evidence},
        )
        try:
            results = sorted(ds.take_all(), key=lambda r: r["rid"])
        except Exception as exc:  # an actor died or the model failed in it: Ray wraps the cause
            cause = getattr(exc, "cause", None) or exc
            first = next((x.strip() for x in str(cause).splitlines() if x.strip()), type(cause).__name__)
            raise ModelRuntimeError(f"the Ray engine failed ({type(cause).__name__}: {first})") from exc
        for r in results:
            d = json.loads(r["result"])
            yield ChunkResult(d["lines"], d["n_queries"], d["n_truncated"], d["hints"], d["n_shortened"])

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


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
        written: output records in OUT (those kept from earlier runs included).
        total: records to write in this run's shard (None when unknown, e.g. stdin).
        output: the output path (None for stdout).
    """

    def __init__(self, cause: BaseException, written: int, total: int | None, output: Path | None):
        self.cause, self.written, self.total, self.output = cause, written, total, output
        where = str(output) if output is not None else "stdout"
        of = f" of {total}" if total is not None else ""
        hint = "; rerun with --resume" if output is not None else ""
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
    """

    n_records: int = 0
    n_in_shard: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    scorable: dict[str, int] = field(default_factory=dict)
    n_non_latin: int = 0


def survey_input(path: str, registry, task: str, aspects: Sequence[str],
                 shard: tuple[int, int] | None = None) -> Survey:
    """Parse every record of ``path`` once and count, per aspect, the records it can score
    (:func:`~unieval_local.validate.check_example`; sentence splitting is not run). Cheap: no model."""
    from .validate import check_example, non_latin_share, parse_example

    resolved = {a: registry.get_aspect(task, a) for a in aspects}
    s = Survey(scorable={a: 0 for a in aspects})
    fields: dict[str, int] = defaultdict(int)
    for rec in iter_records(path):
        s.n_records += 1
        if shard is not None and shard_of(rec.key, shard[1]) != shard[0]:
            continue
        s.n_in_shard += 1
        if rec.error is not None or not isinstance(rec.data, dict):
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


def nothing_to_score_message(survey: Survey, registry, task: str, aspects: Sequence[str], path: str) -> str:
    """One line: no record can be scored for ``aspects``; the fields found, what each aspect
    needs, the renames that would help (:data:`~unieval_local.validate.FIELD_ALIASES`) and the
    aspects that could run."""
    from .validate import FIELD_ALIASES

    found = ", ".join(sorted(survey.fields)) or "none"
    needs = "; ".join(f"{a} needs {', '.join(registry.get_aspect(task, a).required_fields)}" for a in aspects)
    renames = [f"'{k}' to '{FIELD_ALIASES[k.lower()]}'" for k in sorted(survey.fields)
               if k.lower() in FIELD_ALIASES and FIELD_ALIASES[k.lower()] not in survey.fields]
    fix = f" Did you mean: rename {', '.join(renames)}?" if renames else ""
    runnable = [a for a in registry.get_task(task).aspects if a not in aspects]
    if runnable:
        can = [a for a in runnable if all(f in survey.fields for f in registry.get_aspect(task, a).required_fields)]
        if can:
            fix += " These aspects can run on these records: " + " ".join(f"--aspect {a}" for a in can) + "."
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

    def __init__(self, total: int | None, initial: int = 0, enabled: bool | None = None, every: float = 30.0):
        import logging

        from tqdm.auto import tqdm

        self.total, self.done, self.every = total, float(initial), every
        self.log = logging.getLogger("unieval_local")
        tty = sys.stderr.isatty()
        self.bar = None
        self.lines = enabled is None and not tty
        if enabled or (enabled is None and tty):
            self.bar = tqdm(total=total, initial=initial, desc="records", unit="rec", dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")
        self.t0 = self.last = time.monotonic()
        self.start = float(initial)

    def set(self, done: float) -> None:
        """Move to ``done`` records (fractions allowed: progress within a request)."""
        done = max(done, self.done)
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done = done
        now = time.monotonic()
        if self.lines and now - self.last >= self.every:
            self.last = now
            rate = (self.done - self.start) / max(now - self.t0, 1e-9)
            if self.total:
                eta = (self.total - self.done) / rate if rate > 0 else float("inf")
                left = f", about {eta / 60:.1f} min left" if eta != float("inf") else ""
                self.log.info("records %d/%d (%.0f%%), %.2f records/s%s", int(self.done), self.total,
                              100 * self.done / self.total, rate, left)
            else:
                self.log.info("records %d, %.2f records/s", int(self.done), rate)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------------- the run
def run_batch(
    input: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    task: str = "summarization",
    aspects: Sequence[str] | str | None = None,
    scorer_kwargs: dict | None = None,
    resume: bool = False,
    shard: tuple[int, int] | str | None = None,
    engine: str = "local",
    ray_actors: int = 1,
    gpus_per_actor: float = 0.0,
    ray_address: str | None = None,
    evidence: bool = False,
    progress: bool | None = None,
    stream: TextIO | None = None,
) -> BatchSummary:
    """Score every record of ``input`` and write one output line per record (the CLI's ``score``).

    Args:
        input: ``.jsonl`` (streamed; ``-`` = stdin) or a ``.json`` list.
        output: the output JSONL; ``None`` writes to ``stream`` (stdout), without
            sidecar or resume.
        task, aspects: what to score (``None`` or ``"all"``: every aspect of the task).
        scorer_kwargs: keyword arguments of :class:`~unieval_local.Scorer`.
        resume: keep the records already in ``output`` and score the rest.
        shard: ``(K, N)`` or ``"K/N"``: only the records whose key hashes to K.
        engine: ``local`` or ``ray``.
        ray_actors, gpus_per_actor, ray_address: the Ray pool (``engine="ray"``).
        evidence: add evidence to each output line.
        progress: progress bar (``None``: only on a terminal).
        stream: where to write when ``output`` is None (default stdout).

    Returns:
        A :class:`BatchSummary` over every record in the output.

    Raises:
        InputFileError, ValueError: unreadable input, bad options, unknown aspects.
        ResumeError: the output exists without ``resume``, or belongs to another
            run (signature or input fingerprint differ).
        OutputWriteError: a write failed (disk full); earlier records are intact.
        CheckpointNotFoundError, CheckpointError: no usable checkpoint.
    """
    t0 = time.perf_counter()
    scorer_kwargs = dict(scorer_kwargs or {})
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    scorer = Scorer(**{**scorer_kwargs, "progress": False})
    registry = scorer.registry
    expand_all = aspects == "all" or aspects == ["all"]
    names = registry.aspect_names(task, aspects if aspects is not None else
                                  [next(iter(registry.get_task(task).aspects))])
    input_path = str(input)
    if output is not None and str(output) == "-":
        output = None
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
        survey = survey_input(input_path, registry, task, names, shard)
        if expand_all:
            for a in names:
                if survey.scorable[a] == 0:
                    missing = [f for f in registry.get_aspect(task, a).required_fields if f not in survey.fields]
                    skipped_aspects[a] = (f"needs {', '.join(repr(f) for f in missing)}; no record has it"
                                          if missing else "no record can be scored for it")
            if len(skipped_aspects) < len(names):
                names = [a for a in names if a not in skipped_aspects]
            else:
                skipped_aspects = {}
        if survey.n_in_shard and all(survey.scorable[a] == 0 for a in names):
            raise NothingToScoreError(nothing_to_score_message(survey, registry, task, names, input_path))
    for name in dict.fromkeys(registry.get_aspect(task, a).checkpoint for a in names):
        scorer.runner(name)  # fail early on a missing checkpoint
    signature = scorer.signature(task, names[0]).model_copy(update={"aspect": "+".join(names)})
    checkpoints = dict.fromkeys(registry.get_aspect(task, a).checkpoint for a in names)
    run_id = {"signature": signature.model_dump(), "config": scorer.config.as_dict(),
              "checkpoint_fingerprints": {name: scorer.fingerprint(name) for name in checkpoints},
              "aspect_hashes": {a: h for a in names if (h := scorer.aspect_hash(task, a))},
              "evidence": evidence}
    input_fp = None if input_path == "-" else {"path": os.path.abspath(input_path),
                                               "sha256": sha256_file(input_path)}
    done: set = set()
    kept: list[dict] = []
    out_path = Path(output) if output is not None else None
    if out_path is not None:
        existing = out_path.exists() and out_path.stat().st_size > 0
        if existing and not resume:
            raise ResumeError(f"{out_path} already exists; pass --resume to continue it, or remove it")
        if existing:
            meta_file = sidecar_path(out_path)
            if not meta_file.is_file():
                raise ResumeError(f"{out_path} has no sidecar {meta_file.name}; it cannot be resumed safely")
            meta = json.loads(meta_file.read_text())
            diffs = run_differences(meta["run"], run_id)
            if diffs:
                raise ResumeError(f"refusing to resume {out_path}: the run settings differ ({'; '.join(diffs)}); "
                                  "rerun with the original settings, or write to a new output")
            if meta.get("input", {}).get("sha256") != input_fp["sha256"]:
                raise ResumeError(f"refusing to resume {out_path}: the input file changed since the run started "
                                  f"(sha256 {meta.get('input', {}).get('sha256', '?')[:12]} != {input_fp['sha256'][:12]})")
            if meta.get("shard") != (f"{shard[0]}/{shard[1]}" if shard else None):
                raise ResumeError(f"refusing to resume {out_path}: it is shard {meta.get('shard')}, not "
                                  f"{f'{shard[0]}/{shard[1]}' if shard else None}")
            kept, torn = read_output(out_path, repair=True)
            if torn:
                logging.getLogger("unieval_local").warning("repaired a torn last line in %s", out_path)
            done = {x["index"] for x in kept}  # the input is unchanged (checked above): index identifies a record
    writer = OutputWriter(out_path, stream)
    meta = {"run": run_id, "input": input_fp, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "progress": {"records_seen": 0, "records_in_shard": 0, "written": len(kept), "complete": False}}
    if out_path is not None:
        _write_sidecar(out_path, meta)
    if engine == "ray":
        eng = RayEngine({**scorer_kwargs, "progress": False}, actors=ray_actors, gpus_per_actor=gpus_per_actor,
                        address=ray_address)
    elif engine == "local":
        eng = LocalEngine(scorer)
    else:
        raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}")
    written = list(kept)
    summary_extra = {"n_queries": 0, "n_truncated": 0, "n_shortened": 0, "hints": defaultdict(int), "skipped": 0}
    total = survey.n_in_shard if survey is not None else None
    bar = Progress(total, initial=len(kept), enabled=progress)
    window = getattr(eng, "window", 1)
    try:
        pending: list[list[Record]] = []
        chunk: list[Record] = []

        def drain(final: bool = False) -> None:
            if not pending or (len(pending) < window and not final):
                return
            base = len(written)
            sizes = [len(c) for c in pending]

            def on_batch(k: int, done_q: int, total_q: int) -> None:  # request k of pending, done_q of total_q queries
                bar.set(base + sum(sizes[:k]) + sizes[k] * done_q / max(total_q, 1))

            for k, res in enumerate(eng.map(pending, task, names, evidence, on_batch)):
                writer.write(res.lines)
                written.extend(res.lines)
                summary_extra["n_queries"] += res.n_queries
                summary_extra["n_truncated"] += res.n_truncated
                summary_extra["n_shortened"] += res.n_shortened
                for key, v in res.hints.items():
                    summary_extra["hints"][key] += v
                meta["progress"]["written"] = len(written)
                bar.set(base + sum(sizes[:k + 1]))
            if out_path is not None:
                _write_sidecar(out_path, meta)
            pending.clear()

        rec = first
        first_index: dict[str, int] = {}
        while rec is not None:
            meta["progress"]["records_seen"] += 1
            key = json.dumps(rec.key)
            if key in first_index and rec.error is None:
                rec = Record(rec.index, rec.data, f"duplicate id {rec.key!r} (first at record "
                             f"{first_index[key]}); ids must be unique")
            first_index.setdefault(key, rec.index)
            if shard is None or shard_of(rec.key, shard[1]) == shard[0]:
                meta["progress"]["records_in_shard"] += 1
                if rec.index in done:
                    summary_extra["skipped"] += 1
                else:
                    chunk.append(rec)
                    if len(chunk) == MAX_EXAMPLES_PER_REQUEST:
                        pending.append(chunk)
                        chunk = []
                        drain()
            rec = next(records, None)
        if chunk:
            pending.append(chunk)
        drain(final=True)
        meta["progress"]["complete"] = True
        if out_path is not None:
            _write_sidecar(out_path, meta)
    except (KeyboardInterrupt, ModelRuntimeError) as exc:
        n_done = len(written)
        if out_path is not None:
            writer.close()
            try:  # count what is in the file: the signal may have come between a write and its bookkeeping
                n_done = len(read_output(out_path)[0])
                meta["progress"]["written"] = n_done
                _write_sidecar(out_path, meta)
            except (OSError, ResumeError):
                pass
        raise RunInterrupted(exc, n_done, total, out_path) from exc
    finally:
        bar.close()
        writer.close()
        eng.close()
    summary = summarize(written, names)
    summary.n_skipped = summary_extra["skipped"]
    summary.n_queries = summary_extra["n_queries"]
    summary.n_truncated = summary_extra["n_truncated"]
    summary.n_shortened = summary_extra["n_shortened"]
    summary.hints = dict(summary_extra["hints"])
    summary.signature = str(signature)
    summary.seconds = time.perf_counter() - t0
    summary.skipped_aspects = skipped_aspects
    summary.n_non_latin = survey.n_non_latin if survey is not None else 0
    if scorer_kwargs.get("cache_dir") and engine == "local":
        summary.cache = scorer.cache_stats()
    if summary.hints:
        summary.hint_message = input_hint_message(registry.get_task(task), summary.hints)
    return summary


# ----------------------------------------------------------------------------- merge
def merge_outputs(paths: Sequence[str | os.PathLike], output: str | os.PathLike, *, force: bool = False) -> BatchSummary:
    """Join shard outputs into one file, in input order, after checking coverage.

    Checks: every shard has a sidecar from the same run and input, the shards are
    ``0/N`` ... ``N-1/N`` each exactly once and complete, no key appears twice,
    and the shards together hold every input record (records are identified by
    their index in the common input file). ``output`` is not overwritten unless ``force``.

    Raises:
        MergeError: any check fails; nothing is written.
    """
    if Path(output).exists() and not force:
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
    runs = [json.dumps(m["run"], sort_keys=True) for m in metas]
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
    for p, lines in zip(paths, lines_by):
        for line in lines:
            k = line["index"]
            if k in seen:
                dups.append(f"record {k} (key {line['key']!r}) is in both {seen[k]} and {p}")
            seen[k] = str(p)
    problems += dups[:10] + ([f"... and {len(dups) - 10} more duplicated records"] if len(dups) > 10 else [])
    if not problems and metas:
        expected = metas[0]["progress"]["records_seen"]
        if len(seen) != expected:
            problems.append(f"the shards hold {len(seen)} records but the input has {expected}")
    if problems:
        raise MergeError("cannot merge:\n  " + "\n  ".join(problems[:20]))
    merged = sorted((x for lines in lines_by for x in lines), key=lambda x: x["index"])
    write_jsonl(output, merged)
    aspects = metas[0]["run"]["signature"]["aspect"].split("+")
    summary = summarize(merged, aspects)
    summary.signature = None
    return summary
