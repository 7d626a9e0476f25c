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
from dataclasses import dataclass, field
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
from ..requests.score import answer_languages, evaluation_result, joined_answers, score_requests
from ..wire.http import PathRedactor, known_paths, public_checkpoints
from .core import BatchingWorker, DrainingError, ServiceLimits, estimate_tokens
from .errors import ServiceError, error_body, service_error
from .metrics import ServiceMetrics
from .runs import RunStore, new_run, now, run_evaluations

__all__ = ["PREP_THREADS", "RUNS_RETRY_AFTER_S", "Answer", "Reader", "Service", "ServiceError", "error_body",
           "service_error"]

log = logging.getLogger("unieval_local.service")

#: Threads that read bodies and prepare requests and answers off the event loop. Two: the work
#: holds the GIL (JSON parsing, validation, planning), so more threads would not run it faster,
#: only take more turns from the event loop.
PREP_THREADS = 2
#: The Retry-After (seconds) of a non-blocking custom run refused because ``--max-runs`` runs are
#: kept and all are still running.
RUNS_RETRY_AFTER_S = 5

#: A request body reader: parses and validates the body (in a preparation thread) and returns
#: what the endpoint reads (its arguments); raises ServiceError (422) or BodyError.
Reader = Callable[[], Any]


@dataclass
class Answer:
    """One endpoint's answer.

    Attributes:
        body: the JSON answer (the endpoint's documented shape).
        notes: what the client should know besides it, in order, each once, server paths taken
            out; where they travel (a ``notes`` key, or the ``X-UniEval-Notes`` header) is the
            route's choice (:mod:`unieval_local.service.app`).
        status: the HTTP status (200; 202 for a custom run accepted without waiting).
        headers: extra response headers (``Location`` of a run).
    """

    body: Any
    notes: list[str] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Work:
    """One HTTP request's work, prepared off the loop: the requests to submit (planned), their
    estimated tokens, and ``finish(answers) -> body`` (run off the loop too)."""

    requests: list[Request]
    prepared: list[Any]
    tokens: int
    finish: Callable[[list[Any]], Any]
    long_input: str = "truncate"


