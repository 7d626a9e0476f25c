"""The registry of tasks and aspects: one data-driven table, no per-aspect code.

Each aspect is a Boolean question put to a T5 checkpoint, over some fields of
the example. The prompt of one query is (UniEval, ``utils.add_question``)::

    question: <question> </s> <label 1>: <value 1> </s> <label 2>: <value 2> ...

The templates, granularity and reduction are those of UniEval (Zhong et al.,
EMNLP 2022, arXiv 2210.07197, Sec. 3 and the public code ``maszhongming/UniEval``),
restated in ``shared/UNIEVAL_CONTRACT.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import UnknownTaskError
from ..text.judges import PROMETHEUS_RUBRICS, THEMIS_CRITERIA
from .evaluators import EVALUATORS

__all__ = ["ALL", "ALL_AVAILABLE", "ASPECT_FAMILIES", "Aspect", "CHECKPOINTS", "DEFAULT_REGISTRY", "GROUP_NAMES",
           "Granularity", "PromptField", "Reduction", "Registry", "combined_value", "mixed_scales_note",
           "TASKS", "Task", "aspects_of", "get_aspect", "get_task", "task_names"]

Granularity = Literal["output", "sentence"]
Reduction = Literal["mean", "sum", "min"]

#: Checkpoint names (the folder names under ``UNIEVAL_LOCAL_HOME``) and their hub ids: one per
#: evaluator of the registry (:data:`~unieval_local.registry.evaluators.EVALUATORS`).
CHECKPOINTS: dict[str, str] = {e.name: e.hub_id for e in EVALUATORS.values() if e.hub_id}

#: ``--aspect all`` (and no aspect named): the task's own set, the aspects its own evaluator
#: answers (``Task.checkpoint``: UniEval's four for summarization, five for dialogue, two for
#: data2text, ``consistency`` for fact), the same on every machine whatever else is staged.
ALL = "all"
#: ``--aspect all+``: every aspect of the task whose evaluator is here (the others named in one
#: warning): what ``all`` meant before issue 37, so its meaning depends on what is staged.
ALL_AVAILABLE = "all+"
#: Family groups: name -> the evaluators whose aspects of the task it stands for, as if each were
#: named (a missing checkpoint then fails as a named aspect's does).
ASPECT_FAMILIES: dict[str, tuple[str, ...]] = {
    "geval": ("g-eval",),
    "seahorse": tuple(f"seahorse-large-q{n}" for n in range(1, 7)),
}
#: Every group name ``--aspect`` / ``aspects=`` takes beside aspect names (no aspect may be so named).
GROUP_NAMES: tuple[str, ...] = (ALL, ALL_AVAILABLE, *ASPECT_FAMILIES)


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
        checkpoint: the evaluator (and checkpoint) name: a key of
            :data:`~unieval_local.registry.evaluators.EVALUATORS`, or a hub id (a UniEval-format model).
        description: one line for ``--help`` and the README table.
        chunk_field: the long field that ``long_input="chunk"`` splits into
            windows (``None``: the aspect is fitted instead).
        window_reduction: how scores over windows combine: ``max`` for
            consistency-like aspects (a claim is supported if some passage
            supports it), ``mean`` otherwise.
        chunk_unit: windows hold whole ``sentence`` s, or whole ``line`` s
            (dialogue turns).
        scale: for a rating aspect (G-Eval), K: ratings run 1..K (2 <= K <= 9). Its scores keep
            that scale: the expected rating E in [1, K] (Liu et al., 2023, G-Eval, section 2.3);
            where aspects are combined (an example's ``aspect_mean``, meta-evaluation's
            ``overall``, the HTML report's all-aspect views) an aspect on a 1-K scale enters as
            ``(E - 1) / (K - 1)`` unless every aspect combined has the same scale
            (:func:`combined_value`), and the result says so. None: a probability.
        decompose: decompose, then verify (``fact/claims``: :mod:`unieval_local.claims`): the
            target's claims (written by a staged generator, else its sentences) are each checked
            against the source by the run's claim checker (the ``claim_checker`` setting, whose
            evaluator the engine's registry puts in ``checkpoint``); the score is the share of
            supported claims. ``question`` and ``fields`` are shown, never put in a prompt.
    """

    task: str
    name: str
    question: str
    fields: tuple[PromptField, ...]
    granularity: Granularity = "output"
    reduction: Reduction = "mean"
    checkpoint: str = "unieval-sum"
    description: str = ""
    chunk_field: str | None = None
    window_reduction: Literal["max", "mean"] = "mean"
    chunk_unit: Literal["sentence", "line"] = "sentence"
    scale: int | None = None
    decompose: bool = False

    @property
    def evaluator(self) -> str:
        """The name of the evaluator that answers this aspect (``unieval-sum``,
        ``minicheck-flan-t5-large`` ...: a key of
        :data:`~unieval_local.registry.evaluators.EVALUATORS`). The field is still called
        ``checkpoint`` (its name before evaluators had their own registry; YAML aspects and
        code that read or set it keep working)."""
        return self.checkpoint

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The example fields this aspect needs, in prompt order (``target`` always)."""
        names = [f.field for f in self.fields if f.field != "target"]
        return tuple(dict.fromkeys(["target", *names]))

    @property
    def checks_claims(self) -> bool:
        """True for a claim-vs-document aspect: its fields are the target (the claim) and the
        source (the document), it takes the max over windows of a long document (a claim is
        supported if some passage supports it), and it scores the claim itself (not a decompose
        aspect): what the reports' consistency option and ``fact/claims``' checker may name."""
        return self.required_fields == ("target", "source") and self.window_reduction == "max" and not self.decompose

    @property
    def value_range(self) -> str:
        """Human-readable range of one example's score."""
        if self.granularity == "sentence" and self.reduction == "sum":
            return "[0, n_sentences]"
        if self.scale:
            return f"[1, {self.scale}] (expected rating)"
        return "[0, 1]"


