"""Scale-out on Ray Serve: the same app as a Ray Serve deployment of ``replicas`` replicas, each
loading its model once and batching the requests it receives (``unieval-local serve --engine ray
--replicas N``). Ray Serve's HTTP proxy balances requests over the replicas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["run_ray_serve", "serve_deployment"]


def serve_deployment(engine_kwargs: Mapping[str, Any], limits: Any, preload: Sequence[str], api_key: str | None,
                     replicas: int, report_long_input: str | None = "chunk") -> Any:
    """A bound Ray Serve application of the service.

    Args:
        engine_kwargs: the :class:`~unieval_local.engine.Engine` settings (each replica builds its engine).
        limits: :class:`~unieval_local.service.core.ServiceLimits` (per replica).
        preload: checkpoints each replica loads before it takes requests.
        api_key: the Bearer key, or None.
        replicas: the number of replicas (>= 1).
        report_long_input: how the report endpoints read long inputs (:class:`~.handlers.Service`).

    Raises:
        MissingExtraError: ``ray[serve]`` is not installed (the ``ray`` extra).
    """
    from ..extras import require

    require("ray_serve")
    from ray import serve

    @serve.deployment(num_replicas=replicas, ray_actor_options={"num_cpus": 0})
    @serve.ingress()
    class UniEvalService:
        """One replica: an engine, a scheduler and its worker thread, and the app over them."""

        def __init__(self, engine_kwargs, limits, preload, api_key, report_long_input):
            from ..engine import Engine
            from .handlers import Service

            self.service = Service(Engine(**dict(engine_kwargs)), limits, preload, report_long_input)
            self.service.load()
            self.api_key = api_key

        def __serve_build_asgi_app__(self):
            from .app import create_app

            return create_app(self.service, self.api_key)

    return UniEvalService.bind(dict(engine_kwargs), limits, list(preload), api_key, report_long_input)


def run_ray_serve(app: Any, host: str, port: int) -> None:
    """Run ``app`` (from :func:`serve_deployment`) on a local Ray instance, HTTP on ``host:port``,
    until SIGTERM or Ctrl-C; then shut Ray Serve down (replicas answer what they accepted first)."""
    import signal
    import threading

    import ray
    from ray import serve

    ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # after ray.init, which installs its own
        signal.signal(sig, lambda *_: stop.set())
    serve.start(http_options={"host": host, "port": port})
    serve.run(app, name="unieval-local", route_prefix="/", blocking=False)
    print(f"unieval-local: serving on http://{host}:{port} (Ray Serve)", flush=True)
    stop.wait()
    serve.shutdown()
    ray.shutdown()
