"""The engine: named jobs of Boolean-QA queries in, scores by name out. No torch.

Every scoring entry point goes through an :class:`Engine` (by way of the
:class:`~unieval_local.requests.scheduler.Scheduler`)::

    jobs (name -> Job: aspects of one checkpoint x examples)
      -> plan: planning.build_plan (fan-out: one flat list of prompts per job; fact/claims: claims.py)
      -> execute: one Runner per checkpoint (the distinct prompts of all jobs of a checkpoint
                  as ONE list, each scored once, in length-sorted batches)
               -> fold.fold_all (fan-in: windows, references, sentences)
               -> evidence (on request)
    -> results by name, the pass's RunStats, and RunStats per group of names

An :class:`Engine` is made from one :class:`~unieval_local.settings.EngineSettings` and holds the
:class:`~unieval_local.config.RunConfig` (every setting that can change a score), the registry of tasks
and aspects, the sentence splitter and the pool of runners (one per checkpoint name, loaded on first
use, wrapped in the score cache when one is configured). Whatever turns prompts into probabilities
implements the :class:`~unieval_local.models.base.Runner` protocol (T5, the cache wrapper, the tests' fake).
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from . import notes
from .claims import claim_signature, generator_name, plan_claims, with_claim_checker
from .config import RunConfig
from .errors import ExampleProblem, InvalidExampleError
from .models.base import Runner, RunnerFactory
from .models.checkpoints import ModelSpec, ResolvedCheckpoint, check_identity, resolve_checkpoint, unverified_message
from .models.devices import cpu_threads as _cpu_threads
from .pipeline.evidence import truncated_field
from .pipeline.fold import fold_all
from .pipeline.jobs import Job, JobResult, PassResult, PlannedJob, RunStats, jobs_by_checkpoint, truncation_message
from .pipeline.planning import build_plan
from .registry.evaluators import Evaluator, format_of, get_evaluator
from .registry.tasks import DEFAULT_REGISTRY, Aspect, Registry
from .schema import Signature
from .settings import EngineSettings, batch_tokens_for
from .text.language import DETECTOR, UNDETERMINED, language_name, languages_outside, record_language
from .text.prompts import BooleanQA, chunk_words_for
from .text.sentences import (DEFAULT_SPLITTER, MergeLetterless, MergePunctuation, SentenceSplitter, as_splitter,
                             missing_splitter_note, signed_splitters, splitter_for_language)

__all__ = ["Engine", "Job", "JobResult", "PassResult", "PlannedJob", "RunStats", "Runner", "RunnerFactory",
           "jobs_by_checkpoint", "truncation_message"]


class Engine:
    """Runs named jobs through one runner per checkpoint, under one :class:`RunConfig`.

    Args:
        settings: an :class:`~unieval_local.settings.EngineSettings` (default: the declared
            defaults); keyword arguments override its fields (``Engine(dtype="bfloat16")``). The
            settings are those of :class:`~unieval_local.Scorer` (one declaration:
            :data:`~unieval_local.settings.SETTINGS`, where each is documented).

    Attributes:
        settings: the :class:`~unieval_local.settings.EngineSettings` in effect (a Ray actor
            rebuilds its engine from ``settings.as_kwargs()``).
        config: every setting that can change a score (signature, cache key, batch run
            identity, report settings).
        registry: the tasks and aspects (built-in, plus ``aspects_config``).
        splitter: the sentence splitter (``MergePunctuation`` over it with ``merge_punctuation``).
        device: the device in use. cache: the score cache, or None.

    Raises:
        ValueError: an invalid setting (named), an unavailable device.
        TypeError: an unknown setting name.
        AspectsConfigError: an invalid aspects config.
    """

    def __init__(self, settings: EngineSettings | None = None, **overrides: Any):
        settings = settings if settings is not None else EngineSettings()
        if overrides:
            unknown = sorted(set(overrides) - set(settings.as_kwargs()))
            if unknown:
                raise TypeError(f"unknown engine setting(s) {', '.join(unknown)}; the settings are "
                                f"{', '.join(settings.as_kwargs())}")
            settings = settings.replace(**overrides)
        self.settings: EngineSettings = settings
        self.splitter: SentenceSplitter = as_splitter(settings.splitter) if settings.splitter else DEFAULT_SPLITTER
        if settings.merge_punctuation:
            self.splitter = MergePunctuation(self.splitter)
        self._splitters: dict[str, SentenceSplitter] = {}
        self._language_warned: set[tuple[str, str]] = set()
        if settings.runner_factory is not None and settings.device is None:
            self.device = "cpu"
        else:
            from .models.devices import resolve_device

            self.device = resolve_device(settings.device)
        #: padded tokens per forward pass: the setting, else the device's default (settings.BATCH_TOKENS)
        self.batch_tokens: int = settings.batch_tokens or batch_tokens_for(self.device)
        self.config = RunConfig(max_length=settings.max_length, reference_reduction=settings.reference_reduction,
                                long_input=settings.long_input, window_overlap=settings.window_overlap,
                                chunk_words=settings.chunk_words, splitter=self.splitter.name,
                                language=settings.language,
                                language_detector=None if settings.language else DETECTOR.name,
                                dtype="float32" if settings.dtype == "auto" else settings.dtype,
                                device=self.device, fast_forward=bool(settings.fast_forward),
                                claim_checker=settings.claim_checker, generator=generator_name(settings.generator))
        if self.config.dtype == "bfloat16" and self.device == "cpu":
            from .models.cpu_precision import bfloat16_cpu_warning  # slower, or fast (AMX): by what the CPU has
            warnings.warn(bfloat16_cpu_warning(), RuntimeWarning, stacklevel=3)
        self.cache = None
        if settings.cache_dir is not None:
            from .models.cache import ScoreCache

            self.cache = ScoreCache(settings.cache_dir)  # an unusable one warns now, once, and is disabled
            if self.config.dtype == "bfloat16":
                warnings.warn("the score cache is not used with bfloat16: bfloat16 scores depend on which "
                              "prompts share a batch (up to ~1e-3), so a cached value would not reproduce",
                              RuntimeWarning, stacklevel=3)
        from .registry.user_aspects import registry_with

        self.registry: Registry = with_claim_checker(registry_with(settings.aspects_config), settings.claim_checker)
        self._checkpoints: dict[str, ResolvedCheckpoint] = {}
        self._identity: dict[str, str] = {}
        self._fingerprints: dict[str, str] = {}
        self._runners: dict[str, Runner] = {}
        self._dtypes: dict[str, str] = {}
        self._dtype_lock = threading.Lock()  # apart from _lock: runner() holds that one when it asks
        self._loads = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ languages
    def record_language(self, example: Any) -> str:
        """The language of one example or record (:func:`~unieval_local.text.language.record_language`):
        its ``language`` field, else the run's ``language``, else detected (``und`` when it cannot
        be told; read as English). None for None."""
        if example is None:
            return None
        return record_language(example, self.settings.language)

    def splitter_for(self, language: str | None, checkpoint: str | None = None) -> SentenceSplitter:
        """The sentence splitter of text in ``language``: the ``splitter=`` the engine was given
        (for every language), else the language's built-in one
        (:func:`~unieval_local.text.sentences.splitter_for_language`: NLTK's English Punkt for en,
        Chinese rules for zh/ja and Chinese varieties, Punkt with Indonesian abbreviations for id/ms,
        sentencex for the rest), under ``MergePunctuation`` with ``merge_punctuation``, and for an
        evaluator ``checkpoint`` other than UniEval's (Boolean-QA: NLTK's pieces kept, parity) under
        :class:`~unieval_local.text.sentences.MergeLetterless`. A language
        without a splitter of its own (generic terminators) is noted for the request, and warned
        once per engine (:func:`~unieval_local.text.sentences.missing_splitter_note`)."""
        split = self._language_splitter(language)
        keep = checkpoint is None or isinstance(get_evaluator(checkpoint).prompt_format, BooleanQA)
        return split if keep else MergeLetterless(split)

    def _language_splitter(self, language: str | None) -> SentenceSplitter:
        if self.settings.splitter or language in (None, "en", UNDETERMINED):
            return self.splitter
        split = self._splitters.get(language)
        if split is None:
            base = splitter_for_language(language)
            made = (self.splitter if base is DEFAULT_SPLITTER
                    else MergePunctuation(base) if self.settings.merge_punctuation else base)
            split = self._splitters.setdefault(language, made)  # atomic: one thread's is kept
            first = split is made
        else:
            first = False
        missing = missing_splitter_note(language)
        if missing:
            notes.note(missing, warn=first, stacklevel=3)
        return split

    def language_problems(self, checkpoint: str, aspects: Sequence[Aspect], languages: Sequence[str | None]
                          ) -> list[ExampleProblem]:
        """Examples in a language the evaluator ``checkpoint`` was not trained on
        (:attr:`~unieval_local.registry.evaluators.Evaluator.languages`; undetermined text counts as
        English): with ``strict_language``, one problem per (example, aspect), field ``language``;
        otherwise none, and one ``UserWarning`` per (aspect, language) per engine, naming both."""
        trained = get_evaluator(checkpoint).languages
        if trained is None:
            return []
        outside, problems = languages_outside(trained, languages), []
        told = ", ".join(trained)
        for lang, idx in outside.items():
            for a in aspects:
                what = f"{a.task}/{a.name}" if a.task != "report" else f"the report's '{a.name}' query"
                if self.settings.strict_language:
                    problems += [ExampleProblem(i, "language", f"{what}: its evaluator {checkpoint} was trained on "
                                                f"{told}, not {language_name(lang)} ({lang}); strict_language "
                                                "refuses it", a.name) for i in idx]
                    continue
                with self._lock:
                    new = (what, lang) not in self._language_warned
                    self._language_warned.add((what, lang))
                # the request's notes always, with its count (an answer given for someone else); a warning
                # once per engine, without one (a batch run's requests are its records: the first's count misleads)
                why = (f"{language_name(lang)} ({lang}), but its evaluator {checkpoint} was trained on {told}: its "
                       "scores there are not validated (strict_language / --strict-language refuses such examples; "
                       "docs/languages.md)")
                notes.note(f"{what}: {len(idx)} example{'' if len(idx) == 1 else 's'} in {why}", warn=False)
                if new:
                    warnings.warn(f"{what}: examples in {why}", UserWarning, stacklevel=3)
        return problems

    @property
    def model(self) -> ModelSpec:
        """The ``model`` setting: a folder, hub id or name -> folder mapping (or None)."""
        return self.settings.model

    # ------------------------------------------------------------------ checkpoints and runners
    def checkpoint(self, name: str) -> ResolvedCheckpoint:
        """Resolve checkpoint ``name`` (see :func:`~unieval_local.models.checkpoints.resolve_checkpoint`).

        The folder's recorded identity is checked against the evaluator ``name``: one that
        names another evaluator is refused; one that names nothing is used with one warning
        (per engine) and signs ``identity:unverified``; one only its config.json names signs ``identity:named``.

        Raises:
            CheckpointNotFoundError: not found locally and not fetchable.
            CheckpointError: the folder is another evaluator's model
                (:func:`~unieval_local.models.checkpoints.check_identity`).
        """
        with self._lock:
            if name not in self._checkpoints:
                ckpt = resolve_checkpoint(name, self.settings.model, offline=self.settings.offline)
                status, identity = check_identity(ckpt.path, get_evaluator(name))
                if status == "unverified":
                    warnings.warn(unverified_message(name, ckpt.path, identity), UserWarning, stacklevel=3)
                self._checkpoints[name] = ckpt
                self._identity[name] = status
            return self._checkpoints[name]

    def identity(self, name: str) -> str:
        """``verified``, ``named`` or ``unverified``: what says checkpoint ``name``'s folder is that evaluator's
        model (:func:`~unieval_local.models.checkpoints.check_identity`; another evaluator's is refused)."""
        self.checkpoint(name)
        return self._identity[name]

    def fingerprint(self, name: str) -> str:
        """The content fingerprint (hex SHA-256) of checkpoint ``name``, from its files (no model
        is loaded), computed once per engine; for an evaluator whose tokenizer lives in another
        folder (HHEM's foundation), that folder's files count too."""
        ckpt = self.checkpoint(name)
        with self._lock:
            if name not in self._fingerprints:
                from .models.checkpoints import fingerprint_checkpoint

                # files hashed through the persistent memo keyed on (path, size, mtime_ns, inode)
                # (hashing.memo_sha256_file): a file renamed over with the same size and mtime is hashed again
                fp = fingerprint_checkpoint(ckpt.path)
                spec = get_evaluator(name)
                if spec.tokenizer_from:  # its tokenizer and config live in the foundation: they count too
                    from .hashing import sha256_text
                    from .models.hhem.model import foundation_of

                    fp = sha256_text(fp + "\0" + fingerprint_checkpoint(foundation_of(ckpt.path, spec)))
                self._fingerprints[name] = fp
            return self._fingerprints[name]

    def _chunk_words(self, evaluator) -> int:
        """The words per chunk an own-chunking format reads (:func:`~unieval_local.text.prompts.chunk_words_for`:
        ``chunk_words``, else its own, capped by its ``max_words`` with a note)."""
        words, capped = chunk_words_for(evaluator.prompt_format, self.config.chunk_words)
        if capped:
            notes.note(f"{evaluator.name}: {capped}", warn=True, stacklevel=3)
        return words

    def dtype_for(self, name: str) -> str:
        """The dtype checkpoint ``name`` runs in (signed per aspect): the ``dtype`` setting; ``auto``
        (the default): float32, bfloat16 for a ``causal-lm`` checkpoint above 3B parameters
        (:func:`~unieval_local.models.causal_lm.model.auto_dtype`, noted once). Raises
        CheckpointNotFoundError or CheckpointError as :meth:`checkpoint` (``causal-lm`` under ``auto``)."""
        if self.settings.dtype != "auto" or get_evaluator(name).backend != "causal-lm":
            return self.config.dtype
        with self._dtype_lock:
            if name in self._dtypes:
                return self._dtypes[name]
        from .models.causal_lm.model import auto_dtype

        dtype, n = auto_dtype(self.checkpoint(name).path)
        if dtype == "bfloat16":
            slow = "; on CPU that is slow: an 8B model needs a GPU in practice" if self.device == "cpu" else ""
            notes.note(f"{name}: {n / 1e9:.1f}B parameters: bfloat16 (--dtype auto; --dtype float32 forces "
                       f"float32){slow}", warn=True, stacklevel=4)
        with self._dtype_lock:
            self._dtypes[name] = dtype
        return dtype

    def check_checkpoint(self, name: str) -> None:
        """Check checkpoint ``name`` without loading a model: it resolves and its weight files open
        (:func:`~unieval_local.models.t5.loading.stored_weight_names`; the Ray driver's check).

        Raises:
            CheckpointNotFoundError, CheckpointError: not found, or unreadable weights.
        """
        ckpt = self.checkpoint(name)
        if self.settings.runner_factory is None:
            from .models.t5.loading import stored_weight_names

            stored_weight_names(ckpt.path)

    def runner(self, name: str) -> Runner:
        """The runner of checkpoint ``name``, loaded on first use (score-cache wrapped, if one is set, not bfloat16).

        Raises:
            CheckpointNotFoundError, CheckpointError: not found, or does not load.
        """
        ckpt = self.checkpoint(name)
        fingerprint = self.fingerprint(name)
        evaluator = get_evaluator(name)
        self.dtype_for(name)  # resolved (and kept) before _lock: it resolves the checkpoint, which takes _lock
        with self._lock:
            if name not in self._runners:
                factory = self.settings.runner_factory or self._default_factory
                runner: Runner = factory(ckpt, fingerprint, evaluator)
                self._loads += 1
                if self.cache is not None and self.dtype_for(name) != "bfloat16":
                    from .models.cache import CachedRunner

                    runner = CachedRunner(runner, self.cache, self.config, evaluator)
                self._runners[name] = runner
            return self._runners[name]

    def loaded_runner(self, name: str) -> Runner | None:
        """The runner of checkpoint ``name`` if it is loaded already, else None (nothing loads)."""
        with self._lock:
            return self._runners.get(name)

    def _default_factory(self, checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator) -> Runner:
        from .models.backends import backend_factory
        from .models.devices import set_threads

        if self.settings.threads is not None:
            set_threads(self.settings.threads)
        factory = backend_factory(evaluator.backend)  # t5, seq-classifier (models/backends.py)
        return factory(checkpoint, fingerprint, evaluator, device=self.device, dtype=self.dtype_for(evaluator.name),
                       batch_tokens=self.batch_tokens, attention_mib=self.settings.attention_mib,
                       fast_forward=self.config.fast_forward, progress=False)  # the scheduler shows the queries

    def max_length(self, name: str) -> int:
        """Tokens per query for checkpoint (evaluator) ``name``: the run's ``max_length``, else its default."""
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
        from .models.cache import CachedRunner

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

    def signature(self, task: str, aspect: str, languages: Sequence[str | None] | None = None,
                  long_input: str | None = None) -> Signature:
        """The reproducibility signature of results for ``(task, aspect)``: this engine's
        :class:`RunConfig`, the checkpoint (its hub id, else its evaluator's name: never a path of
        this machine, so the signature is the same string wherever the folder lies; revision,
        content fingerprint) and, for a user-defined aspect, its definition's hash. No model is
        loaded; once it is, the forward that actually runs is signed (``ff:off`` when a fast
        forward fell back to the model's own, and for every non-T5 backend, which has no other),
        with the tokenizer (``|tok:...``), CPU threads (``|threads:N``) and ``identity:unverified`` when the
        checks at load doubted the tokenizer (:attr:`Runner.tokenizer_doubt`).
        ``languages``: the scored examples' languages (None entries skipped), most frequent first
        in the signature's ``language``, with each one's splitter where they differ.
        ``long_input``: the mode the jobs were planned with, where it was not the engine's
        (:attr:`Job.long_input <unieval_local.pipeline.jobs.Job.long_input>`)."""
        a = self.registry.get_aspect(task, aspect)
        language, splitter = signed_splitters(languages, lambda lang: self.splitter_for(lang, a.checkpoint),
                                              self.splitter)
        ckpt = self.checkpoint(a.checkpoint)
        evaluator = get_evaluator(a.checkpoint)
        chunking = evaluator.prompt_format.own_chunking
        config = self.config if long_input in (None, self.config.long_input) else \
            dataclasses.replace(self.config, long_input=long_input)
        signature = Signature.from_config(config, task=task, aspect=aspect, checkpoint=ckpt.hub_id or evaluator.name,
                                     revision=ckpt.revision, fingerprint=self.fingerprint(a.checkpoint),
                                     aspect_hash=self.aspect_hash(task, aspect), max_length=self.max_length(a.checkpoint),
                                     evaluator=evaluator.name, chunk_words=self._chunk_words(evaluator) if chunking else None,
                                     identity=self.identity(a.checkpoint), language=language, splitter=splitter)
        loaded = self._runners.get(a.checkpoint)
        fast = (evaluator.backend == "t5" and self.config.fast_forward
                and (loaded is None or loaded.forward == "fast"))  # the forward that ran, once loaded
        update: dict = {} if fast == signature.fast_forward else {"fast_forward": fast}
        if a.decompose:  # fact/claims: its checker and generator
            update.update(claim_signature(self))
        if (dtype := self.dtype_for(a.checkpoint)) != signature.dtype:  # auto: bfloat16 above 3B parameters
            update["dtype"] = dtype
        if loaded is not None:  # the tokenizer that ran; a doubtful one signs unverified
            if loaded.tokenizer_class:
                update["tokenizer"] = loaded.tokenizer_class
            if loaded.tokenizer_doubt:
                update["identity"] = "unverified"
            if self.device == "cpu":  # signed, never keyed (models.devices.cpu_threads)
                update["threads"] = _cpu_threads()
        return signature.model_copy(update=update) if update else signature

    # ------------------------------------------------------------------ running
    def plan(self, jobs: Mapping[Hashable, Job]) -> dict[Hashable, PlannedJob]:
        """Plan named jobs: each job's prompts and queries (:func:`~unieval_local.pipeline.planning.build_plan`),
        under the job's ``long_input`` mode, else this engine's (``fit`` and ``chunk`` need the
        checkpoint's tokenizer, so its runner loads; so does an evaluator that chunks the document
        itself or whose backend cuts inside one field, to measure the claim it keeps whole: one too
        long for the window is a planning problem of that example, field ``target``). No prompt is
        scored. Thread-safe: the HTTP service plans a request in a handler thread while the worker
        scores others.

        Raises:
            CheckpointNotFoundError, CheckpointError: a checkpoint planning needs is unusable.
        """
        config, out = self.config, {}
        for name, job in jobs.items():
            if job.aspects[0].decompose:  # fact/claims: claims written or split, then checked (claims.py)
                out[name] = plan_claims(self, job)
                continue
            mode = job.long_input or config.long_input
            fmt = get_evaluator(job.checkpoint).prompt_format
            # own chunks are fitted in its tokens; a claim its backend must keep whole is measured
            counter = (self.runner(job.checkpoint) if mode != "truncate" or fmt.own_chunking
                       or fmt.cut_field is not None else None)
            languages = [None if ex is None else job.language or self.record_language(ex) for ex in job.examples]
            refused = self.language_problems(job.checkpoint, job.aspects, languages)
            examples = list(job.examples)
            for p in refused:
                examples[p.index] = None
            splitters = [self.splitter_for(lang, job.checkpoint) for lang in languages]
            plan, found = build_plan(examples, job.aspects, splitters, long_input=mode,
                                     counter=counter, max_length=self.max_length(job.checkpoint),
                                     overlap=config.window_overlap,
                                     chunk_words=self._chunk_words(get_evaluator(job.checkpoint)))
            out[name] = PlannedJob(job, plan, refused + list(found), languages)
        return out

    def execute(self, planned: Mapping[Hashable, PlannedJob], *, evidence: bool | Collection[Hashable] = False,
                on_batch: Callable[[int, int], None] | None = None) -> PassResult:
        """Score planned jobs in one go: the distinct prompts of every job of a checkpoint go to
        that checkpoint's runner as ONE list (each scored once, in length-sorted batches), then
        :meth:`fold` puts the scores back. The
        :class:`~unieval_local.requests.scheduler.Scheduler` scores in micro-batches instead
        and folds each request as soon as its prompts are scored; this is the one-shot form
        (:meth:`run`).

        Args:
            planned: name -> :class:`PlannedJob` (:meth:`plan`).
            evidence: build per-example :class:`~unieval_local.schema.Evidence` for every job
                (True) or for the named ones.
            on_batch: called after each forward batch with (distinct queries done, distinct
                queries of that checkpoint), for progress reporting.

        Returns:
            :class:`PassResult`.

        Raises:
            CheckpointNotFoundError, CheckpointError: a checkpoint is unusable.
            ModelRuntimeError: the model failed while scoring.
        """
        loads_before, (hits_before, misses_before) = self._loads, self.cache_counts()
        scored: dict[str, dict[str, tuple[float, int]]] = {}
        for name, pj in planned.items():
            scored.setdefault(pj.job.checkpoint, {}).update(dict.fromkeys(pj.plan.prompts))
        for ckpt_name, table in scored.items():
            distinct = list(table)
            if distinct:
                p_yes, n_tokens = self.runner(ckpt_name).score(distinct, max_length=self.max_length(ckpt_name),
                                                               on_batch=on_batch)
                table.update(zip(distinct, zip(p_yes.tolist(), n_tokens.tolist())))
        results, stats = self.fold(planned, scored, evidence=evidence)
        hits, misses = self.cache_counts()
        stats.cache_hits, stats.cache_misses = hits - hits_before, misses - misses_before
        stats.model_loads = self._loads - loads_before
        return PassResult(results, stats)

    def fold(self, planned: Mapping[Hashable, PlannedJob], scored: Mapping[str, Mapping[str, tuple[float, int]]], *,
             evidence: bool | Collection[Hashable] = False) -> tuple[dict[Hashable, JobResult], RunStats]:
        """Put scored prompts back into planned jobs (fan-in:
        :func:`~unieval_local.pipeline.fold.fold_all` under this engine's ``reference_reduction``).

        Args:
            planned: name -> :class:`PlannedJob`.
            scored: checkpoint name -> prompt -> ``(p_yes, untruncated token count)``, holding at
                least every prompt of ``planned``'s jobs of that checkpoint.
            evidence: build evidence for every job (True) or for the named ones.

        Returns:
            ``(results, stats)``: name -> :class:`~unieval_local.pipeline.jobs.JobResult`, and the
            counters of these jobs (their distinct queries per checkpoint, truncations, fit
            shortenings; model loads and cache counts are the caller's to add).

        Raises:
            KeyError: a prompt of ``planned`` is not in ``scored``.
        """
        results = {name: JobResult(problems=list(pj.problems), languages=list(pj.languages))
                   for name, pj in planned.items()}
        stats = RunStats()
        by_checkpoint: dict[str, list[Hashable]] = {}
        for name, pj in planned.items():
            by_checkpoint.setdefault(pj.job.checkpoint, []).append(name)
        for ckpt_name, members in by_checkpoint.items():
            self._fold_checkpoint(ckpt_name, members, planned, scored.get(ckpt_name, {}), results, evidence, stats)
        return results, stats

    def _fold_checkpoint(self, ckpt_name: str, members: list[Hashable], planned: Mapping[Hashable, PlannedJob],
                         scored: Mapping[str, tuple[float, int]], results: dict[Hashable, JobResult],
                         evidence: bool | Collection[Hashable], stats: RunStats) -> None:
        """Fold the jobs ``members`` of one checkpoint into ``results`` and count them in ``stats``."""
        config, max_length = self.config, self.max_length(ckpt_name)
        distinct = list(dict.fromkeys(p for name in members for p in planned[name].plan.prompts))
        runner = self.loaded_runner(ckpt_name) if distinct else None
        shortened = 0
        for name in members:
            pj, res = planned[name], results[name]
            py = np.array([scored[p][0] for p in pj.plan.prompts], dtype=np.float64)
            nt = np.array([scored[p][1] for p in pj.plan.prompts], dtype=np.int64)
            folded = fold_all(pj.plan, py, config.reference_reduction)
            res.values.update(pj.values_of(folded))
            if (pj.job.long_input or config.long_input) == "fit":  # windows fit mode made (a format's own chunks are not)
                shortened += len({p for p, q in zip(pj.plan.prompts, pj.plan.queries) if q.window is not None
                                  and not format_of(pj.plan.aspects[q.aspect]).own_chunking})
            if evidence is True or (evidence and name in evidence):
                res.evidence.update(pj.evidence_of(folded, py, nt, max_length, runner))
        stats.n_queries += len(distinct)
        stats.queries_by[ckpt_name] = stats.queries_by.get(ckpt_name, 0) + len(distinct)
        stats.n_shortened += shortened
        cut = [p for p in distinct if scored[p][1] > max_length]
        if cut:
            spans = {p: q.spans for name in members for p, q in zip(planned[name].plan.prompts,
                                                                     planned[name].plan.queries)}
            self.count_truncated(ckpt_name, [(p, spans[p]) for p in cut], stats)

    def count_truncated(self, checkpoint: str, cut: Sequence[tuple[str, Sequence[tuple[str, int, int]]]],
                        stats: RunStats) -> None:
        """Count in ``stats`` the prompts of ``checkpoint`` cut at its ``max_length`` (``cut``: each
        with its field spans): ``n_truncated``, ``truncated_by``, ``truncated_fields``."""
        if not cut:
            return
        runner, max_length = self.loaded_runner(checkpoint), self.max_length(checkpoint)
        stats.n_truncated += len(cut)
        stats.truncated_by[checkpoint] = stats.truncated_by.get(checkpoint, 0) + len(cut)
        cut_field = get_evaluator(checkpoint).prompt_format.cut_field
        for p, spans in cut:
            where = truncated_field(p, spans, runner, max_length, cut_field) or "prompt"
            stats.truncated_fields[where] = stats.truncated_fields.get(where, 0) + 1

    def run(self, jobs: Mapping[Hashable, Job], *, evidence: bool = False, strict: bool = False,
            on_batch: Callable[[int, int], None] | None = None) -> tuple[dict[Hashable, JobResult], RunStats]:
        """Plan and execute named jobs in one pass (:meth:`plan`, then :meth:`execute`).

        Args:
            jobs: name -> :class:`~unieval_local.pipeline.jobs.Job`.
            evidence: also build per-example :class:`~unieval_local.schema.Evidence`.
            strict: raise :class:`InvalidExampleError` before running any model on a planning problem.
            on_batch: progress callback (:meth:`execute`).

        Returns:
            ``(results, stats)``: name -> :class:`~unieval_local.pipeline.jobs.JobResult`, the pass's ``RunStats``.

        Raises:
            InvalidExampleError: ``strict`` and a planning problem (no sentence, too long for fit/chunk ...).
            CheckpointNotFoundError, CheckpointError: a checkpoint is unusable.
            ModelRuntimeError: the model failed while scoring.
        """
        planned = self.plan(jobs)
        if strict:
            problems = [p for pj in planned.values() for p in pj.problems]
            if problems:
                raise InvalidExampleError(problems)
        result = self.execute(planned, evidence=evidence, on_batch=on_batch)
        return result.results, result.stats
