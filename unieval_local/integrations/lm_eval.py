"""lm-evaluation-harness hooks: UniEval aspects as task metrics, from a task YAML (issue 45).

lm-eval calls ``process_results(doc, results)`` once per document, then each metric's
``aggregation`` once over the items of all documents. The hooks here make the per-document
step cheap and put the scoring in the aggregation: ``process_results`` returns, per aspect, an
item ``{"aspect", "target", "source", "references", "context"}``, and
:meth:`UniEvalHooks.aggregate` scores all items of one aspect in ONE :meth:`Scorer.score` call
(the whole batch, one model pass plan) and returns their mean. The process's one scorer per
setting (:func:`~unieval_local.integrations.shared.shared_scorer`) serves every aspect and task.
lm-eval's samples file (``--log_samples``) therefore holds these items, not per-document scores.

``!function`` loads a file beside the YAML, so a task folder holds a short ``unieval_hooks.py``::

    from unieval_local.integrations.lm_eval import UniEvalHooks
    hooks = UniEvalHooks(task="summarization", aspects=("coherence", "consistency", "fluency"),
                         source_field="document", stderr=True)
    process_results = hooks.process_results
    aggregate, aggregate_stderr = hooks.aggregate, hooks.aggregate_stderr

and the YAML names them (``configs/lm_eval/unieval_summarization/`` holds a complete example)::

    process_results: !function unieval_hooks.process_results
    metric_list:
      - metric: unieval_coherence
        aggregation: !function unieval_hooks.aggregate
        higher_is_better: true
      - metric: unieval_coherence_stderr
        aggregation: !function unieval_hooks.aggregate_stderr
        higher_is_better: false

The metric for aspect A is called ``unieval_A``. lm-eval gives a custom aggregation no
standard error (it bootstraps only its own functions and writes ``N/A`` to
``unieval_A_stderr``), so with ``stderr=True`` the hooks also return items for a metric
``unieval_A_stderr`` whose aggregation, :meth:`UniEvalHooks.aggregate_stderr`, reuses the
batch's scores (no second model pass) and gives lm-eval's own formula for a mean
(``mean_stderr``: sample standard deviation, n-1, over sqrt(n)). Listed after ``unieval_A``
in ``metric_list``, its value replaces lm-eval's ``N/A`` in the results, so lm-eval's table
shows it in its ``Stderr`` column.

A document the aspect cannot score (an empty generation, a missing reference) would otherwise
fail the whole aggregation after every generation is done. ``on_invalid`` says what happens:
``"skip"`` (the default) leaves it out of the mean and the standard error with a warning naming
each such document (its position in lm-eval's order) and why; ``"error"`` raises the package's
``InvalidExampleError``; a number scores it as that number (e.g. ``0.0``). Nothing here imports
lm-eval; nothing is downloaded (the model: ``model=``, else ``$UNIEVAL_LOCAL_MODEL``, else the
package's resolution).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidExampleError
from .shared import check_on_invalid, recall_values, remember_values, scorer_key, shared_scorer

__all__ = ["METRIC_PREFIX", "STDERR_SUFFIX", "UniEvalHooks"]

#: The metric name of aspect A is ``METRIC_PREFIX + A``.
METRIC_PREFIX = "unieval_"
#: The standard error of aspect A's mean is metric ``METRIC_PREFIX + A + STDERR_SUFFIX``
#: (lm-eval's own key for a metric's standard error).
STDERR_SUFFIX = "_stderr"
_FIELDS = ("source", "references", "context")


class UniEvalHooks:
    """``process_results``, ``aggregate`` and ``aggregate_stderr`` for one task's aspects (see the module).

    Args:
        task: summarization, dialogue, data2text or fact.
        aspects: the aspects reported, each as metric ``unieval_<aspect>``.
        source_field: the document field holding the source (None: the aspects need none).
        references_field: the field holding the reference text or list of texts (None: not used).
        context_field: the field holding the context (dialogue's fact; None: not used).
        stderr: also return items for ``unieval_<aspect>_stderr`` (list them in ``metric_list``
            with ``aggregation: !function ....aggregate_stderr``, after ``unieval_<aspect>``).
        on_invalid: a document the aspect cannot score: ``"skip"`` (left out, with a warning),
            ``"error"`` (``InvalidExampleError``) or a number (its value).
        model, device, scorer_settings: as :func:`~unieval_local.integrations.shared.shared_scorer`.

    Raises:
        UnknownTaskError: an unknown task or aspect (at construction).
        ValueError: ``on_invalid`` is none of the three.
    """

    def __init__(self, *, task: str = "summarization", aspects: Sequence[str] = ("coherence",),
                 source_field: str | None = "document", references_field: str | None = None,
                 context_field: str | None = None, stderr: bool = False, on_invalid: str | float = "skip",
                 model: Any = None, device: str | None = None, scorer_settings: dict[str, Any] | None = None):
        check_on_invalid(on_invalid, ("skip", "error"))
        self.task = task
        self.aspects = tuple(aspects)
        self.stderr = stderr
        self.on_invalid = on_invalid
        self.fields = {"source": source_field, "references": references_field, "context": context_field}
        self._settings = dict(scorer_settings or {}, model=model, device=device)
        registry = shared_scorer(**self._settings).registry
        for aspect in self.aspects:
            registry.get_aspect(task, aspect)

    def process_results(self, doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
        """One document's items: ``{"unieval_<aspect>": {"aspect", "target", "source", "references",
        "context"}}``, and the same item under ``"unieval_<aspect>_stderr"`` when ``stderr`` is on.

        ``results[0]`` is the generated text (``output_type: generate_until``); the other fields
        are read from ``doc`` by the names given at construction (None where not given).
        """
        target = results[0] if isinstance(results[0], str) else str(results[0])
        item: dict[str, Any] = {"target": target}
        for key, name in self.fields.items():
            item[key] = None if name is None else doc.get(name)
        if isinstance(item["references"], str):
            item["references"] = [item["references"]]
        elif item["references"] is not None:
            item["references"] = list(item["references"])
        out: dict[str, dict[str, Any]] = {}
        for a in self.aspects:
            out[METRIC_PREFIX + a] = {"aspect": a, **item}
            if self.stderr:
                out[METRIC_PREFIX + a + STDERR_SUFFIX] = out[METRIC_PREFIX + a]
        return out

    def score_items(self, items: Sequence[dict[str, Any]]) -> list[float | None]:
        """The values of one aspect's items, in order, from ONE scorer call; None for an item
        left out (``on_invalid="skip"``). A batch already scored in this process is reused (the
        stderr metric's items are the mean metric's; lm-eval's ``!function`` loads the hooks file
        once per occurrence, so the two aggregations belong to two hooks objects).

        Raises:
            ValueError: items of several aspects (one metric, one aspect).
            InvalidExampleError: ``on_invalid="error"`` and an item the aspect cannot score.
        """
        aspects = {item["aspect"] for item in items}
        if len(aspects) != 1:
            raise ValueError(f"aggregate() got items of several aspects {sorted(aspects)}; one metric, one aspect")
        aspect = aspects.pop()
        key = (scorer_key(**self._settings), self.task, repr(self.on_invalid),
               json.dumps(list(items), sort_keys=True, default=str))
        kept = recall_values(key)
        if kept is not None:
            return kept
        examples = [{"target": item["target"], **{f: item[f] for f in _FIELDS if item.get(f) is not None}}
                    for item in items]
        values = self._score(examples, aspect)
        remember_values(key, values)
        return values

    def _score(self, examples: list[dict[str, Any]], aspect: str) -> list[float | None]:
        """One scorer call over the examples; those the aspect cannot score per ``on_invalid``."""
        scorer = shared_scorer(**self._settings)
        try:
            return [float(e.value) for e in scorer.score(examples, task=self.task, aspect=aspect).examples]
        except InvalidExampleError as exc:
            bad = {p.index for p in exc.problems if p.index is not None}
            if self.on_invalid == "error" or not bad:
                raise
            why = "; ".join(f"document {p.index}: {self._words(p.field)}: {p.message}" for p in exc.problems[:10])
            more = f" (and {len(exc.problems) - 10} more)" if len(exc.problems) > 10 else ""
            fill = None if self.on_invalid == "skip" else float(self.on_invalid)
            warnings.warn(f"{METRIC_PREFIX}{aspect}: {len(bad)} of {len(examples)} documents cannot be scored, "
                          + ("left out of the mean and its stderr" if fill is None else f"each scored {fill}")
                          + f" (on_invalid={self.on_invalid!r}): {why}{more}", stacklevel=4)
        good = [i for i in range(len(examples)) if i not in bad]
        values: list[float | None] = [fill] * len(examples)
        if good:
            scored = scorer.score([examples[i] for i in good], task=self.task, aspect=aspect).examples
            for i, e in zip(good, scored):
                values[i] = float(e.value)
        return values

    def _words(self, field: str) -> str:
        """A field in lm-eval's words (lm-eval's ``target`` is the document's gold answer)."""
        if field == "target":
            return "the generation"
        name = self.fields.get(field)
        return f"doc[{name!r}] (the {field})" if name else repr(field)

    def aggregate(self, items: Sequence[dict[str, Any]]) -> float:
        """The mean of one aspect over the documents scored, as one batch; NaN, with a warning,
        where no document could be scored (a metric of nothing; lm-eval's group averages take floats)."""
        values = [v for v in self.score_items(items) if v is not None] if items else []
        if not values:
            warnings.warn(f"{METRIC_PREFIX}{items[0]['aspect'] if items else '?'}: no document could be scored "
                          "(on_invalid='skip'): its value is NaN", stacklevel=2)
            return float("nan")
        return sum(values) / len(values)

    def aggregate_stderr(self, items: Sequence[dict[str, Any]]) -> float | str:
        """The standard error of the aspect's mean: sample standard deviation (n-1) over sqrt(n),
        lm-eval's ``mean_stderr``, over the documents scored; ``"N/A"`` (lm-eval's own mark) for
        fewer than two. The scores come from :meth:`score_items`, so a batch the mean metric
        scored is not scored again."""
        values = [v for v in self.score_items(items) if v is not None] if items else []
        n = len(values)
        if n < 2:
            return "N/A"
        mu = sum(values) / n
        return math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1)) / math.sqrt(n)
