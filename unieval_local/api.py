"""The Python API: a reusable :class:`Scorer` and the one-shot :func:`score`.

``score()`` delegates to a cached default ``Scorer``; no logic is duplicated.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .checkpoints import ModelSpec, ResolvedCheckpoint, resolve_checkpoint
from .errors import ExampleProblem, InvalidExampleError, NonFiniteScoreError, RequestTooLargeError
from .evidence import build_evidence
from .fold import ReferenceReduction, fold_all
from .planning import LongInput, build_plan
from .validate import non_latin_share, validate_examples, warn_input_hints
from .schema import EvaluationResult, ExampleScores, Signature, UniEvalData, UniEvalResult, UniEvalStats
from .sentences import DEFAULT_SPLITTER, SentenceSplitter
from .tasks import DEFAULT_REGISTRY, Aspect, Registry

#: The most examples one request of the hosted-metric form (module-level :func:`score`) may
#: hold, as in the hosted metric; a :class:`Scorer` takes any number.
MAX_EXAMPLES_PER_REQUEST = 250
#: Examples planned and run together inside :meth:`Scorer.evaluate` (bounds prompt memory).
ENGINE_PASS_EXAMPLES = 1000


class Scorer:
    """Scores examples with UniEval checkpoints, loading each checkpoint once.

    Args:
        model: ``None`` (the registry's checkpoint per task, found through
            ``$UNIEVAL_LOCAL_HOME``, the HF cache or the hub), a checkpoint folder
            or hub id used for every task, or a mapping from checkpoint name
            (``unieval-sum``, ``unieval-dialog``, ``unieval-fact``) to folder.
        device: ``cpu``, ``cuda`` or ``cuda:N``; default CUDA when available.
        dtype: ``float32`` (default, UniEval parity to 1e-5) or ``bfloat16``.
            ``float16`` raises ``ValueError`` (T5 overflows to NaN).
        max_length: tokens per query; longer prompts lose their END, as in
            UniEval (default 1024).
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
            run again (see :mod:`unieval_local.cache`).
        long_input: ``truncate`` (default, UniEval: a prompt longer than
            ``max_length`` loses its end, silently in UniEval, with a warning
            here), ``fit`` (shorten the long context field so the question and
            target stay whole) or ``chunk`` (score against windows of whole
            sentences/turns of the long field: max over windows for
            consistency-like aspects, mean for coherence). See
            :func:`~unieval_local.planning.build_plan`.
        window_overlap: sentences (turns) shared by consecutive windows in
            ``chunk`` mode (default 1).
        aspects_config: a YAML file of user-defined aspects added to the tasks
            (see :mod:`unieval_local.aspects_config`); ``scorer.registry`` holds them.
        runner_factory: advanced/testing: ``f(ResolvedCheckpoint, device, dtype)``
            returning a runner (default loads the T5 model, cached per process).

    Raises:
        ValueError: bad ``dtype``, ``max_length``, ``batch_tokens`` or reduction.
        CacheError: ``cache_dir`` cannot be created or written (a ``ValueError``).
        AspectsConfigError: an invalid aspects config (a ``ValueError``).

    Example:
        >>> scorer = Scorer(model="ckpts/unieval-sum", device="cpu")  # doctest: +SKIP
        >>> scorer.score([{"target": "A summary.", "source": "A document."}],
        ...              task="summarization", aspect="coherence").overall.value  # doctest: +SKIP
        0.93
    """

    def __init__(
        self,
        model: ModelSpec = None,
        device: str | None = None,
        dtype: str = "float32",
        max_length: int = 1024,
        batch_tokens: int = 8192,
        *,
        reference_reduction: ReferenceReduction = "mean",
        offline: bool | None = None,
        splitter: SentenceSplitter | None = None,
        progress: bool | None = False,
        fast_forward: bool = True,
        cache_dir: str | os.PathLike | None = None,
        aspects_config: str | os.PathLike | None = None,
        long_input: LongInput = "truncate",
        window_overlap: int = 1,
        attention_mib: float = 1024,
        runner_factory: Callable[[ResolvedCheckpoint, str, str], Any] | None = None,
    ):
        from .config import RunConfig

        self.model = model
        if not isinstance(batch_tokens, int) or batch_tokens < 1:
            raise ValueError(f"batch_tokens must be a positive integer, got {batch_tokens!r}")
        if isinstance(attention_mib, bool) or not isinstance(attention_mib, (int, float)) or not attention_mib > 0:
            raise ValueError(f"attention_mib must be a positive number, got {attention_mib!r}")
        self.batch_tokens = batch_tokens
        self.attention_mib = attention_mib
        self.offline = offline
        self.splitter = splitter or DEFAULT_SPLITTER
        self.progress = progress
        if runner_factory is not None and device is None:
            self.device = "cpu"
        else:
            from .runner import resolve_device

            self.device = resolve_device(device)
        #: every setting that can change a score (signature, cache key, batch run identity)
        self.config = RunConfig(max_length=max_length, reference_reduction=reference_reduction,
                                long_input=long_input, window_overlap=window_overlap, splitter=self.splitter.name,
                                dtype=dtype, device=self.device, fast_forward=bool(fast_forward))
        if self.dtype == "bfloat16" and self.device == "cpu":
            warnings.warn("bfloat16 on CPU is slower than float32 and deviates from UniEval's numbers; "
                          "use it on a GPU", RuntimeWarning, stacklevel=2)
        self.cache_dir = cache_dir
        self._cache = None
        if cache_dir is not None:
            from .cache import ScoreCache

            self._cache = ScoreCache(cache_dir)  # fail early on an unusable folder
            if self.dtype == "bfloat16":
                warnings.warn("the score cache is not used with bfloat16: bfloat16 scores depend on which "
                              "prompts share a batch (up to ~1e-3), so a cached value would not reproduce",
                              RuntimeWarning, stacklevel=2)
        self.registry: Registry = DEFAULT_REGISTRY
        if aspects_config is not None:
            from .aspects_config import load_aspects_config

            self.registry = DEFAULT_REGISTRY.with_aspects(load_aspects_config(aspects_config, DEFAULT_REGISTRY))
        self._runner_factory = runner_factory
        self._checkpoints: dict[str, ResolvedCheckpoint] = {}
        self._fingerprints: dict[str, str] = {}
        self._runners: dict[str, Any] = {}
        self._lock = threading.Lock()

    # settings, read from the one RunConfig
    max_length = property(lambda self: self.config.max_length, doc="Tokens per query.")
    reference_reduction = property(lambda self: self.config.reference_reduction, doc="mean or max over references.")
    long_input = property(lambda self: self.config.long_input, doc="truncate, fit or chunk.")
    window_overlap = property(lambda self: self.config.window_overlap, doc="Sentences shared by windows (chunk).")
    dtype = property(lambda self: self.config.dtype, doc="float32 or bfloat16.")
    fast_forward = property(lambda self: self.config.fast_forward, doc="Our single-step forward (True) or the model's.")

    # ------------------------------------------------------------------ loading
    def checkpoint(self, name: str) -> ResolvedCheckpoint:
        """Resolve checkpoint ``name`` (see :func:`~unieval_local.checkpoints.resolve_checkpoint`)."""
        with self._lock:
            if name not in self._checkpoints:
                self._checkpoints[name] = resolve_checkpoint(name, self.model, offline=self.offline)
            return self._checkpoints[name]

    def fingerprint(self, name: str) -> str:
        """The content fingerprint (hex SHA-256) of checkpoint ``name``, computed once per scorer
        (see :func:`~unieval_local.checkpoints.fingerprint_checkpoint`)."""
        ckpt = self.checkpoint(name)
        with self._lock:
            if name not in self._fingerprints:
                from .checkpoints import fingerprint_checkpoint

                hasher = self._cache.file_sha256 if self._cache is not None else None
                self._fingerprints[name] = fingerprint_checkpoint(ckpt.path, file_hash=hasher)
            return self._fingerprints[name]

    def runner(self, name: str):
        """The loaded runner of checkpoint ``name``.

        Raises:
            CheckpointNotFoundError, CheckpointError: not found, or does not load.
        """
        ckpt = self.checkpoint(name)
        use_cache = self._cache is not None and self.dtype != "bfloat16"
        fingerprint = self.fingerprint(name) if use_cache else None
        with self._lock:
            if name not in self._runners:
                if self._runner_factory is not None:
                    runner = self._runner_factory(ckpt, self.device, self.dtype)
                else:
                    from .runner import load_runner

                    runner = load_runner(ckpt, self.device, self.dtype)
                if use_cache:
                    from .cache import CachedRunner

                    runner = CachedRunner(runner, self._cache, fingerprint, self.config)
                self._runners[name] = runner
            return self._runners[name]

    def resolved_checkpoints(self) -> dict[str, str]:
        """Checkpoint name -> hub id (or folder) of every checkpoint resolved so far."""
        with self._lock:
            return {name: c.hub_id or str(c.path) for name, c in self._checkpoints.items()}

    def cache_stats(self) -> dict[str, int]:
        """Queries answered from the score cache (``hits``) and scored anew (``misses``) so far."""
        runners = [r for r in self._runners.values() if hasattr(r, "hits")]
        return {"hits": sum(r.hits for r in runners), "misses": sum(r.misses for r in runners)}

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
        """The reproducibility signature of results for ``(task, aspect)``: this scorer's
        :class:`~unieval_local.config.RunConfig`, the checkpoint (hub id or folder, revision,
        content fingerprint) and, for a user-defined aspect, its definition's hash."""
        a = self.registry.get_aspect(task, aspect)
        ckpt = self.checkpoint(a.checkpoint)
        return Signature.from_config(self.config, task=task, aspect=aspect, checkpoint=ckpt.hub_id or str(ckpt.path),
                                     revision=ckpt.revision, fingerprint=self.fingerprint(a.checkpoint),
                                     aspect_hash=self.aspect_hash(task, aspect))

    # ------------------------------------------------------------------ scoring
    def run_jobs(self, jobs: Sequence["Job"], *, evidence: bool = False, strict: bool = False,
                 on_batch: Callable[[int, int], None] | None = None) -> tuple[list["JobResult"], "RunStats"]:
        """Run several sets of Boolean-QA queries through the model in one pass per checkpoint.

        This is the engine under every scoring entry point: each job's aspects
        are planned over its examples (:func:`~unieval_local.planning.build_plan`,
        with this scorer's ``long_input``), the prompts of all jobs that share
        a checkpoint go to that checkpoint's runner as ONE list (so each
        distinct prompt is scored once, in length-sorted batches), and each
        job's scores are folded back (:func:`~unieval_local.fold.fold_all`).
        Reports use it to mix UniEval aspects with their own queries (claims,
        key points, rubric questions) over derived examples.

        Args:
            jobs: :class:`Job` s; aspect names must be unique within a job.
            evidence: also build per-example :class:`~unieval_local.schema.Evidence`.
            strict: raise :class:`InvalidExampleError` before running the model
                when planning finds any problem.
            on_batch: called after each forward batch with (distinct queries done,
                distinct queries of that checkpoint), for progress reporting.

        Returns:
            ``(results, stats)``: one :class:`JobResult` per job, in order, and
            the pass's :class:`RunStats`.

        Raises:
            InvalidExampleError: ``strict`` and a planning problem.
            CheckpointNotFoundError, CheckpointError: a checkpoint is unusable.
        """
        plans, results = [], []
        for job in jobs:
            names = [a.name for a in job.aspects]
            if len(set(names)) != len(names):
                raise ValueError(f"aspect names repeat within one job: {names}")
            ckpts = {a.checkpoint for a in job.aspects}
            if len(ckpts) != 1:
                raise ValueError(f"the aspects of one job must share a checkpoint, got {sorted(ckpts)}")
            counter = self.runner(job.checkpoint) if self.long_input != "truncate" else None
            if counter is not None and not hasattr(counter, "count"):
                raise TypeError(f"long_input={self.long_input!r} needs a runner that counts tokens")
            plan, found = build_plan(
                job.examples, job.aspects, self.splitter, long_input=self.long_input, counter=counter,
                max_length=self.max_length, overlap=self.window_overlap)
            plans.append(plan)
            results.append(JobResult(values={}, unit_values={}, problems=found))
        problems = [p for r in results for p in r.problems]
        if strict and problems:
            raise InvalidExampleError(problems)
        stats = RunStats()
        by_checkpoint: dict[str, list[int]] = {}
        for j, job in enumerate(jobs):
            by_checkpoint.setdefault(job.checkpoint, []).append(j)
        for ckpt_name, members in by_checkpoint.items():
            prompts = [p for j in members for p in plans[j].prompts]
            runner, p_yes, n_tokens = None, np.empty(0), np.empty(0, dtype=np.int64)
            if prompts:
                runner = self.runner(ckpt_name)
                settings = dict(max_length=self.max_length, batch_tokens=self.batch_tokens,
                                progress=self.progress, fast_forward=self.fast_forward,
                                attention_mib=self.attention_mib, on_batch=on_batch)
                if hasattr(runner, "score_prompts"):
                    p_yes, n_tokens = runner.score_prompts(prompts, **settings)
                else:
                    p_yes = runner.p_yes(prompts, **settings)
                    n_tokens = np.full(len(prompts), -1, dtype=np.int64)
            stats.n_queries += len(set(prompts))
            stats.n_truncated += len({p for p, n in zip(prompts, n_tokens) if n > self.max_length})
            offset = 0
            for j in members:
                plan, res = plans[j], results[j]
                k = len(plan.prompts)
                py, nt = p_yes[offset:offset + k], n_tokens[offset:offset + k]
                offset += k
                folded = fold_all(plan, py, self.reference_reduction)
                res.values.update(folded.values)
                res.unit_values.update(folded.unit_values)
                if self.long_input == "fit":
                    stats.n_shortened += len({p for p, q in zip(plan.prompts, plan.queries) if q.window is not None})
                if evidence:
                    counter = runner if hasattr(runner, "cut") else None
                    res.evidence.update(build_evidence(plan, folded, py, nt, jobs[j].examples,
                                                       self.max_length, counter))
        return results, stats

    def _run(self, examples: Sequence[UniEvalData | None], task: str, aspects: Sequence[str],
             strict: bool, evidence: bool = False, on_batch: Callable[[int, int], None] | None = None) -> "_Run":
        """One job per checkpoint over ``examples`` for the named aspects of ``task``."""
        jobs = jobs_by_checkpoint([self.registry.get_aspect(task, a) for a in aspects], examples)
        results, stats = self.run_jobs(jobs, evidence=evidence, strict=strict, on_batch=on_batch)
        run = _Run(values={}, problems=[p for r in results for p in r.problems], n_queries=stats.n_queries,
                   n_truncated=stats.n_truncated, n_shortened=stats.n_shortened)
        for r in results:
            run.values.update(r.values)
            run.evidence.update(r.evidence)
        run.values = {a: run.values[a] for a in aspects}
        return run

    def score_values(
        self, examples: Sequence[UniEvalData | None], *, task: str, aspects: Sequence[str],
        strict: bool = False,
    ) -> tuple[dict[str, np.ndarray], list[ExampleProblem]]:
        """Score parsed, checked examples for several aspects of one task.

        This is the engine under :meth:`score` and the CLI: no request cap, and
        one bad example never loses the others' scores. All aspects that share
        a checkpoint go through the model as one flat list of queries.

        Args:
            examples: from :func:`~unieval_local.validate.validate_examples`;
                ``None`` entries are skipped.
            task: task name.
            aspects: aspect names of ``task``.
            strict: raise :class:`InvalidExampleError` before running the model
                when planning finds a problem (a target with no sentences, or one
                too long for ``fit``/``chunk``).

        Returns:
            ``(values, problems)``: ``values[aspect]`` is a float64 array of shape
            ``(len(examples),)``, NaN where an example was skipped, has a
            planning problem, or got non-finite logits; ``problems`` lists the
            planning problems.
        """
        run = self._run(examples, task, aspects, strict)
        return run.values, run.problems

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
        warn_input_hints(examples, self.registry.get_task(task), resolved)
        non_latin = [i for i, ex in enumerate(examples) if non_latin_share(ex.target) > 0.5]
        if non_latin:
            warnings.warn(f"{len(non_latin)} target(s) are mostly in a non-Latin script (examples "
                          f"{non_latin[:10]}{' ...' if len(non_latin) > 10 else ''}); the UniEval evaluators were "
                          "trained on English only, so their scores there mean little", UserWarning, stacklevel=3)
        return examples

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
        run = self._run_in_passes(examples, task, names, evidence)
        values = run.values
        if run.n_truncated:
            warnings.warn(
                f"{run.n_truncated} of {run.n_queries} queries were longer than max_length={self.max_length} "
                f"tokens and lost their end (long_input={self.long_input!r}); use long_input='fit' or 'chunk' "
                "to keep the target whole, and evidence=True to see which", UserWarning, stacklevel=2)
        if run.n_shortened:
            warnings.warn(
                f"{run.n_shortened} of {run.n_queries} queries had a long field shortened to fit max_length="
                f"{self.max_length} (long_input='fit': only the beginning of that field was read; "
                "long_input='chunk' reads all of it); evidence=True shows the windows", UserWarning, stacklevel=2)
        bad = sorted({i for v in values.values() for i in np.flatnonzero(~np.isfinite(v)).tolist()})
        if bad:
            raise NonFiniteScoreError(
                f"the model gave non-finite logits for examples {bad[:20]} "
                f"(dtype {self.dtype}); try dtype='float32'", bad)
        ev = run.evidence if evidence else {}
        per_aspect = {
            a: UniEvalResult(overall=UniEvalStats(value=float(np.mean(v))),
                             examples=[UniEvalStats(value=float(x), evidence=ev[a][i] if ev else None)
                                       for i, x in enumerate(v)],
                             signature=self.signature(task, a))
            for a, v in values.items()
        }
        rows = [ExampleScores(scores={a: float(values[a][i]) for a in names},
                              aspect_mean=float(np.mean([values[a][i] for a in names])),
                              evidence={a: ev[a][i] for a in names} if ev else None)
                for i in range(len(examples))]
        return EvaluationResult(task=task, aspects=names, examples=rows, per_aspect=per_aspect)

    def _run_in_passes(self, examples: Sequence[UniEvalData], task: str, names: Sequence[str],
                       evidence: bool) -> "_Run":
        """:meth:`_run` over consecutive slices of :data:`ENGINE_PASS_EXAMPLES` examples, joined."""
        total = _Run(values={a: np.empty(0) for a in names}, problems=[], evidence={a: [] for a in names})
        for at in range(0, len(examples), ENGINE_PASS_EXAMPLES):
            run = self._run(examples[at:at + ENGINE_PASS_EXAMPLES], task, names, strict=True, evidence=evidence)
            for a in names:
                total.values[a] = np.concatenate([total.values[a], run.values[a]])
                if evidence:
                    total.evidence[a] += run.evidence[a]
            total.n_queries += run.n_queries
            total.n_truncated += run.n_truncated
            total.n_shortened += run.n_shortened
        return total

    def score(self, data: Any = None, *, task: str = "summarization", aspect: str = "coherence",
              evidence: bool = False, targets: Sequence[str] | None = None, sources: Sequence[str] | None = None,
              references: Sequence[Sequence[str] | str] | None = None,
              contexts: Sequence[str] | None = None) -> UniEvalResult:
        """Score any number of examples for one (task, aspect).

        Args:
            data: examples as dicts or :class:`UniEvalData` (``target`` plus the
                fields the aspect needs; UniEval's ``system_output`` and
                ``reference`` names are accepted), or a pandas DataFrame with those
                columns; or None with the parallel lists below.
            task: task name (see ``unieval-local tasks`` / README table).
            aspect: aspect name of the task.
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
            ValueError: both ``data`` and lists given, lists of different lengths, or
                ``data`` of an unusable type.
            InvalidExampleError: one or more bad examples, all listed with
                index, aspect and field (a ``ValueError``); nothing is scored.
            CheckpointNotFoundError, CheckpointError: no usable checkpoint.
            NonFiniteScoreError: the model produced NaN/inf for some examples.
            ModelRuntimeError: the model failed at runtime (e.g. out of memory on one query).
        """
        return self._score(data, task=task, aspect=aspect, evidence=evidence, targets=targets, sources=sources,
                           references=references, contexts=contexts)

    def _score(self, data: Any, *, task: str, aspect: str, evidence: bool, max_examples: int | None = None,
               **columns: Any) -> UniEvalResult:
        self.registry.get_aspect(task, aspect)
        return self.evaluate(data, task=task, aspects=[aspect], evidence=evidence, _max_examples=max_examples,
                             **columns).per_aspect[aspect]