@dataclass(frozen=True)
class Task:
    """A task: its name, its aspects (keyed by name) and its default checkpoint (evaluator)."""

    name: str
    aspects: dict[str, Aspect] = field(default_factory=dict)
    description: str = ""
    checkpoint: str = "unieval-sum"


def _fields(*pairs: tuple[str, str]) -> tuple[PromptField, ...]:
    return tuple(PromptField(label, name) for label, name in pairs)


def _task(name: str, checkpoint: str, description: str, aspects: list[Aspect]) -> Task:
    return Task(name, {a.name: a for a in aspects}, description, checkpoint)


_SUM, _DIA, _D2T, _FACT = "summarization", "dialogue", "data2text", "fact"

#: SEAHORSE's six questions in order (q1..q6: checkpoints seahorse-large-q1..q6): aspect name, the
#: question (shown, never put in the prompt: SEAHORSE's prompt has no question) and one line.
_SEAHORSE_ASPECTS = (
    ("comprehensible", "Is the summary comprehensible?",
     "SEAHORSE Q1: the summary can be read and understood (P('1'), mT5-large)"),
    ("repetition", "Is the summary free of unnecessary repetition?",
     "SEAHORSE Q2: the summary does not repeat itself needlessly (P('1'), mT5-large)"),
    ("grammar", "Is the summary grammatical?",
     "SEAHORSE Q3: the summary is grammatically correct (P('1'), mT5-large)"),
    ("attribution", "Is all the information in the summary fully attributable to the article?",
     "SEAHORSE Q4: the summary is fully supported by the article (P('1'); max over source windows)"),
    ("main_ideas", "Does the summary capture the main ideas of the article?",
     "SEAHORSE Q5: the summary captures the article's main ideas (P('1'), mT5-large)"),
    ("conciseness", "Is the summary concise?",
     "SEAHORSE Q6: the summary says it without unneeded words (P('1'), mT5-large)"),
)

