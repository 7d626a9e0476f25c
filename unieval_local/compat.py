"""Drop-in Python API of the summary-rating evaluator our users switch from.

Code written for that evaluator keeps working with one changed import::

    from unieval_local.compat import SummarizationEvaluator, SummaryData

    evaluator = SummarizationEvaluator(model=None, enabled_metrics=["coherence", "fluency"])
    result = await evaluator.evaluate(SummaryData(input=transcript, summary=summary))
    result["summary"]["relevancy_rating"], result["summary"]["coherence"]["score"]

``evaluate`` returns exactly ``{"summary": {"global_explanation", "relevancy_rating",
"score", "possible_issues", "binary_score", "avg_score", "<metric>": {"score",
"explanation", "normalized_score"}, ...}}`` with only the enabled metrics: the ``rating``
report of :mod:`unieval_local.reports.rating` (ratings 1-3 from local UniEval queries by
cut points; ``normalized_score = score / 3``; ``avg_score`` their mean; the
good/incomplete/bad rule engine). No LLM is called: ``model`` names a local checkpoint,
not a judge, and ``model_credentials`` is accepted (one note) and never used or logged.
``normalized_score`` and ``avg_score`` are rounded to two decimals as the evaluator's
documented example shows them; the cut points are the calibrated ones (``unieval-local
calibration``). ``load_simple_summarization_dataset().load()`` gives the evaluator's small
example dataset (a meeting transcript and its summary) as :class:`SummaryData` rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .errors import CheckpointNotFoundError, ExampleProblem, InvalidExampleError
from .extras import require
from .reports.base import BadRecord
from .wire.rating_evaluator import SummaryData, evaluator_error, evaluator_result

__all__ = ["SimpleSummarizationDataset", "SummarizationEvaluator", "SummaryData", "load_simple_summarization_dataset",
           "summary_record"]

#: The fields an item to rate is read from (the rating evaluator's ``SummaryData``), in order.
ITEM_FIELDS: tuple[str, ...] = ("input", "summary", "references")


def summary_record(item: Any) -> dict[str, Any] | BadRecord:
    """The record of one item to rate, read the way the evaluator's users hand it in: any object
    with the ``SummaryData`` fields (duck typing), not only this package's class.

    Args:
        item: a mapping (its keys as they are: ``input``/``summary``, or ``source``/``target``,
            checked later with every other record); or an object whose attributes hold the fields:
            our :class:`SummaryData`, the evaluator's own ``SummaryData`` (another pydantic model
            of the same name), a pydantic model, a dataclass, or any object with ``input`` and
            ``summary`` attributes (``references`` optional).

    Returns:
        ``{"input", "summary"[, "references"]}`` with the attributes present (a None
        ``references`` left out), or a dict copy of a mapping; a :class:`BadRecord` for an
        object with neither ``input`` nor ``summary`` (its message names the type and the fields
        looked for). A missing or empty field is not refused here: the rating report names it
        (``summary``, ``input``) as for a dict.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Item:
        ...     input: str
        ...     summary: str
        >>> summary_record(Item("The council met.", "They met."))
        {'input': 'The council met.', 'summary': 'They met.'}
    """
    if isinstance(item, Mapping):
        return dict(item)
    if isinstance(item, BaseModel):  # ours or another package's: its fields, as it declares them
        fields = item.model_dump(exclude_none=True)
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    else:
        fields = {name: getattr(item, name, _MISSING) for name in ITEM_FIELDS}
    record = {name: value for name in ITEM_FIELDS
              if (value := fields.get(name, _MISSING)) is not _MISSING and value is not None}
    if not {"input", "summary"} & set(record):
        return BadRecord(f"expected SummaryData, a dict, or an object with 'input' and 'summary' attributes; got "
                         f"{type(item).__name__}, which has neither")
    return record


#: An attribute the item does not have.
_MISSING = object()


class SimpleSummarizationDataset:
    """The rating evaluator's small example dataset: meeting transcripts and their summaries.

    Args:
        data_dir: a folder holding ``simple_summarization.json`` (a JSON list of ``{input,
            summary}`` rows); default the one built into this package.
    """

    def __init__(self, data_dir: str | os.PathLike | None = None):
        self.data_dir = data_dir

    def load(self) -> list[SummaryData]:
        """The rows, as :class:`SummaryData` (read by attribute or by key, ``row["input"]``).

        Raises:
            OSError, ValueError: the file cannot be read or is not a list of ``{input, summary}``.
        """
        import json
        from importlib import resources

        if self.data_dir is None:
            text = resources.files("unieval_local").joinpath("data/simple_summarization.json").read_text("utf-8")
        else:
            text = (Path(self.data_dir) / "simple_summarization.json").read_text(encoding="utf-8")
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise ValueError("simple_summarization.json must hold a list of {input, summary} rows")
        return [SummaryData.model_validate({k: r[k] for k in ("input", "summary", "references") if k in r})
                for r in rows]


def load_simple_summarization_dataset(data_dir: str | os.PathLike | None = None) -> SimpleSummarizationDataset:
    """The evaluator's built-in example dataset (``.load()`` gives the rows), as its own
    ``load_simple_summarization_dataset`` does: an English meeting transcript with its summary
    (original text written for this package, MIT). ``data_dir``: a folder with your own
    ``simple_summarization.json`` instead."""
    return SimpleSummarizationDataset(data_dir)


class SummarizationEvaluator:
    """Rates summaries 1-3 per metric with a rule engine, locally (the ``rating`` report).

    Args:
        model: the UniEval checkpoint(s): ``None`` (``unieval-sum`` from
            ``$UNIEVAL_LOCAL_HOME``, the Hugging Face cache, or the hub when online), a
            checkpoint folder or hub id, or a mapping checkpoint name -> folder. An LLM name
            (``"gpt-4o"``) is not a checkpoint: a clear ``CheckpointNotFoundError`` says so.
        enabled_metrics: a subset of coherence, consistency, relevance, fluency (default
            all four), as a list or one string (``"coherence"``, ``"coherence,fluency"``);
            only their rules apply and only they appear in the result.
        config: a :class:`~unieval_local.reports.RatingConfig`, a dict of its settings, or
            the path of a rating YAML (e.g. fitted cut points,
            ``scripts/fit_rating_cutpoints.py``); ``enabled_metrics`` overrides its own.
        device: ``cpu``, ``cuda``, ``cuda:N`` (default: cuda when available).
        model_credentials: accepted so that code written for the hosted evaluator runs as it
            is (``SummarizationEvaluator(model_credentials=os.getenv(...))``); a local
            evaluator needs none: one note on the first call, and the value is never kept,
            shown nor logged.
        engine: an existing :class:`~unieval_local.engine.Engine` to share (a
            ``Scorer``'s ``scorer.engine``); then ``model`` and ``device`` are not used.
        **engine_settings: other :class:`~unieval_local.engine.Engine` settings (``dtype``,
            ``offline``, ``cache_dir`` ...); long sources are read in windows
            (``long_input="chunk"``) unless set otherwise.

    Raises:
        ValueError: an unknown metric or an invalid config (raised here, before any model loads).

    The model loads on the first ``evaluate``. The placeholder-cut-points warning (the
    default cut points are not fitted) is given once per evaluator, on its first call.
    """

    def __init__(self, model: Any = None, enabled_metrics: Sequence[str] | None = None, *,
                 config: Any = None, device: str | None = None, engine: Any = None,
                 model_credentials: Any = None, **engine_settings: Any):
        require("reports")
        #: a note about an ignored ``model_credentials`` (the value itself is never kept)
        self._credentials_note = None
        given_credentials = model_credentials is not None
        del model_credentials
        from .reports.options import load_options
        from .reports.rating import RatingConfig

        if isinstance(enabled_metrics, str):  # one metric, or "coherence,fluency"
            enabled_metrics = [m.strip() for m in enabled_metrics.split(",") if m.strip()]
        overrides = {"enabled_metrics": list(enabled_metrics)} if enabled_metrics is not None else {}
        if isinstance(config, RatingConfig):
            self.config = RatingConfig.model_validate({**config.model_dump(exclude_unset=True), **overrides}) \
                if overrides else config  # exclude_unset: an unset language stays the record's
        elif isinstance(config, (str, os.PathLike)):
            self.config = load_options(RatingConfig, config, overrides)
        elif config is None or isinstance(config, Mapping):
            self.config = load_options(RatingConfig, None, {**dict(config or {}), **overrides})
        else:
            raise ValueError(f"config must be a RatingConfig, a dict, a YAML path or None, got {type(config).__name__}")
        if given_credentials:  # the judge actually used: UniEval's checkpoints, or the G-Eval judge's local model
            judge = ("a local instruct model (the G-Eval judge, judge: g-eval)" if self.config.judge == "g-eval"
                     else "local UniEval checkpoints")
            self._credentials_note = (f"model_credentials is not used: this evaluator rates with {judge} and calls "
                                      "no API, so it needs no credentials (the value was neither kept nor logged)")
        self.model = model
        self.device = device
        self._engine = engine
        self._settings = {"long_input": "chunk", **engine_settings}
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    @property
    def enabled_metrics(self) -> list[str]:
        """The metrics rated, in order."""
        return list(self.config.enabled_metrics)

    @property
    def engine(self):
        """The :class:`~unieval_local.engine.Engine` (made on first use)."""
        if self._engine is None:
            from .engine import Engine

            self._engine = Engine(model=self.model, device=self.device, **self._settings)
        return self._engine

    async def evaluate(self, data: SummaryData | Mapping[str, Any] | Sequence[SummaryData | Mapping[str, Any]]
                       ) -> dict[str, Any] | list[dict[str, Any]]:
        """Rate one summary (or, given a list, each of them: :meth:`evaluate_batch`).

        Args:
            data: :class:`SummaryData`, any object with its ``input`` and ``summary`` fields
                (the evaluator's own ``SummaryData``, a dataclass: :func:`summary_record`), or a
                dict with ``input`` and ``summary`` (also ``source``/``target``; optional
                ``references``); or a list of them.

        Returns:
            ``{"summary": {...}}`` (module docstring): ``score`` 1 / 0.5 / 0 for good /
            incomplete / bad, ``binary_score`` 1 only for good, ``avg_score`` in [1/3, 1],
            per enabled metric ``score`` 1-3, ``normalized_score = score / 3`` and an
            ``explanation``. ``normalized_score`` and ``avg_score`` are rounded to two
            decimals, as the evaluator's documented example shows them (0.67, 0.92); with the
            ``details`` option, ``details`` holds every probability at full precision. For a
            list: one such result (or ``{"error": ...}``) per item.

        Raises:
            InvalidExampleError: the input is unusable (the message names the field: an
                empty summary, a missing input ...); not raised for a list, whose bad items
                become ``{"error": ...}``.
            CheckpointNotFoundError, CheckpointError: no usable checkpoint.
        """
        if isinstance(data, (list, tuple)):
            results, notes = await self._batch(data)
            self._warn(notes)
            return results
        (result,), notes = await self._batch([data])
        self._warn(notes)
        if "error" in result:
            err = result["error"]
            raise InvalidExampleError([ExampleProblem(0, err["field"], err["message"])])
        return result

    async def evaluate_batch(self, data: Sequence[SummaryData | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Rate many summaries in one engine pass (much faster than one ``evaluate`` each).

        Args:
            data: :class:`SummaryData` items or dicts, as for :meth:`evaluate`.

        Returns:
            One result per item, in order: ``{"summary": {...}}``, or for an unusable item
            ``{"error": {"field", "message"}}`` (the field in this API's names: ``input``,
            ``summary``); a bad item never loses the others' results.

        Raises:
            CheckpointNotFoundError, CheckpointError: no usable checkpoint.
        """
        results, notes = await self._batch(data)
        self._warn(notes)
        return results

    async def _batch(self, data: Sequence[Any]) -> tuple[list[dict[str, Any]], list[str]]:
        """Rate ``data`` off the event loop's thread; ``(results, notes)``."""
        records = [self._record(i, item) for i, item in enumerate(data)]
        results, notes = await asyncio.to_thread(self._rate, records)
        if self._credentials_note:
            notes = [self._credentials_note, *notes]
        return results, notes

    def _warn(self, notes: Sequence[str]) -> None:
        """Each note as a ``UserWarning`` pointing at the caller's line (``await evaluator.evaluate(...)``),
        in the caller's thread, once per evaluator."""
        for note in notes:
            if note not in self._warned:
                self._warned.add(note)
                warnings.warn(note, UserWarning, stacklevel=3)

    def _record(self, i: int, item: Any) -> Any:
        return summary_record(item)

    def _rate(self, records: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
        from .reports import make_report

        with self._lock:  # one model, one pass at a time
            try:
                out = make_report(records, "rating", engine=self.engine, options=self.config, warn=False)
            except CheckpointNotFoundError as exc:
                hint = ""
                if isinstance(self.model, str) and "/" not in self.model and not os.path.exists(self.model):
                    hint = (f" (model={self.model!r} looks like an LLM name: this evaluator rates with local "
                            "UniEval checkpoints; pass model=None, a checkpoint folder or a hub id)")
                raise CheckpointNotFoundError(f"{exc}{hint}") from None
        results = []
        for r in out.reports:
            if r.error is not None:
                results.append(evaluator_error(r.error))
                continue
            dumped = r.report.model_dump(mode="json")
            result = evaluator_result(dumped["summary"], self.config.enabled_metrics)
            if dumped.get("details") is not None:
                result["details"] = dumped["details"]
            if r.reasons is not None and r.reasons.generator is not None:  # a local model wrote the reasons
                result["reasons"] = r.reasons.model_dump(mode="json")
            results.append(result)
        return results, out.notes