@dataclass(frozen=True)
class Job:
    """Boolean-QA queries to run: some aspects (all of one checkpoint) over some examples.

    Attributes:
        aspects: the aspects (built-in, user-defined, or made on the fly by a
            report, e.g. a key-point coverage question); unique names.
        examples: the examples to plan them over (``None`` entries are skipped);
            they may be derived ones, e.g. ``{target: key point, source: summary}``.
    """

    aspects: tuple[Aspect, ...]
    examples: Sequence[UniEvalData | None]

    @property
    def checkpoint(self) -> str:
        """The checkpoint name all the job's aspects use."""
        return self.aspects[0].checkpoint


def jobs_by_checkpoint(aspects: Sequence[Aspect], examples: Sequence[UniEvalData | None]) -> list[Job]:
    """One :class:`Job` per checkpoint for ``aspects`` over the same ``examples``
    (aspects in the given order within each job; jobs in order of first appearance)."""
    groups: dict[str, list[Aspect]] = {}
    for a in aspects:
        groups.setdefault(a.checkpoint, []).append(a)
    return [Job(tuple(group), examples) for group in groups.values()]


@dataclass
class JobResult:
    """What one :class:`Job` gave.

    Attributes:
        values: aspect -> float64 array of shape ``(len(examples),)``; NaN where
            an example was skipped, had a planning problem or a non-finite score.
        unit_values: aspect -> per example its per-unit (sentence) values, or None.
        problems: planning problems (example index, field, message).
        evidence: aspect -> per example :class:`~unieval_local.schema.Evidence`
            (only when asked for).
    """

    values: dict[str, np.ndarray]
    unit_values: dict[str, list[list[float] | None]]
    problems: list[ExampleProblem]
    evidence: dict[str, list] = field(default_factory=dict)


