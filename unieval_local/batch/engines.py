"""Where a batch run's requests are scored: in this process (:class:`LocalBatchEngine`, through
the run's :class:`~unieval_local.requests.scheduler.Scheduler`) or on one Ray Data pipeline of
scorer actors (:class:`RayBatchEngine`), registered by name in :data:`BATCH_ENGINES`. Both send
:class:`~unieval_local.requests.score.RecordsRequest` objects; the driver reads the input and
writes the output itself."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np

from ..config import MAX_EXAMPLES_PER_REQUEST
from ..engine import Engine, RunStats
from ..errors import CheckpointError, CheckpointNotFoundError, MissingExtraError, ModelRuntimeError
from ..records import Record
from ..requests.scheduler import Scheduler
from ..requests.score import ChunkResult, RecordsRequest

__all__ = ["BATCH_ENGINES", "BatchEngine", "LocalBatchEngine", "RayBatchEngine", "make_batch_engine"]


# ----------------------------------------------------------------------------- batch engines
class BatchEngine(Protocol):
    """Where a batch run's requests are scored. Registered by name in :data:`BATCH_ENGINES`;
    each takes the run's :class:`~unieval_local.engine.Engine` and its own options."""

    name: str

    def check(self, checkpoints: Sequence[str]) -> None:
        """Fail early (before any output is written) when a checkpoint is unusable."""
        ...

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int], None] | None = None, *, per_record: bool = False,
            skip_missing: bool = False) -> Iterator[ChunkResult]:
        """One :class:`ChunkResult` per request, in order (with ``per_record``, where the engine
        can: one per record, each as soon as it is scored, in input order); ``on_batch(done,
        total)`` after each micro-batch where the engine can (queries scored, queries known);
        ``skip_missing``: the aspects are a set (:class:`~unieval_local.requests.score.RecordsRequest`)."""
        ...

    def completed(self) -> list[ChunkResult]:
        """After :meth:`map` was interrupted: the results it had finished and not yet given
        (a batch run writes them before it stops), in input order."""
        ...

    def partial(self) -> float:
        """Records' worth of work done and not yet given by :meth:`map` (progress between
        records; 0 where the engine cannot tell)."""
        ...

    def forward_passes(self) -> int | None:
        """Micro-batches the model ran in this process so far (None where the engine cannot
        tell: Ray's actors count their own)."""
        ...

    def close(self) -> None:
        """Release what the engine holds (a Ray instance it started)."""
        ...


