"""The registry of tasks and aspects: one data-driven table, no per-aspect code.

Each aspect is a Boolean question put to a T5 checkpoint, over some fields of
the example. The prompt of one query is (UniEval, ``utils.add_question``)::

    question: <question> </s> <label 1>: <value 1> </s> <label 2>: <value 2> ...

The templates, granularity and reduction are those of UniEval (Zhong et al.,
EMNLP 2022, arXiv 2210.07197, Sec. 3 and the public code ``maszhongming/UniEval``),
restated in ``shared/UNIEVAL_CONTRACT.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .errors import UnknownTaskError

Granularity = Literal["output", "sentence"]
Reduction = Literal["mean", "sum", "min"]

#: Checkpoint names (the folder names under ``UNIEVAL_LOCAL_HOME``) and their hub ids.
CHECKPOINTS: dict[str, str] = {
    "unieval-sum": "MingZhong/unieval-sum",
    "unieval-dialog": "MingZhong/unieval-dialog",
    "unieval-fact": "MingZhong/unieval-fact",
}


@dataclass(frozen=True)
class PromptField:
    """One labelled field of a prompt: ``<label>: <value of field>``.

    ``field`` is a field of :class:`~unieval_local.schema.UniEvalData`:
    ``target`` (replaced by each sentence at sentence granularity), ``source``,
    ``context``, ``references`` (one query per reference) or any extra field.
    """

    label: str
    field: str


@dataclass(frozen=True)
class Aspect:
    """One (task, aspect) pair: the question, its fields and how scores reduce.

    Attributes:
        task: task name, e.g. ``summarization``.
        name: aspect name, e.g. ``coherence``.
        question: the question text, e.g. ``Is this a coherent summary to the document?``.
        fields: the labelled fields after the question, in prompt order.
        granularity: ``output`` (one query for the whole target) or ``sentence``
            (one query per Punkt sentence of the target).
        reduction: how sentence scores combine into the example's score
            (``mean``; ``sum`` for UniEval's dialogue engagingness; ``min``).
        checkpoint: checkpoint name, a key of :data:`CHECKPOINTS` or a user's.
        description: one line for ``--help`` and the README table.
    """

    task: str
    name: str
    question: str
    fields: tuple[PromptField, ...]
    granularity: Granularity = "output"
    reduction: Reduction = "mean"
    checkpoint: str = "unieval-sum"
    description: str = ""

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The example fields this aspect needs, in prompt order (``target`` always)."""
        names = [f.field for f in self.fields]
        if "target" not in names:
            names.insert(0, "target")
        return tuple(dict.fromkeys(names))

    @property
    def value_range(self) -> str:
        """Human-readable range of one example's score."""
        if self.granularity == "sentence" and self.reduction == "sum":
            return "[0, n_sentences]"
        return "[0, 1]"


@dataclass(frozen=True)
class Task:
    """A task: its name and its aspects, keyed by aspect name."""

    name: str
    aspects: dict[str, Aspect] = field(default_factory=dict)
    description: str = ""


def _fields(*pairs: tuple[str, str]) -> tuple[PromptField, ...]:
    return tuple(PromptField(label, name) for label, name in pairs)


_SUM = "summarization"

TASKS: dict[str, Task] = {
    _SUM: Task(
        name=_SUM,
        description="Summaries of a source document (UniEval, SummEval-trained).",
        aspects={
            "coherence": Aspect(
                _SUM,
                "coherence",
                "Is this a coherent summary to the document?",
                _fields(("summary", "target"), ("document", "source")),
                description="the summary is well structured and organised, given the document",
            ),
            "consistency": Aspect(
                _SUM,
                "consistency",
                "Is this claim consistent with the document?",
                _fields(("claim", "target"), ("document", "source")),
                granularity="sentence",
                description="every summary sentence is supported by the document (mean over sentences)",
            ),
            "fluency": Aspect(
                _SUM,
                "fluency",
                "Is this a fluent paragraph?",
                _fields(("paragraph", "target")),
                granularity="sentence",
                description="each sentence is well formed (mean over sentences)",
            ),
            "relevance": Aspect(
                _SUM,
                "relevance",
                "Is this summary relevant to the reference?",
                _fields(("summary", "target"), ("reference", "references")),
                description="the summary holds the reference's important content (mean over references)",
            ),
        },
    ),
}


def task_names() -> list[str]:
    """Names of all registered tasks, in registry order."""
    return list(TASKS)


def get_task(task: str) -> Task:
    """Return the :class:`Task` named ``task``.

    Raises:
        UnknownTaskError: the name is not registered; the message lists valid names.
    """
    try:
        return TASKS[task]
    except (KeyError, TypeError):
        raise UnknownTaskError(
            f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}"
        ) from None


def get_aspect(task: str, aspect: str) -> Aspect:
    """Return the :class:`Aspect` ``aspect`` of ``task``.

    Raises:
        UnknownTaskError: unknown task or aspect; the message lists the valid ones.
    """
    t = get_task(task)
    try:
        return t.aspects[aspect]
    except (KeyError, TypeError):
        raise UnknownTaskError(
            f"unknown aspect {aspect!r} for task {task!r}; "
            f"valid aspects: {', '.join(t.aspects)}"
        ) from None
