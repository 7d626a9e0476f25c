"""``fact/claims``: decompose, then verify (issue 44, item 3).

FActScore (Min et al., EMNLP 2023, Sec. 3) scores a text by breaking it into atomic facts and
checking each against a knowledge source; MiniCheck (Tang et al., EMNLP 2024) was trained to check
such claims against a grounding document. Here, per example:

1. **Claims.** With a generator (the ``generator`` setting: ``NAME=DIR`` of a local instruct
   model, default the staged ``g-eval`` model), the target's atomic claims are written by it:
   :func:`~unieval_local.text.claims.claims_messages` (FActScore's decomposition prompt, after Sec.
   3.1) through the model's own chat template (``runner.chat_prompt``), all examples in ONE
   batched greedy ``runner.generate`` call, each answer read by
   :func:`~unieval_local.text.claims.parse_claims`. An answer that is not a claim list, that hit
   :data:`MAX_NEW_TOKENS`, or whose prompt was over the window is a problem of that example
   (field ``target``), never scored. Without a generator (``none``, or none staged: one note),
   the claims are the target's sentences, split by the splitter of the record's language
   (:meth:`Engine.splitter_for <unieval_local.engine.Engine.splitter_for>`, the checker's).
2. **Verify.** Every (source, claim) pair, and every (source sentence, claim) pair for the
   evidence sentence, is a derived example of the claim checker aspect (the ``claim_checker``
   setting, default ``fact/support``: MiniCheck's own protocol); they are planned as ONE job of the
   checker's checkpoint, so the engine or scheduler scores them with the other jobs of that
   checkpoint in one batched run (identical prompts once).
3. **Fold.** The example's score is the share of its claims whose checker value is >= 0.5
   (:data:`THRESHOLD`: MiniCheck's and the checkers' own decision rule, ``P(supported) > 0.5``);
   its evidence lists each claim with its verdict, value and the source sentence the checker
   scores highest for it (ties: the first).

The engine calls :func:`plan_claims` for a job of a decompose aspect, folds it through
:class:`ClaimsPlannedJob`, builds its registry with :func:`with_claim_checker` and signs with
:func:`claim_signature`.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import notes
from .errors import CheckpointError, CheckpointNotFoundError, ExampleProblem
from .pipeline.fold import Folded
from .pipeline.jobs import Job, PlannedJob
from .registry.tasks import Aspect, Registry, Task
from .schema import ClaimEvidence, Evidence
from .text.claims import claims_messages, parse_claims
from .text.language import writing_language

__all__ = ["ClaimsPlannedJob", "MAX_NEW_TOKENS", "STOP", "THRESHOLD", "checker_aspect", "claim_signature",
           "fact_checker_aspects", "generator_name", "plan_claims", "resolve_generator", "with_claim_checker"]

#: A claim is supported when the checker's value is at least this (its P(supported) > 0.5 rule).
THRESHOLD = 0.5
#: New tokens a claim list may take; an answer that hits it is reported, never parsed.
MAX_NEW_TOKENS = 512
#: A claim list is one block of lines: a blank line ends it (what follows is commentary).
STOP: tuple[str, ...] = ("\n\n",)
#: The evaluator whose staged folder is the default generator (its chat template writes the claims).
DEFAULT_GENERATOR = "g-eval"


# ---------------------------------------------------------------------------------- the checker
def fact_checker_aspects(registry: Registry) -> list[str]:
    """The aspects that may check claims, ``fact/<aspect>``: the fact task's claim-vs-document
    aspects (:attr:`Aspect.checks_claims <unieval_local.registry.tasks.Aspect.checks_claims>`):
    ``fact/consistency``, ``fact/support`` (MiniCheck), ``fact/factcg``, ``fact/nli_support``,
    ``fact/hhem``, ``fact/groundedness`` (Granite Guardian) ..."""
    fact = registry.tasks.get("fact")
    return [f"fact/{a.name}" for a in (fact.aspects.values() if fact else ()) if a.checks_claims]


def checker_aspect(registry: Registry, name: str) -> Aspect:
    """The claim checker ``name`` (``TASK/ASPECT``) from ``registry``.

    Raises:
        ValueError: ``name`` is not one of :func:`fact_checker_aspects` (named, with the valid ones).
    """
    valid = fact_checker_aspects(registry)
    if name not in valid:
        raise ValueError(f"claim_checker {name!r} is not a fact checker aspect (a fact-task aspect that checks a "
                         f"claim against a document); use one of {', '.join(valid)}")
    task, _, aspect = name.partition("/")
    return registry.get_aspect(task, aspect)


def with_claim_checker(registry: Registry, name: str) -> Registry:
    """``registry`` with every decompose aspect answered by the checker ``name``'s evaluator (its
    ``checkpoint``: what availability, languages, pooling and signatures read).

    Raises:
        ValueError: ``name`` is not a fact checker aspect (:func:`checker_aspect`).
    """
    checkpoint = checker_aspect(registry, name).checkpoint
    tasks: dict[str, Task] = {}
    for tname, t in registry.tasks.items():
        aspects = {n: dataclasses.replace(a, checkpoint=checkpoint) if a.decompose else a for n, a in t.aspects.items()}
        tasks[tname] = Task(t.name, aspects, t.description, t.checkpoint)
    return Registry(tasks)


# ---------------------------------------------------------------------------------- the generator
def generator_name(setting: str | None) -> str | None:
    """The ``generator`` setting as the run configuration signs it: its NAME (never the folder),
    ``none``, or None (the default: the staged ``g-eval`` model, if any)."""
    return setting.split("=", 1)[0].strip() if setting and setting != "none" else setting


_LOADED: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def resolve_generator(engine: Any) -> tuple[str, Path] | None:
    """The generator of ``engine``'s ``generator`` setting: ``(name, folder)``, or None (``none``;
    the default when no ``g-eval`` folder is staged: ``model`` names none, nor
    ``$UNIEVAL_LOCAL_HOME/g-eval``; a single ``model`` folder is never taken for it).

    Raises:
        CheckpointNotFoundError: ``NAME=DIR`` whose folder has no ``config.json``.
    """
    value = engine.settings.generator
    if value == "none":
        return None
    if value:
        name, _, folder = value.partition("=")
        path = Path(folder.strip()).expanduser()
        if not (path / "config.json").is_file():
            raise CheckpointNotFoundError(f"generator {name.strip()}: no model folder at {folder.strip()} "
                                          "(config.json missing)")
        return name.strip(), path
    model = engine.settings.model
    if model is not None and not isinstance(model, Mapping):
        return None
    try:
        return DEFAULT_GENERATOR, engine.checkpoint(DEFAULT_GENERATOR).path
    except (CheckpointNotFoundError, CheckpointError, ValueError):
        return None


def _generator(engine: Any) -> tuple[str, Any, str] | None:
    """``(name, runner, fingerprint)`` of ``engine``'s generator (loaded once per engine), or None."""
    found = resolve_generator(engine)
    if found is None:
        return None
    name, path = found
    if engine.settings.generator is None:  # the staged g-eval model: the engine's own runner of it
        return name, engine.runner(DEFAULT_GENERATOR), engine.fingerprint(DEFAULT_GENERATOR)
    with _LOCK:
        held = _LOADED.setdefault(engine, {})
        if name not in held:
            from .models.checkpoints import ResolvedCheckpoint, fingerprint_checkpoint
            from .registry.evaluators import get_evaluator

            ckpt, fp = ResolvedCheckpoint(name, path, "explicit"), fingerprint_checkpoint(path)
            factory = engine.settings.runner_factory
            if factory is None:
                from .models.backends import backend_factory

                def factory(c, f, e):
                    return backend_factory("causal-lm")(c, f, e, device=engine.device, dtype=engine.config.dtype,
                                                        batch_tokens=engine.batch_tokens,
                                                        attention_mib=engine.settings.attention_mib,
                                                        fast_forward=engine.config.fast_forward, progress=False)
            held[name] = (factory(ckpt, fp, get_evaluator(DEFAULT_GENERATOR)), fp)
        runner, fp = held[name]
    return name, runner, fp


