"""The first pass over a batch run's input, before any model loads: how many records each
aspect can score (:func:`survey_input`), and the message when none can
(:func:`nothing_to_score_message`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ..fields import hinted_field
from ..pipeline.validate import check_example, parse_example
from ..records import InputSpec, iter_records
from .resume import shard_of

__all__ = ["Survey", "nothing_to_score_message", "survey_input"]


@dataclass
class Survey:
    """What a first pass over the input found, before any model is loaded.

    Attributes:
        n_records: records in the input; ``n_in_shard`` of them in this run's shard.
        fields: field name -> records of the shard that have it (objects only).
        scorable: aspect -> records of the shard whose fields that aspect can use.
        n_invalid: records of the shard that were read but do not parse as a record (a field
            of the wrong type, a bad ``language`` code); ``first_invalid``: the first one's
            ``record N: <problem>``.
        n_unreadable: records of the shard that could not be read (invalid JSON or CSV, a
            UTF-16 surrogate); ``first_unreadable``: the first one's ``record N: <error>``.
    """

    n_records: int = 0
    n_in_shard: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    scorable: dict[str, int] = field(default_factory=dict)
    n_invalid: int = 0
    first_invalid: str | None = None
    n_unreadable: int = 0
    first_unreadable: str | None = None


def survey_input(path: InputSpec, registry, task: str, aspects: Sequence[str],
                 shard: tuple[int, int] | None = None) -> Survey:
    """Parse every record of ``path`` once and count, per aspect, the records it can score
    (:func:`~unieval_local.pipeline.validate.check_example`; sentence splitting is not run). Cheap: no model.

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
            s.n_invalid += 1
            if problems and s.first_invalid is None:
                s.first_invalid = f"record {rec.index}: {problems[0].describe()}"
            continue
        for a, asp in resolved.items():
            if not check_example(rec.index, ex, [asp]):
                s.scorable[a] += 1
    s.fields = dict(fields)
    return s


def nothing_to_score_message(survey: Survey, registry, task: str, aspects: Sequence[str], path: InputSpec,
                             unavailable: Collection[str] = ()) -> str:
    """One line: no record of ``path`` can be scored for ``aspects``; the fields found, what each
    aspect needs, the renames that would help (:data:`~unieval_local.fields.ALIASES`),
    the aspects that could run (their fields are there and their evaluator is: none of
    ``unavailable``), and how many records could not be read or are not valid records (with the
    first one's error)."""
    found = ", ".join(sorted(survey.fields)) or "none"
    needs = "; ".join(f"{a} needs {', '.join(registry.get_aspect(task, a).required_fields)}" for a in aspects)
    renames = [f"'{k}' to '{hinted_field(k)}'" for k in sorted(survey.fields)
               if hinted_field(k) and hinted_field(k) not in survey.fields]
    fix = f" Did you mean: rename {', '.join(renames)}?" if renames else ""
    can = [a for a in registry.get_task(task).aspects
           if a not in aspects and a not in unavailable and survey.scorable.get(a, 0) > 0]
    if can:
        fix += " These aspects can run on these records: " + " ".join(f"--aspect {a}" for a in can) + "."
    if survey.n_invalid:
        fix += (f" {survey.n_invalid} of the {survey.n_in_shard} records are not valid records (first: "
                f"{survey.first_invalid}).")
    if survey.n_unreadable:
        fix += (f" {survey.n_unreadable} of the {survey.n_in_shard} records could not be read (first: "
                f"{survey.first_unreadable}).")
    n = survey.n_in_shard
    return (f"no record of {path} can be scored for {', '.join(aspects)} ({n} record{'s' if n != 1 else ''}): "
            f"{'the records have' if n != 1 else 'the record has'} fields {found}; {needs}.{fix}")
