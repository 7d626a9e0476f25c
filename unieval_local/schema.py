"""Typed inputs and results (pydantic v2), matching the hosted UniEval metric schema.

Names follow the hosted metric (its config, ``UniEvalConfig``, is in :mod:`unieval_local.wire.hosted`):
``UniEvalData(target, source, references, context)``, ``UniEvalStats(value)``,
``UniEvalResult(overall, examples)``. Results are frozen.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, field_validator, model_validator

__all__ = ["ClaimEvidence", "EvaluationResult", "Evidence", "ExampleScores", "QueryEvidence", "RunInfo",
           "SentenceEvidence", "Signature", "Span", "UniEvalData", "UniEvalResult", "UniEvalStats",
           "evaluator_signatures"]



class UniEvalData(BaseModel):
    """One example to evaluate.

    Attributes:
        target: the generated text under evaluation (required, non-empty).
            UniEval's record name ``system_output`` is accepted on input.
        source: the input document / dialogue history, when the aspect needs it.
        references: reference texts, when the aspect needs them. UniEval's
            ``reference`` (one string) is accepted on input as a one-item list.
        context: extra grounding (e.g. the knowledge fact of a dialogue).
        language: the example's language (ISO 639-1: ``en``, ``zh``, ``id`` ...), instead of
            detecting it (:mod:`unieval_local.text.language`).

    Other fields (``id``, ``doc_id``, ``system_id``, ``instruction`` ...) are
    kept as given, so that user-defined aspects can use them.

    Texts must be ``str``: ``bytes`` (or numbers) are refused rather than decoded
    or converted, since the encoding is unknown (pydantic's lax mode would turn
    ``b"..."`` into a string silently).

    Raises:
        pydantic.ValidationError: wrong types, or ``target`` and ``system_output``
            both given with different values.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    target: StrictStr
    source: StrictStr | None = None
    references: list[StrictStr] | None = None
    context: StrictStr | None = None
    language: StrictStr | None = None

    @field_validator("language")
    @classmethod
    def _language_code(cls, v: str | None) -> str | None:
        from .settings import check_language

        return None if v is None else check_language(v, "the language")

    @model_validator(mode="before")
    @classmethod
    def _accept_unieval_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "system_output" in data:
            out = data.pop("system_output")
            if "target" in data and data["target"] != out:
                raise ValueError("both 'target' and 'system_output' given, with different values")
            data["target"] = out
        if "reference" in data:
            ref = data.pop("reference")
            if "references" in data and data["references"] is not None:
                raise ValueError("both 'references' and 'reference' given; use 'references'")
            data["references"] = None if ref is None else [ref] if isinstance(ref, str) else ref
        return data

    @field_validator("references", mode="before")
    @classmethod
    def _one_string_is_one_reference(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    def get_field(self, name: str) -> Any:
        """The value of field ``name`` (a declared or an extra field), or ``None``."""
        if name in type(self).model_fields:
            return getattr(self, name)
        return (self.model_extra or {}).get(name)


class Signature(BaseModel):
    """What produced a result: enough to reproduce it (sacrebleu-style signature).

    Built from the scorer's :class:`~unieval_local.config.RunConfig` (every setting
    and library version that can change a score) plus the checkpoint that answered
    and the aspect asked (:meth:`from_config`).

    Attributes:
        checkpoint: hub id (when known from a download manifest or the HF cache), else the folder.
        revision: hub commit of the files, when known.
        fingerprint: first 12 hex digits of the checkpoint's CONTENT fingerprint
            (SHA-256 over its config, weight and tokenizer files): two folders that
            claim the same hub id but hold other weights get different signatures.
        aspect_hash: (user-defined aspects only) a short SHA-256 of the aspect's
            question, fields, granularity and reductions, so two configs that define
            the same name differently give different signatures.
        window_overlap: windows' shared sentences (matters in ``chunk`` mode only).
        evaluator: the evaluator (checkpoint family) that answered.
        origin: ``imported`` for scores this package did not compute (e.g. UniEval's own
            published predictions, ``scripts/convert_summeval_unieval.py``); None for a run.
        identity: ``verified`` when the checkpoint folder's files were checked against a record
            of that evaluator's hub files (a download manifest with checksums, or a Hugging Face
            cache snapshot); ``named`` when only the folder's own label names it (``config.json``'s
            ``unieval_local_evaluator``: stand-ins, your fine-tunes); ``unverified`` when nothing
            in it does (:func:`~unieval_local.models.checkpoints.check_identity`). ``str()`` shows
            ``identity:named`` and ``identity:unverified``; ``verified`` adds nothing.
        chunk_words: words per document chunk, for evaluators that chunk it themselves (MiniCheck).
        splitter: the sentence splitter's name with its library versions; with records in
            several languages split differently, ``<language>=<name>`` for each, ``;``-separated.
        language: the language(s) of the examples, most frequent first, ``,``-separated (``en``,
            ``zh``, ``zh,en``); ``auto`` before any was read (a batch run's identity); the run's
            ``language=`` when it forced one.
        language_detector: the detector (``py3langid-0.4.0``) when languages were detected.
        fast_forward: our single-step forward (True) or the model's own.
        tokenizer: the loaded tokenizer's class and the flags that change its ids
            (``T5Tokenizer+extra:100``; :func:`~unieval_local.models.tokenizer_identity.describe_tokenizer`),
            once the checkpoint's runner is loaded; None before, or for a runner that does not say.
        threads: the CPU threads torch's operators used (device ``cpu``, once a runner is
            loaded; :func:`~unieval_local.models.devices.cpu_threads`): they can move float32
            scores in their last digits; never in the score cache's key nor a resume check.
        claim_checker: (``fact/claims`` only) the checker aspect of each claim, ``TASK/ASPECT``.
        generator: (``fact/claims`` only) who wrote the claims: ``<name>#<12 hex of its content
            fingerprint>``, or ``sentences`` (no generator: the target's sentences are the claims).
        torch, transformers, tokenizers, sentencepiece: library versions.

    ``str(signature)`` gives a compact one-line form for papers and logs.
    """

    model_config = ConfigDict(frozen=True)

    package: str
    task: str
    aspect: str
    aspect_hash: str | None = None
    checkpoint: str
    revision: str | None = None
    fingerprint: str | None = None
    max_length: int
    evaluator: str | None = None
    identity: str | None = None
    origin: str | None = None
    chunk_words: int | None = None
    splitter: str
    language: str | None = None
    language_detector: str | None = None
    reference_reduction: str
    long_input: str = "truncate"
    window_overlap: int = 1
    dtype: str
    device: str
    fast_forward: bool = True
    torch: str
    transformers: str
    tokenizers: str | None = None
    sentencepiece: str | None = None
    tokenizer: str | None = None
    threads: int | None = None
    claim_checker: str | None = None
    generator: str | None = None

    @classmethod
    def from_config(cls, config: Any, *, task: str, aspect: str, checkpoint: str, revision: str | None,
                    fingerprint: str | None, max_length: int, aspect_hash: str | None = None,
                    evaluator: str | None = None, chunk_words: int | None = None,
                    identity: str | None = None, language: str | None = None,
                    splitter: str | None = None) -> "Signature":
        """The signature of ``(task, aspect)`` answered by ``checkpoint`` under ``config``
        (a :class:`~unieval_local.config.RunConfig`), with the query length that applied
        (``max_length``: the run's, else the evaluator's default) and, for an evaluator that
        chunks its document itself, the chunk size; ``language`` and ``splitter``: the examples'
        languages and their splitters (default: the run's language or ``auto``, its splitter)."""
        v = config.version_map
        return cls(package=config.package, task=task, aspect=aspect, aspect_hash=aspect_hash,
                   checkpoint=checkpoint, revision=revision, fingerprint=fingerprint[:12] if fingerprint else None,
                   max_length=max_length, evaluator=evaluator, identity=identity, chunk_words=chunk_words,
                   splitter=splitter or config.splitter,
                   language=language or config.language or "auto", language_detector=config.language_detector,
                   reference_reduction=config.reference_reduction, long_input=config.long_input,
                   window_overlap=config.window_overlap, dtype=config.dtype, device=config.device,
                   fast_forward=config.fast_forward, torch=v.get("torch", "absent"),
                   transformers=v.get("transformers", "absent"), tokenizers=v.get("tokenizers"),
                   sentencepiece=v.get("sentencepiece"))

    def __str__(self) -> str:
        ckpt = (self.checkpoint + (f"@{self.revision[:12]}" if self.revision else "")
                + (f"#{self.fingerprint}" if self.fingerprint else ""))
        return (
            f"unieval-local:{self.package}|task:{self.task}|aspect:{self.aspect}"
            + (f"#{self.aspect_hash}" if self.aspect_hash else "") + f"|ckpt:{ckpt}"
            + (f"|identity:{self.identity}" if self.identity in ("unverified", "named") else "")
            + (f"|origin:{self.origin}" if self.origin else "")
            + f"|maxlen:{self.max_length}" + (f"|chunk:{self.chunk_words}w" if self.chunk_words else "")
            + (f"|lang:{self.language}" if self.language else "")
            + (f"|detect:{self.language_detector}" if self.language_detector else "")
            + f"|split:{self.splitter}|refs:{self.reference_reduction}"
            f"|long:{self.long_input}" + (f"|overlap:{self.window_overlap}" if self.long_input == "chunk" else "")
            + f"|dtype:{self.dtype}|device:{self.device}" + (f"|threads:{self.threads}" if self.threads else "")
            + ("" if self.fast_forward else "|ff:off")
            + (f"|tok:{self.tokenizer}" if self.tokenizer else "")
            + (f"|checker:{self.claim_checker}|gen:{self.generator}" if self.claim_checker else "")
            + f"|torch:{self.torch}|transformers:{self.transformers}"
            + (f"|tokenizers:{self.tokenizers}" if self.tokenizers else "")
        )


def evaluator_signatures(per_aspect: Any) -> dict[str, Signature]:
    """One signature per evaluator from the signatures of several aspects (aspect -> :class:`Signature`,
    in order): the first aspect's of each evaluator (keyed by its ``evaluator``, else its
    ``checkpoint``), with ``aspect`` the ``+``-joined aspects it answered and ``aspect_hash`` the
    ``+``-joined hashes of those that have one; its other settings are that evaluator's own (its
    chunk words, max_length, dtype ...), never another's. Evaluators in order of first appearance."""
    groups: dict[str, list[Signature]] = {}
    for sig in per_aspect.values():
        groups.setdefault(sig.evaluator or sig.checkpoint, []).append(sig)
    out = {}
    for name, sigs in groups.items():
        hashes = [s.aspect_hash for s in sigs if s.aspect_hash]
        out[name] = sigs[0] if len(sigs) == 1 else sigs[0].model_copy(
            update={"aspect": "+".join(s.aspect for s in sigs), "aspect_hash": "+".join(hashes) or None})
    return out


class Span(BaseModel):
    """Characters ``[start, end)`` of one field's text."""

    model_config = ConfigDict(frozen=True)

    field: str
    start: int
    end: int


class QueryEvidence(BaseModel):
    """One Boolean-QA query behind a score.

    Attributes:
        value: its P(Yes) in [0, 1]; for a rating aspect (G-Eval) the expected rating E in [1, K].
        sentence: index of the target sentence it scored (sentence-level aspects), else None.
        reference: index of the reference it used, when the aspect uses references.
        window: the part of a long field it used (``fit`` / ``chunk`` modes), else None.
        n_tokens: the prompt's token count before any truncation (None if unknown).
        truncated: True when the prompt was longer than ``max_length`` and its end was cut.
        tokens_dropped: how many tokens were cut (0 if none).
        truncated_field: the field in which the cut fell (the fields after it were lost too).
        distribution: a rating aspect's p(k) for k = "1" .. "K", renormalised over the score
            tokens (G-Eval, Liu et al., 2023, section 2.3: E = sum k p(k)); None otherwise.
    """

    model_config = ConfigDict(frozen=True)

    value: float
    sentence: int | None = None
    reference: int | None = None
    window: Span | None = None
    n_tokens: int | None = None
    truncated: bool = False
    tokens_dropped: int = 0
    truncated_field: str | None = None
    distribution: dict[str, float] | None = None


class SentenceEvidence(BaseModel):
    """One target sentence of a sentence-level aspect.

    ``value`` is the sentence's score (after reducing windows and references);
    the aspect's reduction of these values (mean, or sum for engagingness) is
    the example's score. ``start``/``end`` are character offsets into the
    target; ``window`` is the source window that gave a max-reduced value.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    value: float
    start: int
    end: int
    window: Span | None = None


class ClaimEvidence(BaseModel):
    """One claim of a ``fact/claims`` score (decompose, then verify).

    Attributes:
        claim: the claim's text (a generated atomic claim, or a target sentence).
        verdict: ``supported`` when ``value >= 0.5``, else ``unsupported``.
        value: the claim checker's score of (source, claim), in [0, 1].
        evidence_sentence: the source sentence that best supports the claim: the one the
            checker scores highest when it checks the claim against each source sentence alone.
    """

    model_config = ConfigDict(frozen=True)

    claim: str
    verdict: Literal["supported", "unsupported"]
    value: float
    evidence_sentence: str | None = None


class Evidence(BaseModel):
    """Why an example got its score for one aspect (``evidence=True`` / ``--evidence``).

    Attributes:
        sentences: per target sentence (sentence-level aspects only), else None.
        queries: every query behind the score.
        truncated: True when any of those queries lost its end to ``max_length``.
        unit: (``fact/claims`` only) where the claims came from: ``generated`` (a staged
            instruct model wrote them) or ``sentences`` (the target's sentences).
        generator: (``fact/claims`` only) the generator's name, None with ``sentences``.
        claims: (``fact/claims`` only) each claim with its verdict, value and evidence sentence.
    """

    model_config = ConfigDict(frozen=True)

    sentences: list[SentenceEvidence] | None = None
    queries: list[QueryEvidence]
    truncated: bool = False
    unit: Literal["generated", "sentences"] | None = None
    generator: str | None = None
    claims: list[ClaimEvidence] | None = None


class UniEvalStats(BaseModel):
    """One score. ``value`` is in [0, 1], except dialogue engagingness: [0, n_sentences], and a
    rating aspect (G-Eval): the expected rating in [1, K] (``Aspect.scale``; ``tasks`` shows it).

    ``evidence`` is present only when asked for (``evidence=True``). Nothing else: this is the
    hosted metric's result schema (each example's language is in ``Scorer.evaluate``'s
    :class:`ExampleScores` and in the signature).
    """

    model_config = ConfigDict(frozen=True)

    value: float
    evidence: Evidence | None = None


class RunInfo(BaseModel):
    """What one call did on the model (``Scorer.evaluate`` / ``score``; a batch run's sidecar
    ``stats`` holds the same counts).

    Attributes:
        forward_passes: micro-batches the model ran for the call (the scheduler's ``batches``;
            0 when every query was answered from the score cache or memo).
        distinct_queries: distinct prompts the model scored (a prompt several examples or
            aspects share counts once; cache hits not counted).
        wall_s: wall-clock seconds of the call (``time.perf_counter``), validation included.
        cpu_s: CPU seconds of this process over the call (``time.process_time``: user + system,
            every thread of the process, so a multi-threaded forward can exceed ``wall_s``).
    """

    model_config = ConfigDict(frozen=True)

    forward_passes: int
    distinct_queries: int
    wall_s: float
    cpu_s: float


class UniEvalResult(BaseModel):
    """The result of one (task, aspect) over one request.

    Attributes:
        overall: the mean over examples of ``examples[i].value``.
        examples: one score per input example, in input order.
        signature: how the numbers were made (optional in the schema).
        run: what the call did on the model (:class:`RunInfo`; ``Scorer`` results only, None
            elsewhere and left out of the hosted metric's JSON).
    """

    model_config = ConfigDict(frozen=True)

    overall: UniEvalStats
    examples: list[UniEvalStats]
    signature: Signature | None = None
    run: RunInfo | None = None

    def to_pandas(self):
        """The scores as a ``pandas.DataFrame``: one row per example (index 0..n-1, input order),
        one column named after the aspect (``signature.aspect``; ``value`` without a signature)
        holding ``examples[i].value``. Evidence is left out (it is nested: ``model_dump`` has it).

        Returns:
            ``pandas.DataFrame`` of shape ``(len(examples), 1)``, float64.

        Raises:
            MissingExtraError: pandas is not installed (an ``ImportError`` naming
                ``pip install 'unieval-local[pandas]'``).

        Example:
            >>> UniEvalResult(overall=UniEvalStats(value=0.5), examples=[UniEvalStats(value=0.25),
            ...     UniEvalStats(value=0.75)]).to_pandas()["value"].tolist()  # doctest: +SKIP
            [0.25, 0.75]
        """
        name = self.signature.aspect if self.signature is not None else "value"
        return _data_frame({name: [float(e.value) for e in self.examples]})


class ExampleScores(BaseModel):
    """One example's scores in a multi-aspect evaluation.

    Attributes:
        scores: aspect -> score.
        aspect_mean: the mean of this example's aspect scores (what UniEval's
            ``evaluate`` calls the sample's ``overall``). Not to be confused
            with ``UniEvalResult.overall``, the mean of one aspect over examples. A rating
            aspect (G-Eval, 1-K) beside aspects of another scale enters it as
            ``(E - 1) / (K - 1)`` in [0, 1], with a note
            (:func:`~unieval_local.registry.tasks.combined_value`); ``scores`` keep their scales.
    """

    model_config = ConfigDict(frozen=True)

    scores: dict[str, float]
    aspect_mean: float
    evidence: dict[str, Evidence] | None = None
    language: str | None = None  # the language the example was read in (en, zh, id, und ...)


class EvaluationResult(BaseModel):
    """A multi-aspect evaluation of one request (``Scorer.evaluate``).

    Attributes:
        task: the task.
        aspects: the aspects, in the order asked.
        examples: per example, in input order: its score per aspect and its
            ``aspect_mean`` (mean over aspects; UniEval's per-sample overall).
        per_aspect: aspect -> :class:`UniEvalResult`, whose ``overall`` is the
            mean over examples of that aspect (empty for a call of no examples: no mean of nothing).
        run: what the call did on the model (:class:`RunInfo`), or None.
        mean_of: (a property) the aspects each example's ``aspect_mean`` averages, in order:
            ``aspects``, as asked (``aspects=None`` / ``"all"``: the task's own set, the same on
            every machine; ``"all+"``: those whose evaluator was here). Not part of the JSON
            (``aspects`` says it there).
        signatures: (a property) evaluator -> its :class:`Signature` over the aspects it answered
            (``aspect``: them, ``+``-joined), each with that evaluator's own settings
            (:func:`evaluator_signatures` of the per-aspect ones); empty for a call of no examples.
        signature: (a property) the one signature when ONE evaluator answered every aspect (as
            ``per_aspect[a].signature``, over all the aspects); None when several did (no one
            line is true of all of them: cite ``signatures``) or none (no examples).
    """

    model_config = ConfigDict(frozen=True)

    task: str
    aspects: list[str]
    examples: list[ExampleScores]
    per_aspect: dict[str, UniEvalResult]
    run: RunInfo | None = None

    @property
    def mean_of(self) -> tuple[str, ...]:
        """The aspects each example's ``aspect_mean`` averages (``aspects``, in order)."""
        return tuple(self.aspects)

    @property
    def signatures(self) -> dict[str, Signature]:
        """Evaluator -> the signature of the aspects it answered, its own settings (see the class)."""
        return evaluator_signatures({a: r.signature for a, r in self.per_aspect.items() if r.signature is not None})

    @property
    def signature(self) -> Signature | None:
        """The signature when one evaluator answered every aspect; None when several did (see
        :attr:`signatures`) or none."""
        sigs = self.signatures
        return next(iter(sigs.values())) if len(sigs) == 1 else None

    def to_pandas(self):
        """The scores as a ``pandas.DataFrame``: one row per example (index 0..n-1, input order),
        one float column per aspect (in ``aspects`` order: ``examples[i].scores[aspect]``), then
        ``aspect_mean`` (:attr:`ExampleScores.aspect_mean`) and ``language`` (None where not
        recorded). Evidence is left out (it is nested: ``model_dump`` has it); ``per_aspect[a].overall``
        is the column's mean.

        Returns:
            ``pandas.DataFrame`` of shape ``(len(examples), len(aspects) + 2)``.

        Raises:
            MissingExtraError: pandas is not installed (an ``ImportError`` naming
                ``pip install 'unieval-local[pandas]'``).
        """
        columns: dict[str, list] = {a: [float(e.scores[a]) for e in self.examples] for a in self.aspects}
        columns["aspect_mean"] = [None if e.aspect_mean is None else float(e.aspect_mean) for e in self.examples]
        columns["language"] = [e.language for e in self.examples]
        return _data_frame(columns)


def _data_frame(columns: dict[str, list]):
    """``pandas.DataFrame(columns)``; :class:`~unieval_local.errors.MissingExtraError` naming the
    ``pandas`` extra when pandas cannot be imported."""
    try:
        import pandas as pd
    except ImportError:
        from .extras import missing_extra

        raise missing_extra("pandas") from None
    return pd.DataFrame(columns)