class LocalBatchEngine:
    """Scores requests in this process with the run's engine, through one
    :class:`~unieval_local.requests.scheduler.Scheduler`: with ``per_record``, every record is a
    request of its own, ``lookahead`` records are in the scheduler at once (their prompts share
    micro-batches, and one that repeats is scored once), and each record is given back as soon as
    its last query is scored (in input order): an interrupted run keeps every record that was
    complete.

    Args:
        engine: the run's :class:`~unieval_local.engine.Engine`.
        lookahead: records in the scheduler at once (default 500: two requests of 250).
    """

    name = "local"

    def __init__(self, engine: Engine, lookahead: int = 2 * MAX_EXAMPLES_PER_REQUEST):
        self.engine = engine
        self.scheduler = Scheduler(engine)
        self.lookahead = max(1, int(lookahead))
        self._inflight: deque[Future] = deque()

    def check(self, checkpoints: Sequence[str]) -> None:
        """Load each checkpoint's runner now (this process uses them)."""
        for name in checkpoints:
            self.engine.runner(name)

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int], None] | None = None, *, per_record: bool = False,
            skip_missing: bool = False) -> Iterator[ChunkResult]:
        """Each record a request of its own (the scheduling, and so the numbers, are the same
        whether records or requests are given back); given back one by one (``per_record``) or
        joined per request of the input."""
        if per_record:
            yield from self._records(requests, task, aspects, evidence, on_batch, skip_missing)
            return
        sizes: list[int] = []

        def sized() -> Iterator[list[Record]]:
            for chunk in requests:
                sizes.append(len(chunk))
                yield chunk

        parts: list[ChunkResult] = []
        for res in self._records(sized(), task, aspects, evidence, on_batch, skip_missing):
            parts.append(res)
            if len(parts) == sizes[0]:
                sizes.pop(0)
                yield _joined(parts)
                parts = []

    def _records(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
                 on_batch: Callable[[int, int], None] | None, skip_missing: bool = False) -> Iterator[ChunkResult]:
        records = (rec for chunk in requests for rec in chunk)
        inflight, exhausted = self._inflight, False
        while True:
            while not exhausted and len(inflight) < self.lookahead:
                rec = next(records, None)
                if rec is None:
                    exhausted = True
                    break
                inflight.append(self.scheduler.submit(RecordsRequest([rec], task, aspects, evidence,
                                                                             skip_missing)))
            while inflight and inflight[0].done():
                yield inflight.popleft().result()
            if not inflight:
                if exhausted:
                    return
                continue  # every record in flight was answered at once (remembered queries): take more
            self.scheduler.step(on_batch)

    def completed(self) -> list[ChunkResult]:
        """The records finished and not yet given by an interrupted :meth:`map`."""
        return [f.result() for f in self._inflight if f.done() and not f.cancelled() and f.exception() is None]

    def partial(self) -> float:
        """Records finished and waiting for their turn in input order, plus the scored share of
        those the scheduler holds."""
        return sum(1 for f in self._inflight if f.done()) + self.scheduler.partial()

    def model_stats(self) -> RunStats:
        """What the model did in this process: distinct queries scored, cache hits and misses."""
        return self.scheduler.stats

    def forward_passes(self) -> int:
        """Micro-batches the scheduler ran (:attr:`Scheduler.batches
        <unieval_local.requests.scheduler.Scheduler.batches>`)."""
        return self.scheduler.batches

    def close(self) -> None:
        pass


def _joined(parts: Sequence[ChunkResult]) -> ChunkResult:
    """The records' results of one request, as one :class:`ChunkResult`."""
    stats = RunStats()
    for part in parts:
        stats += part.stats
    return ChunkResult([line for part in parts for line in part.lines], stats,
                       [reason for part in parts for reason in part.reasons])


class _RayScorerActor:
    """One Ray actor: one :class:`~unieval_local.engine.Engine` (its model loaded once, on the
    first request) scoring whole requests."""

    def __init__(self, settings: dict, task: str, aspects: list[str], evidence: bool, skip_missing: bool = False):
        self.scheduler = Scheduler(Engine(**settings))
        self.task, self.aspects, self.evidence, self.skip_missing = task, aspects, evidence, skip_missing

    def __call__(self, batch: dict) -> dict:
        out = []
        for payload in batch["request"]:
            chunk = [Record(**r) for r in json.loads(payload)]
            before = self.scheduler.stats
            before = (before.cache_hits, before.cache_misses, before.model_loads)
            answer = self.scheduler.answer(RecordsRequest(chunk, self.task, self.aspects, self.evidence,
                                                                   self.skip_missing))
            now = self.scheduler.stats  # this request's share of the model's work: loads and cache counts
            answer.stats.cache_hits += now.cache_hits - before[0]
            answer.stats.cache_misses += now.cache_misses - before[1]
            answer.stats.model_loads += now.model_loads - before[2]
            out.append(json.dumps(answer.to_dict()))
        return {"rid": batch["rid"], "result": np.array(out, dtype=object)}


