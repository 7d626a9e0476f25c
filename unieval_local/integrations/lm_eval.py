"""lm-evaluation-harness hooks: UniEval aspects as task metrics, from a task YAML (issue 45).

lm-eval calls ``process_results(doc, results)`` once per document, then each metric's
``aggregation`` once over the items of all documents. The hooks here make the per-document
step cheap and put the scoring in the aggregation: ``process_results`` returns, per aspect, an
item ``(aspect, target, source, references, context)``, and :meth:`UniEvalHooks.aggregate`
scores all items of one aspect in ONE :meth:`Scorer.score` call (the whole batch, one model
pass plan) and returns their mean. The process's one scorer per setting
(:func:`~unieval_local.integrations.shared.shared_scorer`) serves every aspect and task.

``!function`` loads a file beside the YAML, so a task folder holds a two-line ``unieval_hooks.py``::

    from unieval_local.integrations.lm_eval import UniEvalHooks
    hooks = UniEvalHooks(task="summarization", aspects=("coherence", "consistency", "fluency"),
                         source_field="document")
    process_results, aggregate = hooks.process_results, hooks.aggregate

and the YAML names them (``docs/integrations/lm_eval_task/`` holds a complete example)::

    process_results: !function unieval_hooks.process_results
    metric_list:
      - metric: unieval_coherence
        aggregation: !function unieval_hooks.aggregate
        higher_is_better: true

The metric for aspect A is called ``unieval_A``. lm-eval gives custom aggregations no
standard error (its bootstrap covers only its own functions). Nothing here imports lm-eval;
nothing is downloaded (the model: ``model=``, else ``$UNIEVAL_LOCAL_MODEL``, else the package's
resolution).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .shared import shared_scorer

__all__ = ["METRIC_PREFIX", "UniEvalHooks"]

#: The metric name of aspect A is ``METRIC_PREFIX + A``.
METRIC_PREFIX = "unieval_"


class UniEvalHooks:
    """``process_results`` and ``aggregate`` for one task's aspects (see the module).

    Args:
        task: summarization, dialogue, data2text or fact.
        aspects: the aspects reported, each as metric ``unieval_<aspect>``.
        source_field: the document field holding the source (None: the aspects need none).
        references_field: the field holding the reference text or list of texts (None: not used).
        context_field: the field holding the context (dialogue's fact; None: not used).
        model, device, scorer_settings: as :func:`~unieval_local.integrations.shared.shared_scorer`.

    Raises:
        UnknownTaskError: an unknown task or aspect (at construction).
    """

    def __init__(self, *, task: str = "summarization", aspects: Sequence[str] = ("coherence",),
                 source_field: str | None = "document", references_field: str | None = None,
                 context_field: str | None = None, model: Any = None, device: str | None = None,
                 scorer_settings: dict[str, Any] | None = None):
        self.task = task
        self.aspects = tuple(aspects)
        self.fields = {"source": source_field, "references": references_field, "context": context_field}
        self._settings = dict(scorer_settings or {}, model=model, device=device)
        registry = shared_scorer(**self._settings).registry
        for aspect in self.aspects:
            registry.get_aspect(task, aspect)

    def process_results(self, doc: dict[str, Any], results: Sequence[Any]) -> dict[str, tuple]:
        """One document's items: ``{"unieval_<aspect>": (aspect, target, source, references, context)}``.

        ``results[0]`` is the generated text (``output_type: generate_until``); the other fields
        are read from ``doc`` by the names given at construction.
        """
        target = results[0] if isinstance(results[0], str) else str(results[0])
        values = tuple(None if name is None else doc.get(name) for name in self.fields.values())
        source, references, context = values
        if isinstance(references, str):
            references = (references,)
        elif references is not None:
            references = tuple(references)
        return {METRIC_PREFIX + a: (a, target, source, references, context) for a in self.aspects}

    def score_items(self, items: Sequence[tuple]) -> list[float]:
        """The values of one aspect's items, in order, from ONE scorer call."""
        aspects = {item[0] for item in items}
        if len(aspects) != 1:
            raise ValueError(f"aggregate() got items of several aspects {sorted(aspects)}; one metric, one aspect")
        aspect = aspects.pop()
        examples = []
        for _, target, source, references, context in items:
            example: dict[str, Any] = {"target": target}
            for key, value in (("source", source), ("references", references), ("context", context)):
                if value is not None:
                    example[key] = list(value) if key == "references" else value
            examples.append(example)
        result = shared_scorer(**self._settings).score(examples, task=self.task, aspect=aspect)
        return [float(e.value) for e in result.examples]

    def aggregate(self, items: Sequence[tuple]) -> float:
        """The mean of one aspect over every document (NaN for none), scored as one batch."""
        if not items:
            return float("nan")
        values = self.score_items(items)
        return sum(values) / len(values)
