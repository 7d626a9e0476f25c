"""The Python API: a reusable :class:`Scorer` and the one-shot :func:`score`.

``score()`` delegates to a cached default ``Scorer``; no logic is duplicated. A ``Scorer``
is the user-facing face of an :class:`~unieval_local.engine.Engine` (which holds the run
configuration, the registry and the runner pool) and a
:class:`~unieval_local.requests.scheduler.Scheduler` (which runs requests on it): it
validates whole requests, sends them as :class:`~unieval_local.requests.score.ScoreRequest`
objects, and shapes the answers in the hosted metric's schema.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .config import MAX_EXAMPLES_PER_REQUEST, RunConfig
from .engine import Engine, RunStats, truncation_message
from .pipeline.jobs import shortened_message
from .errors import CheckpointError, CheckpointNotFoundError, ExampleProblem, InvalidExampleError, \
    RequestTooLargeError, UniEvalError
from .models.base import Runner, RunnerFactory
from .models.checkpoints import ModelSpec, ResolvedCheckpoint
from .pipeline.fold import ReferenceReduction
from .pipeline.planning import LongInput
from .pipeline.validate import validate_examples, warn_input_hints
from .registry.tasks import Registry
from .requests.scheduler import Scheduler
from .requests.score import answer_languages, available_aspects, evaluation_result, joined_answers, score_requests
from .schema import EvaluationResult, RunInfo, Signature, UniEvalData, UniEvalResult
from .settings import SETTINGS, EngineSettings, default
from .text.sentences import SentenceSplitter
from .wire.hosted import DEFAULT_ASPECT, DEFAULT_TASK, UniEvalConfig, resolve_task_aspect

__all__ = ["DEFAULT_ASPECT", "DEFAULT_TASK", "EvaluationResult", "MAX_EXAMPLES_PER_REQUEST", "Scorer",
           "UniEvalResult", "as_examples", "resolve_task_aspect", "score"]


def settings_doc(indent: str = "        ") -> str:
    """The ``Args`` entries of the engine settings, from their declaration (each written once,
    in :data:`~unieval_local.settings.SETTINGS`): ``name: help (CLI flag); default ...``."""
    lines = []
    for s in SETTINGS:
        flag = s.flag or s.negative_flag
        lines.append(f"{indent}{s.name}: {s.help_text()}{f' (CLI {flag})' if flag else ''}; "
                     f"default ``{s.default!r}``.")
    return "\n".join(lines)


class Scorer:
    """Scores examples with UniEval checkpoints, loading each checkpoint once.

    Args (keyword only): the engine settings, declared once in
    :data:`~unieval_local.settings.SETTINGS` (a test checks this signature against it):

    SETTINGS_DOC

    Raises:
        ValueError: an invalid setting (the message names it), or an unavailable device.
        TypeError: an unknown keyword.
        AspectsConfigError: an invalid aspects config (a ``ValueError``).

    Example:
        >>> scorer = Scorer(model="ckpts/unieval-sum", device="cpu")  # doctest: +SKIP
        >>> scorer.score([{"target": "A summary.", "source": "A document."}],
        ...              task="summarization", aspect="coherence").overall.value  # doctest: +SKIP
        0.93
    """

    def __init__(
        self,
        *,
        model: ModelSpec = default("model"),
        device: str | None = default("device"),
        dtype: str = default("dtype"),
        max_length: int | None = default("max_length"),
        batch_tokens: int | None = default("batch_tokens"),
        attention_mib: float = default("attention_mib"),
        reference_reduction: ReferenceReduction = default("reference_reduction"),
        offline: bool | None = default("offline"),
        splitter: SentenceSplitter | None = default("splitter"),
        progress: bool | None = default("progress"),
        fast_forward: bool = default("fast_forward"),
        cache_dir: str | os.PathLike | None = default("cache_dir"),
        aspects_config: str | os.PathLike | None = default("aspects_config"),
        long_input: LongInput = default("long_input"),
        window_overlap: int = default("window_overlap"),
        chunk_words: int = default("chunk_words"),
        language: str | None = default("language"),
        strict_language: bool = default("strict_language"),
        merge_punctuation: bool = default("merge_punctuation"),
        claim_checker: str = default("claim_checker"),
        generator: str | None = default("generator"),
        threads: int | None = default("threads"),
        runner_factory: RunnerFactory | None = default("runner_factory"),
    ):
        settings = EngineSettings(
            model=model, device=device, dtype=dtype, max_length=max_length, batch_tokens=batch_tokens,
            attention_mib=attention_mib, reference_reduction=reference_reduction, offline=offline,
            splitter=splitter, progress=progress, fast_forward=fast_forward, cache_dir=cache_dir,
            aspects_config=aspects_config, long_input=long_input, window_overlap=window_overlap,
            chunk_words=chunk_words, language=language, strict_language=strict_language,
            merge_punctuation=merge_punctuation, claim_checker=claim_checker, generator=generator, threads=threads,
            runner_factory=runner_factory)
        #: the engine: run configuration, registry, runner pool
        self.engine = Engine(settings)
        #: runs this scorer's requests on the engine (one pass per request of at most 250 examples)
        self.scheduler = Scheduler(self.engine)

    # ------------------------------------------------------------------ configuration (the engine's)
    @property
    def config(self) -> RunConfig:
        """Every setting that can change a score (:class:`~unieval_local.config.RunConfig`)."""
        return self.engine.config

    @property
    def settings(self) -> EngineSettings:
        """The engine settings in effect (:class:`~unieval_local.settings.EngineSettings`)."""
        return self.engine.settings

    @property
    def registry(self) -> Registry:
        """The tasks and aspects this scorer knows (built-in plus ``aspects_config``)."""
        return self.engine.registry

    @property
    def splitter(self) -> SentenceSplitter:
        """The sentence splitter."""
        return self.engine.splitter

    @property
    def device(self) -> str:
        """The device in use (``cpu``, ``cuda``, ``cuda:N``)."""
        return self.engine.device

    @property
    def model(self) -> ModelSpec:
        """The ``model`` argument: a folder, hub id or name -> folder mapping (or None)."""
        return self.engine.model

    max_length = property(lambda self: self.config.max_length, doc="Tokens per query.")
    reference_reduction = property(lambda self: self.config.reference_reduction, doc="mean or max over references.")
    long_input = property(lambda self: self.config.long_input, doc="truncate, fit or chunk.")
    window_overlap = property(lambda self: self.config.window_overlap, doc="Sentences shared by windows (chunk).")
    dtype = property(lambda self: self.config.dtype, doc="float32 or bfloat16.")
    fast_forward = property(lambda self: self.config.fast_forward, doc="Our single-step forward (True) or the model's.")

    def checkpoint(self, name: str) -> ResolvedCheckpoint:
        """Resolve checkpoint ``name`` (see :meth:`Engine.checkpoint <unieval_local.engine.Engine.checkpoint>`)."""
        return self.engine.checkpoint(name)

    def runner(self, name: str) -> Runner:
        """The loaded runner of checkpoint ``name`` (see :meth:`unieval_local.engine.Engine.runner`)."""
        return self.engine.runner(name)

    def signature(self, task: str, aspect: str, languages: Sequence[str | None] | None = None) -> Signature:
        """The reproducibility signature of results for ``(task, aspect)`` (over examples in
        ``languages``: see :meth:`Engine.signature <unieval_local.engine.Engine.signature>`)."""
        return self.engine.signature(task, aspect, languages)

    def cache_stats(self) -> dict[str, int]:
        """Queries answered from the score cache (``hits``) and scored anew (``misses``) so far."""
        hits, misses = self.engine.cache_counts()
        return {"hits": hits, "misses": misses}

    # ------------------------------------------------------------------ scoring
    def _check_request(self, data: Any, task: str, aspects: Sequence[str], columns: Mapping[str, Any],
                       max_examples: int | None = None, allow_empty: bool = False) -> list[UniEvalData]:
        """Validate one call for all its aspects; raise for any problem (nothing scored). No
        examples: an error, unless ``allow_empty`` (``evaluate``), then an empty list."""
        resolved = [self.registry.get_aspect(task, a) for a in aspects]
        items = as_examples(data, **columns)
        if max_examples is not None and len(items) > max_examples:
            raise RequestTooLargeError(
                f"a request of the hosted-metric form score() holds at most {max_examples} examples, got "
                f"{len(items)}; use Scorer().score / Scorer().evaluate (any number) or the CLI "
                "(`unieval-local score FILE`)"
            )
        if not items and allow_empty:
            return []
        if not items:
            raise InvalidExampleError([ExampleProblem(None, "data", "the request is empty: it holds no examples")])
        examples, problems = validate_examples(items, resolved)
        if problems:
            raise InvalidExampleError(problems)
        warn_input_hints(examples, resolved)
        return examples

    def _run_requests(self, examples: Sequence[UniEvalData], task: str, names: Sequence[str],
                      evidence: bool) -> tuple[dict[str, np.ndarray], dict[str, list], RunStats, list]:
        """The examples as score requests of the scheduler's pass size, run together, and their
        answers joined: ``(values, evidence, stats, languages)``, per aspect over all examples in
        order, and each example's language.

        Raises:
            The first failed request's error (InvalidExampleError for a planning problem is
            numbered in the whole call's examples).
        """
        requests = score_requests(examples, task, names, evidence, self.scheduler.policy)
        answers = self.scheduler.answers(requests)
        return (*joined_answers(answers, names, evidence), answer_languages(answers))

    def evaluate(self, data: Any = None, *, task: str = DEFAULT_TASK,
                 aspects: Sequence[str] | str | None = None, evidence: bool = False,
                 targets: Sequence[str] | None = None, sources: Sequence[str] | None = None,
                 references: Sequence[Sequence[str] | str] | None = None,
                 contexts: Sequence[str] | None = None, _max_examples: int | None = None,
                 _single: bool = False) -> EvaluationResult:
        """Score any number of examples for several aspects of one task at once.

        All aspects that share a checkpoint go through the model together: the examples are
        validated at once, then sent to the scheduler as requests of at most 250 examples (its
        :class:`~unieval_local.requests.scheduler.RequestPolicy`), whose distinct prompts it
        scores in length-sorted micro-batches.

        Args:
            data: examples as dicts or :class:`UniEvalData`, or a pandas DataFrame
                (one row per example, columns named as the fields); or None with
                the parallel lists below. No examples (``[]``): an empty result (no
                model loads), where :meth:`score` raises.
            task: task name.
            aspects: aspect names; ``None`` or ``"all"``: the task's own set (its own
                evaluator's aspects: UniEval's four for summarization), the same on every machine
                whatever else is staged; ``"all+"``: every aspect of the task whose evaluator is
                here (found offline, of the right model: checked before any model loads, nothing
                fetched), the others named in ONE ``UserWarning``; ``"geval"``, ``"seahorse"``: a
                family's aspects, as if named
                (:func:`~unieval_local.requests.score.available_aspects`). An aspect NAMED here
                whose checkpoint is missing raises (you asked for that number: a NaN beside the
                others would be a number silently missing from a mean).
            evidence: also return, per example and aspect, the sentences and
                queries behind the score (:class:`~unieval_local.schema.Evidence`).
            targets, sources, references, contexts: parallel lists, one item per
                example, instead of ``data`` (``references[i]`` is a list of texts or one text).

        Returns:
            :class:`EvaluationResult`: per example its score per aspect and its
            ``aspect_mean`` (mean over aspects, UniEval's per-sample "overall"; ``mean_of``
            names them);
            per aspect a :class:`UniEvalResult` whose ``overall`` is the mean over
            examples. Ranges: [0, 1] except dialogue engagingness ([0, n_sentences]) and
            G-Eval ratings ([1, K], ``aspect_mean`` then rescales them and notes it).
            ``run`` (:class:`~unieval_local.schema.RunInfo`, also on each per-aspect result):
            the call's forward passes, distinct queries, wall and CPU seconds.

        Raises:
            The errors of :meth:`score`, raised from this call (the scheduler's frames left out
            of the traceback), in the Python API's names (``model=``, ``aspects=``).
        """
        t0, c0 = time.perf_counter(), time.process_time()
        batches, queries = self.scheduler.batches, self.scheduler.stats.n_queries
        try:
            names = available_aspects(self.engine, task, aspects)
            columns = dict(targets=targets, sources=sources, references=references, contexts=contexts)
            examples = self._check_request(data, task, names, columns, _max_examples, allow_empty=not _single)
            if not examples:
                return EvaluationResult(task=task, aspects=list(names), examples=[], per_aspect={},
                                        run=RunInfo(forward_passes=0, distinct_queries=0,
                                                    wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0))
            values, ev, stats, languages = self._run_requests(examples, task, names, evidence)
            self._warn_about(stats)
            result = evaluation_result(task, names, values, ev, self.signature, self.dtype, languages,
                                       [self.engine.registry.get_aspect(task, a).scale for a in names])
        except (UniEvalError, ValueError, FileNotFoundError) as exc:
            raise _in_python_names(exc).with_traceback(None) from None
        run = RunInfo(forward_passes=self.scheduler.batches - batches,
                      distinct_queries=self.scheduler.stats.n_queries - queries,
                      wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
        return result.model_copy(update={"run": run, "per_aspect": {
            a: r.model_copy(update={"run": run}) for a, r in result.per_aspect.items()}})

    def _warn_about(self, stats: RunStats) -> None:
        """The truncation and fit-shortening warnings of one call."""
        if stats.n_truncated:
            limits = {n: self.engine.max_length(n) for n in stats.truncated_by}
            warnings.warn(truncation_message(stats, limits, self.long_input, cli=False), UserWarning, stacklevel=3)
        if stats.n_shortened:
            warnings.warn(shortened_message(stats), UserWarning, stacklevel=3)

    def score(self, data: Any = None, *, task: str | None = None, aspect: str | None = None,
              evaluation_aspect: str | None = None, config: UniEvalConfig | Mapping[str, Any] | None = None,
              evidence: bool = False, targets: Sequence[str] | None = None, sources: Sequence[str] | None = None,
              references: Sequence[Sequence[str] | str] | None = None,
              contexts: Sequence[str] | None = None) -> UniEvalResult:
        """Score any number of examples for one (task, aspect).

        The (task, aspect) may be named as here (``task=``, ``aspect=``) or with the hosted
        metric's names (``evaluation_aspect=``, ``config=UniEvalConfig(...)`` or a dict of
        it), so that code written for the hosted metric runs unchanged; see
        :func:`resolve_task_aspect`. ``None`` means "not given": with nothing given the task
        is ``summarization`` and the aspect ``coherence``.

        Args:
            data: examples as dicts or :class:`UniEvalData` (``target`` plus the
                fields the aspect needs; UniEval's ``system_output`` and
                ``reference`` names are accepted), or a pandas DataFrame with those
                columns; or None with the parallel lists below.
            task: task name (see ``unieval-local tasks`` / README table); ``None``: the
                ``config``'s task, else ``summarization``.
            aspect: aspect name of the task; ``None``: ``evaluation_aspect``, else the
                ``config``'s aspect, else ``coherence``.
            evaluation_aspect: the hosted metric's name for ``aspect`` (an alias: give
                either, or both with the same value).
            config: the hosted metric's :class:`~unieval_local.schema.UniEvalConfig`, or a
                dict of it (``{"task": ..., "evaluation_aspect": ...}``; ``aspect`` is read
                too), validated against this scorer's registry so user-defined aspects
                (``aspects_config``) are accepted. ``task`` / ``aspect`` given beside it
                must agree with it.
            evidence: also return each example's sentences and queries
                (``examples[i].evidence``); off by default, as in the hosted schema.
            targets, sources, references, contexts: parallel lists instead of ``data``,
                e.g. ``scorer.score(targets=summaries, sources=documents, aspect="consistency")``.

        Returns:
            :class:`UniEvalResult`: ``examples[i].value`` per example in input
            order (in [0, 1]; dialogue engagingness in [0, n_sentences]),
            ``overall.value`` their mean, and a ``signature``.

        Raises:
            UnknownTaskError: unknown task or aspect (a ``ValueError``).
            ValueError: ``aspect`` and ``evaluation_aspect`` differ; ``config`` and an
                explicit ``task`` / ``aspect`` differ; ``config`` of another type, with
                unknown keys, or naming an unknown task or aspect (a pydantic
                ``ValidationError``); both ``data`` and lists given, lists of different
                lengths, or ``data`` of an unusable type.
            InvalidExampleError: one or more bad examples, all listed with
                index, aspect and field (a ``ValueError``); nothing is scored.
            CheckpointNotFoundError, CheckpointError: no usable checkpoint.
            NonFiniteScoreError: the model produced NaN/inf for some examples.
            ModelRuntimeError: the model failed at runtime (e.g. out of memory on one query).
        """
        task, aspect = resolve_task_aspect(self.registry, task=task, aspect=aspect,
                                           evaluation_aspect=evaluation_aspect, config=config)
        return self._score(data, task=task, aspect=aspect, evidence=evidence, targets=targets, sources=sources,
                           references=references, contexts=contexts)

    def _score(self, data: Any, *, task: str, aspect: str, evidence: bool, max_examples: int | None = None,
               **columns: Any) -> UniEvalResult:
        self.registry.get_aspect(task, aspect)
        return self.evaluate(data, task=task, aspects=[aspect], evidence=evidence, _max_examples=max_examples,
                             _single=True, **columns).per_aspect[aspect]


Scorer.__doc__ = Scorer.__doc__.replace("    SETTINGS_DOC", settings_doc())

_DEFAULT_SCORERS: dict[str, Scorer] = {}
_DEFAULT_LOCK = threading.Lock()


def _model_key(model: ModelSpec) -> str:
    if isinstance(model, Mapping):
        return json.dumps({str(k): str(v) for k, v in model.items()}, sort_keys=True)
    return json.dumps(None if model is None else str(model))


def score(
    data: Any = None,
    *,
    task: str | None = None,
    aspect: str | None = None,
    evaluation_aspect: str | None = None,
    config: UniEvalConfig | Mapping[str, Any] | None = None,
    model: ModelSpec = None,
    device: str | None = None,
    targets: Sequence[str] | None = None,
    sources: Sequence[str] | None = None,
    references: Sequence[Sequence[str] | str] | None = None,
    contexts: Sequence[str] | None = None,
) -> UniEvalResult:
    """Score one request (at most 250 examples, the hosted metric's limit) for one (task, aspect).

    The hosted-metric form: a one-shot wrapper over a cached default :class:`Scorer`
    per ``(model, device)``, so checkpoints load once per process. Arguments, result
    and errors are those of :meth:`Scorer.score` (``task``, ``aspect``,
    ``evaluation_aspect`` and ``config`` included: the hosted metric's
    ``score(data, config=UniEvalConfig(task=..., evaluation_aspect=...))`` and
    ``score(data, task=..., evaluation_aspect=...)`` work as they are), plus:

    Args:
        model: a checkpoint folder, hub id, or ``{checkpoint name: folder}``; default
            ``$UNIEVAL_LOCAL_HOME``, the HF cache, the hub.
        device: ``cpu``, ``cuda`` or ``cuda:N``; default CUDA when available.

    Raises:
        RequestTooLargeError: more than 250 examples (a ``ValueError``); a
            :class:`Scorer` takes any number.

    Example:
        >>> from unieval_local import UniEvalConfig, score  # doctest: +SKIP
        >>> r = score([{"target": "Elizabeth was hospitalized.", "source": "..."}],
        ...           task="summarization", aspect="consistency")  # doctest: +SKIP
        >>> r.overall.value, [e.value for e in r.examples]  # doctest: +SKIP
        >>> score(data, config=UniEvalConfig(task="summarization",
        ...                                  evaluation_aspect="consistency"))  # doctest: +SKIP
    """
    key = _model_key(model) + "|" + str(device)
    with _DEFAULT_LOCK:
        scorer = _DEFAULT_SCORERS.get(key)
        if scorer is None:
            scorer = _DEFAULT_SCORERS[key] = Scorer(model=model, device=device)
    task, aspect = resolve_task_aspect(scorer.registry, task=task, aspect=aspect,
                                       evaluation_aspect=evaluation_aspect, config=config)
    result = scorer._score(data, task=task, aspect=aspect, evidence=False, max_examples=MAX_EXAMPLES_PER_REQUEST,
                           targets=targets, sources=sources, references=references, contexts=contexts)
    return result.model_copy(update={"run": None})  # the hosted metric's shape: no run counters



def as_examples(data: Any = None, *, targets: Sequence[str] | None = None, sources: Sequence[str] | None = None,
                references: Sequence[Sequence[str] | str] | None = None,
                contexts: Sequence[str] | None = None) -> list[Any]:
    """The examples of a request, from whichever form it came in.

    Args:
        data: an iterable of dicts / :class:`UniEvalData`, or a pandas DataFrame (any object
            with ``to_dict("records")`` and ``columns``: one row per example; missing cells
            (NaN/None) become absent fields).
        targets, sources, references, contexts: parallel lists instead (each of the same
            length; ``references[i]`` one text or a list of texts).

    Returns:
        A list of items for :func:`~unieval_local.pipeline.validate.validate_examples` (not yet validated).

    Raises:
        ValueError: both forms given; lists of different lengths; a string, bytes or mapping
            given as ``data`` (one example must still be wrapped in a list).
    """
    columns = {"target": targets, "source": sources, "references": references, "context": contexts}
    given = {k: v for k, v in columns.items() if v is not None}
    if given:
        if data is not None:
            raise ValueError("give the examples either as data or as parallel lists (targets=, sources=, ...), "
                             "not both")
        for name, col in given.items():
            if isinstance(col, (str, bytes)) or not hasattr(col, "__len__"):
                raise ValueError(f"{name}s must be a list with one item per example, got {type(col).__name__}")
        lengths = {f"{name}s": len(col) for name, col in given.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError("the parallel lists differ in length: "
                             + ", ".join(f"{k} has {v}" for k, v in lengths.items()))
        n = next(iter(lengths.values()))
        return [{name: col[i] for name, col in given.items()} for i in range(n)]
    if data is None:
        raise ValueError("no examples: give data (a list of dicts, or a DataFrame) or targets=[...]")
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        rows = data.to_dict("records")
        return [{k: v for k, v in row.items() if not _is_missing(v)} for row in rows]
    if isinstance(data, (str, bytes, Mapping, UniEvalData)):
        raise ValueError(f"data must be a list of examples, got one {type(data).__name__}; wrap it in a list")
    return list(data)


#: CLI flags in the library's messages -> the Python API's arguments (``--model X`` -> ``model='X'``)
_CLI_NAMES = ((re.compile(r"--model[ =]([\w.-]+)=DIR\b"), lambda m: f"model={{{m.group(1)!r}: DIR}}"),
              (re.compile(r"--model[ =]([^\s),;]+)"), lambda m: f"model={m.group(1)!r}"),
              (re.compile(r"--aspect[ =]([^\s),;]+)"), lambda m: f"aspects=[{m.group(1)!r}]"),
              (re.compile(r"--offline\b"), lambda m: "offline=True"),
              (re.compile(r"--max-length\b"), lambda m: "max_length="),
              (re.compile(r"--long-input ([a-z]+)"), lambda m: f"long_input={m.group(1)!r}"),
              (re.compile(r"--model\b"), lambda m: "model="))


_REPEATED_MODEL = re.compile(r"(model=(?:\{[^{}]*\}|'[^']*'))(?:, \1)+")


def _in_python_names(exc: BaseException) -> BaseException:
    """``exc`` with a checkpoint error's message in the Python API's names (``model='DIR'`` for
    ``--model DIR``); other errors as they are (their messages already speak Python)."""
    if isinstance(exc, (CheckpointNotFoundError, CheckpointError)) and len(exc.args) == 1 \
            and isinstance(exc.args[0], str):
        text = exc.args[0]
        for pattern, repl in _CLI_NAMES:
            text = pattern.sub(repl, text)
        # "(--model X=DIR, model={'X': DIR})" said both surfaces' forms: once rewritten, say it once
        text = _REPEATED_MODEL.sub(r"\1", text)
        exc.args = (text,)
    return exc


def _is_missing(value: Any) -> bool:
    """None or a float NaN (how a DataFrame marks an empty cell)."""
    return value is None or (isinstance(value, float) and value != value)
