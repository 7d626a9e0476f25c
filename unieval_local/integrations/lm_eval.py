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

The metric for aspect A is called ``unieval_A``. lm-eval gives a custom aggregation no
standard error (it bootstraps only its own functions and writes ``N/A`` to
``unieval_A_stderr``), so with ``stderr=True`` the hooks also return items for a metric
``unieval_A_stderr`` whose aggregation, :meth:`UniEvalHooks.aggregate_stderr`, reuses the
batch's scores (no second model pass) and gives lm-eval's own formula for a mean
(``mean_stderr``: sample standard deviation, n-1, over sqrt(n)). Listed after ``unieval_A``
in ``metric_list``, its value replaces lm-eval's ``N/A`` in the results, so lm-eval's table
shows it in its ``Stderr`` column. Nothing here imports lm-eval;
nothing is downloaded (the model: ``model=``, else ``$UNIEVAL_LOCAL_MODEL``, else the package's
resolution).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .shared import recall_values, remember_values, scorer_key, shared_scorer

__all__ = ["METRIC_PREFIX", "STDERR_SUFFIX", "UniEvalHooks"]

#: The metric name of aspect A is ``METRIC_PREFIX + A``.
METRIC_PREFIX = "unieval_"
#: The standard error of aspect A's mean is metric ``METRIC_PREFIX + A + STDERR_SUFFIX``
#: (lm-eval's own key for a metric's standard error).
STDERR_SUFFIX = "_stderr"


class UniEvalHooks:
    """``process_results`` and ``aggregate`` for one task's aspects (see the module).

    Args:
        task: summarization, dialogue, data2text or fact.
        aspects: the aspects reported, each as metric ``unieval_<aspect>``.
        source_field: the document field holding the source (None: the aspects need none).
        references_field: the field holding the reference text or list of texts (None: not used).
        context_field: the field holding the context (dialogue's fact; None: not used).
        stderr: also return items for ``unieval_<aspect>_stderr`` (list them in ``metric_list``
            with ``aggregation: !function ....aggregate_stderr``, after ``unieval_<aspect>``).
        model, device, scorer_settings: as :func:`~unieval_local.integrations.shared.shared_scorer`.

    Raises:
        UnknownTaskError: an unknown task or aspect (at construction).
    """

    def __init__(self, *, task: str = "summarization", aspects: Sequence[str] = ("coherence",),
                 source_field: str | None = "document", references_field: str | None = None,
                 context_field: str | None = None, stderr: bool = False, model: Any = None,
                 device: str | None = None, scorer_settings: dict[str, Any] | None = None):
        self.task = task
        self.aspects = tuple(aspects)
        self.stderr = stderr
        self.fields = {"source": source_field, "references": references_field, "context": context_field}
        self._settings = dict(scorer_settings or {}, model=model, device=device)
        registry = shared_scorer(**self._settings).registry
        for aspect in self.aspects:
            registry.get_aspect(task, aspect)

    def process_results(self, doc: dict[str, Any], results: Sequence[Any]) -> dict[str, tuple]:
        """One document's items: ``{"unieval_<aspect>": (aspect, target, source, references, context)}``,
        and the same item under ``"unieval_<aspect>_stderr"`` when ``stderr`` is on.

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
        out: dict[str, tuple] = {}
        for a in self.aspects:
            out[METRIC_PREFIX + a] = (a, target, source, references, context)
            if self.stderr:
                out[METRIC_PREFIX + a + STDERR_SUFFIX] = out[METRIC_PREFIX + a]
        return out

    def score_items(self, items: Sequence[tuple]) -> list[float]:
        """The values of one aspect's items, in order, from ONE scorer call (a batch already
        scored by these hooks is reused: the stderr metric's items are the mean metric's)."""
        # kept for the process, not the hooks object: lm-eval's ``!function`` loads the hooks file once
        # per occurrence in the YAML, so the mean and stderr aggregations belong to two hooks objects
        aspects = {item[0] for item in items}
        if len(aspects) != 1:
            raise ValueError(f"aggregate() got items of several aspects {sorted(aspects)}; one metric, one aspect")
        aspect = aspects.pop()
        cache_key: tuple | None = (scorer_key(**self._settings), self.task, tuple(items))
        try:
            hash(cache_key)
        except TypeError:  # a field holding a list or dict: not kept
            cache_key = None
        kept = None if cache_key is None else recall_values(cache_key)
        if kept is not None:
            return kept
        examples = []
        for _, target, source, references, context in items:
            example: dict[str, Any] = {"target": target}
            for key, value in (("source", source), ("references", references), ("context", context)):
                if value is not None:
                    example[key] = list(value) if key == "references" else value
            examples.append(example)
        result = shared_scorer(**self._settings).score(examples, task=self.task, aspect=aspect)
        values = [float(e.value) for e in result.examples]
        if cache_key is not None:
            remember_values(cache_key, values)
        return list(values)

    def aggregate(self, items: Sequence[tuple]) -> float:
        """The mean of one aspect over every document (NaN for none), scored as one batch."""
        if not items:
            return float("nan")
        values = self.score_items(items)
        return sum(values) / len(values)

    def aggregate_stderr(self, items: Sequence[tuple]) -> float:
        """The standard error of the aspect's mean: sample standard deviation (n-1) over sqrt(n),
        lm-eval's ``mean_stderr`` (NaN for fewer than two documents). The scores come from
        :meth:`score_items`, so a batch the mean metric scored is not scored again."""
        if len(items) < 2:
            return float("nan")
        values = self.score_items(items)
        n = len(values)
        mu = sum(values) / n
        return math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1)) / math.sqrt(n)