#: G-Eval's aspects (Liu et al., 2023, Sec. 2: a task introduction, the criteria, evaluation steps
#: an LLM wrote once for them as the automatic chain of thought, form-filling): name, scale K,
#: fields, and the instructions (written for this package, following that method).
_GEVAL_INTRO = ("You will be given one summary written for a source text. Your task is to rate the summary on "
                "one metric. Read these instructions carefully and refer to them while you rate.\n\n")
_GEVAL_ASPECTS = (
    ("geval_coherence", 5, ("source", "target"),
     "Coherence (1-5): the collective quality of all sentences. The summary should be well structured and "
     "well organised: it builds from sentence to sentence a coherent body of information about the topic, "
     "not a heap of related facts.",
     "1. Read the source text and identify its main topic and key points.\n2. Read the summary and compare it "
     "with the source text: does it cover the topic, and does it present the points in a clear, logical order?\n"
     "3. Assign a coherence score from 1 to 5."),
    ("geval_consistency", 5, ("source", "target"),
     "Consistency (1-5): the factual alignment between the summary and the source text. A consistent summary "
     "states only facts the source supports; penalise summaries that contain invented or contradicted facts.",
     "1. Read the source text carefully and note the main facts and details it gives.\n2. Read the summary and "
     "check every statement against the source: is it supported, contradicted or absent?\n3. Assign a "
     "consistency score from 1 to 5."),
    ("geval_relevance", 5, ("source", "target"),
     "Relevance (1-5): the selection of important content from the source. The summary should include only "
     "the source's important information; penalise redundancy and excess detail.",
     "1. Read the source text and list its most important points.\n2. Read the summary: how many of those "
     "points does it hold, and how much space goes to unimportant or repeated content?\n3. Assign a relevance "
     "score from 1 to 5."),
    ("geval_fluency", 3, ("target",),
     "Fluency (1-3): the quality of the summary's sentences: grammar, spelling, punctuation, word choice and "
     "sentence structure. 1: many errors make it hard to read; 2: some errors, but still readable; 3: few or "
     "no errors, easy to read.",
     "1. Read the summary sentence by sentence.\n2. Note grammatical, spelling and punctuation errors and "
     "awkward phrasing.\n3. Assign a fluency score from 1 to 3."),
)
_GEVAL_LABELS = {"source": "Source Text", "target": "Summary"}
#: The aspects of the judges that reason, in SummEval's order (text/judges.py).
_JUDGE_KEYS = ("coherence", "consistency", "fluency", "relevance")