def claim_signature(engine: Any) -> dict[str, str]:
    """What a ``fact/claims`` signature adds: ``claim_checker`` (``TASK/ASPECT``) and ``generator``
    (``<name>#<12 hex of its content fingerprint>``, or ``sentences``). Loads no model: the default
    generator is resolved, a NAME=DIR folder fingerprinted (its files hashed once per change, through
    :func:`~unieval_local.models.checkpoints.fingerprint_checkpoint`'s file-hash memo)."""
    found = resolve_generator(engine)
    if found is None:
        gen = "sentences"
    elif engine.settings.generator is None:
        gen = f"{found[0]}#{engine.fingerprint(DEFAULT_GENERATOR)[:12]}"
    else:
        from .models.checkpoints import fingerprint_checkpoint

        gen = f"{found[0]}#{fingerprint_checkpoint(found[1])[:12]}"
    return {"claim_checker": engine.config.claim_checker, "generator": gen}


def _write_claims(name: str, runner: Any, targets: Mapping[int, str], languages: Sequence[str | None],
                  aspect: Aspect) -> tuple[dict[int, list[str]], list[ExampleProblem]]:
    """The generated claims of each target (index -> text), in ONE batched generation, and the
    problems of the examples whose answer is not a usable claim list."""
    order = list(targets)
    prompts = [runner.chat_prompt(claims_messages(targets[i], writing_language(languages[i]))) for i in order]
    made = runner.generate(prompts, max_new_tokens=MAX_NEW_TOKENS, stop=STOP) if prompts else []
    claims: dict[int, list[str]] = {}
    problems: list[ExampleProblem] = []
    for i, gen in zip(order, made):
        why = None
        if gen.finish == "length":
            why = f"the generator {name} hit max_new_tokens ({MAX_NEW_TOKENS}) before its claim list ended"
        elif gen.finish == "too_long":
            why = f"the claims prompt is longer than the generator {name}'s window: nothing was generated"
        elif (parsed := parse_claims(gen.text)) is None:
            why = (f"the generator {name} did not write a claim list (one claim per line, each starting '- '): "
                   f"{gen.text[:80]!r}")
        else:
            claims[i] = parsed
        if why:
            problems.append(ExampleProblem(i, "target", f"{aspect.task}/{aspect.name}: {why}", aspect.name))
    return claims, problems


