"""UniEval-style scores as a Hugging Face ``evaluate`` metric, offline (issue 45).

Load it by path (never from the hub)::

    import evaluate
    from unieval_local.integrations import evaluate_path
    metric = evaluate.load(evaluate_path(), "default", model="ckpts/unieval-sum")
    metric.compute(predictions=summaries, sources=documents, task="summarization",
                   aspects=["coherence", "fluency"])
    # {"coherence": [...], "coherence_mean": 0.71, "fluency": [...], "fluency_mean": 0.83,
    #  "signature": "unieval-local 0.1.0|unieval-sum@...|summarization|..."}

``config_name`` chooses the evaluator: ``"default"`` scores the task's own aspects (UniEval's
for summarization), an evaluator name (``unieval-sum``, ``minicheck-flan-t5-large``, ...) scores
the task's aspects that evaluator answers, and refuses, by name, an aspect it does not. The
model comes from the ``model=`` keyword of ``evaluate.load`` (a folder, or ``{evaluator:
folder}``), else ``$UNIEVAL_LOCAL_MODEL``, else the package's own resolution
(``$UNIEVAL_LOCAL_HOME/<evaluator>``, the HF cache): never a download. One scorer per process
and setting (:func:`unieval_local.integrations.shared.shared_scorer`).

This file is a script that ``evaluate`` copies and imports by itself: absolute imports only.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import datasets
import evaluate

from unieval_local.integrations.shared import aspect_columns, shared_scorer

__all__ = ["UniEvalMetric"]

_DESCRIPTION = ("UniEval-style multi-aspect scores of generated text (Zhong et al., EMNLP 2022) and the "
                "package's other local evaluators (MiniCheck, SEAHORSE, ...), computed offline.")
_CITATION = """@inproceedings{zhong2022unieval,
  title={Towards a Unified Multi-Dimensional Evaluator for Text Generation},
  author={Zhong, Ming and Liu, Yang and Yin, Da and Mao, Yuning and Jiao, Yizhu and Liu, Pengfei and
          Zhu, Chenguang and Ji, Heng and Han, Jiawei},
  booktitle={EMNLP}, year={2022}}"""
_INPUTS = """
Args:
    predictions: the generated texts (targets), one per example.
    sources: the source documents (or dialogue histories), one per example; None where no aspect needs them.
    references: optional, one text or a list of texts per example (needed by e.g. summarization relevance:
        an aspect that needs them refuses, naming itself and the field, when they are missing).
    contexts: optional, one per example (dialogue's knowledge fact).
    task: summarization (default), dialogue, data2text or fact.
    aspects: aspect names; None: the task's aspects of this module's evaluator (``config_name``).
Returns:
    {ASPECT: [float per example], ASPECT + "_mean": float, "signature": str}; values in [0, 1]
    (dialogue engagingness: [0, n_sentences]; G-Eval and judges: their rating scale).
"""


class UniEvalMetric(evaluate.Metric):
    """An ``evaluate.Metric`` over a shared :class:`~unieval_local.api.Scorer` (see the module).

    Args (of ``evaluate.load``, beside ``config_name``: ``"default"`` or an evaluator's name, else
    ``ValueError`` at load with a did-you-mean):
        model: a checkpoint folder or ``{evaluator: folder}``; None: ``$UNIEVAL_LOCAL_MODEL``, else the
            package's resolution.
        device: ``cpu``, ``cuda`` or ``cuda:N``; None: CUDA when available.
        scorer_settings: any other :class:`Scorer` keywords (``dtype``, ``max_length``, ...).
    """

    def __init__(self, *args: Any, model: Any = None, device: str | None = None,
                 scorer_settings: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._settings = dict(scorer_settings or {}, model=model, device=device)
        self._pending: list[dict[str, Any]] = []
        if self.config_name not in (None, "default"):
            registry = shared_scorer(**self._settings).registry
            known = sorted({spec.checkpoint for task in registry.tasks.values() for spec in task.aspects.values()})
            if self.config_name not in known:
                close = difflib.get_close_matches(self.config_name, known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"config_name {self.config_name!r} is no evaluator{hint}: 'default' (the task's "
                                 f"own aspects) or one of {', '.join(known)}")

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_INPUTS,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "sources": datasets.Value("string")}),
            reference_urls=["https://github.com/maszhongming/UniEval"])

    def _aspects(self, scorer: Any, task: str, aspects: Sequence[str] | str | None) -> list[str] | None:
        """The aspects to score: those named, checked against ``config_name``'s evaluator (None:
        the task's own set, as ``Scorer.evaluate`` resolves it)."""
        table = scorer.registry.get_task(task).aspects
        evaluator = None if self.config_name in (None, "default") else self.config_name
        if aspects is None:
            if evaluator is None:
                return None
            names = [a for a, spec in table.items() if spec.checkpoint == evaluator]
            if not names:
                raise ValueError(f"evaluator {evaluator!r} (config_name) answers no aspect of task {task!r}")
            return names
        names = [aspects] if isinstance(aspects, str) else list(aspects)
        for name in names:
            spec = scorer.registry.get_aspect(task, name)  # unknown: the registry's did-you-mean error
            if evaluator is not None and spec.checkpoint != evaluator:
                raise ValueError(f"aspect {task}/{name} is answered by {spec.checkpoint!r}, not by this module's "
                                 f"evaluator {evaluator!r} (config_name); load it with config_name="
                                 f"{spec.checkpoint!r} or 'default'")
        return names

    def add(self, *, prediction: str | None = None, reference: Any = None, source: str | None = None,
            context: str | None = None) -> None:
        """Keep one example for the next :meth:`compute` (in this process's memory, not
        ``evaluate``'s arrow cache: the module runs in one process).

        Raises:
            ValueError: ``prediction`` is missing.
        """
        if prediction is None:
            raise ValueError("add() needs prediction= (the generated text)")
        self._pending.append({"predictions": prediction, "references": reference, "sources": source,
                              "contexts": context})

    def add_batch(self, *, predictions: Sequence[str] | None = None, references: Sequence[Any] | None = None,
                  sources: Sequence[str] | None = None, contexts: Sequence[str] | None = None) -> None:
        """Keep a batch of examples for the next :meth:`compute` (see :meth:`add`).

        Raises:
            ValueError: ``predictions`` is missing, or a column's length differs from it (named).
        """
        self._pending += self._rows("add_batch", predictions, references, sources, contexts)

    @staticmethod
    def _rows(caller: str, predictions: Sequence[str] | None, references: Sequence[Any] | None,
              sources: Sequence[str] | None, contexts: Sequence[str] | None) -> list[dict[str, Any]]:
        """One dict per example of the columns given to ``caller`` (add_batch or compute).

        Raises:
            ValueError: no predictions, or a column whose length differs from theirs (named).
        """
        if predictions is None:
            raise ValueError(f"{caller}() needs predictions= (the generated texts)")
        n = len(predictions)
        columns = {"references": references, "sources": sources, "contexts": contexts}
        for name, column in columns.items():
            if column is not None and len(column) != n:
                raise ValueError(f"{caller}(): {name} has {len(column)} entries, predictions {n}")
        return [{"predictions": prediction, **{name: None if column is None else column[i]
                                               for name, column in columns.items()}}
                for i, prediction in enumerate(predictions)]

    @staticmethod
    def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any] | None]:
        """The examples as columns (None: a column no example has).

        Raises:
            ValueError: a column given for some examples and not others (their indices named).
        """
        out: dict[str, list[Any] | None] = {"predictions": [r["predictions"] for r in rows]}
        for name in ("references", "sources", "contexts"):
            have = [i for i, r in enumerate(rows) if r[name] is not None]
            if have and len(have) != len(rows):
                lack = [i for i, r in enumerate(rows) if r[name] is None]
                raise ValueError(f"{name} were given for examples {have[:5]} but not for examples {lack[:5]} "
                                 f"(of {len(rows)}, counting those added before): give them for every example "
                                 "or for none (the examples added before are kept)")
            out[name] = [r[name] for r in rows] if have else None
        return out

    def compute(self, *, predictions: Sequence[str] | None = None, references: Sequence[Any] | None = None,
                sources: Sequence[str] | None = None, contexts: Sequence[str] | None = None,
                task: str = "summarization", aspects: Sequence[str] | str | None = None) -> dict[str, Any]:
        """Score every prediction for every aspect in ONE scorer call (see ``_INPUTS`` for the arguments).

        Examples kept by :meth:`add` / :meth:`add_batch` come first, then those passed here (as
        ``evaluate``'s own ``compute``); once the call's arguments are accepted all are forgotten,
        whatever the scorer then does. A call refused for its arguments (a missing or uneven
        column, an aspect this evaluator does not answer) keeps the examples added before it. Overrides
        ``evaluate``'s ``compute``: references are optional and may be lists per example.

        Raises:
            ValueError: no predictions at all, a column given for only some examples, an aspect
                this module's evaluator (``config_name``) does not answer.
            InvalidExampleError: the package's error, listing each example, aspect and missing field.
            CheckpointNotFoundError: a missing checkpoint (nothing is downloaded).
            UnknownTaskError: an unknown task or aspect (with the names it knows).
        """
        rows = list(self._pending)
        if predictions is not None:
            rows += self._rows("compute", predictions, references, sources, contexts)
        elif any(c is not None for c in (references, sources, contexts)):
            raise ValueError("compute() got sources/references/contexts but no predictions= (the generated texts)")
        if not rows:
            raise ValueError("compute() needs predictions= (the generated texts), or examples added before "
                             "with add() / add_batch()")
        columns = self._columns(rows)
        scorer = shared_scorer(**self._settings)
        names = self._aspects(scorer, task, aspects)
        self._pending = []  # the inputs are valid: scored now, forgotten whatever the model does
        result = scorer.evaluate(task=task, aspects=names, targets=columns["predictions"],
                                 sources=columns["sources"], references=columns["references"],
                                 contexts=columns["contexts"])
        out: dict[str, Any] = {}
        for name, values in aspect_columns(result, result.aspects).items():
            out[name] = values
            out[name + "_mean"] = float(result.per_aspect[name].overall.value) if values else float("nan")
        sigs = result.signatures
        out["signature"] = str(result.signature) if result.signature is not None else \
            "; ".join(f"{k}: {v}" for k, v in sigs.items())
        return out

    def _compute(self, predictions: Any = None, references: Any = None) -> dict[str, Any]:
        """Not used: :meth:`compute` is overridden (``evaluate`` requires the method to exist)."""
        raise NotImplementedError("UniEvalMetric overrides compute()")
