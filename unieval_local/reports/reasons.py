"""Reasons in the seed formats written by a local instruct model (issue 44, item 4).

The ``rating`` report (seed 000's ``explanation`` / ``global_explanation`` through
:mod:`unieval_local.compat`, seed 001's rating evaluator) and the ``autoeval`` report (seed 003's
``accuracy`` reason of each decomposed point and ``reasoning`` of each adherence rubric) write
these fields from templates around the checkers' probabilities. With a generator staged (the
``generator`` setting: ``NAME=DIR``, or by default the staged ``g-eval`` model:
:func:`unieval_local.claims.resolve_generator`; ``none``: templates), :func:`write_reasons` has the
model word each of them:

* per field, :func:`~unieval_local.text.reasons.reason_messages` with the claim (the metric, the
  summary sentence, the rubric question), the verdict (the rating, supported or not, addressed or
  not: never changed) and the evidence (the template, which quotes the source passage or the
  lowest sentence and gives the probability), in the record's language (``ReportRow.language``);
* every field of every record of the report in ONE batched greedy ``runner.generate`` call
  (:data:`MAX_NEW_TOKENS`, stopped at a blank line);
* a generation that hit the limit (``length``), whose prompt was over the window
  (``too_long``) or that wrote nothing (``empty``) keeps its template: the row's ``reasons``
  marks it, and one run-level note counts them.

Every report row of these formats gets ``reasons`` (:class:`~unieval_local.reports.base.Reasons`):
which fields were generated, which are templates, by which generator. The verdicts, scores and
every other field stay as they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..claims import DEFAULT_GENERATOR, _generator
from ..errors import CheckpointError
from ..text.language import writing_language
from ..text.reasons import read_reason, reason_messages
from .base import Reasons, ReportRow

__all__ = ["FORMATS", "MAX_NEW_TOKENS", "STOP", "reason_fields", "reasons_note", "slug_note", "write_reasons"]

#: New tokens a reason may take (one or two sentences); one that hits it keeps its template.
MAX_NEW_TOKENS = 128
#: A reason is one paragraph: a blank line ends it.
STOP: tuple[str, ...] = ("\n\n",)
#: The report formats whose rows have reasons.
FORMATS = ("rating", "autoeval")


def reason_fields(fmt: str, report: Any) -> list[tuple[str, str, str, str]]:
    """The reason fields of one report: ``(path, claim, verdict, template)`` each, in report order.

    ``rating``: ``summary.global_explanation`` (claim "the summary overall", verdict the
    ``relevancy_rating`` and the possible issues) and ``summary.<metric>.explanation`` per enabled
    metric (verdict ``<score> of 3``). ``autoeval``: ``accuracy.decomposition.<k>.accuracy`` (claim
    the point, verdict supported or not) and ``adherence.rubrics.<k>.reasoning`` (claim the
    question, verdict addressed or not). The template (the field's current text) is the evidence.
    """
    out = []
    if fmt == "rating":
        s = report.summary
        issues = "; ".join(s.possible_issues)
        out.append(("summary.global_explanation", "the summary overall",
                    s.relevancy_rating + (f" ({issues})" if issues else ""), s.global_explanation))
        for m, r in s.metrics.items():
            out.append((f"summary.{m}.explanation", f"the summary's {m}", f"{r.score} of 3", r.explanation))
    elif fmt == "autoeval":
        for k, p in enumerate(report.accuracy.decomposition):
            out.append((f"accuracy.decomposition.{k}.accuracy", p.point,
                        "supported by the source" if p.is_accurate else "not supported by the source", p.accuracy))
        for k, r in enumerate(report.adherence.rubrics):
            yes = r.is_addressed in (True, "True")
            out.append((f"adherence.rubrics.{k}.reasoning", r.question, "addressed" if yes else "not addressed",
                        r.reasoning))
    return out


def _replaced(report: Any, texts: dict[str, str]) -> Any:
    """``report`` with the fields at ``texts``' paths set to its texts (everything else as it was)."""
    if not texts:
        return report
    data = report.model_dump(mode="python")
    for path, text in texts.items():
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = text
    return type(report).model_validate(data)


def _why(gen: Any) -> tuple[str | None, str | None]:
    """``(reason, None)`` of a usable generation, else ``(None, why)``."""
    if gen.finish in ("length", "too_long"):
        return None, gen.finish
    text = read_reason(gen.text)
    return (text, None) if text else (None, "empty")


def write_reasons(rows: Sequence[ReportRow], fmt: str, engine: Any) -> tuple[list[ReportRow], list[str]]:
    """Mark, and with a generator write, the reasons of a report's rows (module docstring).

    Args:
        rows: the report's rows (error rows are passed through). fmt: the format's name (rows of
            formats other than :data:`FORMATS` are returned as they are). engine: the report's
            :class:`~unieval_local.engine.Engine` (its ``generator`` setting).

    Returns:
        ``(rows, notes)``: each reported row with its fields replaced by the generated reasons and
        ``reasons`` set; the run-level notes (how many fields kept their template, and why; the
        default generator that cannot write: the templates stay).

    Raises:
        CheckpointNotFoundError: a ``NAME=DIR`` generator whose folder is not there.
        CheckpointError: a ``NAME=DIR`` generator that is not an instruct model (no chat template).
    """
    rows = list(rows)
    todo = {i: reason_fields(fmt, r.report) for i, r in enumerate(rows)
            if fmt in FORMATS and r.report is not None}
    if not todo:
        return rows, []
    notes: list[str] = []
    gen = _generator(engine)
    prompts, where = [], []
    if gen is not None:
        runner = gen[1]
        try:
            for i, fields in todo.items():
                lang = writing_language(rows[i].language)
                for path, claim, verdict, template in fields:
                    prompts.append(runner.chat_prompt(reason_messages(claim, verdict, template, lang)))
                    where.append((i, path))
        except CheckpointError as exc:
            if engine.settings.generator is not None:  # named by the user: refused, never ignored
                raise
            notes.append(f"the reasons are templates: the staged {DEFAULT_GENERATOR} model cannot write them ({exc})")
            gen, prompts, where = None, [], []
    made = gen[1].generate(prompts, max_new_tokens=MAX_NEW_TOKENS, stop=STOP) if prompts else []
    written: dict[int, dict[str, str]] = {i: {} for i in todo}
    failed: dict[int, dict[str, str]] = {i: {} for i in todo}
    for (i, path), g in zip(where, made):
        text, why = _why(g)
        if text is None:
            failed[i][path] = why
        else:
            written[i][path] = text
    for i, fields in todo.items():
        marks = {path: "generated" if path in written[i] else "template" for path, *_ in fields}
        kinds = set(marks.values())
        source = "mixed" if len(kinds) > 1 else kinds.pop() if kinds else ("template" if gen is None else "generated")
        reasons = Reasons(source=source, generator=None if gen is None else gen[0], fields=marks, failed=failed[i])
        rows[i] = rows[i].model_copy(update={"report": _replaced(rows[i].report, written[i]), "reasons": reasons})
    whys = Counter(why for per in failed.values() for why in per.values())
    if whys:
        notes.append(f"{sum(whys.values())} of {len(where)} reasons kept their template because the generator "
                     f"{gen[0]} failed on them ({', '.join(f'{k}: {v}' for k, v in sorted(whys.items()))}; length: "
                     f"hit {MAX_NEW_TOKENS} new tokens, too_long: the prompt is over its window, empty: no text); "
                     "each report's reasons.failed names them")
    return rows, notes


def reasons_note(reasons: Reasons | None) -> str | None:
    """The mark of one row's reasons as a note, for the answers whose shape has no room for
    ``reasons`` (the HTTP service's rating and autoeval routes): None without a generator (the
    templates, as documented), else which fields the generator wrote and which kept their template.

    Example:
        >>> reasons_note(Reasons(source="mixed", generator="g-eval", fields={"a": "generated", "b": "template"},
        ...                      failed={"b": "length"}))
        'the reasons were written by the local generator g-eval: 1 of 2 fields (a); templates: b (length)'
    """
    if reasons is None or reasons.generator is None:
        return None
    made = [p for p, how in reasons.fields.items() if how == "generated"]
    kept = [f"{p} ({reasons.failed.get(p, 'template')})" for p, how in reasons.fields.items() if how == "template"]
    return (f"the reasons were written by the local generator {reasons.generator}: {len(made)} of "
            f"{len(reasons.fields)} fields ({', '.join(made) or 'none'})" + (f"; templates: {', '.join(kept)}"
                                                                              if kept else ""))


def slug_note(model_slug: str | None, engine: Any) -> str | None:
    """The note on a hosted request's ``model_slug`` (the hosted model it asked for): None when it
    is None; when it names the staged generator (its NAME), that the texts are written by it;
    else that it is ignored (no hosted model is called), naming what writes the texts here
    (a custom-run body's ``model_slug``: :func:`unieval_local.reports.plan_report`)."""
    if model_slug is None:
        return None
    from ..claims import resolve_generator

    found = resolve_generator(engine)
    if found is not None and str(model_slug).strip() == found[0]:
        return (f"model_slug {model_slug!r}: the texts (claims, key points, reasons) are written by the staged local "
                f"generator {found[0]}; the scores come from the local checkpoints")
    here = f"the local generator {found[0]}" if found is not None else "templates (no generator staged)"
    return (f"model_slug {model_slug!r} is ignored: no hosted model is called; the scores come from the local "
            f"checkpoints and the texts (claims, key points, reasons) from {here}")

