"""Joining shard outputs (``unieval-local merge``): same run, same input, every shard once and
complete, no key missing or repeated; written atomically under the output's lock."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import MergeError, OutputWriteError
from ..locks import is_stream_path, output_lock
from .output import read_output, replace_atomically, sidecar_path
from .resume import comparable_run
from .summary import BatchSummary, summarize

__all__ = ["merge_outputs"]


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
            replace_atomically(Path(os.path.realpath(target)), data)
    except OSError as exc:
        raise OutputWriteError(exc.errno, f"writing {output} failed: {exc.strerror or exc}; the shards are "
                               "unchanged: fix the cause and merge again") from exc
    aspects = metas[0]["run"]["signature"]["aspect"].split("+")
    summary = summarize(merged, aspects)
    summary.signature = None
    return summary
