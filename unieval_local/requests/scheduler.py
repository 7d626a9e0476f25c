"""The Scheduler: many requests, scored in micro-batches, each request answered as soon as its
last query is scored.

Every entry point (``Scorer.score``/``evaluate``, batch runs, the report formats, the HTTP
service) hands its :class:`~unieval_local.requests.base.Request` objects to a
:class:`Scheduler`. A request's stage is planned when it enters (:meth:`Engine.plan
<unieval_local.engine.Engine.plan>`: its prompts), and its distinct prompts join one pool per
checkpoint, where a prompt that several requests need is one entry (scored once). Each
:meth:`Scheduler.step` runs ONE micro-batch: about one forward batch of prompts of one
checkpoint, chosen as below, scored by that checkpoint's runner; then every request stage whose
last prompt was in it is folded (:meth:`Engine.fold <unieval_local.engine.Engine.fold>`) and
advanced: it yields its next stage (planned and pooled in turn: summ, autoeval) or its answer.

Which prompts a micro-batch holds (the fairness rule):

* Requests are ordered shortest first: by the prompts they still wait for, discounted by age
  (halved every :attr:`Scheduler.ageing` micro-batches since the stage entered), ties by arrival.
  Shortest-remaining-first gives the lowest mean latency for a mix of sizes, and equal requests
  (32 clients of 4 examples; the records of a batch run) finish in arrival order, earlier first;
  the age discount means that a large request is never starved by a stream of small ones.
* The first request of that order leads the micro-batch, except that a request that led the
  previous micro-batch gives the lead to a smaller request that is waiting: a large request never
  holds the worker for more than one micro-batch while smaller ones wait (interleaving).
* A window of the waiting prompts is taken in that order, the leader's first and then those of
  the requests of its size class (waiting for at most :data:`SIZE_CLASS` times the leader's
  remaining queries: a small request's batch is not filled up with a large one's), until it holds
  :attr:`Scheduler.window` forward batches' worth of tokens (2 by default); it is sorted by token
  length (:meth:`Runner.count`) and cut into batches of at most ``batch_tokens`` padded tokens
  (:func:`~unieval_local.models.batching.next_batch_end`); the batch holding the leader's first
  prompt runs. A small window keeps requests finishing in the order above (a window of every
  waiting prompt would advance all of them a little each time, and finish them all at the end);
  sorting inside it keeps each batch of prompts of similar length, and the next step's window
  sees the requests that arrived meanwhile.

Nothing here depends on the clock: the same submissions give the same micro-batches, so
repeated offline runs are byte-identical. A micro-batch shares its batch with other prompts than
a one-shot run would: float32 scores move in their last digits (~1e-7), never more.

Failures stay with their requests: a request whose generator raises, or whose strict stage finds
planning problems, fails alone; a checkpoint that does not load fails only the requests that wait
for its prompts; a micro-batch the model fails on is split by request, halving, until the request
that makes it fail is found (it alone fails; the others are scored). A cancelled future (a
client that timed out or went away) drops its request's prompts that no other request waits for.

Answers come back as :class:`concurrent.futures.Future` objects, so a thread that submits (an
HTTP handler) can wait for the answer while another thread steps.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from .. import notes
from ..engine import Engine, JobResult, RunStats
from .base import Prepared, Request, RequestPolicy, Stage, StageResult

__all__ = ["Prepared", "RequestPolicy", "SIZE_CLASS", "Scheduler"]

#: A micro-batch led by a request holds the queries of the requests waiting for at most this many
#: times the leader's remaining queries (and the leader's own).
SIZE_CLASS = 4



@dataclass(eq=False)
class _Entry:
    """One pooled prompt: the requests waiting for it and its token length (once counted)."""

    waiters: list[Prepared] = field(default_factory=list)
    length: int | None = None
    spans: tuple = ()  # the prompt's fields, for the one truncation count (Engine.count_truncated)


class Scheduler:
    """Scores requests in micro-batches (see the module docstring).

    Args:
        engine: the :class:`~unieval_local.engine.Engine` it runs on.
        policy: the :class:`RequestPolicy` entry points split their input with (default 250).
        window: forward batches' worth of tokens (``batch_tokens`` each) of the waiting prompts, in
            priority order, that one micro-batch is chosen from (sorted by length inside it): 2 keeps
            requests finishing in order while batches stay of prompts of similar length.
        mix: micro-batches may hold several requests' prompts (False: the leader's only, the
            service's ``--max-wait-ms 0``).
        memo: scored prompts remembered per checkpoint (by SHA-256), so a prompt that comes back
            after its first request finished is not scored again (0: none).
        ageing: micro-batches after which a waiting request's size counts half.
        step_seconds: a micro-batch's target duration (None: none): where the model is slow
            (a CPU), its token budget is cut to what it scores in about this long (the measured
            seconds per padded token), so a request that arrives waits at most about this long for
            the micro-batch in progress (the HTTP service: ``--max-step-ms``). A batch run sets
            none: it has no one waiting, and full batches are its fastest.

    Attributes:
        stats: the counters of the model's work: distinct queries scored, those truncated (by
            checkpoint and field), cache hits and misses, model loads
            (:class:`~unieval_local.engine.RunStats`).
        batches: micro-batches run so far.
        real_tokens, padded_tokens: the tokens of the prompts of those micro-batches, and the
            padded tokens (rows x longest) they took: ``real / padded`` is the padding efficiency.

    Thread safety: :meth:`prepare` and :meth:`submit` may be called from any thread;
    :meth:`step` from one thread at a time (it holds a lock while it runs).
    """

    def __init__(self, engine: Engine, policy: RequestPolicy | None = None, *, window: float = 2.0, mix: bool = True,
                 memo: int = 65536, ageing: float = 32.0, step_seconds: float | None = None):
        self.engine = engine
        self.policy = policy or RequestPolicy()
        self.window, self.mix, self.memo_size, self.ageing = max(1.0, float(window)), bool(mix), max(0, int(memo)), ageing
        self.step_seconds = step_seconds
        self.stats = RunStats()
        self.batches = 0
        self.real_tokens = self.padded_tokens = 0
        self._per_token: dict[str, float] = {}  # seconds per padded token of each checkpoint (moving average)
        self._last_padded = 0
        self._lock = threading.RLock()
        self._work = threading.Condition(self._lock)
        self._step_lock = threading.Lock()
        self._new: list[Prepared] = []
        self._active: list[Prepared] = []
        self._pool: dict[str, dict[str, _Entry]] = {}
        self._memo: dict[str, OrderedDict[bytes, tuple[float, int]]] = {}
        self._seq = 0
        self._last_leader: Prepared | None = None

    # ------------------------------------------------------------------ submitting
    def prepare(self, request: Request) -> Prepared:
        """Start ``request`` and plan its first stage in the calling thread (the service does this
        off its event loop, to cost the request before admitting it); submit it with :meth:`submit`.

        Raises:
            Whatever the request raises while it plans its first stage (an invalid example ...),
            or the engine while planning it (a checkpoint ``fit``/``chunk`` needs).
        """
        p = request if isinstance(request, Prepared) else Prepared(request)
        if p.generator is not None or p.answered:
            return p
        with notes.collecting(p.request.notes):
            p.generator = p.request.stages(self.engine)
            try:
                self._set_stage(p, next(p.generator))
            except StopIteration as stop:
                p.answer, p.answered = stop.value, True
                return p
        p.cost = sum(len(pj.plan.prompts) for pj in p.planned.values()) + max(0, int(p.request.later_queries))
        return p

    def submit(self, request: Request | Prepared) -> Future:
        """Queue ``request`` (planned at the next :meth:`step` unless :meth:`prepare` did it); its
        answer (or error) arrives in the returned future. Cancelling the future drops its work."""
        p = request if isinstance(request, Prepared) else Prepared(request)
        with self._work:
            self._seq += 1
            p.seq = self._seq
            self._new.append(p)
            self._work.notify_all()
        return p.future

    def pending(self) -> int:
        """Requests submitted and not yet answered."""
        with self._lock:
            return len(self._new) + len(self._active)

    def queued_queries(self) -> int:
        """Prompts waiting in the pool (distinct per checkpoint), not yet scored."""
        with self._lock:
            return sum(len(table) for table in self._pool.values())

    def partial(self) -> float:
        """How much of the requests waiting for queries is done: per request, the share of its
        current stage's queries already scored, summed (progress between answers)."""
        with self._lock:
            return sum(1.0 - p.remaining / p.pooled for p in self._active if p.pooled and not p.done)

    def partial_cost(self) -> float:
        """:meth:`partial` in cost units: per request waiting for queries, its
        :attr:`~unieval_local.requests.base.Prepared.cost` times the share of its current stage's
        queries already scored, summed (the work done on requests not yet answered, in the units
        the service admits them by)."""
        with self._lock:
            return sum(p.cost * (1.0 - p.remaining / p.pooled) for p in self._active if p.pooled and not p.done)

    def wait_for_work(self, timeout: float | None = None) -> bool:
        """Block until a request is pending (True) or ``timeout`` seconds pass (False)."""
        with self._work:
            return self._work.wait_for(lambda: bool(self._new or self._active), timeout)

    # ------------------------------------------------------------------ running
    def run(self, requests: Iterable[Request], on_batch: Callable[[int, int], None] | None = None) -> list[Future]:
        """Submit ``requests`` and step until every one is answered; their futures, in order
        (each holds an answer or an exception). ``on_batch(done, total)`` after each micro-batch:
        prompts scored so far by this call and prompts known."""
        futures = [self.submit(r) for r in requests]
        bar, start = None, self.stats.n_queries
        try:
            while not all(f.done() for f in futures):
                self.step(on_batch)
                if self.engine.settings.progress is not False:  # queries scored, of those known
                    done = self.stats.n_queries - start
                    if bar is None:
                        from ..progress import Progress

                        bar = Progress(None, enabled=self.engine.settings.progress, what="queries")
                    bar.set_total(done + self.queued_queries())
                    bar.set(done)
        finally:
            if bar is not None:
                bar.close()
        return futures

    def answer(self, request: Request, on_batch: Callable[[int, int], None] | None = None) -> Any:
        """Run one request to its answer.

        Raises:
            Whatever the request raised, or what failed its micro-batches.
        """
        return self.run([request], on_batch)[0].result()

    def answers(self, requests: Sequence[Request], on_batch: Callable[[int, int], None] | None = None) -> list[Any]:
        """Run ``requests`` together; their answers in order.

        Raises:
            The first failed request's exception (in request order).
        """
        return [f.result() for f in self.run(requests, on_batch)]

    def step(self, on_batch: Callable[[int, int], None] | None = None) -> int:
        """Enter the requests submitted since the last step, then run one micro-batch (module
        docstring) and deliver its scores.

        Args:
            on_batch: called after the micro-batch with ``(prompts scored so far, prompts known)``.

        Returns:
            The number of requests answered (or failed) in this step.

        Raises:
            KeyboardInterrupt (and :class:`~unieval_local.errors.Terminated`): passed on; every
            request not yet answered fails with it first.
        """
        with self._step_lock:
            engine = self.engine
            loads, (hits, misses) = engine.model_loads, engine.cache_counts()
            try:
                finished = self._enter_new()
                chosen = self._choose()
                if chosen is not None:
                    finished += self._run_batch(*chosen)
            except Exception:  # a bug of ours: nothing is left waiting forever
                self._fail_all(RuntimeError("the scheduler failed; see the log"))
                raise
            except BaseException as exc:  # Ctrl-C, SIGTERM: fail what waits, then pass it on
                self._fail_all(exc)
                raise
            finally:  # the models loaded and the cache's answers of this step (planning included)
                h, m = engine.cache_counts()
                self.stats.cache_hits += h - hits
                self.stats.cache_misses += m - misses
                self.stats.model_loads += engine.model_loads - loads
            if chosen is not None and on_batch is not None:
                on_batch(self.stats.n_queries, self.stats.n_queries + self.queued_queries())
            return finished

    # ------------------------------------------------------------------ entering stages
    def _enter_new(self) -> int:
        with self._lock:
            new, self._new = self._new, []
        finished = 0
        for p in new:
            if p.future.cancelled():
                self._close(p)
                finished += 1
                continue
            try:
                self.prepare(p)
            except Exception as exc:  # this request's input or checkpoint: it fails alone
                finished += self._fail(p, exc)
                continue
            if p.answered:
                finished += self._deliver(p)
                continue
            finished += self._pool_stage(p)
        return finished

    def _set_stage(self, p: Prepared, stage: Any) -> None:
        """Plan ``stage`` (the request's next): its jobs under its own names."""
        if not isinstance(stage, Stage):
            raise TypeError(f"a request must yield Stage objects, got {type(stage).__name__}")
        p.stage = stage
        p.planned = self.engine.plan(stage.jobs)

    def _pool_stage(self, p: Prepared) -> int:
        """Put a planned stage's prompts in the pool (or answer it at once: a refused strict
        stage, or one whose prompts are all known); the number of requests this finished."""
        if p.stage.strict and any(pj.problems for pj in p.planned.values()):
            refused = {name: JobResult(problems=list(pj.problems)) for name, pj in p.planned.items()}
            return self._advance(p, StageResult(refused, RunStats(), refused=True))
        todo: dict[str, dict[str, None]] = {}
        spans: dict[str, Any] = {}
        for pj in p.planned.values():
            todo.setdefault(pj.job.checkpoint, {}).update(dict.fromkeys(pj.plan.prompts))
            spans.update((q, info.spans) for q, info in zip(pj.plan.prompts, pj.plan.queries))
        p.todo, p.scored, p.remaining, p.entered = {}, {}, 0, self.batches
        cached = {ckpt: self._cached(ckpt, prompts) for ckpt, prompts in todo.items()}
        with self._lock:
            for ckpt, prompts in todo.items():
                pool, memo = self._pool.setdefault(ckpt, {}), self._memo.get(ckpt)
                known = p.scored.setdefault(ckpt, {})
                wait = p.todo.setdefault(ckpt, {})
                for prompt in prompts:
                    hit = memo.get(_digest(prompt)) if memo is not None else None
                    hit = hit if hit is not None else cached[ckpt].get(prompt)
                    if hit is not None:
                        known[prompt] = hit
                        continue
                    entry = pool.get(prompt)
                    if entry is None:
                        entry = pool[prompt] = _Entry(spans=tuple(spans[prompt]))
                    entry.waiters.append(p)
                    wait[prompt] = None
                p.remaining += len(wait)
            p.pooled = p.remaining
            if p.remaining:
                self._active.append(p)
                return 0
        return self._finish_stage(p)

    def _cached(self, ckpt: str, prompts: dict[str, None]) -> dict[str, tuple[float, int]]:
        """What the score cache holds of ``prompts`` (nothing without a cache, or before the
        checkpoint's runner is loaded; those are answered in their micro-batch instead)."""
        runner = self.engine.loaded_runner(ckpt)
        if runner is None or not prompts:
            return {}
        with self._lock:  # the pool's prompts are asked for already
            pool = self._pool.get(ckpt, {})
            fresh = [q for q in prompts if q not in pool]
        return runner.lookup(fresh, max_length=self.engine.max_length(ckpt)) if fresh else {}

    def _finish_stage(self, p: Prepared) -> int:
        """Fold a stage whose prompts are all scored and advance its request."""
        with notes.collecting(p.request.notes):
            try:
                results, stats = self.engine.fold(p.planned, p.scored, evidence=p.stage.evidence)
            except Exception as exc:
                return self._fail(p, exc)
        return self._advance(p, StageResult(results, stats))

    def _advance(self, p: Prepared, got: StageResult) -> int:
        """Send ``got`` to the request: it yields its next stage (pooled) or answers."""
        with notes.collecting(p.request.notes):
            try:
                self._set_stage(p, p.generator.send(got))
            except StopIteration as stop:
                p.answer, p.answered = stop.value, True
                return self._deliver(p)
            except Exception as exc:
                return self._fail(p, exc)
        return self._pool_stage(p)

    # ------------------------------------------------------------------ micro-batches
    def _order(self) -> list[Prepared]:
        """The waiting requests, shortest (age-discounted) first, ties by arrival."""
        now = self.batches
        return sorted((p for p in self._active if p.remaining and not p.done),
                      key=lambda p: (p.remaining * 0.5 ** ((now - p.entered) / self.ageing), p.seq))

    def _choose(self) -> tuple[str, list[str]] | None:
        """The checkpoint and prompts of the next micro-batch, or None when nothing waits."""
        self._drop_cancelled()
        with self._lock:
            order = self._order()
            if not order:
                return None
            leader = order[0]
            if leader is self._last_leader:  # it led the last one: a smaller waiting request leads now
                smaller = [p for p in order[1:] if p.remaining < leader.remaining]
                if smaller:
                    leader = smaller[0]
            self._last_leader = leader
            ckpt = next(c for c, prompts in leader.todo.items() if prompts)
            # the leader's batch is shared with requests of its size class only: a small request's
            # batch is not filled up with a large one's queries (its latency would be the large
            # batch's); a large leader takes the smaller ones along
            others = [q for q in order if q is not leader and q.remaining <= SIZE_CLASS * leader.remaining]
            queue = [list(p.todo.get(ckpt, ())) for p in [leader] + (others if self.mix else [])]
        try:
            runner = self.engine.runner(ckpt)
        except Exception:  # noqa: BLE001  reported to the requests that need it by _run_batch
            return ckpt, queue[0][:1]
        return ckpt, self._batch_of(ckpt, runner, queue)

    def _batch_of(self, ckpt: str, runner: Any, queue: list[list[str]]) -> list[str]:
        """The next micro-batch of ``ckpt``: a window of the waiting prompts in priority order
        (``queue``: each request's, the leader's first) holding :attr:`window` batches' worth of
        tokens, sorted by length and cut into batches under the runner's budgets; the batch that
        holds the leader's first prompt."""
        from ..models.batching import next_batch_end, sort_by_length

        budget = int(runner.batch_tokens or self.engine.batch_tokens)
        if self.step_seconds and ckpt in self._per_token:  # what the model scores in step_seconds
            budget = max(1, min(budget, int(self.step_seconds / self._per_token[ckpt])))
        cells, max_length = runner.max_cells, self.engine.max_length(ckpt)
        window: dict[str, int] = {}
        tokens = 0
        for prompts in queue:
            for at in range(0, len(prompts), 64):  # counted as they are needed (64 at a time)
                part = [q for q in prompts[at:at + 64] if q not in window]
                for q, n in zip(part, self._lengths(ckpt, runner, part, max_length)):
                    window[q] = n
                    tokens += n
                    if tokens >= self.window * budget:
                        break
                if tokens >= self.window * budget:
                    break
            if tokens >= self.window * budget:
                break
        prompts, lengths = list(window), list(window.values())
        order = sort_by_length(lengths)
        start = 0
        while start < len(order):
            end = next_batch_end(order, lengths, start, budget, max_cells=cells)
            if 0 in order[start:end]:
                batch = order[start:end]
                self._last_padded = len(batch) * max(lengths[k] for k in batch)
                self.real_tokens += sum(lengths[k] for k in batch)
                self.padded_tokens += self._last_padded
                return [prompts[k] for k in batch]
            start = end
        return prompts[:1]

    def _lengths(self, ckpt: str, runner: Any, prompts: list[str], max_length: int) -> list[int]:
        """Each pooled prompt's token length (cut at ``max_length``), counted once (on its pool entry)."""
        with self._lock:
            entries = [self._pool[ckpt][q] for q in prompts]
        unknown = [k for k, e in enumerate(entries) if e.length is None]
        if unknown:
            for k, n in zip(unknown, runner.count([prompts[k] for k in unknown])):
                entries[k].length = min(int(n), max_length)
        return [e.length for e in entries]

    def _run_batch(self, ckpt: str, prompts: list[str]) -> int:
        """Score one micro-batch and deliver it; the number of requests finished."""
        try:
            runner = self.engine.runner(ckpt)
        except Exception as exc:  # the checkpoint does not load: only the requests that need it fail
            with self._lock:
                waiting = list(dict.fromkeys(w for e in self._pool.get(ckpt, {}).values() for w in e.waiters))
            return sum(self._fail(p, exc) for p in waiting)
        started = time.perf_counter()
        finished = self._score(ckpt, runner, prompts)
        if self._last_padded:  # the model's pace, for step_seconds (a moving average over ~8 batches)
            pace = (time.perf_counter() - started) / self._last_padded
            self._per_token[ckpt] = pace if ckpt not in self._per_token else 0.875 * self._per_token[ckpt] + 0.125 * pace
            self._last_padded = 0
        self.batches += 1
        return finished

    def _score(self, ckpt: str, runner: Any, prompts: list[str]) -> int:
        """Score ``prompts``; when the model fails on them, split them by request (halves) until
        the request whose prompts fail is found: it fails alone."""
        try:
            p_yes, n_tokens = runner.score(prompts, max_length=self.engine.max_length(ckpt))
        except Exception as exc:
            with self._lock:
                pool = self._pool.get(ckpt, {})
                owners = list(dict.fromkeys(w for prompt in prompts if prompt in pool for w in pool[prompt].waiters))
                half = set(owners[:len(owners) // 2])
                first = [q for q in prompts if q in pool and any(w in half for w in pool[q].waiters)]
            if len(owners) <= 1 or len(prompts) == 1:  # this request, or this prompt (all who wait for it)
                return sum(self._fail(p, exc) for p in owners)
            taken = set(first)
            rest = [q for q in prompts if q not in taken]
            if not first or not rest:  # every prompt is shared across the halves: halve the prompts
                first, rest = prompts[:len(prompts) // 2], prompts[len(prompts) // 2:]
            failed = self._score(ckpt, runner, first)
            with self._lock:  # what the failures left someone waiting for
                rest = [q for q in rest if q in self._pool.get(ckpt, {})]
            return failed + (self._score(ckpt, runner, rest) if rest else 0)
        self.stats.n_queries += len(prompts)
        max_length = self.engine.max_length(ckpt)
        with self._lock:
            pool = self._pool.get(ckpt, {})
            cut = [(q, pool[q].spans) for q, n in zip(prompts, n_tokens.tolist()) if n > max_length and q in pool]
        self.engine.count_truncated(ckpt, cut, self.stats)
        done: list[Prepared] = []
        with self._lock:
            pool = self._pool.get(ckpt, {})
            memo = self._memo.setdefault(ckpt, OrderedDict()) if self.memo_size else None
            for prompt, v, n in zip(prompts, p_yes.tolist(), n_tokens.tolist()):
                entry = pool.pop(prompt, None)
                if memo is not None:
                    memo[_digest(prompt)] = (v, n)
                    if len(memo) > self.memo_size:
                        memo.popitem(last=False)
                for w in entry.waiters if entry is not None else ():
                    if w.done or prompt not in w.todo.get(ckpt, {}):
                        continue
                    del w.todo[ckpt][prompt]
                    w.scored[ckpt][prompt] = (v, n)
                    w.remaining -= 1
                    if not w.remaining:
                        done.append(w)
            for w in done:
                self._active.remove(w)
        return sum(self._finish_stage(w) for w in sorted(done, key=lambda w: w.seq))

    # ------------------------------------------------------------------ endings
    def _unpool(self, p: Prepared) -> None:
        """Take ``p`` out of the pool: prompts no other request waits for are dropped."""
        with self._lock:
            for ckpt, prompts in p.todo.items():
                pool = self._pool.get(ckpt, {})
                for prompt in prompts:
                    entry = pool.get(prompt)
                    if entry is None:
                        continue
                    entry.waiters = [w for w in entry.waiters if w is not p]
                    if not entry.waiters:
                        del pool[prompt]
            p.todo, p.remaining = {}, 0
            if p in self._active:
                self._active.remove(p)
            if self._last_leader is p:
                self._last_leader = None

    def _drop_cancelled(self) -> None:
        with self._lock:
            gone = [p for p in self._active if p.future.cancelled()]
        for p in gone:
            self._close(p)

    def _close(self, p: Prepared) -> None:
        p.done = True
        self._unpool(p)
        if p.generator is not None:
            p.generator.close()

    def _deliver(self, p: Prepared) -> int:
        self._close(p)
        try:
            p.future.set_result(p.answer)
        except InvalidStateError:  # cancelled meanwhile
            pass
        return 1

    def _fail(self, p: Prepared, exc: BaseException) -> int:
        if p.done:
            return 0
        self._close(p)
        try:
            p.future.set_exception(exc)
        except InvalidStateError:
            pass
        return 1

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            everyone = self._new + list(self._active)
            self._new = []
        for p in everyone:
            self._fail(p, exc)


def _digest(prompt: str) -> bytes:
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).digest()
