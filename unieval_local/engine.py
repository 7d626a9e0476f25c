"""The engine: named jobs of Boolean-QA queries in, scores by name out. No torch.

Every scoring entry point (``Scorer.score``/``evaluate``, the batch runs, the report
formats) goes through :meth:`Engine.run`::

    jobs (name -> Job: aspects of one checkpoint x examples)
      -> planning.build_plan      (fan-out: one flat list of prompts per job)
      -> one Runner per checkpoint (all jobs of a checkpoint as ONE list: each distinct
                                    prompt scored once, in length-sorted batches)
      -> fold.fold_all            (fan-in: windows, references, sentences)
      -> evidence (on request)
    -> results by name, and one RunStats

An :class:`Engine` holds the one :class:`~unieval_local.config.RunConfig` (every setting
that can change a score), the registry of tasks and aspects, the sentence splitter and
the pool of runners (one per checkpoint name, loaded on first use, wrapped in the score
cache when one is configured). Whatever turns prompts into probabilities implements the
:class:`Runner` protocol: the T5 runner (:mod:`unieval_local.runner`), the cache wrapper
(:mod:`unieval_local.cache`) and the tests' fake runner.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .checkpoints import ModelSpec, ResolvedCheckpoint, check_identity, resolve_checkpoint, unverified_message
from .config import RunConfig
from .errors import ExampleProblem, InvalidExampleError
from .evaluators import Evaluator, get_evaluator
from .evidence import build_evidence, truncated_field
from .fold import fold_all
from .planning import TokenCounter, build_plan
from .prompts import format_of
from .schema import Evidence, Signature, UniEvalData
from .sentences import DEFAULT_SPLITTER, MergePunctuation, SentenceSplitter
from .tasks import DEFAULT_REGISTRY, Aspect, Registry

#: Default of :class:`Engine`'s ``batch_tokens``: padded tokens per forward pass.
DEFAULT_BATCH_TOKENS = 8192
#: Default of :class:`Engine`'s ``attention_mib``: MiB of encoder attention scores per pass.
DEFAULT_ATTENTION_MIB = 1024


@runtime_checkable
class Runner(TokenCounter, Protocol):
    """What the engine needs from a model runner: scores with token counts, token
    arithmetic for long inputs (:class:`~unieval_local.planning.TokenCounter`), and a name
    and content fingerprint for signatures and cache keys.

    Attributes:
        name: what the runner runs, for messages (a hub id or a folder).
        fingerprint: hex SHA-256 of the checkpoint's content
            (:func:`~unieval_local.checkpoints.fingerprint_checkpoint`): part of every cache key.
    """

    name: str
    fingerprint: str

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p_yes, n_tokens)`` per prompt, in order.

        ``p_yes``: float64, shape ``(len(prompts),)``, in [0, 1], NaN where the model gave
        non-finite logits; ``n_tokens``: int64, each prompt's untruncated token count (more
        than ``max_length`` means its end was cut). ``on_batch(done, total)``, when given, is
        called after each forward batch with the distinct prompts scored so far.
        """
        ...


#: ``factory(checkpoint, fingerprint, evaluator) -> Runner``: how an engine makes the runner of
#: one checkpoint (``evaluator``: its :class:`~unieval_local.evaluators.Evaluator` spec).
RunnerFactory = Callable[[ResolvedCheckpoint, str, Evaluator], Runner]


