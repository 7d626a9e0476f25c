"""The Python API: a reusable :class:`Scorer` and the one-shot :func:`score`.

``score()`` delegates to a cached default ``Scorer``; no logic is duplicated. A ``Scorer``
is the user-facing face of an :class:`~unieval_local.engine.Engine` (which holds the run
configuration, the registry and the runner pool, and runs the jobs): it validates whole
requests and shapes the results in the hosted metric's schema.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .checkpoints import ModelSpec, ResolvedCheckpoint
from .config import MAX_EXAMPLES_PER_REQUEST, RunConfig
from .engine import DEFAULT_ATTENTION_MIB, DEFAULT_BATCH_TOKENS, Engine, JobResult, Runner, RunnerFactory, RunStats, jobs_by_checkpoint, truncation_message
from .errors import ExampleProblem, InvalidExampleError, NonFiniteScoreError, RequestTooLargeError
from .fold import ReferenceReduction
from .planning import LongInput
from .schema import (EvaluationResult, ExampleScores, Signature, UniEvalConfig, UniEvalData, UniEvalResult,
                     UniEvalStats)
from .sentences import SentenceSplitter
from .tasks import Registry
from .validate import non_latin_share, validate_examples, warn_input_hints

#: Examples planned and run together inside :meth:`Scorer.evaluate` (bounds prompt memory).
ENGINE_PASS_EXAMPLES = 1000

#: The task and aspect scored when none is named (the hosted metric's defaults, UniEvalConfig's).
DEFAULT_TASK, DEFAULT_ASPECT = "summarization", "coherence"

#: The keys a ``config`` dict may hold (UniEvalConfig's fields; ``aspect`` is its alias).
_CONFIG_KEYS = ("task", "evaluation_aspect", "aspect")


class Scorer:
    """Scores examples with UniEval checkpoints, loading each checkpoint once.

    Args (keyword only):
        model: ``None`` (the registry's checkpoint per task, found through
            ``$UNIEVAL_LOCAL_HOME``, the HF cache or the hub), a checkpoint folder
            or hub id used for every task, or a mapping from checkpoint name
            (``unieval-sum``, ``unieval-dialog``, ``unieval-fact``) to folder.
        device: ``cpu``, ``cuda`` or ``cuda:N``; default CUDA when available. Checked
            here: an unavailable device raises ``ValueError`` listing the available ones.
        dtype: ``float32`` (default, UniEval parity to 1e-5) or ``bfloat16``.
            ``float16`` raises ``ValueError`` (T5 overflows to NaN).
        max_length: tokens per query; longer prompts lose their END, as in
            UniEval (default None: each evaluator's own, 1024 for UniEval, 2048 for MiniCheck).
        batch_tokens: the most padded tokens (rows x longest prompt) in one forward
            pass (default 8192).
        attention_mib: the most MiB the encoder's attention scores of one forward pass
            may take (rows x heads x longest**2 x bytes per element; default 1024): the
            token budget grows linearly with the length, attention with its square,
            so both bound a batch (:func:`~unieval_local.runner.next_batch_end`).
        reference_reduction: ``mean`` (default) or ``max`` over several references.
        offline: never touch the network (also ``HF_HUB_OFFLINE=1``).
        splitter: sentence splitter (default: NLTK English Punkt, UniEval's).
        progress: show a progress bar over queries (``None``: only on a terminal).
        fast_forward: run our own exact T5 forward for the single decoder step
            (encoder attention bias built once per batch, cross-attention
            reassociated so that encoder states are not projected through each
            layer's key/value matrices, only the Yes/No rows of the LM head;
            default on, agrees with the model's forward to ~1e-6). ``False``
            runs the model's own ``forward``.
        cache_dir: opt-in persistent score cache (SQLite) in this folder; a query
            already scored with the same checkpoint content and settings is not
            run again (see :mod:`unieval_local.cache`). Not used with bfloat16. A cache
            that fails (damaged, read-only, disk full, folder not creatable) is disabled
            with one ``CacheUnusableWarning`` (a ``RuntimeWarning``); scoring goes on without it.
        long_input: ``truncate`` (default, UniEval: a prompt longer than
            ``max_length`` loses its end, silently in UniEval, with a warning
            here), ``fit`` (shorten the long context field so the question and
            target stay whole) or ``chunk`` (score against windows of whole
            sentences/turns of the long field: max over windows for
            consistency-like aspects, mean for coherence). See
            :func:`~unieval_local.planning.build_plan`.
        window_overlap: sentences (turns) shared by consecutive windows in
            ``chunk`` mode (default 1).
        chunk_words: whitespace words per document chunk for evaluators that chunk
            the document themselves (MiniCheck's ``chunk_size``, default 500).
        threads: CPU threads torch uses (``torch.set_num_threads``, for the whole process;
            default None: torch's own, one per core). On a machine shared with other jobs, set
            it to your share of the cores. It never changes a score.
        merge_punctuation: sentence-level aspects do not score letterless pieces ("?", "1.",
            "!!") as sentences of their own: they join a neighbouring sentence
            (:class:`~unieval_local.sentences.MergePunctuation`). Default False: UniEval
            scores every Punkt piece and averages them in (parity). The splitter's name in the
            signature says which.
        aspects_config: a YAML file of user-defined aspects added to the tasks
            (see :mod:`unieval_local.aspects_config`); ``scorer.registry`` holds them.
        runner_factory: advanced/testing: ``f(ResolvedCheckpoint, fingerprint, Evaluator)``
            returning a :class:`~unieval_local.engine.Runner` (default: the T5 runner,
            its model loaded once per process).

    Raises:
        ValueError: bad ``dtype``, ``max_length``, ``batch_tokens``, reduction or device.
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
        model: ModelSpec = None,
        device: str | None = None,
        dtype: str = "float32",
        max_length: int | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        attention_mib: float = DEFAULT_ATTENTION_MIB,
        reference_reduction: ReferenceReduction = "mean",
        offline: bool | None = None,
        splitter: SentenceSplitter | None = None,
        progress: bool | None = False,
        fast_forward: bool = True,
        cache_dir: str | os.PathLike | None = None,
        aspects_config: str | os.PathLike | None = None,
        long_input: LongInput = "truncate",
        window_overlap: int = 1,
        chunk_words: int = 500,
        merge_punctuation: bool = False,
        threads: int | None = None,
        runner_factory: RunnerFactory | None = None,
    ):
        #: the engine: run configuration, registry, runner pool; runs the jobs
        self.engine = Engine(model=model, device=device, dtype=dtype, max_length=max_length,
                             batch_tokens=batch_tokens, attention_mib=attention_mib,
                             reference_reduction=reference_reduction, offline=offline, splitter=splitter,
                             progress=progress, fast_forward=fast_forward, cache_dir=cache_dir,
                             aspects_config=aspects_config, long_input=long_input, window_overlap=window_overlap,
                             chunk_words=chunk_words, merge_punctuation=merge_punctuation, threads=threads,
                             runner_factory=runner_factory)

    # ------------------------------------------------------------------ configuration (the engine's)
    @property
    def config(self) -> RunConfig:
        """Every setting that can change a score (:class:`~unieval_local.config.RunConfig`)."""
        return self.engine.config

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

    def signature(self, task: str, aspect: str) -> Signature:
        """The reproducibility signature of results for ``(task, aspect)``."""
        return self.engine.signature(task, aspect)

    def cache_stats(self) -> dict[str, int]:
        """Queries answered from the score cache (``hits``) and scored anew (``misses``) so far."""
        hits, misses = self.engine.cache_counts()
        return {"hits": hits, "misses": misses}

    # ------------------------------------------------------------------ scoring
    def _check_request(self, data: Any, task: str, aspects: Sequence[str], columns: Mapping[str, Any],
                       max_examples: int | None = None) -> list[UniEvalData]:
        """Validate one request for all its aspects; raise for any problem (nothing scored)."""
        resolved = [self.registry.get_aspect(task, a) for a in aspects]
        items = as_examples(data, **columns)
        if max_examples is not None and len(items) > max_examples:
            raise RequestTooLargeError(
                f"a request of the hosted-metric form score() holds at most {max_examples} examples, got "
                f"{len(items)}; use Scorer().score / Scorer().evaluate (any number) or the CLI "
                "(`unieval-local score FILE`)"
            )
        if not items:
            raise InvalidExampleError([ExampleProblem(0, "data", "the request holds no examples")])
        examples, problems = validate_examples(items, resolved)
        if problems:
            raise InvalidExampleError(problems)
        warn_input_hints(examples, resolved)
        non_latin = [i for i, ex in enumerate(examples) if non_latin_share(ex.target) > 0.5]
        if non_latin:
            warnings.warn(f"{len(non_latin)} target(s) are mostly in a non-Latin script (examples "
                          f"{non_latin[:10]}{' ...' if len(non_latin) > 10 else ''}); the UniEval evaluators were "
                          "trained on English only, so their scores there mean little", UserWarning, stacklevel=3)
        return examples

    def _run_in_passes(self, examples: Sequence[UniEvalData], task: str, names: Sequence[str],
                       evidence: bool) -> tuple[JobResult, RunStats]:
        """The engine over consecutive slices of :data:`ENGINE_PASS_EXAMPLES` examples (one job
        per checkpoint each), joined into one result per aspect."""
        aspects = [self.registry.get_aspect(task, a) for a in names]
        total, stats = JobResult(values={a: np.empty(0) for a in names}, evidence={a: [] for a in names}), RunStats()
        for at in range(0, len(examples), ENGINE_PASS_EXAMPLES):
            results, st = self.engine.run(jobs_by_checkpoint(aspects, examples[at:at + ENGINE_PASS_EXAMPLES]),
                                          evidence=evidence, strict=True)
            stats += st
            for res in results.values():
                for a, v in res.values.items():
                    total.values[a] = np.concatenate([total.values[a], v])
                for a, ev in res.evidence.items():
                    total.evidence[a] += ev
        return total, stats

    def evaluate(self, data: Any = None, *, task: str = "summarization",
                 aspects: Sequence[str] | str | None = None, evidence: bool = False,
                 targets: Sequence[str] | None = None, sources: Sequence[str] | None = None,
                 references: Sequence[Sequence[str] | str] | None = None,
                 contexts: Sequence[str] | None = None, _max_examples: int | None = None) -> EvaluationResult:
        """Score any number of examples for several aspects of one task at once.

        All aspects that share a checkpoint go through the model as one batch plan
        (in passes of :data:`ENGINE_PASS_EXAMPLES` examples, to bound memory).

        Args:
            data: examples as dicts or :class:`UniEvalData`, or a pandas DataFrame
                (one row per example, columns named as the fields); or None with
                the parallel lists below.
            task: task name.
            aspects: aspect names; ``None`` or ``"all"``: every aspect of the task.
            evidence: also return, per example and aspect, the sentences and
                queries behind the score (:class:`~unieval_local.schema.Evidence`).
            targets, sources, references, contexts: parallel lists, one item per
                example, instead of ``data`` (``references[i]`` is a list of texts or one text).

        Returns:
            :class:`EvaluationResult`: per example its score per aspect and its
            ``aspect_mean`` (mean over aspects, UniEval's per-sample "overall");
            per aspect a :class:`UniEvalResult` whose ``overall`` is the mean over
            examples. Ranges: [0, 1] except dialogue engagingness ([0, n_sentences]).

        Raises:
            The errors of :meth:`score`.
        """
        names = self.registry.aspect_names(task, aspects)
        columns = dict(targets=targets, sources=sources, references=references, contexts=contexts)
        examples = self._check_request(data, task, names, columns, _max_examples)
        run, stats = self._run_in_passes(examples, task, names, evidence)
        values = run.values
        if stats.n_truncated:
            limits = {n: self.engine.max_length(n) for n in stats.truncated_by}
            warnings.warn(truncation_message(stats, limits, self.long_input, cli=False), UserWarning, stacklevel=2)
        if stats.n_shortened:
            warnings.warn(
                f"{stats.n_shortened} of {stats.n_queries} distinct queries had a long field shortened to fit "
                f"max_length (long_input='fit': only the beginning of that field was read; "
                "long_input='chunk' reads all of it); evidence=True shows the windows", UserWarning, stacklevel=2)
        bad = sorted({i for v in values.values() for i in np.flatnonzero(~np.isfinite(v)).tolist()})
        if bad:
            raise NonFiniteScoreError(
                f"the model gave non-finite logits for examples {bad[:20]} "
                f"(dtype {self.dtype}); try dtype='float32'", bad)
        ev = run.evidence if evidence else {}
        per_aspect = {
            a: UniEvalResult(overall=UniEvalStats(value=float(np.mean(values[a]))),
                             examples=[UniEvalStats(value=float(x), evidence=ev[a][i] if ev else None)
                                       for i, x in enumerate(values[a])],
                             signature=self.signature(task, a))
            for a in names
        }
        rows = [ExampleScores(scores={a: float(values[a][i]) for a in names},
                              aspect_mean=float(np.mean([values[a][i] for a in names])),
                              evidence={a: ev[a][i] for a in names} if ev else None)
                for i in range(len(examples))]
        return EvaluationResult(task=task, aspects=names, examples=rows, per_aspect=per_aspect)

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
                             **columns).per_aspect[aspect]


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
    return scorer._score(data, task=task, aspect=aspect, evidence=False, max_examples=MAX_EXAMPLES_PER_REQUEST,
                         targets=targets, sources=sources, references=references, contexts=contexts)



def resolve_task_aspect(registry: Registry, *, task: str | None = None, aspect: str | None = None,
                        evaluation_aspect: str | None = None,
                        config: UniEvalConfig | Mapping[str, Any] | None = None) -> tuple[str, str]:
    """The ``(task, aspect)`` a call names, from our names or the hosted metric's.

    ``None`` means "not given" for every argument. ``evaluation_aspect`` is an alias of
    ``aspect``; ``config`` is a :class:`~unieval_local.schema.UniEvalConfig` or a dict of
    it, whose ``task`` / ``evaluation_aspect`` apply where the keywords are not given.
    With nothing given: :data:`DEFAULT_TASK`, :data:`DEFAULT_ASPECT`. The names are not
    looked up here unless ``config`` is a dict (the scorer checks them when it scores).

    Args:
        registry: validates a ``config`` dict (user-defined aspects included).
        task, aspect, evaluation_aspect, config: as in :meth:`Scorer.score`.

    Returns:
        ``(task, aspect)``.

    Raises:
        ValueError: ``aspect`` and ``evaluation_aspect`` given with different values;
            ``task`` or the aspect given beside ``config`` with a value other than its
            own (the message names both); a dict ``config`` with keys other than
            ``task``, ``evaluation_aspect``, ``aspect``, or with ``aspect`` and
            ``evaluation_aspect`` that differ; ``config`` of another type.
        pydantic.ValidationError: a dict ``config`` naming an unknown task or aspect (a
            ``ValueError``; the message lists the valid names).
    """
    if aspect is not None and evaluation_aspect is not None and aspect != evaluation_aspect:
        raise ValueError(f"aspect={aspect!r} and evaluation_aspect={evaluation_aspect!r} differ; "
                         "they are two names of one argument: give one of them")
    name, given_as = (aspect, "aspect") if aspect is not None else (evaluation_aspect, "evaluation_aspect")
    if config is None:
        return (task if task is not None else DEFAULT_TASK), (name if name is not None else DEFAULT_ASPECT)
    if isinstance(config, Mapping):
        unknown = [str(k) for k in config if k not in _CONFIG_KEYS]
        if unknown:
            raise ValueError(f"config has unknown key(s) {', '.join(map(repr, unknown))}; a UniEvalConfig holds "
                             "'task' and 'evaluation_aspect' (or 'aspect')")
        if "aspect" in config and "evaluation_aspect" in config and config["aspect"] != config["evaluation_aspect"]:
            raise ValueError(f"config['aspect']={config['aspect']!r} and config['evaluation_aspect']="
                             f"{config['evaluation_aspect']!r} differ; give one of them")
        config = UniEvalConfig.model_validate(dict(config), context={"registry": registry})
    elif not isinstance(config, UniEvalConfig):
        raise ValueError(f"config must be a UniEvalConfig or a dict, got {type(config).__name__}")
    if task is not None and task != config.task:
        raise ValueError(f"task={task!r} and config.task={config.task!r} differ; give the task once")
    if name is not None and name != config.evaluation_aspect:
        raise ValueError(f"{given_as}={name!r} and config.evaluation_aspect={config.evaluation_aspect!r} differ; "
                         "give the aspect once")
    return config.task, config.evaluation_aspect


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
        A list of items for :func:`~unieval_local.validate.validate_examples` (not yet validated).

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


def _is_missing(value: Any) -> bool:
    """None or a float NaN (how a DataFrame marks an empty cell)."""
    return value is None or (isinstance(value, float) and value != value)