class Service:
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
        self.scheduler = Scheduler(engine, mix=self.limits.max_wait_ms > 0)
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
        }

    # ------------------------------------------------------------------ errors and notes
    def error(self, exc: BaseException) -> ServiceError:
        """:func:`service_error` with the server's paths taken out of the message and the problems
        (the full message, when it differed, goes to the log at warning level)."""
        err = service_error(exc)
        message = self.redact(err.message)
        examples = [{**e, "message": self.redact(e.get("message", ""))} for e in err.examples]
        if message == err.message and examples == err.examples:
            return err
        log.warning("answered %s %s (server paths taken out): %s %s", err.status, err.type, err.message,
                    "; ".join(e.get("message", "") for e in err.examples))
        return ServiceError(err.status, err.type, message, examples, err.headers)

    def _notes(self, *groups: Sequence[str]) -> list[str]:
        """The notes of ``groups`` in order, each once, server paths taken out."""
        return list(dict.fromkeys(self.redact(n) for g in groups for n in g))

    def _stats_notes(self, stats: RunStats, long_input: str, shortened: bool = True) -> None:
        """Note what the Python API warns about a run's counters: truncated queries (the same
        sentence, :func:`~unieval_local.engine.truncation_message`) and, for scores, fields that
        ``long_input='fit'`` shortened."""
        if stats.n_truncated:
            limits = {n: self.engine.max_length(n) for n in stats.truncated_by}
            notes.note(truncation_message(stats, limits, long_input, cli=False), warn=False)
        if shortened and stats.n_shortened:
            notes.note(shortened_message(stats), warn=False)

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
            Whatever ``fn`` raises.
        """
        def collected() -> tuple[Any, list[str]]:
            with notes.collecting() as sink:
                return fn(*args), sink

        return await asyncio.get_running_loop().run_in_executor(self._prep, collected)

    def _work(self, requests: Sequence[Request], tokens: int, finish: Callable[[list[Any]], Any],
              long_input: str | None = None) -> _Work:
        """``requests`` planned for the scheduler (:meth:`Scheduler.prepare`; in the calling
        preparation thread), with their tokens, how their answers become the body, and the
        long-input mode they were planned with (None: the engine's)."""
        requests = list(requests)
        return _Work(requests, [self.scheduler.prepare(r) for r in requests], tokens, finish,
                     long_input or self.engine.config.long_input)

    def _submit(self, work: _Work) -> list[Future]:
        """Submit prepared work (a request accepted before :meth:`begin_drain` still is; the
        worker refuses once it stops: DrainingError)."""
        futures = self.worker.submit(work.prepared, work.tokens)
        self.metrics.requests_accepted.inc(len(work.prepared))
        return futures

    async def _wait(self, futures: Sequence[Future], timeout: float | None = None) -> list[Any]:
        """The answers of ``futures`` (504 after the request timeout; the first error raised)."""
        timeout = self.limits.request_timeout_s if timeout is None else timeout
        wrapped = [asyncio.wrap_future(f) for f in futures]
        try:
            done = await asyncio.wait_for(asyncio.gather(*wrapped), timeout)
        except asyncio.CancelledError:  # the client went away: its queued work is dropped
            for f in futures:
                f.cancel()
            raise
        except asyncio.TimeoutError:
            for f in futures:
                f.cancel()
            raise ServiceError(504, "Timeout", f"the request was not answered within {timeout:g} s "
                               "(--request-timeout-s); the service is busy or the request is large") from None
        return list(done)

    async def _run(self, prepare: Callable[[], _Work]) -> Answer:
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

    def _score_work(self, data: Sequence[Any], task: str, aspects: Sequence[str], evidence: bool,
                    finish: Callable[..., Any]) -> _Work:
        """Validated examples as planned score requests (as ``Scorer`` checks them: every problem
        at once, input hints noted); ``finish(values, evidence, languages)`` gives the body (the
        truncation notes of the answers' counters are given)."""
        from ..pipeline.validate import validate_examples, warn_input_hints

        resolved = [self.engine.registry.get_aspect(task, a) for a in aspects]
        if not data:
            raise InvalidExampleError([ExampleProblem(0, "data", "the request holds no examples")])
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

        def prepare() -> _Work:
            config, data = read()
            if len(data) > MAX_EXAMPLES_PER_REQUEST:
                raise RequestTooLargeError(
                    f"a request holds at most {MAX_EXAMPLES_PER_REQUEST} examples (the hosted metric's limit), got "
                    f"{len(data)}; split it, or POST /v1/score")
            task, aspect = config.get("task"), config.get("evaluation_aspect")
            self.engine.registry.get_aspect(task, aspect)

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
        def prepare() -> _Work:
            task, aspects, data, evidence = read()
            names = self.engine.registry.aspect_names(task, aspects)

            def finish(values: Mapping[str, np.ndarray], ev: Mapping[str, list], languages: Any) -> dict[str, Any]:
                result = evaluation_result(task, names, values, ev, self.engine.signature, self.engine.config.dtype,
                                           languages).model_dump(mode="json", exclude_none=True)
                for per in result.get("per_aspect", {}).values():
                    if isinstance(per.get("signature"), dict) and "checkpoint" in per["signature"]:
                        per["signature"]["checkpoint"] = self.redact(per["signature"]["checkpoint"])
                return result

            return self._score_work(data, task, names, evidence, finish)

        return await self._run(prepare)

    def _report_work(self, records: Any, format: str, options: Any, answer: Callable[[Any], Any]) -> _Work:
        """One report run (:func:`~unieval_local.reports.plan_report`) planned for the shared
        scheduler; ``answer(report file)`` gives the body. The file's notes and its truncation
        count become notes, as ``make_report`` warns them."""
        from ..reports import plan_report

        mode = self.report_long_input
        plan = plan_report(records, format, engine=self.engine, options=options, long_input=mode)

        def finish(parts: list[Any]) -> Any:
            out = plan.finish(parts, warn=False)
            for text in out.notes:
                notes.note(text, warn=False)
            stats = RunStats()
            for part in parts:
                stats += part.stats
            self._stats_notes(stats, mode, shortened=False)
            return answer(out)

        return self._work(plan.requests, estimate_tokens(records), finish, mode)

    async def summarization_evaluator(self, read: Reader) -> Answer:
        """``POST /v1/summarization-evaluator``: the rating evaluator's ``{"summary": {...}}``
        (:class:`~unieval_local.compat.SummarizationEvaluator`'s answer for one summary); the
        record's own notes are among the answer's notes.

        Args:
            read: returns ``(record, enabled_metrics)``.

        Raises:
            ServiceError: 422 naming the field (``input``, ``summary``) or the bad metric.
        """
        from ..reports.options import load_options
        from ..reports.rating import RatingConfig
        from ..wire.rating_evaluator import evaluator_error, evaluator_result

        def prepare() -> _Work:
            record, enabled_metrics = read()
            if isinstance(enabled_metrics, str):
                enabled_metrics = [m.strip() for m in enabled_metrics.split(",") if m.strip()]
            overrides = {"enabled_metrics": list(enabled_metrics)} if enabled_metrics is not None else {}
            config = load_options(RatingConfig, None, overrides)

            def answer(out: Any) -> dict[str, Any]:
                row = out.reports[0]
                if row.error is not None:
                    err = evaluator_error(row.error)["error"]
                    raise ServiceError(422, "InvalidExample", err["message"],
                                       [{"index": 0, "field": err["field"], "message": err["message"]}])
                for text in row.notes:
                    notes.note(text, warn=False)
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
        def prepare() -> _Work:
            record = read()

            def answer(out: Any) -> dict[str, Any]:
                row = out.reports[0]
                if row.error is not None:
                    raise ServiceError(422, "InvalidExample", row.error.message,
                                       [{"index": 0, "field": row.error.field, "message": row.error.message}])
                for text in row.notes:
                    notes.note(text, warn=False)
                return row.report.model_dump(mode="json", exclude_none=True)

            return self._report_work([dict(record)], "autoeval", None, answer)

        return await self._run(prepare)

    # ------------------------------------------------------------------ custom runs
    def get_run(self, run_id: str) -> dict[str, Any]:
        """``GET /runs/{id}``: the run object (404 when unknown or forgotten)."""
        run = self.runs.get(run_id)
        if run is None:
            raise ServiceError(404, "NotFound", f"no run {run_id!r}: runs are kept in memory, at most "
                               f"{self.limits.max_runs} (--max-runs, the oldest finished ones forgotten first), and "
                               "lost when the service restarts")
        return run

    async def custom_run(self, read: Reader) -> Answer:
        """``POST /runs/custom``: score a hosted custom-run body (the summ metric); the run object.

        The run object: :func:`~unieval_local.service.runs.new_run`, its ``evaluations`` once done
        (:func:`~unieval_local.service.runs.run_evaluations`: each row result with its own
        ``notes``); ``notes`` holds the run's notes (ignored keys, report notes, truncation, the
        requests' own notes). ``is_blocking`` true (default): 200 with the finished run; false:
        202 with the run queued, ``GET /runs/{id}`` gives it when done.

        At most ``max_runs`` runs are kept (a hard bound): the oldest finished ones are forgotten
        first; a non-blocking run when every kept run is still running is refused (503, Retry-After);
        a blocking run is answered all the same, and kept once finished if there is room then.

        Args:
            read: returns the body (a dict).

        Raises:
            ServiceError: 422 naming ``evaluations[i].metrics[k]`` (an unknown metric) or the
                place of another shape error; 503 ``TooManyRuns``; 429/503 as :func:`service_error`;
                504 for a blocking run past the timeout (its id in the message: it can still be polled).
        """
        from ..wire.custom_run import CustomRunError, plan_custom_run

        def prepare() -> tuple[dict[str, Any], list, list[_Work | None], list[str]]:
            body = read()
            groups, run_notes = plan_custom_run(body, consumed=("is_blocking", "data_collection_id"))
            works = [self._report_work(g.records, "summ", None, lambda out: out) if g.records else None
                     for g in groups]
            return body, groups, works, run_notes

        try:
            self._check_open()
            (body, groups, works, run_notes), before = await self.off_loop(prepare)
        except CustomRunError as exc:  # the body's shape: every place named, e.g. evaluations[0].metrics[1]
            raise ServiceError(422, "InvalidRequest", str(exc),
                               [{"index": None, "field": place, "message": message}
                                for place, message in exc.problems]) from None
        except Exception as exc:
            raise self.error(exc) from None
        run = new_run(body, self._notes(run_notes, before))
        kept = self.runs.keep(run)
        if not kept and not run["is_blocking"]:
            raise ServiceError(503, "TooManyRuns", f"{self.limits.max_runs} custom runs are kept (--max-runs) and "
                               "every one is still running, so this one could not be polled: retry after the "
                               "Retry-After seconds, or send is_blocking true to get the run in the answer",
                               headers={"Retry-After": str(RUNS_RETRY_AFTER_S)})
        live = [w for w in works if w is not None]
        merged = _Work([r for w in live for r in w.requests], [p for w in live for p in w.prepared],
                       sum(w.tokens for w in live), lambda answers: answers)
        try:
            futures = self._submit(merged)
        except Exception as exc:
            self.runs.forget(run["id"])
            raise self.error(exc) from None
        task = asyncio.ensure_future(self._finish_run(run, kept, groups, works, merged, futures))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        mode = {"X-UniEval-Long-Input": self.report_long_input}
        if not run["is_blocking"]:
            return Answer(dict(run), run["notes"], 202, {"Location": f"/runs/{run['id']}", **mode})
        try:
            await asyncio.wait_for(asyncio.shield(task), self.limits.request_timeout_s)
        except asyncio.TimeoutError:
            where = f"GET /runs/{run['id']} gives it when done" if run["id"] in self.runs else \
                "it cannot be polled (--max-runs runs are kept, all running)"
            limit = self.limits.request_timeout_s
            raise ServiceError(504, "Timeout", f"run {run['id']} was not finished within {limit:g} s "
                               f"(--request-timeout-s); it goes on: {where}") from None
        if run["status"] == "failed":
            raise ServiceError(500, run["error"]["type"], run["error"]["message"])
        return Answer(dict(run), run["notes"], headers=mode)

    async def _finish_run(self, run: dict[str, Any], kept: bool, groups: list, works: list[_Work | None],
                          merged: _Work, futures: list[Future]) -> None:
        """Wait for a run's answers, then fill its object (in place, on the loop); keep it now if
        it could not be kept when it started."""
        def build(parts: list[Any]) -> list[dict[str, Any]]:
            reports, at = [], 0
            for work in works:
                n = len(work.prepared) if work is not None else 0
                reports.append(work.finish(parts[at:at + n]) if work is not None else None)
                at += n
            return run_evaluations(groups, reports)

        try:
            parts = await self._wait(futures, timeout=float("inf"))
            evaluations, after = await self.off_loop(build, parts)
        except Exception as exc:  # noqa: BLE001  the run fails, its object says why
            err = self.error(exc)
            run.update(status="failed", completed_at=now(), error={"type": err.type, "message": err.message})
        else:
            run.update(evaluations=evaluations, status="completed", completed_at=now(),
                       notes=self._notes(run["notes"], [n for r in merged.requests for n in r.notes], after))
        if not kept:
            self.runs.keep(run)