# ---------------------------------------------------------------------------------- plan and fold
@dataclasses.dataclass(frozen=True)
class ClaimsPlannedJob(PlannedJob):
    """A planned ``fact/claims`` job: its ``plan`` is the claim checker's over derived examples
    (``job``: the checker aspect over them); ``problems`` and ``languages`` are the original
    examples'.

    Attributes:
        aspect: the decompose aspect. checker: the checker aspect.
        unit: ``generated`` or ``sentences``. generator: the generator's name, or None.
        rows: per original example (None: not scored), per claim: ``(claim, derived index of
            (source, claim), ((source sentence, derived index of (sentence, claim)), ...))``.
    """

    aspect: Aspect | None = None
    checker: Aspect | None = None
    unit: str = "sentences"
    generator: str | None = None
    rows: tuple = ()

    def _claim_values(self, folded: Folded, i: int) -> list[float] | None:
        v = folded.values[self.checker.name]
        got = [float(v[whole]) for _, whole, _ in self.rows[i]]
        return got if np.isfinite(got).all() else None

    def values_of(self, folded: Folded) -> dict[str, np.ndarray]:
        """aspect -> the share of each example's claims with a checker value >= :data:`THRESHOLD`
        (NaN: not scored, or a non-finite checker value)."""
        out = np.full(len(self.rows), np.nan, dtype=np.float64)
        for i, rows in enumerate(self.rows):
            got = self._claim_values(folded, i) if rows else None
            if got is not None:
                out[i] = float(np.mean([x >= THRESHOLD for x in got]))
        return {self.aspect.name: out}

    def evidence_of(self, folded: Folded, p_yes: np.ndarray, n_tokens: np.ndarray, max_length: int,
                    counter: Any = None) -> dict[str, list[Evidence | None]]:
        """aspect -> per example its :class:`~unieval_local.schema.Evidence`: ``unit``,
        ``generator``, ``claims`` (claim, verdict, value, evidence sentence) and the queries of
        each claim against the whole source (the checker's windows or chunks), in claim order."""
        derived = super().evidence_of(folded, p_yes, n_tokens, max_length, counter)[self.checker.name]
        v = folded.values[self.checker.name]
        out: list[Evidence | None] = []
        for i, rows in enumerate(self.rows):
            got = self._claim_values(folded, i) if rows else None
            if got is None:
                out.append(None)
                continue
            claims, queries = [], []
            for (claim, whole, parts), value in zip(rows, got):
                best = max(parts, key=lambda part: v[part[1]])[0] if parts else None
                claims.append(ClaimEvidence(claim=claim, verdict="supported" if value >= THRESHOLD else "unsupported",
                                            value=value, evidence_sentence=best))
                queries += derived[whole].queries if derived[whole] is not None else []
            out.append(Evidence(queries=queries, truncated=any(q.truncated for q in queries), unit=self.unit,
                                generator=self.generator, claims=claims))
        return {self.aspect.name: out}


