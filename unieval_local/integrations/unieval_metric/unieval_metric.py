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

    Args (of ``evaluate.load``, beside ``config_name``):
        model: a checkpoint folder or ``{evaluator: folder}``; None: ``$UNIEVAL_LOCAL_MODEL``, else the
            package's resolution.
        device: ``cpu``, ``cuda`` or ``cuda:N``; None: CUDA when available.
        scorer_settings: any other :class:`Scorer` keywords (``dtype``, ``max_length``, ...).
    """

    def __init__(self, *args: Any, model: Any = None, device: str | None = None,
                 scorer_settings: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._settings = dict(scorer_settings or {}, model=model, device=device)

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

    def compute(self, *, predictions: Sequence[str] | None = None, references: Sequence[Any] | None = None,
                sources: Sequence[str] | None = None, contexts: Sequence[str] | None = None,
                task: str = "summarization", aspects: Sequence[str] | str | None = None) -> dict[str, Any]:
        """Score every prediction for every aspect in ONE scorer call (see ``_INPUTS`` for the arguments).

        Overrides ``evaluate``'s ``compute`` (no ``add_batch`` cache: references are optional
        and per-example lists). Raises the package's errors: ``InvalidExampleError`` listing
        each example, aspect and missing field; ``CheckpointNotFoundError`` for a missing
        checkpoint (nothing is downloaded); ``UnknownTaskError`` for an unknown name.
        """
        if predictions is None:
            raise ValueError("compute() needs predictions= (the generated texts)")
        scorer = shared_scorer(**self._settings)
        names = self._aspects(scorer, task, aspects)
        result = scorer.evaluate(task=task, aspects=names, targets=list(predictions),
                                 sources=None if sources is None else list(sources),
                                 references=None if references is None else list(references),
                                 contexts=None if contexts is None else list(contexts))
        out: dict[str, Any] = {}
        for name, values in aspect_columns(result, result.aspects).items():
            out[name] = values
            out[name + "_mean"] = float(result.per_aspect[name].overall.value) if values else float("nan")
        sigs = result.signatures
        out["signature"] = str(result.signature) if result.signature is not None else \
            "; ".join(f"{k}: {v}" for k, v in sigs.items())
        return out

    def _compute(self, predictions: Any = None, references: Any = None) -> dict[str, Any]:
        raise NotImplementedError("UniEvalMetric overrides compute(); add_batch() is not supported")
