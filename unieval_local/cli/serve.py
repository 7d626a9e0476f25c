"""``unieval-local serve``: the local HTTP service (:mod:`unieval_local.service`).

Exit status: 0 after SIGTERM or Ctrl-C once every accepted request is answered; 2 for a usage
error (a non-loopback ``--host`` without an API key and without ``--no-auth``, an unreadable
``--api-key-file``, a port in use, a missing ``serve`` extra, an invalid setting); 3 when a preloaded
checkpoint cannot be found or loaded (the server stops; ``/health`` said 503 ``failed``
meanwhile); 5 when loading failed otherwise.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from .common import EXIT_CHECKPOINT, EXIT_MODEL, EXIT_OK, add_engine_flags, engine_settings, usage_error, usage_exit

__all__ = ["add_parser", "api_key", "is_loopback", "run"]

#: The environment variable an API key may come from (after --api-key and --api-key-file).
KEY_ENV = "UNIEVAL_LOCAL_API_KEY"


def add_parser(sub) -> None:
    """Register ``serve``: the engine flags of ``score`` (from the settings declaration), the
    service's limits (:data:`~unieval_local.service.core.SERVICE_FLAGS`), address, auth and engine."""
    from ..service.core import SERVICE_FLAGS, ServiceLimits

    p = sub.add_parser(
        "serve", help="a local HTTP service answering the hosted evaluators' requests",
        description="Serve /v1/unieval, /runs/custom, /v1/summarization-evaluator, /v1/autoeval, /v1/score, "
                    "/health, /info and /metrics (OpenAPI at /docs) with the local checkpoints. Requests from "
                    "many clients share engine passes. Needs the 'serve' extra.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs an API key or --no-auth)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--api-key", default=None, help=f"the Bearer key clients must send (visible to ps: prefer "
                                                   f"--api-key-file or ${KEY_ENV})")
    p.add_argument("--api-key-file", default=None, help="read the key from this file (its first line)")
    p.add_argument("--no-auth", action="store_true", help="serve without a key on a non-loopback address, knowingly")
    defaults = ServiceLimits()
    for name, flag, kind, help_text in SERVICE_FLAGS:
        p.add_argument(flag, dest=name, type=kind, default=getattr(defaults, name),
                       help=help_text.format(default=getattr(defaults, name)))
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default: one process) or ray (a Ray Serve deployment of --replicas replicas)")
    p.add_argument("--replicas", type=int, default=1, help="Ray Serve replicas, each with its own model (default 1)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="server log level (default info); access lines never hold request bodies")
    add_engine_flags(p)
    p.set_defaults(run=run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key``, else ``--api-key-file`` (first line), else ``$UNIEVAL_LOCAL_API_KEY``; None if none.

    Raises:
        SystemExit: an unreadable or empty key file (exit 2).
    """
    if args.api_key:
        return args.api_key
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as fh:
                key = fh.readline().strip()
        except OSError as exc:
            usage_exit(f"cannot read --api-key-file {args.api_key_file!r}: {exc.strerror}")
        if not key:
            usage_exit(f"--api-key-file {args.api_key_file!r} is empty")
        return key
    return os.environ.get(KEY_ENV) or None


def _port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound (in use, not an address of this machine), or None."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"--host {host}: {exc.strerror or exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server on that port? pick --port)"
    return None


def run(args: argparse.Namespace) -> int:
    """Start the service; block until SIGTERM / Ctrl-C; exit 0 once drained (module docstring)."""
    from ..extras import require

    require("serve")
    key = api_key(args)
    if key is None and not args.no_auth and not is_loopback(args.host):
        return usage_error(f"--host {args.host} is not a loopback address and no API key is set: give --api-key-file "
                           f"FILE (or ${KEY_ENV}, --api-key KEY), or pass --no-auth to serve without one knowingly")
    if not 0 <= args.port <= 65535:
        return usage_error(f"--port must be in 0..65535, got {args.port}")
    if args.replicas < 1:
        return usage_error(f"--replicas must be >= 1, got {args.replicas}")
    if problem := _port_problem(args.host, args.port):
        return usage_error(problem)
    from ..errors import CheckpointError, CheckpointNotFoundError
    from ..service.core import SERVICE_FLAGS, ServiceLimits

    try:
        limits = ServiceLimits(**{name: getattr(args, name) for name, *_ in SERVICE_FLAGS})
    except ValueError as exc:
        return usage_error(exc)
    settings = engine_settings(args)
    settings["progress"] = False
    model = settings.get("model")
    preload = sorted(model) if isinstance(model, dict) else ["unieval-sum"]
    if args.engine == "ray":
        from ..service.ray_serve import run_ray_serve, serve_deployment

        require("ray_serve")
        run_ray_serve(serve_deployment(settings, limits, preload, key, args.replicas), args.host, args.port)
        return EXIT_OK
    from ..engine import Engine
    from ..service.app import create_app
    from ..service.handlers import Service

    try:
        engine = Engine(**settings)
    except ValueError as exc:
        return usage_error(exc)
    service = Service(engine, limits, preload)
    return _serve(create_app(service, key), service, args, (CheckpointNotFoundError, CheckpointError), key is not None)


def _serve(app, service, args: argparse.Namespace, load_errors: tuple, has_key: bool) -> int:
    """Run uvicorn until SIGTERM / Ctrl-C; the exit status.

    The port opens at once and ``/health`` answers 503 ``loading`` while the checkpoints load
    in a thread (one load per process); a checkpoint that does not load stops the server (exit
    3, its reason on stderr). At SIGTERM / Ctrl-C the service refuses new requests (503) at
    once, uvicorn stops accepting connections and waits for the requests in flight, the worker
    answers every accepted query, then the process exits 0.
    """
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # noqa: D102  start draining at the signal, not after
            service.worker.stop(timeout=0)
            super().handle_exit(sig, frame)
            # uvicorn re-raises a captured signal after its graceful shutdown (the process would
            # die of SIGTERM before the worker drained): we exit 0 ourselves once drained instead
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, access_log=True,
                            lifespan="off", timeout_graceful_shutdown=int(args.request_timeout_s) + 30)
    server = Server(config)
    failed: list[BaseException] = []

    def load() -> None:
        try:
            service.load()
        except Exception as exc:  # noqa: BLE001  reported below; /health says failed meanwhile
            failed.append(exc)
            server.should_exit = True
            return
        print(f"unieval-local: ready on http://{args.host}:{args.port}: checkpoints {', '.join(service.preload)} "
              f"loaded (OpenAPI at /docs; {'Bearer auth' if has_key else 'no auth'})",
              file=sys.stderr, flush=True)

    print(f"unieval-local: loading checkpoints {', '.join(service.preload)}; /health answers 503 until they are "
          "loaded", file=sys.stderr, flush=True)
    threading.Thread(target=load, name="unieval-local-load", daemon=True).start()
    server.run()
    service.drain()
    if failed:
        print(f"unieval-local: error: {failed[0]}", file=sys.stderr)
        return EXIT_CHECKPOINT if isinstance(failed[0], load_errors) else EXIT_MODEL
    print("unieval-local: stopped: every accepted request was answered", file=sys.stderr, flush=True)
    return EXIT_OK