def plan_claims(engine: Any, job: Job) -> ClaimsPlannedJob:
    """Plan a job of a decompose aspect (``fact/claims``): write or split each example's claims,
    then plan the claim checker over the derived (source, claim) and (source sentence, claim)
    examples through ``engine.plan`` (see the module docstring).

    Raises:
        CheckpointError: the generator cannot generate (not an instruct model: no chat template).
        CheckpointNotFoundError: a ``NAME=DIR`` generator folder that is not there.
    """
    aspect = job.aspects[0]
    checker = checker_aspect(engine.registry, engine.config.claim_checker)
    examples = list(job.examples)
    languages = [None if ex is None else job.language or engine.record_language(ex) for ex in examples]
    gen = _generator(engine)
    if gen is None and engine.settings.generator is None:
        notes.note(f"{aspect.task}/{aspect.name}: no instruct model staged (--generator NAME=DIR, or a g-eval "
                   "folder): the summaries' sentences are the claims (unit 'sentences')", warn=True, stacklevel=3)
    problems: list[ExampleProblem] = []
    if gen is not None:
        claims, problems = _write_claims(gen[0], gen[1], {i: ex.target for i, ex in enumerate(examples)
                                                          if ex is not None}, languages, aspect)
    else:
        claims = {i: engine.splitter_for(languages[i], checker.checkpoint)(ex.target)
                  for i, ex in enumerate(examples) if ex is not None}
        for i in [i for i, c in claims.items() if not c]:
            problems.append(ExampleProblem(i, "target", f"{aspect.task}/{aspect.name}: the target has no sentence "
                                           "to check", aspect.name))
            del claims[i]
    derived, owner, rows = [], [], [None] * len(examples)
    for i, found in sorted(claims.items()):
        ex, lang = examples[i], languages[i]
        sentences = engine.splitter_for(lang, checker.checkpoint)(ex.source)
        sentences = sentences if len(sentences) > 1 else []  # one sentence: the whole source is it
        per = []
        for claim in found:
            whole = len(derived)
            derived.append(ex.model_copy(update={"target": claim, "language": lang}))
            parts = []
            for s in sentences:
                parts.append((s, len(derived)))
                derived.append(ex.model_copy(update={"target": claim, "source": s, "language": lang}))
            per.append((claim, whole, tuple(parts) if parts else ((ex.source.strip(), whole),)))
        owner += [i] * (len(derived) - len(owner))
        rows[i] = tuple(per)
    inner = engine.plan({0: Job((checker,), derived, long_input=job.long_input)})[0] if derived else None
    for p in inner.problems if inner else ():
        i = owner[p.index]
        claim = derived[p.index].target
        problems.append(ExampleProblem(i, p.field, f"{aspect.task}/{aspect.name}: claim {claim[:60]!r}: {p.message}",
                                       aspect.name))
    for i in {p.index for p in problems}:
        rows[i] = None
    if inner is None:
        from .pipeline.planning import Plan

        inner = PlannedJob(Job((checker,), []), Plan(blocks={checker.name: []}, aspects={checker.name: checker}))
    return ClaimsPlannedJob(inner.job, inner.plan, sorted(problems, key=lambda p: p.index), languages,
                            aspect=aspect, checker=checker, unit="sentences" if gen is None else "generated",
                            generator=None if gen is None else gen[0], rows=tuple(rows))