@dataclass(frozen=True)
class Job:
    """Boolean-QA queries to run: some aspects (all of one checkpoint) over some examples.

    Attributes:
        aspects: the aspects (built-in, user-defined, or made on the fly by a report,
            e.g. a key-point coverage question); unique names.
        examples: the examples to plan them over (``None`` entries are skipped); they
            may be derived ones, e.g. ``{target: key point, source: summary}``.
    """

    aspects: tuple[Aspect, ...]
    examples: Sequence[UniEvalData | None]

    def __post_init__(self) -> None:
        names = [a.name for a in self.aspects]
        if not names:
            raise ValueError("a job needs at least one aspect")
        if len(set(names)) != len(names):
            raise ValueError(f"aspect names repeat within one job: {names}")
        if len({a.checkpoint for a in self.aspects}) != 1:
            raise ValueError(f"the aspects of one job must share a checkpoint, got "
                             f"{sorted({a.checkpoint for a in self.aspects})}")

    @property
    def checkpoint(self) -> str:
        """The checkpoint name all the job's aspects use."""
        return self.aspects[0].checkpoint


def jobs_by_checkpoint(aspects: Sequence[Aspect], examples: Sequence[UniEvalData | None]) -> dict[str, Job]:
    """One :class:`Job` per checkpoint for ``aspects`` over the same ``examples``, named by
    the checkpoint (aspects in the given order within each job; jobs in order of first appearance)."""
    groups: dict[str, list[Aspect]] = {}
    for a in aspects:
        groups.setdefault(a.checkpoint, []).append(a)
    return {name: Job(tuple(group), examples) for name, group in groups.items()}