#: The built-in tasks: UniEval's templates (``utils.add_question``) and reductions (``evaluator.py``).
TASKS: dict[str, Task] = {
    _SUM: _task(_SUM, "unieval-sum", "Summaries of a source document (SummEval-trained).", [
        Aspect(_SUM, "coherence", "Is this a coherent summary to the document?",
               _fields(("summary", "target"), ("document", "source")), chunk_field="source",
               description="the summary is well structured and organised, given the document"),
        Aspect(_SUM, "consistency", "Is this claim consistent with the document?",
               _fields(("claim", "target"), ("document", "source")), granularity="sentence",
               chunk_field="source", window_reduction="max",
               description="every summary sentence is supported by the document (mean over sentences)"),
        Aspect(_SUM, "fluency", "Is this a fluent paragraph?", _fields(("paragraph", "target")),
               granularity="sentence", description="each sentence is well formed (mean over sentences)"),
        Aspect(_SUM, "relevance", "Is this summary relevant to the reference?",
               _fields(("summary", "target"), ("reference", "references")), chunk_field="references",
               description="the summary holds the reference's important content (mean over references)"),
        # SEAHORSE (Clark et al., 2023): one mT5-large checkpoint per question, "premise: <source>
        # hypothesis: <target>", P("1") over the whole vocabulary; the whole summary is one query
        *(Aspect(_SUM, name, f"(SEAHORSE Q{n}) {question}", _fields(("", "source"), ("", "target")),
                 checkpoint=f"seahorse-large-q{n}", chunk_field="source",
                 window_reduction="max" if name == "attribution" else "mean", description=description)
          for n, (name, question, description) in enumerate(_SEAHORSE_ASPECTS, 1)),
        # G-Eval (Liu et al., 2023) with a local instruct model (--model g-eval=DIR): the expected rating
        *(Aspect(_SUM, name, f"{_GEVAL_INTRO}Evaluation Criteria:\n\n{criteria}\n\nEvaluation Steps:\n\n{steps}",
                 _fields(*((_GEVAL_LABELS[f], f) for f in fields)), checkpoint="g-eval", scale=k,
                 description=f"G-Eval {name[6:]} rating 1-{k} (expected over the score tokens; a local LLM), "
                 f"as (rating - 1) / {k - 1}")
          for name, k, fields, criteria, steps in _GEVAL_ASPECTS),
        # Judges that reason (text/judges.py): a generated rationale, then the expected rating 1-5
        *(Aspect(_SUM, f"themis_{key}", f"(Themis) {THEMIS_CRITERIA[key]}",
                 _fields(("", "source"), ("", "target")), checkpoint="themis", scale=5,
                 description=f"Themis-8B's {key} rating 1-5 after its analysis (expected over the rating tokens)")
          for key in _JUDGE_KEYS),
        *(Aspect(_SUM, f"prometheus_{key}", f"(Prometheus 2 rubric) {PROMETHEUS_RUBRICS[key][0]}",
                 _fields(("", "source"), ("", "target")), checkpoint="prometheus-7b-v2.0", scale=5,
                 description=f"Prometheus 2's absolute grade 1-5 of {key} on a rubric, after its feedback "
                 "(expected over the rating tokens)")
          for key in _JUDGE_KEYS),
    ]),
    _DIA: _task(_DIA, "unieval-dialog", "Responses in a knowledge-grounded dialogue (Topical-Chat-trained).", [
        Aspect(_DIA, "naturalness", "Is this a natural response in the dialogue?", _fields(("response", "target")),
               checkpoint="unieval-dialog", description="the response is something a person would say"),
        Aspect(_DIA, "coherence", "Is this a coherent response given the dialogue history?",
               _fields(("response", "target"), ("dialogue history", "source")), checkpoint="unieval-dialog",
               chunk_field="source", chunk_unit="line", description="the response follows from the dialogue history"),
        Aspect(_DIA, "engagingness",
               "Is this an engaging and informative response according to the dialogue history and fact?",
               _fields(("response", "target"), ("dialogue history", "source"), ("fact", "context")),
               granularity="sentence", reduction="sum", checkpoint="unieval-dialog",
               description="SUM over response sentences (UniEval), so it can exceed 1"),
        Aspect(_DIA, "groundedness", "Is this response consistent with knowledge in the fact?",
               _fields(("response", "target"), ("fact", "context")), checkpoint="unieval-dialog",
               chunk_field="context", window_reduction="max", description="the response agrees with the knowledge fact"),
        Aspect(_DIA, "understandability", "Is this an understandable response in the dialogue?",
               _fields(("response", "target")), checkpoint="unieval-dialog",
               description="the response can be understood"),
    ]),
    _D2T: _task(_D2T, "unieval-sum", "Text generated from data, e.g. a dialogue act (SF-RES/SF-HOT).", [
        Aspect(_D2T, "naturalness", "Is this a fluent utterance?", _fields(("utterance", "target")),
               description="the utterance is fluent and natural"),
        Aspect(_D2T, "informativeness", "Is this sentence informative according to the reference?",
               _fields(("sentence", "target"), ("reference", "references")), chunk_field="references",
               description="the sentence carries the reference's information (mean over references)"),
    ]),
    _FACT: _task(_FACT, "unieval-fact", "Factual consistency of any text with a source document.", [
        Aspect(_FACT, "consistency", "Is this claim consistent with the document?",
               _fields(("claim", "target"), ("document", "source")), granularity="sentence",
               checkpoint="unieval-fact", chunk_field="source", window_reduction="max",
               description="every sentence is supported by the document (mean)"),
        # MiniCheck: the document in chunks of 500 words, the claim whole, max over chunks (its own protocol)
        Aspect(_FACT, "support", "(MiniCheck) is the claim supported by the document?",
               _fields(("", "source"), ("", "target")), checkpoint="minicheck-flan-t5-large",
               chunk_field="source", window_reduction="max",
               description="MiniCheck's own protocol: the whole target is one claim, max over document chunks"),
        Aspect(_FACT, "sentence_support", "(MiniCheck) is the claim supported by the document?",
               _fields(("", "source"), ("", "target")), granularity="sentence",
               checkpoint="minicheck-flan-t5-large", chunk_field="source", window_reduction="max",
               description="not MiniCheck's own protocol: each target sentence is a claim, mean over sentences"),
        Aspect(_FACT, "sentence_support_min", "(MiniCheck) is the claim supported by the document?",
               _fields(("", "source"), ("", "target")), granularity="sentence", reduction="min",
               checkpoint="minicheck-flan-t5-large", chunk_field="source", window_reduction="max",
               description="not MiniCheck's own protocol: each target sentence is a claim, min over sentences"),
        # SummaC-ZS (Laban et al., TACL 2022): per target sentence, max over document chunks of
        # P(entailment), mean over sentences; an NLI cross-encoder (multilingual mDeBERTa)
        Aspect(_FACT, "nli_support", "(NLI) does the document entail the sentence?",
               _fields(("", "source"), ("", "target")), granularity="sentence", checkpoint="mdeberta-nli",
               chunk_field="source", window_reduction="max",
               description="SummaC-ZS style: P(entailment) per sentence, max over document chunks, mean over sentences"),
        # HHEM-2.1-Open's own protocol: the whole target against the whole source (up to
        # max_length tokens; --long-input chunk: windows of the source, max over them)
        Aspect(_FACT, "hhem", "(HHEM) is the hypothesis true given the premise?",
               _fields(("", "source"), ("", "target")), checkpoint="hhem-2.1-open",
               chunk_field="source", window_reduction="max",
               description="HHEM-2.1-Open: P(consistent) of the whole target given the source"),
        # FactCG's own protocol: the whole target is one claim, max over 550-word document chunks
        Aspect(_FACT, "factcg", "(FactCG) can we conclude the claim from the paragraph?",
               _fields(("", "source"), ("", "target")), checkpoint="factcg-deberta-large",
               chunk_field="source", window_reduction="max",
               description="FactCG-DeBERTa: P(supported) of the whole target, max over document chunks"),
        # Granite Guardian 3.3's groundedness: 1 - P(yes, the risk) after "<score>"; the source in
        # chunks of 500 words (its format chunks), max over them
        Aspect(_FACT, "groundedness", "(Granite Guardian) is the response grounded in the documents?",
               _fields(("", "source"), ("", "target")), checkpoint="granite-guardian-3.3-8b",
               chunk_field="source", window_reduction="max",
               description="Granite Guardian 3.3: 1 - P(groundedness risk) of the whole target, max over chunks"),
        # decompose, then verify (FActScore, Min et al. 2023): the share of the target's claims the claim
        # checker (--claim-checker, default fact/support: MiniCheck) supports; claims from --generator
        Aspect(_FACT, "claims", "(claims) which of the target's claims does the document support?",
               _fields(("", "source"), ("", "target")), checkpoint="minicheck-flan-t5-large",
               chunk_field="source", window_reduction="max", decompose=True,
               description="share of the target's claims (generated, else its sentences) the claim checker "
                           "supports (>= 0.5)"),
    ]),
}