class RayBatchEngine:
    """Scores requests on ONE Ray Data pipeline for the whole run: ``map_batches`` over a
    pool of ``actors`` scorer actors, each building its own engine from the run's settings
    and loading the model once. Results stream back in request order
    (``preserve_order``); the driver loads no model (it only checks the checkpoint files).

    Args:
        engine: the run's engine (its ``settings`` build the actors' engines).
        actors: scorer actors (``--ray-actors``), >= 1.
        gpus_per_actor: GPUs per actor (``--gpus-per-actor``; 0 on CPU).
        address: an existing cluster (``--ray-address``); default a local Ray instance.

    Raises:
        MissingExtraError: Ray is not installed (the ``ray`` extra).
        ValueError: ``actors < 1`` or ``gpus_per_actor < 0``.
    """

    name = "ray"

    def __init__(self, engine: Engine, *, actors: int = 1, gpus_per_actor: float = 0.0, address: str | None = None):
        if not isinstance(actors, int) or actors < 1:
            raise ValueError(f"--ray-actors must be an integer >= 1, got {actors!r}")
        if gpus_per_actor < 0:
            raise ValueError(f"--gpus-per-actor must be >= 0, got {gpus_per_actor!r}")
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MissingExtraError("--engine ray needs Ray, not installed here: pip install 'unieval-local[ray]'"
                                    ) from exc
        self.engine, self.ray = engine, ray
        self.actors, self.gpus = actors, gpus_per_actor
        self._started = False
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(**kwargs)
            self._started = True
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False

    def check(self, checkpoints: Sequence[str]) -> None:
        """Resolve each checkpoint and open its weight files; no model is loaded here."""
        for name in checkpoints:
            self.engine.check_checkpoint(name)

    def map(self, requests: Iterable[list[Record]], task: str, aspects: Sequence[str], evidence: bool,
            on_batch: Callable[[int, int], None] | None = None, *, per_record: bool = False,
            skip_missing: bool = False) -> Iterator[ChunkResult]:
        """One :class:`ChunkResult` per request, in order (``per_record`` and ``on_batch`` do not
        apply: an actor scores a whole request and sends it back)."""
        items = [{"rid": i, "request": json.dumps([{"index": r.index, "data": r.data, "error": r.error}
                                                   for r in chunk])}
                 for i, chunk in enumerate(requests)]
        if not items:
            return
        ds = self.ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            _RayScorerActor, batch_size=1, concurrency=self.actors, num_gpus=self.gpus or None,
            fn_constructor_kwargs={"settings": self.engine.settings.as_kwargs(), "task": task, "aspects": list(aspects),
                                   "evidence": evidence, "skip_missing": skip_missing},
        )
        try:
            for row in ds.iter_rows():  # streamed in request order, one pipeline (one actor pool) for the run
                yield ChunkResult.from_dict(json.loads(row["result"]))
        except Exception as exc:  # an actor died or the model failed in it: Ray wraps the cause
            cause = getattr(exc, "cause", None) or exc
            if isinstance(cause, (CheckpointError, CheckpointNotFoundError, ModelRuntimeError)):
                raise type(cause)(str(cause)) from exc
            first = next((x.strip() for x in str(cause).splitlines() if x.strip()), type(cause).__name__)
            raise ModelRuntimeError(f"the Ray engine failed ({type(cause).__name__}: {first})") from exc

    def completed(self) -> list[ChunkResult]:
        """Nothing: a request's result comes back whole or not at all."""
        return []

    def partial(self) -> float:
        """Nothing known between requests."""
        return 0.0

    def forward_passes(self) -> None:
        """Unknown here: each actor runs its own scheduler."""
        return None

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


#: Batch engines by name (``--engine``): each is made as ``cls(engine, **options)``.
BATCH_ENGINES: dict[str, type] = {"local": LocalBatchEngine, "ray": RayBatchEngine}


def make_batch_engine(name: str, engine: Engine, options: Mapping[str, Any] | None = None) -> BatchEngine:
    """The batch engine ``name`` of :data:`BATCH_ENGINES` over ``engine``, with its ``options``.

    Raises:
        ValueError: unknown name (the valid ones are listed), or options it does not take.
    """
    if name not in BATCH_ENGINES:
        raise ValueError(f"engine must be one of {', '.join(BATCH_ENGINES)}, got {name!r}")
    try:
        return BATCH_ENGINES[name](engine, **dict(options or {}))
    except TypeError as exc:
        raise ValueError(f"engine {name!r}: {exc}") from None