@dataclass
class RunStats:
    """Counts of one engine pass: distinct queries, those cut at ``max_length``,
    those whose long field ``fit`` shortened."""

    n_queries: int = 0
    n_truncated: int = 0
    n_shortened: int = 0

    def __add__(self, other: "RunStats") -> "RunStats":
        return RunStats(self.n_queries + other.n_queries, self.n_truncated + other.n_truncated,
                        self.n_shortened + other.n_shortened)


@dataclass
class _Run:
    """What one engine pass produced (internal)."""

    values: dict[str, np.ndarray]
    problems: list[ExampleProblem]
    evidence: dict[str, list] = field(default_factory=dict)
    n_queries: int = 0
    n_truncated: int = 0
    n_shortened: int = 0


_DEFAULT_SCORERS: dict[str, Scorer] = {}
_DEFAULT_LOCK = threading.Lock()


def _model_key(model: ModelSpec) -> str:
    if isinstance(model, Mapping):
        return json.dumps({str(k): str(v) for k, v in model.items()}, sort_keys=True)
    return json.dumps(None if model is None else str(model))


def score(
    data: Any = None,
    *,
    task: str = "summarization",
    aspect: str = "coherence",
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
    and errors are those of :meth:`Scorer.score`, plus:

    Raises:
        RequestTooLargeError: more than 250 examples (a ``ValueError``); a
            :class:`Scorer` takes any number.

    Example:
        >>> from unieval_local import score  # doctest: +SKIP
        >>> r = score([{"target": "Elizabeth was hospitalized.", "source": "..."}],
        ...           task="summarization", aspect="consistency")  # doctest: +SKIP
        >>> r.overall.value, [e.value for e in r.examples]  # doctest: +SKIP
    """
    key = _model_key(model) + "|" + str(device)
    with _DEFAULT_LOCK:
        scorer = _DEFAULT_SCORERS.get(key)
        if scorer is None:
            scorer = _DEFAULT_SCORERS[key] = Scorer(model=model, device=device)
    return scorer._score(data, task=task, aspect=aspect, evidence=False, max_examples=MAX_EXAMPLES_PER_REQUEST,
                         targets=targets, sources=sources, references=references, contexts=contexts)


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
