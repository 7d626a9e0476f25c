"""The service's Prometheus metrics (prometheus-client), one registry per app, served as text at
``GET /metrics``. "Requests" are requests (HTTP ones, or the scheduler requests of at most 250
examples an HTTP request becomes); "queries" are model queries only (one Boolean-QA prompt, or
one window of it, scored by the model):

* ``unieval_local_requests_total{endpoint,status}``: HTTP requests answered, by route and status code.
* ``unieval_local_request_seconds{endpoint}``: a histogram of the time to answer them (seconds).
* ``unieval_local_scheduler_requests_total``: scheduler requests accepted (at most 250 examples each).
* ``unieval_local_micro_batches_total``: micro-batches the model ran (about one forward batch each).
* ``unieval_local_model_queries_total``: distinct model queries scored.
* ``unieval_local_queue_queries``: model queries admitted and not yet answered, now (the costs
  ``--max-queued-queries`` bounds: an upper bound before deduplication).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ServiceMetrics"]


class ServiceMetrics:
    """The counters of one app (module docstring).

    Args:
        queued: returns the queries waiting or running now (read at each scrape).

    Raises:
        MissingExtraError: prometheus-client is not installed (the ``serve`` extra).
    """

    def __init__(self, queued: Callable[[], int]):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        disable_created_metrics()  # no *_created series: one sample per counter
        self.registry = CollectorRegistry()
        self.requests = Counter("unieval_local_requests_total", "HTTP requests answered, by endpoint and status",
                                ["endpoint", "status"], registry=self.registry)
        self.seconds = Histogram("unieval_local_request_seconds", "seconds to answer an HTTP request", ["endpoint"],
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
                                 registry=self.registry)
        self.batches = Counter("unieval_local_micro_batches_total", "micro-batches the model ran",
                               registry=self.registry)
        self.requests_accepted = Counter("unieval_local_scheduler_requests_total", "scheduler requests accepted "
                                         "(at most 250 examples each)", registry=self.registry)
        self.queries = Counter("unieval_local_model_queries_total", "distinct model queries scored",
                               registry=self.registry)
        self.queue = Gauge("unieval_local_queue_queries", "model queries admitted and not yet answered "
                           "(costs, before deduplication)", registry=self.registry)
        self.queue.set_function(queued)

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered HTTP request."""
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.seconds.labels(endpoint=endpoint).observe(seconds)

    def text(self) -> tuple[bytes, str]:
        """``(body, content type)`` of the Prometheus text exposition."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
