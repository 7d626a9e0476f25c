"""What each endpoint does, without the HTTP framework: a :class:`Service` holds the engine,
the scheduler, the batching worker, the metrics and the custom runs; its ``async`` methods
take a body reader (a function that parses and validates the request body) and return an
:class:`Answer` (the JSON answer and its notes), or raise :class:`ServiceError` (status, type,
message, per-example problems).

The event loop never does a request's heavy work: reading the body (JSON parsing, validation),
checking the examples, building and planning its :class:`~unieval_local.requests.base.Request`
objects (:meth:`Scheduler.prepare <unieval_local.requests.scheduler.Scheduler.prepare>`), and
building the answer from theirs run in a small pool of preparation threads
(:data:`PREP_THREADS`); the loop only submits the requests to the batching worker and waits.
Every request's model work goes through the shared scheduler, run by the worker thread, so
requests from many clients share model batches.

Notes: an answer carries what the Python API or the CLI would warn about for the same request
(:mod:`unieval_local.notes`): body keys the endpoint does not read, input hints, each submitted
request's own notes (:attr:`Request.notes <unieval_local.requests.base.Request.notes>`: a
language outside an evaluator's training ...), truncated queries, a report's notes, a custom
run's row notes. Server paths never reach a client: error messages, notes and signatures name
checkpoints by evaluator (:class:`~unieval_local.wire.http.PathRedactor`; the full message goes
to the log at warning level).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .. import notes
from .._version import __version__
from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine, RunStats, truncation_message
from ..pipeline.jobs import shortened_message
from ..errors import ExampleProblem, InvalidExampleError, NonFiniteScoreError, RequestTooLargeError
from ..requests.base import Request
from ..requests.scheduler import Scheduler
from ..requests.score import answer_languages, available_aspects, evaluation_result, joined_answers, score_requests
from ..wire.client_fields import bracketed
from ..wire.http import PathRedactor, known_paths, notes_headers, public_checkpoints
from .core import BatchingWorker, DrainingError, ServiceLimits, estimate_tokens
from .errors import ServiceError, error_body, service_error
from .metrics import ServiceMetrics
from .custom_runs import RUNS_RETRY_AFTER_S, CustomRuns
from .runs import RunStore
from .words import in_http_words
from .work import Answer, RatingConfigFile, Reader, Work

__all__ = ["PREP_THREADS", "RUNS_RETRY_AFTER_S", "Answer", "Reader", "Service", "ServiceError", "error_body",
           "service_error"]

log = logging.getLogger("unieval_local.service")

#: Threads that read bodies and prepare requests and answers off the event loop. Two: the work
#: holds the GIL (JSON parsing, validation, planning), so more threads would not run it faster,
#: only take more turns from the event loop.
PREP_THREADS = 2


def _note_row(row: Any) -> None:
    """A rating or autoeval report row's notes, and who wrote its reasons (their answers have no
    ``reasons`` field: :func:`~unieval_local.reports.reasons.reasons_note`), as the answer's notes."""
    from ..reports.reasons import reasons_note

    for text in [*row.notes, reasons_note(row.reasons)]:
        if text:
            notes.note(text, warn=False)


