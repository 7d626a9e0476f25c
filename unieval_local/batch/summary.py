"""What a batch run did (:class:`BatchSummary`), summarized from its output lines, the stderr
table (:func:`format_summary`), and the progress of records done (:class:`Progress`)."""

from __future__ import annotations

import math
import re

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..engine import RunStats
from ..progress import Progress

__all__ = ["BatchSummary", "Progress", "format_summary", "summarize"]


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
        signature: the run signature (one line) when one evaluator scored every aspect; None when
            several did (no one line is true of all of them) or none (a merge).
        signatures: evaluator -> its signature line over the aspects it scored, with its own
            settings (one entry for a run of one evaluator, equal to ``signature``).
        hint_message: one sentence about inputs lacking the endings the checkpoint was trained with.
        max_lengths: checkpoint name -> tokens per query it read (for the truncation message).
        skipped_aspects: with ``--aspect all`` (or none named), the aspects left out because no
            record (or not every record) has their fields (aspect -> why); those left out because
            their evaluator is not here are named in one warning as the run starts
            (:func:`~unieval_local.requests.score.left_out_message`).
        failures: ``(reason, keys)`` of the error records, most frequent reason first.
        run_info: ``{forward_passes, distinct_queries, wall_s, cpu_s}`` of this run (the sidecar's
            ``run_info``; ``forward_passes`` None with Ray).
        hosted: with ``--output-format hosted``: ``(requests, refused requests, records in them)``;
            ``means``, ``counts`` and ``per_system`` are then over the answered requests' records
            only (a refused request's line holds no value for any of its records).
        hosted_errors: where the refused requests' error lines were written (``OUT.errors.jsonl``,
            or ``"stderr"``); None when no request was refused.
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
    signatures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    hint_message: str | None = None
    max_lengths: dict[str, int] = field(default_factory=dict)
    skipped_aspects: dict[str, str] = field(default_factory=dict)
    failures: list[tuple[str, list]] = field(default_factory=list)
    hosted: tuple[int, int, int] | None = None
    hosted_errors: str | None = None
    run_info: dict | None = None


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
    """The stderr table: counts, mean per aspect, per system, signature (one line per evaluator
    when several scored the run)."""
    out = [f"\nscored {s.n_records - s.n_failed} of {s.n_records} records ({s.n_failed} failed)"
           + (f"; {s.n_skipped} of them were already in the output (resumed), {s.n_records - s.n_skipped} "
              "written by this run" if s.n_skipped else "")]
    if s.hosted:
        n_req, n_refused, n_in_refused = s.hosted
        out[0] = (f"\nhosted: {n_req - n_refused} of {n_req} requests answered ({s.n_records - n_in_refused} records "
                  f"with a value); {n_refused} refused ({n_in_refused} records, {s.n_failed} of them cannot be scored: "
                  f"a refused request holds no value for any of its records; their error lines: {s.hosted_errors})"
                  ) if n_refused else \
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
            more, n = len(s.failures) - 5, sum(len(k) for _, k in s.failures[5:])
            out.append(f"  ... and {more} more reason{'s' if more != 1 else ''} ({n} record{'s' if n != 1 else ''})")
    if s.stats.n_queries:
        out.append(f"\nqueries: {s.stats.n_queries} distinct (each scored once), {s.stats.n_truncated} of them cut "
                   "by max_length" + (" (records kept from the earlier run not counted)" if s.n_skipped else ""))
    if s.cached:
        out.append(f"\nscore cache: {s.stats.cache_hits} queries reused, {s.stats.cache_misses} scored"
                   + (f"; disabled ({s.cache_disabled}): scored without it" if s.cache_disabled else ""))
    if len(s.signatures) > 1:
        out.append("\nsignatures (one per evaluator, over the aspects it scored):")
        out += [f"  {name}: {line}" for name, line in s.signatures.items()]
    elif s.signature:
        out.append(f"\nsignature: {s.signature}")
    return "\n".join(out)