class Registry:
    """Tasks and their aspects: the built-ins plus, optionally, user-defined aspects.

    Args:
        tasks: task name -> :class:`Task` (default: the built-in :data:`TASKS`).
    """

    def __init__(self, tasks: dict[str, Task] | None = None):
        self.tasks: dict[str, Task] = dict(TASKS if tasks is None else tasks)

    def task_names(self) -> list[str]:
        """Names of all tasks, in registry order."""
        return list(self.tasks)

    def get_task(self, task: str) -> Task:
        """Return the :class:`Task` named ``task``.

        Raises:
            UnknownTaskError: the name is not registered; the message lists valid names.
        """
        try:
            return self.tasks[task]
        except (KeyError, TypeError):
            import difflib

            close = difflib.get_close_matches(str(task).lower(), list(self.tasks), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownTaskError(f"unknown task {task!r}{hint}; valid tasks: {', '.join(self.tasks)}") from None

    def get_aspect(self, task: str, aspect: str) -> Aspect:
        """Return the :class:`Aspect` ``aspect`` of ``task``.

        Raises:
            UnknownTaskError: unknown task or aspect; the message lists the valid ones.
        """
        t = self.get_task(task)
        try:
            return t.aspects[aspect]
        except (KeyError, TypeError):
            raise UnknownTaskError(f"unknown aspect {aspect!r} for task {task!r}{self._hint(task, aspect)}; "
                                   f"valid aspects: {', '.join(t.aspects)}") from None

    def _hint(self, task: str, aspect) -> str:
        """`` (did you mean 'coherence'?)`` for a near miss, or `` (an aspect of task dialogue)``
        for an aspect of other tasks (UnknownTaskError's hint)."""
        import difflib

        if not isinstance(aspect, str):
            return ""
        others = [n for n, t in self.tasks.items() if n != task and aspect in t.aspects]
        if others:
            return f" (it is an aspect of task {', '.join(others)}: choose that task)"
        close = difflib.get_close_matches(aspect.lower(), list(self.tasks[task].aspects), n=1, cutoff=0.6)
        return f" (did you mean {close[0]!r}?)" if close else ""

    def own_aspects(self, task: str) -> list[str]:
        """The task's own set (what ``all`` and no aspect named mean): its aspects whose evaluator
        is the task's own (``Task.checkpoint``), in registry order; a user-defined aspect of the
        task's evaluator among them.

        Raises:
            UnknownTaskError: unknown task.
        """
        t = self.get_task(task)
        return [n for n, a in t.aspects.items() if a.checkpoint == t.checkpoint]

    def aspect_groups(self, task: str) -> dict[str, list[str]]:
        """Group name -> its aspects for ``task``: ``all`` (:meth:`own_aspects`), ``all+`` (every
        aspect of the task; those whose evaluator is not here are left out by the callers) and
        each family of :data:`ASPECT_FAMILIES` that has aspects in the task (``geval``,
        ``seahorse`` for summarization).

        Raises:
            UnknownTaskError: unknown task.
        """
        t = self.get_task(task)
        groups = {ALL: self.own_aspects(task), ALL_AVAILABLE: list(t.aspects)}
        for name, evaluators in ASPECT_FAMILIES.items():
            if members := [n for n, a in t.aspects.items() if a.checkpoint in evaluators]:
                groups[name] = members
        return groups

    def aspect_names(self, task: str, aspects: str | list[str] | tuple[str, ...] | None) -> list[str]:
        """The aspects asked for, in order, without repeats: ``None`` is ``all``; a group name
        (:meth:`aspect_groups`) stands for its aspects; every other name is checked.

        Raises:
            UnknownTaskError: unknown task or aspect (with the valid names).
        """
        groups = self.aspect_groups(task)
        names: list[str] = []
        for a in [ALL] if aspects is None else [aspects] if isinstance(aspects, str) else list(aspects):
            if isinstance(a, str) and a in groups:
                names += groups[a]
            else:
                self.get_aspect(task, a)
                names.append(a)
        return list(dict.fromkeys(names))

    def optional_aspects(self, task: str, aspects: str | list[str] | tuple[str, ...] | None) -> list[str]:
        """The aspects of :meth:`aspect_names` that only ``all+`` brings in: those a caller leaves
        out (named in one warning) when their evaluator is not here. Empty without ``all+``."""
        items = [] if aspects is None else [aspects] if isinstance(aspects, str) else list(aspects)
        if ALL_AVAILABLE not in items:
            return []
        rest = [a for a in items if a != ALL_AVAILABLE]
        named = set(self.aspect_names(task, rest)) if rest else set()
        return [a for a in self.get_task(task).aspects if a not in named]

    def with_aspects(self, extra: list[Aspect]) -> "Registry":
        """A new registry with ``extra`` aspects added to their tasks.

        Raises:
            UnknownTaskError: an aspect names an unknown task.
            ValueError: an aspect already exists in its task.
        """
        tasks = dict(self.tasks)
        for a in extra:
            if a.task not in tasks:
                raise UnknownTaskError(f"unknown task {a.task!r} for aspect {a.name!r}; valid tasks: {', '.join(tasks)}")
            t = tasks[a.task]
            if a.name in t.aspects:
                raise ValueError(f"aspect {a.name!r} already exists for task {a.task!r}")
            tasks[a.task] = Task(t.name, {**t.aspects, a.name: a}, t.description, t.checkpoint)
        return Registry(tasks)


#: The registry of built-in tasks and aspects.
DEFAULT_REGISTRY = Registry()



def combined_value(values: Sequence[float], scales: Sequence[int | None]) -> float:
    """The mean of several aspects' values for one example (``aspect_mean``, meta-evaluation's
    ``overall``), never mixing scales silently.

    Args:
        values: one value per aspect. scales: per aspect, its ``Aspect.scale`` (K of a 1-K
            rating aspect) or None (a probability in [0, 1], or a sum).

    Returns:
        The plain mean when every scale is the same (all probabilities: UniEval's per-sample
        ``overall``; all 1-5 ratings: a 1-5 mean); otherwise the mean with each rating ``E`` on a
        1-K scale entering as ``(E - 1) / (K - 1)`` in [0, 1] (:func:`mixed_scales_note` says so).
    """
    if len(set(scales)) <= 1:
        return float(np.mean(values))
    return float(np.mean([(v - 1.0) / (k - 1) if k else v for v, k in zip(values, scales)]))


def mixed_scales_note(names: Sequence[str], scales: Sequence[int | None]) -> str | None:
    """The note a multi-aspect result carries when :func:`combined_value` rescales (rating
    aspects beside others, or ratings of different scales), else None. ``names``: the aspects;
    ``scales``: each one's ``Aspect.scale``."""
    if len(set(scales)) <= 1:
        return None
    rated = ", ".join(f"{a} (1-{k})" for a, k in zip(names, scales) if k)
    return (f"aspect_mean: {rated} entered as (rating - 1) / (K - 1) in [0, 1], as the aspects' scales differ; "
            "scores keep each aspect's own scale")


def task_names() -> list[str]:
    """Names of the built-in tasks."""
    return DEFAULT_REGISTRY.task_names()


def get_task(task: str) -> Task:
    """The built-in :class:`Task` ``task`` (see :meth:`Registry.get_task`)."""
    return DEFAULT_REGISTRY.get_task(task)


def get_aspect(task: str, aspect: str) -> Aspect:
    """The built-in :class:`Aspect` (see :meth:`Registry.get_aspect`)."""
    return DEFAULT_REGISTRY.get_aspect(task, aspect)


def aspects_of(checkpoint: str) -> list[Aspect]:
    """The built-in aspects scored by evaluator ``checkpoint`` (a key of
    :data:`~unieval_local.registry.evaluators.EVALUATORS`), in registry order; [] for a hub id or
    a name no built-in aspect uses. Advice names them (a long claim: MiniCheck's sentence-level
    ``fact/sentence_support`` beside its whole-target ``fact/support``)."""
    return [a for t in TASKS.values() for a in t.aspects.values() if a.checkpoint == checkpoint]
