"""The autoeval evaluator's report shape: accuracy decomposition, adherence rubrics and
completeness, each with its score (a percentage or ``N/A``), and our ``details`` beside them
(with the ``details`` option). Built by :mod:`unieval_local.reports.autoeval`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .shapes import ClaimWindow, Percent, WithOptionalDetails

__all__ = ["Accuracy", "AccuracyPoint", "Adherence", "AutoevalDetails", "AutoevalReport", "CompletenessDetails",
           "CompletenessEntry", "ContentItem", "Flag", "ItemDetails", "PointDetails", "Rubric", "RubricDetails"]


class AccuracyPoint(BaseModel):
    """One summary sentence: ``accuracy`` is the reason, ``is_accurate`` the verdict."""

    model_config = ConfigDict(frozen=True)

    point: str
    accuracy: str
    is_accurate: bool


class Accuracy(BaseModel):
    """``decomposition``: the summary's points."""

    model_config = ConfigDict(frozen=True)

    decomposition: list[AccuracyPoint]


class Rubric(BaseModel):
    """One adherence rubric: the ``question``, the ``reasoning`` and the verdict."""

    model_config = ConfigDict(frozen=True)

    question: str
    reasoning: str
    is_addressed: Flag


class Adherence(BaseModel):
    """``rubrics``: one per custom section and per free-form instruction."""

    model_config = ConfigDict(frozen=True)

    rubrics: list[Rubric]


class ContentItem(BaseModel):
    """A transcript sentence related to a completeness question, and the summary
    sentence that covers it (``""`` when none does)."""

    model_config = ConfigDict(frozen=True)

    transcript_content: str
    related_content_from_summary: str
    is_covered: Flag


class CompletenessEntry(BaseModel):
    """One completeness question: its ``score`` (percentage of ``content_list`` covered,
    ``"N/A"`` when the list is empty) and the related transcript content."""

    model_config = ConfigDict(frozen=True)

    question: str
    score: Percent
    content_list: list[ContentItem]


class PointDetails(BaseModel):
    """An accuracy point's consistency P(Yes) and the best window of a long source."""

    model_config = ConfigDict(frozen=True)

    point: str
    score: float
    source_window: ClaimWindow | None = None


class RubricDetails(BaseModel):
    """How a rubric was decided: ``kind`` ``free_text`` (``score`` the rubric query's
    P(Yes), ``summary_text`` what it was asked of) or ``categorical`` (``value`` found,
    ``allowed``); ``section`` the section name (None for a free-form instruction)."""

    model_config = ConfigDict(frozen=True)

    question: str
    kind: Literal["free_text", "categorical"]
    section: str | None = None
    instruction: str | None = None
    score: float | None = None
    summary_text: str | None = None
    value: str | None = None
    allowed: list[str] | None = None


class ItemDetails(BaseModel):
    """A content item's offsets in the source, relatedness and best support P(Yes)."""

    model_config = ConfigDict(frozen=True)

    transcript_content: str
    start: int
    end: int
    relatedness: float
    support: float


class CompletenessDetails(BaseModel):
    """A completeness question's relatedness query, how many sentences passed the
    relatedness threshold before the ``max_items_per_question`` cap, and its items."""

    model_config = ConfigDict(frozen=True)

    question: str
    relatedness_query: str
    n_related: int
    items: list[ItemDetails]


class AutoevalDetails(BaseModel):
    """Everything behind an autoeval report (``details`` option)."""

    model_config = ConfigDict(frozen=True)

    accuracy: list[PointDetails]
    adherence: list[RubricDetails]
    completeness: list[CompletenessDetails]


class AutoevalReport(WithOptionalDetails):
    """The ``autoeval`` report of one summary (shape in the module docstring)."""

    model_config = ConfigDict(frozen=True)

    accuracy: Accuracy
    accuracy_score: Percent
    adherence: Adherence
    adherence_score: Percent
    completeness: list[CompletenessEntry]
    completeness_score: Percent
    details: AutoevalDetails | None = None


#: ``"True"``/``"False"`` as the format writes them, or a JSON boolean (``plain_booleans``).
Flag = Literal["True", "False"] | bool
