"""What makes two runs one: shards (``--shard K/N``: a record's key hashed modulo N), the run
identity a sidecar records and how it is compared (the checkpoint's content, not how its path
was typed), and whether an existing output can be resumed (:func:`resumable`)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from ..errors import ResumeError
from ..hashing import sha256_text
from .output import drop_duplicate_records, read_output, sidecar_path

__all__ = ["comparable_run", "parse_shard", "resumable", "run_differences", "shard_of"]


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
    checkpoint (the same content under a hub id or a folder is the same model); nor the CPU
    threads (signed, but a run resumed with other threads is the same run: issue 29)."""
    out = json.loads(json.dumps(run))
    (out.get("signature") or {}).pop("threads", None)
    if out.get("checkpoint_fingerprints"):
        (out.get("signature") or {}).pop("checkpoint", None)
    return out


def run_differences(old: dict, new: dict) -> list[str]:
    """What differs between two run identities (a sidecar's ``run`` and this run's), one
    ``key: old -> new`` per setting, e.g. ``config.window_overlap: 1 -> 2``; [] when equal."""
    a, b = _flatten(old), _flatten(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


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


def resumable(out_path: Path, resume: bool, run_id: dict, input_fp: dict | None,
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
        kept, dropped = drop_duplicate_records(out_path)
        logging.getLogger("unieval_local").warning(
            "repaired %s: dropped %d duplicate record line(s) (two runs wrote it at once); each record is "
            "kept once, as first written", out_path, dropped)
    return kept, {x["index"] for x in kept}  # the input is unchanged (checked above): index identifies a record