@dataclass
class JobResult:
    """What one :class:`Job` gave.

    Attributes:
        values: aspect -> float64 array of shape ``(len(examples),)``; NaN where an example
            was skipped, had a planning problem or a non-finite score.
        unit_values: aspect -> per example its per-unit (sentence) values, or None.
        problems: planning problems (example index, field, message).
        evidence: aspect -> per example :class:`~unieval_local.schema.Evidence` (only when
            asked for).
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    unit_values: dict[str, list[list[float] | None]] = field(default_factory=dict)
    problems: list[ExampleProblem] = field(default_factory=list)
    evidence: dict[str, list[Evidence | None]] = field(default_factory=dict)


@dataclass
class RunStats:
    """The counters of one or more engine passes (they add up with ``+``).

    Attributes:
        n_queries: distinct queries scored (per checkpoint and pass).
        n_truncated: of those, the ones longer than ``max_length`` that lost their end.
        n_shortened: queries whose long field ``long_input="fit"`` shortened.
        cache_hits, cache_misses: queries answered by the score cache / scored anew.
        model_loads: runners (models) loaded by these passes.
        hints: field -> examples lacking the ending their checkpoint was trained with
            (:func:`~unieval_local.validate.input_hint_counts`).
        truncated_fields: field -> truncated distinct queries whose cut fell in that field
            (``source``, ``target`` ...; the fields after it were lost too).
        truncated_by: checkpoint name -> its truncated distinct queries.
    """

    n_queries: int = 0
    n_truncated: int = 0
    n_shortened: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    model_loads: int = 0
    hints: dict[str, int] = field(default_factory=dict)
    truncated_fields: dict[str, int] = field(default_factory=dict)
    truncated_by: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: "RunStats") -> "RunStats":
        def added(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + v
            return out

        return RunStats(self.n_queries + other.n_queries, self.n_truncated + other.n_truncated,
                        self.n_shortened + other.n_shortened, self.cache_hits + other.cache_hits,
                        self.cache_misses + other.cache_misses, self.model_loads + other.model_loads,
                        added(self.hints, other.hints), added(self.truncated_fields, other.truncated_fields),
                        added(self.truncated_by, other.truncated_by))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for the Ray engine, which sends stats between processes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunStats":
        """The inverse of :meth:`to_dict`."""
        return cls(**{**d, **{k: dict(d.get(k, {})) for k in ("hints", "truncated_fields", "truncated_by")}})


def truncation_message(stats: RunStats, max_lengths: Mapping[str, int], long_input: str, *, cli: bool) -> str:
    """One sentence on the queries that lost their end to ``max_length`` (``stats.n_truncated``),
    for every entry point: how many, each checkpoint's limit, the field the cut fell in, and
    what helps, in the CLI's (``cli``) or Python's words.

    Args:
        stats: the run's counters (``n_truncated``, ``truncated_by``, ``truncated_fields``).
        max_lengths: checkpoint name -> its tokens per query (:meth:`Engine.max_length`).
        long_input: the run's long-input mode.
        cli: name flags (``--long-input chunk``) instead of keywords (``long_input='chunk'``).
    """
    def opt(name: str, value: str) -> str:
        return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value!r}"

    limits = ", ".join(f"{n} {max_lengths.get(n, '?')} tokens" for n in (stats.truncated_by or max_lengths))
    where = ", ".join(f"{f} ({k})" for f, k in sorted(stats.truncated_fields.items(), key=lambda x: -x[1]))
    text = (f"{stats.n_truncated} of {stats.n_queries} distinct queries were longer than max_length ({limits}) and "
            f"lost their end" + (f"; the cut fell in: {where}" if where else ""))
    from .evaluators import get_evaluator

    advice = []
    chunking = [n for n in stats.truncated_by if get_evaluator(n).prompt_format.own_chunking]
    others = [n for n in stats.truncated_by if n not in chunking]
    if chunking:
        advice.append(f"{', '.join(chunking)} read(s) the document in chunks of {opt('chunk_words', 'N')} words "
                      f"whatever {opt('long_input', '...').split()[0] if cli else 'long_input'} says: lower "
                      f"{opt('chunk_words', 'N')} or check long claims sentence by sentence (fact/sentence_support)")
    if others or not chunking:
        if set(stats.truncated_fields) <= {"target", "prompt"} and stats.truncated_fields:
            advice.append("the target alone is too long: no long-input mode helps (split the target, or raise "
                          f"{opt('max_length', 'N')} up to what the model was trained for)")
        elif long_input == "truncate":
            advice.append(f"{opt('long_input', 'chunk')} reads long fields whole in windows ({opt('long_input', 'fit')} "
                          "keeps their beginning)")
        else:
            advice.append("a summary sentence, key point or instruction alone is that long")
    advice.append("--evidence shows which" if cli else "evidence=True shows which")
    return text + "; " + "; ".join(advice)


class Engine:
    """Runs named jobs through one runner per checkpoint, under one :class:`RunConfig`.

    Args (keyword only; the settings of :class:`~unieval_local.Scorer`, which wraps an Engine):
        model: ``None`` (each checkpoint found through ``$UNIEVAL_LOCAL_HOME``, the HF
            cache or the hub), a folder or hub id for every checkpoint, or a mapping from
            checkpoint name to folder.
        device: ``cpu``, ``cuda``, ``cuda:N``; default CUDA when available (checked here:
            an unavailable device raises ``ValueError`` listing the available ones).
        dtype, max_length, reference_reduction, long_input, window_overlap, chunk_words,
            fast_forward: the :class:`~unieval_local.config.RunConfig` (``max_length`` None:
            each evaluator's default).
        batch_tokens: padded tokens (rows x longest prompt) per forward pass (T5 runner).
        attention_mib: MiB of encoder attention scores per forward pass (T5 runner).
        offline: never touch the network (also ``HF_HUB_OFFLINE=1``).
        splitter: sentence splitter (default NLTK English Punkt, UniEval's).
        threads: CPU threads torch uses for the model (``torch.set_num_threads``, process-wide;
            None: torch's default, one per core). Set it when several jobs share a machine;
            it does not change a score.
        merge_punctuation: a letterless piece ("?", "1.") joins a neighbouring sentence
            instead of being scored as a sentence (:class:`~unieval_local.sentences.MergePunctuation`;
            default False: UniEval's behaviour).
        progress: a progress bar over queries inside the runner (``None``: on a terminal).
        cache_dir: opt-in persistent score cache folder (never used with bfloat16). A cache
            that fails (folder not creatable, damaged or foreign file, read-only, disk full)
            is disabled with one :class:`~unieval_local.cache.CacheUnusableWarning` and the
            run goes on without it (``engine.cache.disabled`` says why).
        aspects_config: a YAML file of user-defined aspects.
        runner_factory: ``f(ResolvedCheckpoint, fingerprint, Evaluator) -> Runner``; default
            loads the T5 model (:func:`~unieval_local.runner.t5_runner_factory`).

    Raises:
        ValueError: an invalid setting (named), an unavailable device.
        AspectsConfigError: an invalid aspects config.
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
        reference_reduction: str = "mean",
        offline: bool | None = None,
        splitter: SentenceSplitter | None = None,
        progress: bool | None = False,
        fast_forward: bool = True,
        cache_dir: str | os.PathLike | None = None,
        aspects_config: str | os.PathLike | None = None,
        long_input: str = "truncate",
        window_overlap: int = 1,
        chunk_words: int = 500,
        merge_punctuation: bool = False,
        threads: int | None = None,
        runner_factory: RunnerFactory | None = None,
    ):
        if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, int) or batch_tokens < 1:
            raise ValueError(f"batch_tokens must be a positive integer, got {batch_tokens!r}")
        if isinstance(attention_mib, bool) or not isinstance(attention_mib, (int, float)) or not attention_mib > 0:
            raise ValueError(f"attention_mib must be a positive number, got {attention_mib!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer (or None: torch's default), got {threads!r}")
        self.threads = threads
        #: the keyword arguments this engine was made with (a Ray actor makes its own from them)
        self.settings: dict[str, Any] = dict(
            model=model, device=device, dtype=dtype, max_length=max_length, batch_tokens=batch_tokens,
            attention_mib=attention_mib, reference_reduction=reference_reduction, offline=offline,
            splitter=splitter, progress=progress, fast_forward=fast_forward, cache_dir=cache_dir,
            aspects_config=aspects_config, long_input=long_input, window_overlap=window_overlap,
            chunk_words=chunk_words, merge_punctuation=merge_punctuation, threads=threads,
            runner_factory=runner_factory)
        self.model = model
        self.offline = offline
        self.batch_tokens = batch_tokens
        self.attention_mib = attention_mib
        self.progress = progress
        self.splitter: SentenceSplitter = splitter or DEFAULT_SPLITTER
        if merge_punctuation:
            self.splitter = MergePunctuation(self.splitter)
        if runner_factory is not None and device is None:
            self.device = "cpu"
        else:
            from .runner import resolve_device

            self.device = resolve_device(device)
        #: every setting that can change a score (signature, cache key, batch run identity, report settings)
        self.config = RunConfig(max_length=max_length, reference_reduction=reference_reduction,
                                long_input=long_input, window_overlap=window_overlap, chunk_words=chunk_words,
                                splitter=self.splitter.name,
                                dtype=dtype, device=self.device, fast_forward=bool(fast_forward))
        if self.config.dtype == "bfloat16" and self.device == "cpu":
            warnings.warn("bfloat16 on CPU is slower than float32 and deviates from UniEval's numbers; "
                          "use it on a GPU", RuntimeWarning, stacklevel=3)
        self.cache = None
        if cache_dir is not None:
            from .cache import ScoreCache

            self.cache = ScoreCache(cache_dir)  # an unusable one warns now, once, and is disabled
            if self.config.dtype == "bfloat16":
                warnings.warn("the score cache is not used with bfloat16: bfloat16 scores depend on which "
                              "prompts share a batch (up to ~1e-3), so a cached value would not reproduce",
                              RuntimeWarning, stacklevel=3)
        self.registry: Registry = DEFAULT_REGISTRY
        if aspects_config is not None:
            from .aspects_config import load_aspects_config

            self.registry = DEFAULT_REGISTRY.with_aspects(load_aspects_config(aspects_config, DEFAULT_REGISTRY))
        self._runner_factory = runner_factory
        self._checkpoints: dict[str, ResolvedCheckpoint] = {}
        self._identity: dict[str, str] = {}
        self._fingerprints: dict[str, str] = {}
        self._runners: dict[str, Runner] = {}
        self._loads = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ checkpoints and runners
    def checkpoint(self, name: str) -> ResolvedCheckpoint:
        """Resolve checkpoint ``name`` (see :func:`~unieval_local.checkpoints.resolve_checkpoint`).

        The folder's recorded identity is checked against the evaluator ``name``: one that
        names another evaluator is refused; one that names nothing is used with one warning
        (per engine) and signs as ``identity:unverified``.

        Raises:
            CheckpointNotFoundError: not found locally and not fetchable.
            CheckpointError: the folder is another evaluator's model
                (:func:`~unieval_local.checkpoints.check_identity`).
        """
        with self._lock:
            if name not in self._checkpoints:
                ckpt = resolve_checkpoint(name, self.model, offline=self.offline)
                status, identity = check_identity(ckpt.path, get_evaluator(name))
                if status == "unverified":
                    warnings.warn(unverified_message(name, ckpt.path, identity), UserWarning, stacklevel=3)
                self._checkpoints[name] = ckpt
                self._identity[name] = status
            return self._checkpoints[name]

    def identity(self, name: str) -> str:
        """``verified`` or ``unverified``: whether checkpoint ``name``'s folder says it is that
        evaluator's model (:func:`~unieval_local.checkpoints.check_identity`; a folder that
        names another evaluator is refused when it resolves)."""
        self.checkpoint(name)
        return self._identity[name]

    def fingerprint(self, name: str) -> str:
        """The content fingerprint (hex SHA-256) of checkpoint ``name``, from its files (no model
        is loaded), computed once per engine."""
        ckpt = self.checkpoint(name)
        with self._lock:
            if name not in self._fingerprints:
                from .checkpoints import fingerprint_checkpoint

                hasher = self.cache.file_sha256 if self.cache is not None else None
                self._fingerprints[name] = fingerprint_checkpoint(ckpt.path, file_hash=hasher)
            return self._fingerprints[name]

    def check_checkpoint(self, name: str) -> None:
        """Check checkpoint ``name`` without loading a model: it resolves and its weight files
        open (:func:`~unieval_local.runner.stored_weight_names`). The Ray engine's driver uses
        this instead of loading a model it would not use.

        Raises:
            CheckpointNotFoundError, CheckpointError: not found, or unreadable weights.
        """
        ckpt = self.checkpoint(name)
        if self._runner_factory is None:
            from .runner import stored_weight_names

            stored_weight_names(ckpt.path)

    def runner(self, name: str) -> Runner:
        """The runner of checkpoint ``name``, loaded on first use (wrapped in the score cache
        when this engine has one and the dtype is float32).

        Raises:
            CheckpointNotFoundError, CheckpointError: not found, or does not load.
        """
        ckpt = self.checkpoint(name)
        fingerprint = self.fingerprint(name)
        evaluator = get_evaluator(name)
        with self._lock:
            if name not in self._runners:
                factory = self._runner_factory or self._default_factory
                runner: Runner = factory(ckpt, fingerprint, evaluator)
                self._loads += 1
                if self.cache is not None and self.config.dtype != "bfloat16":
                    from .cache import CachedRunner

                    runner = CachedRunner(runner, self.cache, self.config, evaluator)
                self._runners[name] = runner
            return self._runners[name]

    def _default_factory(self, checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator) -> Runner:
        from .runner import set_threads, t5_runner_factory

        if self.threads is not None:
            set_threads(self.threads)

        return t5_runner_factory(checkpoint, fingerprint, evaluator, device=self.device, dtype=self.config.dtype,
                                 batch_tokens=self.batch_tokens, attention_mib=self.attention_mib,
                                 fast_forward=self.config.fast_forward, progress=self.progress)

    def max_length(self, name: str) -> int:
        """Tokens per query for checkpoint (evaluator) ``name``: the run's ``max_length``, else
        the evaluator's default."""
        return self.config.max_length_for(get_evaluator(name).max_length)

    def resolved_checkpoints(self) -> dict[str, str]:
        """Checkpoint name -> hub id (or folder) of every checkpoint resolved so far."""
        with self._lock:
            return {name: c.hub_id or str(c.path) for name, c in self._checkpoints.items()}

    def checkpoint_identities(self) -> dict[str, dict[str, str | None]]:
        """Checkpoint name -> ``{checkpoint, revision, fingerprint, max_length}`` of every
        checkpoint resolved so far (what signatures and report settings record;
        ``max_length`` is the effective one, :meth:`max_length`, where the run config says
        None for "each evaluator's default")."""
        names = list(self.resolved_checkpoints())
        return {n: {"checkpoint": self.resolved_checkpoints()[n], "revision": self.checkpoint(n).revision,
                    "fingerprint": self.fingerprint(n), "max_length": self.max_length(n),
                    "identity": self.identity(n)} for n in names}

    @property
    def model_loads(self) -> int:
        """Runners (models) this engine has loaded so far (at most one per checkpoint)."""
        return self._loads

    def cache_counts(self) -> tuple[int, int]:
        """``(hits, misses)`` of the score cache over this engine's life (0, 0 without one).

        Misses are the queries the model scored; once the cache is disabled by a failure
        (``self.cache.disabled``), every query is a miss. Never raises."""
        from .cache import CachedRunner

        cached = [r for r in self._runners.values() if isinstance(r, CachedRunner)]
        return sum(r.hits for r in cached), sum(r.misses for r in cached)

    # ------------------------------------------------------------------ signatures
    def aspect_hash(self, task: str, aspect: str) -> str | None:
        """A short SHA-256 of a user-defined aspect's definition; None for a built-in aspect."""
        a = self.registry.get_aspect(task, aspect)
        builtin = DEFAULT_REGISTRY.tasks.get(task)
        if builtin is not None and aspect in builtin.aspects:
            return None
        from .hashing import sha256_text

        return sha256_text(repr((a.question, a.fields, a.granularity, a.reduction, a.chunk_field,
                                 a.window_reduction, a.chunk_unit)))[:12]

    def signature(self, task: str, aspect: str) -> Signature:
        """The reproducibility signature of results for ``(task, aspect)``: this engine's
        :class:`RunConfig`, the checkpoint (hub id or folder, revision, content fingerprint)
        and, for a user-defined aspect, its definition's hash. No model is loaded."""
        a = self.registry.get_aspect(task, aspect)
        ckpt = self.checkpoint(a.checkpoint)
        evaluator = get_evaluator(a.checkpoint)
        chunking = evaluator.prompt_format.own_chunking
        return Signature.from_config(self.config, task=task, aspect=aspect, checkpoint=ckpt.hub_id or str(ckpt.path),
                                     revision=ckpt.revision, fingerprint=self.fingerprint(a.checkpoint),
                                     aspect_hash=self.aspect_hash(task, aspect), max_length=self.max_length(a.checkpoint),
                                     evaluator=evaluator.name, chunk_words=self.config.chunk_words if chunking else None,
                                     identity=self.identity(a.checkpoint))

    # ------------------------------------------------------------------ running
    def run(self, jobs: Mapping[str, Job], *, evidence: bool = False, strict: bool = False,
            on_batch: Callable[[int, int], None] | None = None) -> tuple[dict[str, JobResult], RunStats]:
        """Run named jobs: plan each, score every checkpoint's prompts as one list, fold back.

        The prompts of all jobs that share a checkpoint go to that checkpoint's runner as
        ONE list, so each distinct prompt is scored once, in length-sorted batches; each
        job's scores are then folded back (:func:`~unieval_local.fold.fold_all`) under this
        engine's ``reference_reduction``, with the ``long_input`` mode of its RunConfig.

        Args:
            jobs: name -> :class:`Job`.
            evidence: also build per-example :class:`~unieval_local.schema.Evidence`.
            strict: raise :class:`InvalidExampleError` before running any model when
                planning finds a problem (a target without sentences, one too long for fit/chunk).
            on_batch: called after each forward batch with (distinct queries done, distinct
                queries of that checkpoint), for progress reporting.

        Returns:
            ``(results, stats)``: name -> :class:`JobResult`, and the pass's :class:`RunStats`.

        Raises:
            InvalidExampleError: ``strict`` and a planning problem.
            CheckpointNotFoundError, CheckpointError: a checkpoint is unusable.
            ModelRuntimeError: the model failed while scoring.
        """
        config = self.config
        loads_before, (hits_before, misses_before) = self._loads, self.cache_counts()
        plans, results = {}, {}
        for name, job in jobs.items():
            counter = self.runner(job.checkpoint) if config.long_input != "truncate" else None
            plan, found = build_plan(job.examples, job.aspects, self.splitter, long_input=config.long_input,
                                     counter=counter, max_length=self.max_length(job.checkpoint),
                                     overlap=config.window_overlap, chunk_words=config.chunk_words)
            plans[name] = plan
            results[name] = JobResult(problems=found)
        if strict:
            problems = [p for r in results.values() for p in r.problems]
            if problems:
                raise InvalidExampleError(problems)
        stats = RunStats()
        by_checkpoint: dict[str, list[str]] = {}
        for name, job in jobs.items():
            by_checkpoint.setdefault(job.checkpoint, []).append(name)
        for ckpt_name, members in by_checkpoint.items():
            max_length = self.max_length(ckpt_name)
            prompts = [p for name in members for p in plans[name].prompts]
            runner, p_yes, n_tokens = None, np.empty(0), np.empty(0, dtype=np.int64)
            if prompts:
                runner = self.runner(ckpt_name)
                p_yes, n_tokens = runner.score(prompts, max_length=max_length, on_batch=on_batch)
            stats.n_queries += len(set(prompts))
            spans = {p: q.spans for name in members for p, q in zip(plans[name].prompts, plans[name].queries)}
            cut = {p for p, n in zip(prompts, n_tokens) if n > max_length}
            if cut:
                stats.n_truncated += len(cut)
                stats.truncated_by[ckpt_name] = stats.truncated_by.get(ckpt_name, 0) + len(cut)
                for p in cut:
                    where = truncated_field(p, spans[p], runner, max_length) or "prompt"
                    stats.truncated_fields[where] = stats.truncated_fields.get(where, 0) + 1
            offset = 0
            for name in members:
                plan, res = plans[name], results[name]
                k = len(plan.prompts)
                py, nt = p_yes[offset:offset + k], n_tokens[offset:offset + k]
                offset += k
                folded = fold_all(plan, py, config.reference_reduction)
                res.values.update(folded.values)
                res.unit_values.update(folded.unit_values)
                if config.long_input == "fit":  # windows that fit mode made (a format's own chunks are not)
                    stats.n_shortened += len({p for p, q in zip(plan.prompts, plan.queries) if q.window is not None
                                              and not format_of(plan.aspects[q.aspect]).own_chunking})
                if evidence:
                    res.evidence.update(build_evidence(plan, folded, py, nt, jobs[name].examples,
                                                       max_length, runner))
        hits, misses = self.cache_counts()
        stats.cache_hits, stats.cache_misses = hits - hits_before, misses - misses_before
        stats.model_loads = self._loads - loads_before
        return results, stats


__all__ = ["DEFAULT_ATTENTION_MIB", "DEFAULT_BATCH_TOKENS", "Engine", "Job", "JobResult", "RunStats", "Runner",
           "RunnerFactory", "jobs_by_checkpoint", "truncation_message"]
