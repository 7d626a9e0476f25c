"""What each endpoint does, without the HTTP framework: a :class:`Service` holds the engine,
the scheduler, the batching worker, the metrics and the custom runs; its ``async`` methods
take a parsed body and return the JSON answer, or raise :class:`ServiceError` (status, type,
message, per-example problems). Every request's work is a
:class:`~unieval_local.requests.base.Request` submitted to the shared
:class:`~unieval_local.requests.scheduler.Scheduler` through the worker, so the model only runs
in the worker thread, and requests from many clients share engine passes.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .._version import __version__
from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine
from ..errors import (
    CheckpointError,
    CheckpointNotFoundError,
    ExampleProblem,
    InvalidExampleError,
    NonFiniteScoreError,
    RequestTooLargeError,
    UniEvalError,
    UnknownTaskError,
)
from ..requests.base import Request
from ..requests.scheduler import Scheduler
from ..requests.score import answer_languages, evaluation_result, joined_answers, score_requests
from ..wire.custom_run import CUSTOM_RUN_NAMES
from ..wire.shapes import rename_fields
from .core import BatchingWorker, DrainingError, QueueFullError, ServiceLimits, estimate_tokens
from .metrics import ServiceMetrics

__all__ = ["Service", "ServiceError", "error_body"]


class ServiceError(Exception):
    """An HTTP error answer: ``{"error": {"type", "message", "examples": [{"index", "field", "message"}]}}``.

    Args:
        status: the HTTP status (401, 404, 413, 422, 429, 503, 504, 500).
        type: a short name (``InvalidRequest``, ``QueueFull`` ...).
        message: what is wrong and what to do.
        examples: per-example problems (empty when the request as a whole is at fault).
        headers: extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(self, status: int, type: str, message: str, examples: Sequence[Mapping[str, Any]] = (),
                 headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.type, self.message = status, type, message
        self.examples = [dict(e) for e in examples]
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(self.type, self.message, self.examples)


def error_body(type: str, message: str, examples: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``{"error": {"type", "message", "examples"}}``: every error answer's shape."""
    return {"error": {"type": type, "message": message, "examples": [dict(e) for e in examples]}}


def _problems(problems: Sequence[ExampleProblem]) -> list[dict[str, Any]]:
    return [{"index": p.index, "field": p.field, "message": (f"aspect {p.aspect!r}: " if p.aspect else "") + p.message}
            for p in problems]


def service_error(exc: BaseException) -> ServiceError:
    """The HTTP error of an exception a request raised (its answer never holds a traceback).

    InvalidExampleError -> 422 with every problem; UnknownTaskError, RequestTooLargeError,
    other ValueError -> 422; a checkpoint the request needs that cannot be found or used ->
    422 ``CheckpointUnavailable``; NonFiniteScoreError -> 422 naming the examples; QueueFullError ->
    429 with Retry-After; DrainingError -> 503; anything else (a checkpoint that does not
    run, the model failing) -> 500 with its one-line message.
    """
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, InvalidExampleError):
        return ServiceError(422, "InvalidExample", f"{len(exc.problems)} problem(s) in the request's examples",
                            _problems(exc.problems))
    if isinstance(exc, NonFiniteScoreError):
        return ServiceError(422, "NonFiniteScore", str(exc),
                            [{"index": i, "field": "value", "message": "the model gave a non-finite score"}
                             for i in exc.indices])
    if isinstance(exc, QueueFullError):
        return ServiceError(429, "QueueFull", str(exc), headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, DrainingError):
        return ServiceError(503, "Draining", str(exc), headers={"Retry-After": "5"})
    if isinstance(exc, (UnknownTaskError, RequestTooLargeError, ValueError)):
        return ServiceError(422, "InvalidRequest", " ".join(str(exc).split()))
    if isinstance(exc, (CheckpointError, CheckpointNotFoundError)):  # the request asks for an evaluator not served
        return ServiceError(422, "CheckpointUnavailable",
                            f"{' '.join(str(exc).split())} (this service cannot score that task/aspect: start it "
                            "with --model NAME=DIR for that evaluator; GET /info lists what is loaded)")
    kind = type(exc).__name__ if isinstance(exc, UniEvalError) else "InternalError"
    return ServiceError(500, kind, " ".join(str(exc).split()) or kind)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Service:
    """The engine side of the HTTP service (module docstring).

    Args:
        engine: the :class:`~unieval_local.engine.Engine` (its settings are ``serve``'s engine flags).
        limits: :class:`~unieval_local.service.core.ServiceLimits`.
        preload: checkpoint names to load before ``/health`` says ready (others load on first use).

    Attributes:
        ready: the preloaded checkpoints are loaded. load_error: why loading failed, if it did.
    """

    def __init__(self, engine: Engine, limits: ServiceLimits | None = None, preload: Sequence[str] = ()):
        self.engine = engine
        self.limits = limits or ServiceLimits()
        self.scheduler = Scheduler(engine)
        self.metrics = ServiceMetrics(self._queued)
        self.worker = BatchingWorker(self.scheduler, self.limits, self._ticked)
        self.preload = list(preload)
        self.ready = False
        self.load_error: str | None = None
        self.runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._runs_lock = threading.Lock()
        self._seen = (0, 0)
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ lifecycle
    def _queued(self) -> int:
        return self.worker.queued()

    def _ticked(self, answered: int, seconds: float) -> None:
        passes, prompts = self.scheduler.passes, self.scheduler.stats.n_queries
        self.metrics.passes.inc(passes - self._seen[0])
        self.metrics.prompts.inc(max(0, prompts - self._seen[1]))
        self._seen = (passes, prompts)

    def load(self) -> None:
        """Load the preloaded checkpoints (in the calling thread), then start the worker;
        :attr:`ready` becomes True, or :attr:`load_error` says why not."""
        try:
            for name in self.preload:
                self.engine.runner(name)
        except Exception as exc:  # noqa: BLE001  reported by /health and the log
            self.load_error = " ".join(str(exc).split())
            raise
        self.worker.start()
        self.ready = True

    @property
    def draining(self) -> bool:
        """Shutting down: new requests get 503."""
        return self.worker.stopping

    def drain(self, timeout: float | None = None) -> bool:
        """Accept nothing new, answer every accepted request, stop the worker (True when it stopped in time)."""
        return self.worker.stop(timeout)

    def health(self) -> tuple[int, dict[str, Any]]:
        """``(200, {"status": "ok"})`` once loaded; 503 with ``loading``, ``draining`` or ``failed``."""
        if self.draining:
            return 503, {"status": "draining"}
        if self.load_error:
            return 503, {"status": "failed", "message": self.load_error}
        if not self.ready:
            return 503, {"status": "loading"}
        return 200, {"status": "ok"}

    def info(self) -> dict[str, Any]:
        """Version, process id (which replica answered), the engine's signature (run settings,
        checkpoints), evaluators and limits (never the key)."""
        from ..registry.evaluators import EVALUATORS

        limits = self.limits
        return {
            "version": __version__,
            "pid": os.getpid(),
            "signature": {"run": self.engine.config.as_dict(), "checkpoints": self.engine.checkpoint_identities()},
            "evaluators": sorted(EVALUATORS),
            "loaded": sorted(self.engine.checkpoint_identities()),
            "limits": {"max_examples_per_query": MAX_EXAMPLES_PER_REQUEST, "max_wait_ms": limits.max_wait_ms,
                       "max_batch_tokens": limits.max_batch_tokens, "max_queued_queries": limits.max_queued_queries,
                       "max_body_mb": limits.max_body_mb, "request_timeout_s": limits.request_timeout_s,
                       "max_runs": limits.max_runs},
        }

    # ------------------------------------------------------------------ running requests
    def _check_open(self) -> None:
        if self.draining:
            raise service_error(DrainingError("the service is shutting down and accepts no new request"))
        if not self.ready:
            status, body = self.health()
            raise ServiceError(503, "NotReady", f"the service is not ready ({body['status']}"
                               f"{': ' + body['message'] if 'message' in body else ''}); GET /health says when")

    def _submit(self, requests: Sequence[Request], body: Any) -> list[Future]:
        self._check_open()
        futures = self.worker.submit(list(requests), estimate_tokens(body))
        self.metrics.queries.inc(len(requests))
        return futures

    async def _wait(self, futures: Sequence[Future], timeout: float | None = None) -> list[Any]:
        """The answers of ``futures`` (504 after the request timeout; the first error raised)."""
        timeout = self.limits.request_timeout_s if timeout is None else timeout
        wrapped = [asyncio.wrap_future(f) for f in futures]
        try:
            done = await asyncio.wait_for(asyncio.gather(*wrapped), timeout)
        except asyncio.TimeoutError:
            for f in futures:
                f.cancel()
            raise ServiceError(504, "Timeout", f"the request was not answered within {timeout:g} s "
                               "(--request-timeout-s); the service is busy or the request is large") from None
        return list(done)

    async def answer(self, requests: Sequence[Request], body: Any) -> list[Any]:
        """Submit ``requests`` (one HTTP request's queries) and wait for their answers."""
        return await self._wait(self._submit(requests, body))

    def _examples(self, data: Sequence[Any], task: str, aspects: Sequence[str]) -> list[Any]:
        from ..pipeline.validate import validate_examples

        resolved = [self.engine.registry.get_aspect(task, a) for a in aspects]
        if not data:
            raise InvalidExampleError([ExampleProblem(0, "data", "the request holds no examples")])
        examples, problems = validate_examples(list(data), resolved)
        if problems:
            raise InvalidExampleError(problems)
        return examples

    async def _values(self, data: Sequence[Any], task: str, aspects: Sequence[str], evidence: bool, body: Any):
        requests = score_requests(self._examples(data, task, aspects), task, aspects, evidence, self.scheduler.policy)
        answers = await self.answer(requests, body)
        values, ev, _ = joined_answers(answers, aspects, evidence)
        return values, ev, answer_languages(answers)

    # ------------------------------------------------------------------ endpoints
    async def unieval(self, config: Mapping[str, Any], data: Sequence[Any]) -> dict[str, Any]:
        """``POST /v1/unieval``: the hosted metric's ``{"overall": {"value"}, "examples": [{"value"}]}``.

        Raises:
            ServiceError: 422 for more than 250 examples, an unknown task or aspect, bad examples
                (every problem named), a non-finite score; 429/503/504/500 as :func:`service_error`.
        """
        from ..wire.hosted import hosted_result

        try:
            if len(data) > MAX_EXAMPLES_PER_REQUEST:
                raise RequestTooLargeError(
                    f"a request holds at most {MAX_EXAMPLES_PER_REQUEST} examples (the hosted metric's limit), got "
                    f"{len(data)}; split it, or POST /v1/score")
            task, aspect = config.get("task"), config.get("evaluation_aspect")
            self.engine.registry.get_aspect(task, aspect)
            values, _, _ = await self._values(data, task, [aspect], False, data)
            bad = np.flatnonzero(~np.isfinite(values[aspect])).tolist()
            if bad:
                raise NonFiniteScoreError(f"the model gave non-finite logits for examples {bad[:20]} "
                                          f"(dtype {self.engine.config.dtype}); serve with --dtype float32", bad)
            return hosted_result(values[aspect])
        except Exception as exc:
            raise service_error(exc) from None

    async def score(self, task: str, aspects: Sequence[str] | str | None, data: Sequence[Any],
                    evidence: bool) -> dict[str, Any]:
        """``POST /v1/score``: :meth:`Scorer.evaluate <unieval_local.Scorer.evaluate>`'s
        :class:`~unieval_local.schema.EvaluationResult` as JSON (any number of examples, in
        queries of at most 250)."""
        try:
            names = self.engine.registry.aspect_names(task, aspects)
            values, ev, languages = await self._values(data, task, names, evidence, data)
            result = evaluation_result(task, names, values, ev, self.engine.signature, self.engine.config.dtype,
                                       languages)
            return result.model_dump(mode="json", exclude_none=True)
        except Exception as exc:
            raise service_error(exc) from None

    async def report(self, records: Any, format: str, options: Any = None) -> Any:
        """One report run (:func:`~unieval_local.reports.plan_report`) through the shared scheduler;
        its :class:`~unieval_local.reports.base.ReportFile`."""
        from ..reports import plan_report

        plan = plan_report(records, format, engine=self.engine, options=options)
        parts = await self.answer(plan.requests, records)
        return plan.finish(parts, warn=False)

    async def summarization_evaluator(self, record: Mapping[str, Any],
                                      enabled_metrics: Sequence[str] | str | None) -> dict[str, Any]:
        """``POST /v1/summarization-evaluator``: the rating evaluator's ``{"summary": {...}}``
        (:class:`~unieval_local.compat.SummarizationEvaluator`'s answer for one summary).

        Raises:
            ServiceError: 422 naming the field (``input``, ``summary``) or the bad metric.
        """
        from ..reports.options import load_options
        from ..reports.rating import RatingConfig
        from ..wire.rating_evaluator import evaluator_error, evaluator_result

        try:
            if isinstance(enabled_metrics, str):
                enabled_metrics = [m.strip() for m in enabled_metrics.split(",") if m.strip()]
            overrides = {"enabled_metrics": list(enabled_metrics)} if enabled_metrics is not None else {}
            config = load_options(RatingConfig, None, overrides)
            out = await self.report([dict(record)], "rating", config)
            row = out.reports[0]
            if row.error is not None:
                err = evaluator_error(row.error)["error"]
                raise ServiceError(422, "InvalidExample", err["message"],
                                   [{"index": 0, "field": err["field"], "message": err["message"]}])
            dumped = row.report.model_dump(mode="json")
            result = evaluator_result(dumped["summary"], config.enabled_metrics)
            if dumped.get("details") is not None:
                result["details"] = dumped["details"]
            return result
        except Exception as exc:
            raise service_error(exc) from None

    async def autoeval(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/autoeval``: the autoeval report of one record (``report --format autoeval``'s row report).

        Raises:
            ServiceError: 422 naming the field of an unusable record.
        """
        try:
            out = await self.report([dict(record)], "autoeval")
            row = out.reports[0]
            if row.error is not None:
                raise ServiceError(422, "InvalidExample", row.error.message,
                                   [{"index": 0, "field": row.error.field, "message": row.error.message}])
            result = row.report.model_dump(mode="json", exclude_none=True)
            if row.notes:
                result["notes"] = list(row.notes)
            return result
        except Exception as exc:
            raise service_error(exc) from None

    # ------------------------------------------------------------------ custom runs
    def _keep_run(self, run: dict[str, Any]) -> None:
        with self._runs_lock:
            self.runs[run["id"]] = run
            while len(self.runs) > self.limits.max_runs:
                finished = next((k for k, r in self.runs.items() if r["status"] in ("completed", "failed")), None)
                if finished is None:
                    break
                del self.runs[finished]

    def get_run(self, run_id: str) -> dict[str, Any]:
        """``GET /runs/{id}``: the run object (404 when unknown or forgotten)."""
        with self._runs_lock:
            run = self.runs.get(run_id)
        if run is None:
            raise ServiceError(404, "NotFound", f"no run {run_id!r}: runs are kept in memory, at most "
                               f"{self.limits.max_runs} (--max-runs), and lost when the service restarts")
        return run

    async def custom_run(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """``POST /runs/custom``: score a hosted custom-run body (the summ metric); ``(status, run object)``.

        The run object: ``{"id", "object": "run", "status", "created_at", "completed_at",
        "is_blocking", "data_collection_id", "threshold", "model_slug", "evaluations": [{"index",
        "threshold", "metrics": [{"metric": "summ", "metric_args", "aggregate", "results": [row
        result ...]}]}], "notes", "error"}``; a row result is ``{"index", "id", **the summ
        report}`` (score 0-100, threshold, passed, eval_metadata with missing_details and
        misaligned_details, ...) or ``{"index", "id", "error": {"field", "message"}}``.
        ``is_blocking`` true (default): 200 with the finished run; false: 202 with the run
        queued, ``GET /runs/{id}`` gives it when done.

        Raises:
            ServiceError: 422 naming ``evaluations[i].metrics[k]`` (an unknown metric) or the
                place of another shape error; 429/503 as :func:`service_error`; 504 for a
                blocking run past the timeout (its id in the message: it can still be polled).
        """
        from ..reports import plan_report
        from ..wire.custom_run import CustomRunError, plan_custom_run

        try:
            groups, notes = plan_custom_run(body, consumed=("is_blocking", "data_collection_id"))
            plans = [plan_report(g.records, "summ", engine=self.engine) if g.records else None for g in groups]
            futures = self._submit([r for p in plans if p is not None for r in p.requests], body)
        except CustomRunError as exc:  # the body's shape: every place named, e.g. evaluations[0].metrics[1]
            raise ServiceError(422, "InvalidRequest", str(exc),
                               [{"index": None, "field": place, "message": message}
                                for place, message in exc.problems]) from None
        except Exception as exc:
            raise service_error(exc) from None
        run = {"id": f"run_{uuid.uuid4().hex}", "object": "run", "status": "running", "created_at": _now(),
               "completed_at": None, "is_blocking": bool(body.get("is_blocking", True)),
               "data_collection_id": body.get("data_collection_id"), "threshold": body.get("threshold"),
               "model_slug": body.get("model_slug"), "evaluations": [], "notes": notes, "error": None}
        self._keep_run(run)
        task = asyncio.ensure_future(self._finish_run(run, body, groups, plans, futures))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if not run["is_blocking"]:
            return 202, dict(run)
        try:
            await asyncio.wait_for(asyncio.shield(task), self.limits.request_timeout_s)
        except asyncio.TimeoutError:
            raise ServiceError(504, "Timeout", f"run {run['id']} was not finished within "
                               f"{self.limits.request_timeout_s:g} s (--request-timeout-s); it goes on: "
                               f"GET /runs/{run['id']} gives it when done") from None
        if run["status"] == "failed":
            raise ServiceError(500, run["error"]["type"], run["error"]["message"])
        return 200, dict(run)

    async def _finish_run(self, run: dict[str, Any], body: Mapping[str, Any], groups: list, plans: list,
                          futures: list[Future]) -> None:
        try:
            parts = await self._wait(futures, timeout=float("inf"))
        except Exception as exc:  # noqa: BLE001  the run fails, its object says why
            err = service_error(exc)
            run.update(status="failed", completed_at=_now(), error={"type": err.type, "message": err.message})
            return
        at, evaluations = 0, {}
        for g, plan in zip(groups, plans):
            ev = evaluations.setdefault(g.evaluation, {"index": g.evaluation, "threshold": g.threshold, "metrics": []})
            results, aggregate = [], None
            if plan is not None:
                n = len(plan.requests)
                out = plan.finish(parts[at:at + n], warn=False)
                at += n
                aggregate = out.aggregate
                for r in out.reports:
                    head = {"index": r.index, "id": r.id}
                    if r.error is not None:  # in the custom run's names: output, input
                        error = rename_fields(r.error, CUSTOM_RUN_NAMES)
                        results.append({**head, "error": error.model_dump()})
                    else:
                        results.append({**head, **r.report.model_dump(mode="json")})
                run["notes"] = list(dict.fromkeys(run["notes"] + out.notes))
            ev["metrics"].append({"metric": "summ", "metric_args": g.metric_args, "aggregate": aggregate,
                                  "results": results})
        run.update(evaluations=[evaluations[e] for e in sorted(evaluations)], status="completed",
                   completed_at=_now())
