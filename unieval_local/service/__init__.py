"""The local HTTP service (``unieval-local serve``): the hosted evaluators' HTTP requests,
answered with the local checkpoints.

* :mod:`.core`: the batching worker (the one thread that runs the model), limits, back-pressure.
* :mod:`.handlers`: what each endpoint does (:class:`~.handlers.Service`), framework-free.
* :mod:`.app`: the FastAPI app: routes, request models, auth, body limit, JSON errors.
* :mod:`.metrics`: Prometheus counters. :mod:`.ray_serve`: the same app on Ray Serve.

Needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client).
"""

__all__: list[str] = []
