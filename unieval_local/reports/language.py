"""Reports by language: each record's language picks its consistency checker and its
explanations' language, and the records of one language go to the model together.

:func:`language_options` gives the options a record of some language is reported with:

* ``consistency_aspect``: when the options do not choose one (``consistency_aspect`` not set
  by the user) and the record's language is outside the default checker's training languages
  (unieval-sum: English) but inside the multilingual NLI evaluator's (mdeberta-nli, 27
  languages incl. Chinese and Indonesian), the consistency-like queries (claims, key points,
  support) are asked of :data:`NLI_CONSISTENCY_ASPECT`, SummaC-ZS over mDeBERTa NLI;
* ``language`` (rating, autoeval): the explanation templates of the record's language when
  the options do not choose one and templates exist for it (English otherwise).

:class:`LanguageGroup` runs a format's request over the records of one language and puts
each row back at its index in the whole input, with its ``language`` and
``consistency_aspect``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine import Job
from ..registry.evaluators import get_evaluator
from ..requests.base import Request, Stage, StageGenerator
from ..text.language import UNDETERMINED, language_name
from .base import ReportPart

__all__ = ["LanguageGroup", "NLI_CONSISTENCY_ASPECT", "auto_consistency", "language_options"]

#: The checker of consistency-like queries for records outside the default checker's languages.
NLI_CONSISTENCY_ASPECT = "fact/nli_support"


def auto_consistency(registry, chosen: str, language: str | None) -> str | None:
    """The checker to use instead of ``chosen`` (the default one) for a record in ``language``:
    :data:`NLI_CONSISTENCY_ASPECT` when ``chosen``'s evaluator was not trained on the language and
    the NLI evaluator was; else None (keep ``chosen``). Undetermined text counts as English."""
    if language in (None, UNDETERMINED, "en"):
        return None
    task, _, aspect = chosen.partition("/")
    trained = get_evaluator(registry.get_aspect(task, aspect).checkpoint).languages
    task, _, aspect = NLI_CONSISTENCY_ASPECT.partition("/")
    nli = get_evaluator(registry.get_aspect(task, aspect).checkpoint).languages
    if trained is None or language in trained or not nli or language not in nli:
        return None
    return NLI_CONSISTENCY_ASPECT


def language_options(options: Any, language: str | None, registry) -> tuple[Any, list[str]]:
    """The options a record in ``language`` is reported with, and the notes that say what
    changed (see the module docstring): ``(options, notes)``. A rating report judged by G-Eval
    asks no consistency checker, so none is routed for it."""
    update: dict[str, Any] = {}
    notes: list[str] = []
    if "consistency_aspect" not in options.model_fields_set and getattr(options, "judge", None) != "g-eval":
        checker = auto_consistency(registry, options.consistency_aspect, language)
        if checker is not None:
            update["consistency_aspect"] = checker
            default = options.consistency_aspect
            evaluator = registry.get_aspect(*checker.split("/")).checkpoint
            old = registry.get_aspect(*default.split("/")).checkpoint
            notes.append(f"the record is in {language_name(language)} ({language}), outside the training languages "
                         f"of {old} ({', '.join(get_evaluator(old).languages or ())}), so its consistency-like "
                         f"checks were answered by {checker} ({evaluator}, a multilingual NLI model trained on "
                         f"{language}); choose another with consistency_aspect / --consistency-aspect")
            if hasattr(options, "cut_points"):  # rating: the card's cut points hold for unieval-sum
                from .rating_config import DEFAULT_CUT_POINTS

                own = tuple(options.cut_points["consistency"]) != tuple(DEFAULT_CUT_POINTS["consistency"])
                notes.append(f"its consistency rating maps {checker} scores with the rating config's own "
                             f"consistency cut points: they hold for {checker} only if they were fitted on its scores"
                             if own else f"its consistency rating maps {checker} scores with cut points fitted for "
                             f"{default}: that rating is not calibrated")
    if "language" in type(options).model_fields and "language" not in options.model_fields_set:
        templates = getattr(options, "templates", None)
        known = templates if templates is not None else getattr(options, "template_languages", ())
        update["language"] = language if language in known else "en"
    return (options.model_copy(update=update) if update else options), notes


def _language_view(engine, language: str | None):
    """The engine as a request of one language sees it: a shallow copy (the same runners,
    caches and locks) whose ``splitter`` is that language's; ``origin`` is the engine itself and
    ``group_language`` the language."""
    import copy

    view = copy.copy(engine)
    view.splitter = engine.splitter_for(language)
    view.origin = getattr(engine, "origin", engine)  # what holds the generator loaded once (generated_points)
    view.group_language = language
    return view


@dataclass
class LanguageGroup(Request[ReportPart]):
    """A format's request over records of one language, its rows put back in the whole input.

    Args:
        inner: the format's request over the group's records (its ``start`` 0).
        indices: each of those records' index in the whole input.
        language: their language (every job the inner request yields is read in it, and the
            engine it plans with splits sentences for it).
        consistency_aspect: the checker the records' options use (written in each row).
        row_notes: notes for every row of the group (e.g. why the checker changed).
        long_input: how every job of the group reads long fields (None: as the inner request
            says, else the engine's mode).

    Answer: the inner request's :class:`ReportPart`, each row's ``index`` mapped through
    ``indices`` and its ``language``, ``consistency_aspect`` and notes added.
    """

    inner: Request
    indices: Sequence[int]
    language: str | None
    consistency_aspect: str | None = None
    row_notes: Sequence[str] = ()
    long_input: str | None = None

    def __post_init__(self) -> None:
        self.size = self.inner.size

    @property
    def later_queries(self) -> int:  # type: ignore[override]
        """The inner request's bound of its later stages' queries."""
        return self.inner.later_queries

    def stages(self, engine) -> StageGenerator:
        gen = self.inner.stages(_language_view(engine, self.language))
        got = None
        try:
            while True:
                stage = gen.send(got) if got is not None else next(gen)
                jobs = {n: Job(j.aspects, j.examples, language=self.language,
                               long_input=self.long_input or j.long_input) for n, j in stage.jobs.items()}
                got = yield Stage(jobs, evidence=stage.evidence, strict=stage.strict)
        except StopIteration as stop:
            part = stop.value
        rows = []
        for row in part.rows:
            update = {"index": self.indices[row.index], "language": self.language}
            if row.error is None:
                update["consistency_aspect"] = self.consistency_aspect
                update["notes"] = [*self.row_notes, *row.notes]
            rows.append(row.model_copy(update=update))
        return ReportPart(rows, part.stats)
