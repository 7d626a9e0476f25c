"""The custom runs of the service (``POST /runs/custom``, ``GET /runs/{id}``): a mixin of
:class:`~unieval_local.service.handlers.Service` (it uses the service's run store, preparation
threads, scheduler and notes). A blocking run is answered when it is done; a non-blocking one is
answered 202 as soon as its body's shape is checked, and is planned, admitted and scored in the
background (a refusal fails the run: its object says why); a drain (SIGTERM) waits for it."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

from .errors import ServiceError
from .runs import new_run, now, run_evaluations
from .work import Answer, Reader, Work

__all__ = ["RUNS_RETRY_AFTER_S", "CustomRuns"]

#: The Retry-After (seconds) of a non-blocking custom run refused because ``--max-runs`` runs are
#: kept and all are still running.
RUNS_RETRY_AFTER_S = 5


class CustomRuns:
    """The custom-run endpoints of :class:`~unieval_local.service.handlers.Service` (module docstring)."""

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

        def shape() -> tuple[dict[str, Any], list, list[str]]:
            body = read()
            # data_collection_id is echoed in the run object but changes nothing: noted as ignored when given,
            # as the Python API and the CLI note it (read_custom_run)
            consumed = ("is_blocking",) if body.get("data_collection_id") is not None else \
                ("is_blocking", "data_collection_id")
            groups, run_notes = plan_custom_run(body, consumed=consumed)
            return body, groups, run_notes

        try:
            self._check_open()
            (body, groups, run_notes), before = await self.off_loop(shape)
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
        mode = {"X-UniEval-Long-Input": self.report_long_input}
        if not run["is_blocking"]:  # accepted: planned, admitted and scored in the background
            self._background(self._run_in_background(run, kept, groups))
            return Answer(dict(run), run["notes"], 202, {"Location": f"/runs/{run['id']}", **mode})
        try:
            works, merged, futures = await self._start_run(groups)
        except Exception as exc:
            self.runs.forget(run["id"])
            raise self.error(exc) from None
        task = self._background(self._finish_run(run, kept, groups, works, merged, futures))
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

    def _background(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` as a task the service keeps until it ends (:meth:`finish_background` waits for them)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def finish_background(self, timeout: float | None = None) -> None:
        """Wait for the custom runs accepted and still running (a drain: SIGTERM answers them too)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    async def _start_run(self, groups: list) -> tuple[list[Work | None], Work, list[Future]]:
        """Plan a run's reports off the loop and submit them (admission by cost included)."""
        def prepare() -> list[Work | None]:
            return [self._report_work(g.records, "summ", None, lambda out: out) if g.records else None for g in groups]

        works, _ = await self.off_loop(prepare)
        live = [w for w in works if w is not None]
        merged = Work([r for w in live for r in w.requests], [p for w in live for p in w.prepared],
                       sum(w.tokens for w in live), lambda answers: answers)
        return works, merged, self._submit(merged)

    async def _run_in_background(self, run: dict[str, Any], kept: bool, groups: list) -> None:
        """A non-blocking run after its 202: planned, admitted and scored; a refusal (a request too
        costly, a full queue, draining) fails the run, its object says why."""
        try:
            works, merged, futures = await self._start_run(groups)
        except Exception as exc:  # noqa: BLE001  the run fails, its object says why
            err = self.error(exc)
            run.update(status="failed", completed_at=now(), error={"type": err.type, "message": err.message})
            return
        await self._finish_run(run, kept, groups, works, merged, futures)

    async def _finish_run(self, run: dict[str, Any], kept: bool, groups: list, works: list[Work | None],
                          merged: Work, futures: list[Future]) -> None:
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