class Service(CustomRuns):
    """The engine side of the HTTP service (module docstring).

    Args:
        engine: the :class:`~unieval_local.engine.Engine` (its settings are ``serve``'s engine flags).
        limits: :class:`~unieval_local.service.core.ServiceLimits`.
        preload: checkpoint names to load before ``/health`` says ready (others load on first use).
        report_long_input: how the report endpoints read long inputs (default ``chunk``, as
            ``unieval-local report``); None: the engine's ``long_input``, as /v1/unieval and /v1/score
            (``serve --long-input`` given: one mode for every endpoint). Each answer says which in
            its ``X-UniEval-Long-Input`` header.

    Attributes:
        ready: the preloaded checkpoints are loaded. load_error: why loading failed, if it did.
        runs: the custom runs kept for ``GET /runs/{id}`` (a :class:`~unieval_local.service.runs.RunStore`
            of at most ``max_runs``).
        redact: takes the server's paths out of a text (:class:`~unieval_local.wire.http.PathRedactor`).
    """

    def __init__(self, engine: Engine, limits: ServiceLimits | None = None, preload: Sequence[str] = (),
                 report_long_input: str | None = "chunk"):
        self.engine = engine
        self.limits = limits or ServiceLimits()
        self.report_long_input = report_long_input or engine.config.long_input
        self.scheduler = Scheduler(engine, mix=self.limits.max_wait_ms > 0,
                                   step_seconds=self.limits.max_step_ms / 1000 or None)
        self.metrics = ServiceMetrics(self._queued)
        self.worker = BatchingWorker(self.scheduler, self.limits, self._ticked)
        self.preload = list(preload)
        self.ready = False
        self.load_error: str | None = None
        self.runs = RunStore(self.limits.max_runs)
        self.redact = PathRedactor(lambda: known_paths(engine))
        self._seen = (0, 0)
        self._tasks: set[asyncio.Task] = set()
        self._prep = ThreadPoolExecutor(PREP_THREADS, thread_name_prefix="unieval-local-prep")
        self._closing = False

    # ------------------------------------------------------------------ lifecycle
    def _queued(self) -> int:
        return self.worker.queued()

    def _ticked(self, answered: int, seconds: float) -> None:
        batches, queries = self.scheduler.batches, self.scheduler.stats.n_queries
        self.metrics.batches.inc(max(0, batches - self._seen[0]))
        self.metrics.queries.inc(max(0, queries - self._seen[1]))
        self._seen = (batches, queries)

    def load(self) -> None:
        """Load the preloaded checkpoints (in the calling thread), then start the worker;
        :attr:`ready` becomes True, or :attr:`load_error` says why not.

        Once loaded, every object alive is moved out of the garbage collector's reach
        (``gc.freeze()``): a full collection then walks only what requests create, not the
        models' and libraries' millions of objects (measured: a 300-500 ms pause, in whichever
        thread, that held ``/health`` up while a large body was handled)."""
        try:
            for name in self.preload:
                self.engine.runner(name)
        except Exception as exc:  # noqa: BLE001  reported by /health and the log
            self.load_error = " ".join(str(exc).split())
            raise
        self._warm_up()
        gc.collect()
        gc.freeze()
        self.worker.start()
        self.ready = True

    def _warm_up(self) -> None:
        """Load what planning loads on first use (the language detector, the English sentence
        splitter: about 2 s), so the first request is not the one that waits for it."""
        from ..schema import UniEvalData

        text = "The council approved the new park on Monday. Construction starts in May."
        self.engine.splitter_for(self.engine.record_language(UniEvalData(target=text)))(text)

    @property
    def draining(self) -> bool:
        """Shutting down (:meth:`begin_drain`, or the worker stopping): new requests get 503."""
        return self._closing or self.worker.stopping

    def begin_drain(self) -> None:
        """Refuse every new request from now on (503 ``Draining``); the requests that arrived
        before are still prepared, submitted and answered. :meth:`drain` then stops the worker."""
        self._closing = True

    def drain(self, timeout: float | None = None) -> bool:
        """Accept nothing new, answer every accepted request, stop the worker (True when it stopped in time)."""
        self._closing = True
        stopped = self.worker.stop(timeout)
        self._prep.shutdown(wait=False)
        return stopped

    def health(self) -> tuple[int, dict[str, Any]]:
        """``(200, {"status": "ok"})`` once loaded; 503 with ``loading``, ``draining`` or ``failed``
        (with the load error's message, server paths taken out)."""
        if self.draining:
            return 503, {"status": "draining"}
        if self.load_error:
            return 503, {"status": "failed", "message": self.redact(self.load_error)}
        if not self.ready:
            return 503, {"status": "loading"}
        return 200, {"status": "ok"}

    def info(self) -> dict[str, Any]:
        """Version, process id (which replica answered), the engine's signature (run settings; the
        checkpoints by evaluator and content fingerprint, never their folders:
        :func:`~unieval_local.wire.http.public_checkpoints`), evaluators and limits (never the key)."""
        from ..registry.evaluators import EVALUATORS

        limits, identities = self.limits, self.engine.checkpoint_identities()
        return {
            "version": __version__,
            "pid": os.getpid(),
            "signature": {"run": self.engine.config.as_dict(), "checkpoints": public_checkpoints(identities)},
            "evaluators": sorted(EVALUATORS),
            "loaded": sorted(identities),
            "limits": {"max_examples_per_query": MAX_EXAMPLES_PER_REQUEST, **dataclasses.asdict(limits)},
            "long_input": {"score": self.engine.config.long_input, "reports": self.report_long_input},
            "consistency_aspect": self.consistency_aspect,
        }

    # ------------------------------------------------------------------ errors and notes
    def _notes(self, *groups: Sequence[str]) -> list[str]:
        """The notes of ``groups`` in order, each once, in the client's words (:meth:`words`)."""
        return list(dict.fromkeys(self.words(n) for g in groups for n in g))

    def words(self, text: str) -> str:
        """``text`` as a client reads it: server paths taken out (:attr:`redact`), the Python/CLI
        names of settings in the service's (:func:`~unieval_local.service.words.in_http_words`)."""
        return in_http_words(self.redact(text))

    def _stats_notes(self, stats: RunStats, long_input: str, shortened: bool = True) -> None:
        """Note what the Python API warns about a run's counters: truncated queries (the same
        sentence, :func:`~unieval_local.engine.truncation_message`) and, for scores, fields that
        ``long_input='fit'`` shortened."""
        if stats.n_truncated:
            limits = {n: self.engine.max_length(n) for n in stats.truncated_by}
            notes.note(truncation_message(stats, limits, long_input, surface="http"), warn=False)
        if shortened and stats.n_shortened:
            notes.note(shortened_message(stats, "http"), warn=False)

    # ------------------------------------------------------------------ running requests
    def _check_open(self) -> None:
        if self.draining:
            raise service_error(DrainingError("the service is shutting down and accepts no new request"))
        if not self.ready:
            status, body = self.health()
            raise ServiceError(503, "NotReady", f"the service is not ready ({body['status']}"
                               f"{': ' + body['message'] if 'message' in body else ''}); GET /health says when")

    async def off_loop(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, list[str]]:
        """``fn(*args)`` in a preparation thread, its notes collected: ``(result, notes)``.

        Raises:
            Whatever ``fn`` raises, with the notes collected until then as its ``notes``
            attribute (an error answer carries them: a misspelt key's did-you-mean explains many).
        """
        def collected() -> tuple[Any, list[str]]:
            with notes.collecting() as sink:
                try:
                    return fn(*args), sink
                except Exception as exc:
                    exc.notes = list(sink)  # type: ignore[attr-defined]
                    raise

        return await asyncio.get_running_loop().run_in_executor(self._prep, collected)

    def _work(self, requests: Sequence[Request], tokens: int, finish: Callable[[list[Any]], Any],
              long_input: str | None = None) -> Work:
        """``requests`` planned for the scheduler (:meth:`Scheduler.prepare`; in the calling
        preparation thread), with their tokens, how their answers become the body, and the
        long-input mode they were planned with (None: the engine's)."""
        requests = list(requests)
        return Work(requests, [self.scheduler.prepare(r) for r in requests], tokens, finish,
                     long_input or self.engine.config.long_input)

    def _submit(self, work: Work) -> list[Future]:
        """Submit prepared work (a request accepted before :meth:`begin_drain` still is; the
        worker refuses once it stops: DrainingError)."""
        futures = self.worker.submit(work.prepared, work.tokens)
        self.metrics.requests_accepted.inc(len(work.prepared))
        return futures

    async def _wait(self, futures: Sequence[Future], timeout: float | None = None) -> list[Any]:
        """The answers of ``futures``, in order (504 after the request timeout, and the work is
        dropped; the first error, in order, raised). A cancelled wait (its client went away)
        drops the work too."""
        timeout = self.limits.request_timeout_s if timeout is None else timeout
        wrapped = [asyncio.wrap_future(f) for f in futures]
        try:
            _, pending = await asyncio.wait(wrapped, timeout=None if timeout == float("inf") else timeout)
        except asyncio.CancelledError:  # the client went away: its queued work is dropped
            for f in futures:
                f.cancel()
            raise
        if pending:
            for f in futures:
                f.cancel()
            raise ServiceError(504, "Timeout", f"the request was not answered within {timeout:g} s "
                               "(--request-timeout-s); the service is busy or the request is large")
        errors = [w.exception() for w in wrapped]  # each retrieved: no "never retrieved" log line
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        return [w.result() for w in wrapped]

    async def _run(self, prepare: Callable[[], Work]) -> Answer:
        """Prepare one HTTP request's work off the loop, submit it, wait for its answers, build
        the body off the loop; the :class:`Answer` with every note (module docstring).

        Raises:
            ServiceError: as :meth:`error`.
        """
        try:
            self._check_open()
            work, before = await self.off_loop(prepare)
            answers = await self._wait(self._submit(work))
            body, after = await self.off_loop(work.finish, answers)
        except Exception as exc:
            raise self.error(exc) from None
        return Answer(body, self._notes(before, [n for r in work.requests for n in r.notes], after),
                      headers={"X-UniEval-Long-Input": work.long_input})

    def error(self, exc: BaseException) -> ServiceError:
        """:func:`service_error` with the server's paths taken out of the message and the problems
        (the full message, when it differed, goes to the log at warning level), and the notes
        gathered before it failed in the ``X-UniEval-Notes`` headers."""
        err = service_error(exc)
        message = self.words(err.message)
        examples = [{**e, "message": self.words(e.get("message", ""))} for e in err.examples]
        if message != err.message or examples != err.examples:
            log.warning("answered %s %s (server paths taken out): %s %s", err.status, err.type, err.message,
                        "; ".join(e.get("message", "") for e in err.examples))
        noted = self._notes(getattr(exc, "notes", None) or [])
        headers = {**err.headers, **(notes_headers(noted) if noted else {})}
        message = bracketed(message)  # one path style over HTTP: section_definitions[0].type
        examples = [{**e, "field": bracketed(e.get("field")), "message": bracketed(e["message"])} for e in examples]
        if message == err.message and examples == err.examples and headers == err.headers:
            return err
        return ServiceError(err.status, err.type, message, examples, headers)

    def _score_work(self, data: Sequence[Any], task: str, aspects: Sequence[str], evidence: bool,
                    finish: Callable[..., Any]) -> Work:
        """Validated examples as planned score requests (as ``Scorer`` checks them: every problem
        at once, input hints noted); ``finish(values, evidence, languages)`` gives the body (the
        truncation notes of the answers' counters are given)."""
        from ..pipeline.validate import validate_examples, warn_input_hints

        resolved = [self.engine.registry.get_aspect(task, a) for a in aspects]
        if not data:  # the request as a whole: no example to blame
            raise ServiceError(422, "InvalidRequest", "the request is empty: 'data' holds no examples; send at least "
                               "one", [{"index": None, "field": "data", "message": "the request is empty: no examples"}])
        examples, problems = validate_examples(list(data), resolved)
        if problems:
            raise InvalidExampleError(problems)
        warn_input_hints(examples, resolved)
        requests = score_requests(examples, task, aspects, evidence, self.scheduler.policy)

        def done(answers: list[Any]) -> Any:
            values, ev, stats = joined_answers(answers, aspects, evidence)
            self._stats_notes(stats, self.engine.config.long_input)
            return finish(values, ev, answer_languages(answers))

        return self._work(requests, estimate_tokens(data), done)

    def _config_aspect(self, task: str, aspect: str):
        """The registry's aspect of a ``/v1/unieval`` body's ``config``.

        Raises:
            ServiceError: 422 naming the field at fault (``config.task`` or
                ``config.evaluation_aspect``) and listing the valid names.
        """
        from ..errors import UnknownTaskError

        registry = self.engine.registry
        try:
            registry.get_task(task)
        except UnknownTaskError as exc:
            message = " ".join(str(exc).split())
            raise ServiceError(422, "InvalidRequest", message,
                               [{"index": None, "field": "config.task", "message": message}]) from None
        try:
            return registry.get_aspect(task, aspect)
        except UnknownTaskError as exc:
            message = " ".join(str(exc).split())
            raise ServiceError(422, "InvalidRequest", message,
                               [{"index": None, "field": "config.evaluation_aspect", "message": message}]) from None

    # ------------------------------------------------------------------ endpoints
    async def unieval(self, read: Reader) -> Answer:
        """``POST /v1/unieval``: the hosted metric's ``{"overall": {"value"}, "examples": [{"value"}]}``.

        Args:
            read: returns ``(config, data)``: ``{"task", "evaluation_aspect"}`` and the examples.

        Raises:
            ServiceError: 422 for more than 250 examples, an unknown task or aspect, bad examples
                (every problem named), a non-finite score; 429/503/504/500 as :func:`service_error`.
        """
        from ..wire.hosted import hosted_result

        def prepare() -> Work:
            config, data = read()
            if len(data) > MAX_EXAMPLES_PER_REQUEST:
                raise RequestTooLargeError(
                    f"a request holds at most {MAX_EXAMPLES_PER_REQUEST} examples (the hosted metric's limit), got "
                    f"{len(data)}; split it, or POST /v1/score")
            task, aspect = config.get("task"), config.get("evaluation_aspect")
            if scale := self._config_aspect(task, aspect).scale:  # the hosted schema reads [0, 1]
                notes.note(f"{task}/{aspect} is an expected rating on 1-{scale} (G-Eval), not a probability in "
                           "[0, 1]", warn=False)

            def finish(values: Mapping[str, np.ndarray], _ev: Any, _languages: Any) -> dict[str, Any]:
                bad = np.flatnonzero(~np.isfinite(values[aspect])).tolist()
                if bad:
                    raise NonFiniteScoreError(f"the model gave non-finite logits for examples {bad[:20]} "
                                              f"(dtype {self.engine.config.dtype}); serve with --dtype float32", bad)
                return hosted_result(values[aspect])

            return self._score_work(data, task, [aspect], False, finish)

        return await self._run(prepare)

    async def score(self, read: Reader) -> Answer:
        """``POST /v1/score``: :meth:`Scorer.evaluate <unieval_local.Scorer.evaluate>`'s
        :class:`~unieval_local.schema.EvaluationResult` as JSON (any number of examples, in
        queries of at most 250); each signature's ``checkpoint`` names the evaluator, not a folder.

        Args:
            read: returns ``(task, aspects, data, evidence)``.
        """
        def prepare() -> Work:
            task, aspects, data, evidence = read()
            names = available_aspects(self.engine, task, aspects)  # none named: those whose evaluator is here

            def finish(values: Mapping[str, np.ndarray], ev: Mapping[str, list], languages: Any) -> dict[str, Any]:
                scales = [self.engine.registry.get_aspect(task, a).scale for a in names]
                result = evaluation_result(task, names, values, ev, self.engine.signature, self.engine.config.dtype,
                                           languages, scales).model_dump(mode="json", exclude_none=True)
                for per in result.get("per_aspect", {}).values():
                    if isinstance(per.get("signature"), dict) and "checkpoint" in per["signature"]:
                        per["signature"]["checkpoint"] = self.redact(per["signature"]["checkpoint"])
                return result

            return self._score_work(data, task, names, evidence, finish)

        return await self._run(prepare)

    def _report_work(self, records: Any, format: str, options: Any, answer: Callable[[Any], Any]) -> Work:
        """One report run (:func:`~unieval_local.reports.plan_report`) planned for the shared
        scheduler; ``answer(report file)`` gives the body. The file's notes and its truncation
        count become notes, as ``make_report`` warns them, when a record was scored: where every
        row is an error (the answer is a 422), nothing was scored and no note about scoring (a
        checkpoint used unchecked, cut points) is said."""
        from ..reports import plan_report

        mode = self.report_long_input
        options = self._with_checker(options)
        plan = plan_report(records, format, engine=self.engine, options=options, long_input=mode)

        def finish(parts: list[Any]) -> Any:
            out = plan.finish(parts, warn=False)
            if any(row.error is None for row in out.reports):  # else nothing was scored
                for text in out.notes:
                    notes.note(text, warn=False)
                stats = RunStats()
                for part in parts:
                    stats += part.stats
                self._stats_notes(stats, mode, shortened=False)
            return answer(out)

        return self._work(plan.requests, estimate_tokens(records), finish, mode)

    #: ``serve --consistency-aspect TASK/ASPECT``: the checker of every report endpoint's
    #: consistency-like queries (claims, key points, accuracy and support checks), e.g.
    #: ``fact/factcg``; None: each format's default. A rating config that names its own keeps it.
    consistency_aspect: str | None = None

    def _with_checker(self, options: Any) -> Any:
        """``options`` (None, or a report format's options model) with :attr:`consistency_aspect`
        where they name no checker themselves; unchanged when the service has none."""
        checker = self.consistency_aspect
        if checker is None or (options is not None and "consistency_aspect" in options.model_fields_set):
            return options
        if options is None:
            return {"consistency_aspect": checker}
        return type(options).model_validate({**options.model_dump(exclude_unset=True), "consistency_aspect": checker})

    #: ``serve --rating-config FILE``: the templates, cut points and rules of
    #: /v1/summarization-evaluator (None: the defaults, ``configs/rating.yaml``).
    rating_config: RatingConfigFile | None = None

    async def summarization_evaluator(self, read: Reader) -> Answer:
        """``POST /v1/summarization-evaluator``: the rating evaluator's ``{"summary": {...}}``
        (:class:`~unieval_local.compat.SummarizationEvaluator`'s answer for one summary, rated
        with :attr:`rating_config`; the body's ``enabled_metrics`` overrides its own); the
        record's own notes are among the answer's notes.

        Args:
            read: returns ``(record, enabled_metrics)``.

        Raises:
            ServiceError: 422 naming the field (``input``, ``summary``) or the bad metric.
        """
        from ..reports.options import load_options
        from ..reports.rating import RatingConfig
        from ..wire.rating_evaluator import evaluator_error, evaluator_result

        def prepare() -> Work:
            record, enabled_metrics = read()
            if isinstance(enabled_metrics, str):
                enabled_metrics = [m.strip() for m in enabled_metrics.split(",") if m.strip()]
            overrides = {"enabled_metrics": list(enabled_metrics)} if enabled_metrics is not None else {}
            # exclude_unset: what the file left unset stays unset (the record's language picks the templates)
            base = self.rating_config.config.model_dump(exclude_unset=True) if self.rating_config else {}
            config = load_options(RatingConfig, None, {**base, **overrides})

            def answer(out: Any) -> dict[str, Any]:
                row = out.reports[0]
                if row.error is not None:
                    err = evaluator_error(row.error)["error"]
                    raise ServiceError(422, "InvalidExample", err["message"],
                                       [{"index": 0, "field": err["field"], "message": err["message"]}])
                _note_row(row)
                dumped = row.report.model_dump(mode="json")
                result = evaluator_result(dumped["summary"], config.enabled_metrics)
                if dumped.get("details") is not None:
                    result["details"] = dumped["details"]
                return result

            return self._report_work([dict(record)], "rating", config, answer)

        return await self._run(prepare)

    async def autoeval(self, read: Reader) -> Answer:
        """``POST /v1/autoeval``: the autoeval report of one record (``report --format autoeval``'s
        row report); the record's notes and the run's are the answer's notes.

        Args:
            read: returns the record (a dict).

        Raises:
            ServiceError: 422 naming the field of an unusable record.
        """
        def prepare() -> Work:
            record = read()

            def answer(out: Any) -> dict[str, Any]:
                row = out.reports[0]
                if row.error is not None:
                    raise ServiceError(422, "InvalidExample", row.error.message,
                                       [{"index": 0, "field": row.error.field, "message": row.error.message}])
                _note_row(row)
                return row.report.model_dump(mode="json", exclude_none=True)

            return self._report_work([dict(record)], "autoeval", None, answer)

        return await self._run(prepare)
