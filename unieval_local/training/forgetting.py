"""The forgetting report: how a several-aspect base's OTHER aspects fared in training.

``--forgetting FILE`` names rated records (human scores per aspect: the ``human`` object of
``scripts/convert_summeval.py``'s output, read as ``human.ASPECT``, or the fields named by
``--forgetting-field ASPECT=FIELD[,ASPECT=FIELD]``). They are scored with the base and with the
trained folder through the ordinary scoring path on the base's other aspects
(:func:`~unieval_local.training.replay.other_aspects`); per aspect the report gives the sample-level
Spearman and Kendall correlations with the human scores before and after
(:func:`~unieval_local.analysis.meta.correlations`, UniEval's ``reproduce/correlation.py``) and
the mean absolute change of the scores. Without the flag the report says "forgetting not measured".
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputFileError

__all__ = ["NOT_MEASURED", "forgetting_fields", "forgetting_table", "measure_forgetting"]

#: The report's entry when no ``--forgetting`` file was given.
NOT_MEASURED = {"note": "forgetting not measured (give --forgetting FILE of rated records)"}


def forgetting_fields(spec: str | None) -> dict[str, str]:
    """``{aspect: field}`` of ``--forgetting-field`` (``ASPECT=FIELD[,ASPECT=FIELD]``).

    Raises:
        ValueError: an entry without ``=``.
    """
    out: dict[str, str] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        name, eq, fld = part.partition("=")
        if not eq or not name.strip() or not fld.strip():
            raise ValueError(f"--forgetting-field {part!r}: write ASPECT=FIELD, e.g. coherence=expert_coherence")
        out[name.strip()] = fld.strip()
    return out


def _human(records: list[dict[str, Any]], where: str, aspects: list[str], fields: dict[str, str]):
    from .data import _field

    out: dict[str, np.ndarray] = {}
    for name in aspects:
        fld = fields.get(name, f"human.{name}")
        if name not in fields:
            try:
                _field(records[0], fld)
            except KeyError:
                continue  # not rated: left out of the report (named in it)
        values = []
        for i, rec in enumerate(records):
            try:
                v = _field(rec, fld)
                x = float(v)
            except KeyError:
                raise InputFileError(f"{where}: row {i}: no field {fld!r} for the human {name} score "
                                     "(--forgetting-field ASPECT=FIELD names another)") from None
            except (TypeError, ValueError):
                raise InputFileError(f"{where}: row {i}: {fld} {v!r} is not a number") from None
            if not math.isfinite(x) or isinstance(v, bool):
                raise InputFileError(f"{where}: row {i}: {fld} {v!r} is not a finite number")
            values.append(x)
        out[name] = np.array(values)
    return out


def _scores(folder: Path, evaluator: str, task: str, names: list[str], staged: Path, where: Path, config,
            progress: bool) -> dict[str, np.ndarray]:
    from ..batch.run import run_batch

    settings = {"model": {evaluator: str(folder)}, "aspects_config": config.aspects_config, "device": config.device,
                "dtype": config.dtype, "max_length": config.max_length, "progress": progress}
    if where.exists():
        where.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        run_batch(staged, where, task=task, aspects=names, settings=settings, progress=progress)
    lines = [json.loads(line) for line in where.read_text(encoding="utf-8").splitlines()]
    out = {n: np.full(len(lines), np.nan) for n in names}
    for rec in lines:
        for n in names:
            v = (rec.get("scores") or {}).get(n)
            if v is not None:
                out[n][rec["index"]] = v
    return out


def measure_forgetting(config, evaluator: str, task: str, aspect, base: Path, trained: Path, work: Path,
                       progress: bool) -> dict[str, Any]:
    """The forgetting entry of the report (module docstring): ``{"aspects": {name: {"rows", "before":
    {spearman, kendall}, "after": {...}, "mean_abs_change"}}, "file", "not_rated"}`` or a ``note``.

    Raises:
        InputFileError: an unreadable file, a row without a named human score (row and field named).
        ValueError: a bad ``--forgetting-field``.
    """
    from ..analysis.meta import correlations
    from ..records import read_records, write_jsonl
    from ..registry.user_aspects import registry_with
    from .data import SOURCE_FIELDS, TARGET_FIELDS
    from .replay import other_aspects

    path = Path(config.forgetting)
    if not path.exists():
        raise InputFileError(f"--forgetting {path}: no such file")
    raw = list(read_records(str(path)))
    if not raw:
        raise InputFileError(f"--forgetting {path}: no rows")
    records = []
    for i, row in enumerate(raw):
        rec = dict(row)
        rec.setdefault("target", next((row[k] for k in TARGET_FIELDS if k in row), None))
        src = next((row[k] for k in SOURCE_FIELDS if k in row), None)
        if src is not None:
            rec.setdefault("source", src)
        if rec["target"] is None:
            raise InputFileError(f"--forgetting {path}: row {i}: no target field ({', '.join(TARGET_FIELDS)})")
        records.append(rec)
    fields = forgetting_fields(config.forgetting_field)
    others = [a.name for a in other_aspects(registry_with(config.aspects_config), task, aspect, evaluator, records)]
    if not others:
        return {"note": f"{evaluator} scores no other aspect of {task} on {path}: nothing to forget", "file": str(path)}
    unknown = sorted(set(fields) - set(others))
    if unknown:
        raise ValueError(f"--forgetting-field names {', '.join(unknown)}: not another aspect of {task} the base "
                         f"scores on these records ({', '.join(others)})")
    human = _human(records, f"--forgetting {path}", others, fields)
    names = list(human)
    if not names:
        return {"note": f"{path}: no human scores of {', '.join(others)} (human.ASPECT, or --forgetting-field)",
                "file": str(path)}
    work.mkdir(parents=True, exist_ok=True)
    staged = work / "forgetting.input.jsonl"
    write_jsonl(staged, [{k: v for k, v in r.items() if k in ("target", "source", "references", "context")}
                         for r in records])
    before = _scores(base, evaluator, task, names, staged, work / "forgetting.base.jsonl", config, progress)
    after = _scores(trained, evaluator, task, names, staged, work / "forgetting.trained.jsonl", config, progress)
    out: dict[str, Any] = {}
    for n in names:
        ok = np.isfinite(before[n]) & np.isfinite(after[n])
        b, a, h = before[n][ok], after[n][ok], human[n][ok]
        cb, ca = correlations(b, h), correlations(a, h)
        out[n] = {"rows": int(ok.sum()), "before": {m: cb[m] for m in ("spearman", "kendall")},
                  "after": {m: ca[m] for m in ("spearman", "kendall")},
                  "mean_abs_change": float(np.mean(np.abs(a - b))) if ok.any() else math.nan}
    return {"file": str(path), "level": "sample", "aspects": out, "not_rated": [n for n in others if n not in human]}


def forgetting_table(entry: dict[str, Any]) -> str:
    """The printed lines of the forgetting entry."""
    if "aspects" not in entry:
        return entry["note"]
    lines = [f"forgetting on {entry['file']} (sample level, {', '.join(entry['aspects'])}):",
             f"  {'aspect':<16} {'rows':>5} {'spearman before':>16} {'after':>8} {'kendall before':>15} {'after':>8} "
             f"{'mean |change|':>14}"]
    for n, e in entry["aspects"].items():
        lines.append(f"  {n:<16} {e['rows']:>5} {e['before']['spearman']:>16.4f} {e['after']['spearman']:>8.4f} "
                     f"{e['before']['kendall']:>15.4f} {e['after']['kendall']:>8.4f} {e['mean_abs_change']:>14.4f}")
    return "\n".join(lines)
