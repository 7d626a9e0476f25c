"""``unieval-local serve``: the local HTTP service (:mod:`unieval_local.service`).

Exit status: 0 after SIGTERM or Ctrl-C once every accepted request is answered; 2 for a usage
error (a non-loopback ``--host`` without an API key and without ``--no-auth``, an unreadable
``--api-key-file``, a blank API key or one with surrounding whitespace, a port in use, a missing
``serve`` extra, an invalid setting, a ``--max-connections`` over the file limit, a ``--rating-config``
that cannot be read or holds an invalid option: checked before the model loads); 3 when a model,
judge or checker an option names (``--rating-config`` with ``judge: g-eval``, ``--consistency-aspect``)
is not staged (one line, before the port is bound, as ``report`` refuses it), or a checkpoint
``serve`` preloads (``--model NAME=DIR``, ``--model DIR``) is missing or is no checkpoint of that
evaluator (a folder that does not exist, one without ``config.json`` or a tokenizer, one of
another model family: known without loading, so one line before the port is bound), or it
cannot be loaded (the server stops; ``/health`` said 503 ``failed`` meanwhile); 5 when loading
failed otherwise.

Connections (:mod:`unieval_local.service.connections`; not under ``--engine ray``, where Ray
Serve's proxy takes them):

* ``--header-timeout-s`` (default 10): a request head must arrive within this many seconds of
  the connection's accept or of its previous response's end (408, or a quiet close).
* ``--body-timeout-s`` (default 30) and ``--min-body-rate`` (default 10000 bytes/s): a body
  must arrive within the timeout plus one second per min-rate bytes received.
* ``--keep-alive-s`` (default 5): an idle keep-alive connection is closed after this long.
* ``--max-connections`` (default: the file limit, raised to its hard limit at start, less the
  descriptors open and 64 kept for files, at most 8192): at the cap the server stops accepting
  (clients wait in the listen backlog) and closes the oldest connection still waiting for a
  request head to make room.

Accept errors and closed connections are logged at most once a minute with their counts;
the access log never holds a query string (nor a body, nor the key).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys

from .common import (EXIT_CHECKPOINT, EXIT_MODEL, EXIT_OK, HelpFormatter, add_engine_flags, engine_settings, examples,
                     usage_error, usage_exit)

__all__ = ["add_parser", "api_key", "is_loopback", "run"]

#: The environment variable an API key may come from (after --api-key and --api-key-file).
KEY_ENV = "UNIEVAL_LOCAL_API_KEY"
#: uvicorn's warnings that any client can cause once per connection: logged at most once a minute.
PER_CONNECTION_WARNINGS = ("Invalid HTTP request received.", "Unsupported upgrade request.",
                           "No supported WebSocket library detected. Please use \"pip install 'uvicorn[standard]'\", "
                           "or install 'websockets' or 'wsproto' manually.")


def add_parser(sub) -> None:
    """Register ``serve``: the engine flags of ``score`` (from the settings declaration), the
    service's limits (:data:`~unieval_local.service.core.SERVICE_FLAGS`), address, auth and engine."""
    from ..service.core import SERVICE_FLAGS, ServiceLimits

    p = sub.add_parser(
        "serve", help="a local HTTP service answering the hosted evaluators' requests",
        description="Serve /v1/unieval, /runs/custom, /v1/summarization-evaluator, /v1/autoeval, /v1/score, "
                    "/health, /info and /metrics (OpenAPI at /docs) with the local checkpoints. Requests from "
                    "many clients share engine passes. Needs the 'serve' extra.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local serve --model ckpt/unieval-sum",
                        "unieval-local serve --host 0.0.0.0 --port 8080 --api-key-file key.txt --max-wait-ms 20",
                        docs="docs/serving.md (every endpoint, limits, errors, stopping, Ray Serve, Prometheus)"))
    address = p.add_argument_group("address and authentication")
    address.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs an API key or --no-auth)")
    address.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    address.add_argument("--api-key", default=None, help=f"the Bearer key clients must send (visible to ps: prefer "
                                                   f"--api-key-file or ${KEY_ENV})")
    address.add_argument("--api-key-file", default=None, help="read the key from this file (the key alone, on one line; "
                                                        "one trailing newline is stripped)")
    address.add_argument("--no-auth", action="store_true", help="serve without a key on a non-loopback address, knowingly")
    limits = p.add_argument_group("limits and batching", "what one request and the queue may hold (413, 429, 504)")
    defaults = ServiceLimits()
    for name, flag, kind, help_text in SERVICE_FLAGS:
        limits.add_argument(flag, dest=name, type=kind, default=getattr(defaults, name),
                       help=help_text.format(default=getattr(defaults, name)))
    reports = p.add_argument_group("report endpoints")
    reports.add_argument("--rating-config", default=None, metavar="FILE.yaml",
                   help="the rating options of /v1/summarization-evaluator (templates, fitted cut points, rules), "
                        "as `report --format rating --config FILE` reads them (see configs/rating.yaml); a bad "
                        "file stops the server at start (exit 2); /info gives its file name and SHA-256")
    from ..reports.options import consistency_aspects

    reports.add_argument("--consistency-aspect", default=None, choices=consistency_aspects(), metavar="TASK/ASPECT",
                   help="the aspect that answers the report endpoints' consistency-like queries (claims, key points, "
                        "support), as `report --consistency-aspect` (e.g. fact/factcg; default: each format's own, "
                        "summarization/consistency); a --rating-config that names one keeps its own; choices: "
                        "%(choices)s")
    engine = p.add_argument_group("model and engine", "speed and precision: docs/speed.md")
    engine.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default: one process) or ray (a Ray Serve deployment of --replicas replicas)")
    engine.add_argument("--replicas", type=int, default=1, help="Ray Serve replicas, each with its own model (default 1)")
    from ..service.connections import ConnectionLimits

    conn = ConnectionLimits()
    connections = p.add_argument_group("connections", "slow or idle clients")
    connections.add_argument("--header-timeout-s", type=float, default=conn.header_timeout_s,
                   help=f"close a connection that has not sent a complete request head within this many seconds "
                        f"of its accept or its previous response (default {conn.header_timeout_s:g})")
    connections.add_argument("--body-timeout-s", type=float, default=conn.body_timeout_s,
                   help=f"close a connection whose request body has not arrived within this many seconds of its "
                        f"head, plus one second per --min-body-rate bytes received (default {conn.body_timeout_s:g})")
    connections.add_argument("--min-body-rate", type=float, default=conn.min_body_rate,
                   help=f"bytes per second of body that extend --body-timeout-s (0: a hard limit; default "
                        f"{conn.min_body_rate:g})")
    connections.add_argument("--keep-alive-s", type=float, default=conn.keep_alive_s,
                   help=f"close an idle keep-alive connection after this many seconds (default {conn.keep_alive_s:g})")
    connections.add_argument("--max-connections", type=int, default=None,
                   help="connections open at once; at the cap the server stops accepting and closes the oldest "
                        "one still waiting for a request head to make room (default: the file limit, raised to "
                        "its hard limit at start, less the descriptors open and 64 kept for files, at most 8192)")
    address.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="server log level (default info); access lines never hold request bodies")
    add_engine_flags(engine)
    for action in p._actions:  # what --long-input means here: one mode for every endpoint when given
        if action.dest == "long_input":
            action.help = ("prompts over --max-length: truncate, fit or chunk, for every endpoint (default: chunk "
                           "for the report endpoints, as `report`; truncate for /v1/unieval and /v1/score, as the "
                           "hosted metric; each answer's X-UniEval-Long-Input header says which)")
        elif action.dest == "no_progress":
            action.help = argparse.SUPPRESS  # a service shows no progress bar
    p.set_defaults(run=run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback address: ``localhost`` (any case, a trailing dot
    allowed) or a numeric address in ``127.0.0.0/8`` or ``::1``, in any spelling the system's
    resolver reads as numeric (``127.1``, ``0x7f.1``, ``[::1]``, ``0:0:0:0:0:0:0:1``,
    ``::ffff:127.0.0.1``). A name other than localhost, or text with spaces, is not.

    Example:
        >>> [is_loopback(h) for h in ("127.1", "[::1]", "localhost", "0.0.0.0", "example.com")]
        [True, True, True, False, False]
    """
    if not host or host != host.strip() or any(c.isspace() for c in host):
        return False
    if host.lower().rstrip(".") == "localhost" and host.count(".") <= 1:
        return True
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return False
    found = set()
    for *_, address in infos:
        ip = ipaddress.ip_address(address[0].split("%", 1)[0])
        mapped = getattr(ip, "ipv4_mapped", None)
        found.add((mapped or ip).is_loopback)
    return found == {True}


def _checked_key(key: str, origin: str) -> str:
    """``key`` from ``origin`` (a flag or variable name, for the message), refused if blank or
    padded with whitespace (a key that differs from what clients send by a space is a trap).

    Raises:
        SystemExit: exit 2 with the reason.
    """
    if not key.strip():
        usage_exit(f"{origin} is blank: give the key, or unset it to serve without one on a loopback address")
    if key != key.strip():
        usage_exit(f"{origin} has whitespace before or after the key: remove it (clients would have to send it "
                   "too)")
    return key


def api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key``, else ``--api-key-file`` (the file's one line, one trailing
    newline removed), else ``$UNIEVAL_LOCAL_API_KEY``; None if none is given.

    Raises:
        SystemExit: an unreadable key file, or a key (given in any of the three ways) that is
            blank or has whitespace before or after it, a key file of several lines (exit 2).
    """
    if args.api_key is not None:
        return _checked_key(args.api_key, "--api-key")
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as fh:
                text = fh.read(65536)
        except (OSError, UnicodeDecodeError) as exc:
            usage_exit(f"cannot read --api-key-file {args.api_key_file!r}: {getattr(exc, 'strerror', None) or exc}")
        key = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
        if not key:
            usage_exit(f"--api-key-file {args.api_key_file!r} is empty")
        if "\n" in key or "\r" in key:
            usage_exit(f"--api-key-file {args.api_key_file!r} holds more than one line: it must hold the key alone "
                       "(one trailing newline is allowed)")
        return _checked_key(key, f"the key in --api-key-file {args.api_key_file!r}")
    if KEY_ENV in os.environ:
        return _checked_key(os.environ[KEY_ENV], f"${KEY_ENV}")
    return None


def _unstaged(settings: dict, named: dict[str, str], preload: bool = False) -> str | None:
    """Why a checkpoint that an option names (``named``: checkpoint -> the option, from
    :func:`~unieval_local.service.work.named_checkpoints`, or :func:`_preloaded` with ``preload``)
    cannot be used, in one line, or None: it is not found without the network (one with a hub
    id, online, is fetched on first use; a folder given that does not exist never is), or its
    folder is no checkpoint (no config.json, no tokenizer) or holds another evaluator's model or
    another model family. Nothing is loaded."""
    from ..errors import CheckpointError, CheckpointNotFoundError
    from ..models.checkpoints import CHECKPOINTS, HUB_ID, check_identity, is_offline, resolve_checkpoint
    from ..registry.evaluators import get_evaluator

    model = settings.get("model")
    for name, option in named.items():
        given = model.get(name) if isinstance(model, dict) else model
        fetchable = given is None or (HUB_ID.match(os.fspath(given)) is not None
                                      and not os.fspath(given).startswith((".", "/", "~")))
        try:
            found = resolve_checkpoint(name, model, offline=True)
            check_identity(found.path, get_evaluator(name))
        except CheckpointNotFoundError as exc:
            if fetchable and CHECKPOINTS.get(name) and not is_offline(settings.get("offline")):
                continue
            if preload:
                return " ".join(f"{option}: {exc}".split())
            return " ".join(f"{option} needs the {name} checkpoint, and it is not staged: {exc}".split())
        except CheckpointError as exc:
            return " ".join(f"{option}: {exc}".split()) if preload else \
                " ".join(f"{option} needs the {name} checkpoint: {exc}".split())
    return None


def _preloaded(preload: list[str], model) -> dict[str, str]:
    """The checkpoints ``serve`` loads at start, each with the option that names it, for
    :func:`_unstaged`: ``--model unieval-sum=DIR`` (a mapping), ``--model DIR`` (one folder for
    every checkpoint), or, with no ``--model``, what finds it (``$UNIEVAL_LOCAL_HOME``, the cache).

    Example:
        >>> _preloaded(["unieval-sum"], {"unieval-sum": "ckpt/sum"})
        {'unieval-sum': '--model unieval-sum=ckpt/sum'}
    """
    if isinstance(model, dict):
        return {name: f"--model {name}={model[name]}" for name in preload}
    if model is not None:
        return {name: f"--model {model}" for name in preload}
    return {name: "serve (no --model)" for name in preload}


def _port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound (in use, not an address of this machine), or None."""
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
    if args.host.startswith("[") and args.host.endswith("]"):  # [::1] as in a URL
        args.host = args.host[1:-1]
    if key is None and not args.no_auth and not is_loopback(args.host):
        return usage_error(f"--host {args.host} is not a loopback address and no API key is set: give --api-key-file "
                           f"FILE (or ${KEY_ENV}, --api-key KEY), or pass --no-auth to serve without one knowingly")
    if not 0 <= args.port <= 65535:
        return usage_error(f"--port must be in 0..65535, got {args.port}")
    if args.replicas < 1:
        return usage_error(f"--replicas must be >= 1, got {args.replicas}")
    if args.engine == "ray" and (flags := _connection_flags_given(args)):
        return usage_error(f"{', '.join(flags)}: for --engine local only; under --engine ray, Ray Serve's HTTP proxy "
                           "takes the connections (its keep-alive: RAY_SERVE_HTTP_KEEP_ALIVE_TIMEOUT_S)")
    from ..errors import CheckpointError, CheckpointNotFoundError
    from ..service.core import SERVICE_FLAGS, ServiceLimits

    if args.engine == "ray" and args.rating_config is not None:
        return usage_error("--rating-config: for --engine local only (the Ray Serve replicas rate with the "
                           "defaults)")
    if args.engine == "ray" and args.consistency_aspect is not None:
        return usage_error("--consistency-aspect: for --engine local only (the Ray Serve replicas use each "
                           "format's default)")
    from ..service.work import RatingConfigFile, named_checkpoints

    try:  # read before the model loads: a bad file costs no load
        rating = RatingConfigFile.load(args.rating_config) if args.rating_config is not None else None
    except ValueError as exc:  # the message names the file and the key
        return usage_error(f"--rating-config {exc}")
    try:
        limits = ServiceLimits(**{name: getattr(args, name) for name, *_ in SERVICE_FLAGS})
        connections = _connection_limits(args) if args.engine == "local" else None
    except ValueError as exc:
        return usage_error(exc)
    settings = engine_settings(args)
    settings["progress"] = False
    model = settings.get("model")
    preload = sorted(model) if isinstance(model, dict) else ["unieval-sum"]
    # the report endpoints read long inputs as `report` does (chunk), the score endpoints as the
    # hosted metric does (the engine's default, truncate); --long-input given: one mode for all
    report_long_input = None if args.long_input is not None else "chunk"
    if problem := (_unstaged(settings, _preloaded(preload, model), preload=True)
                   or _unstaged(settings, named_checkpoints(rating, args.consistency_aspect))):
        print(f"unieval-local: error: {problem}", file=sys.stderr)  # before the port is bound, as `report` refuses
        return EXIT_CHECKPOINT
    if problem := _port_problem(args.host, args.port):
        return usage_error(problem)
    if args.engine == "ray":
        from ..service.ray_serve import run_ray_serve, serve_deployment

        require("ray_serve")
        run_ray_serve(serve_deployment(settings, limits, preload, key, args.replicas, report_long_input),
                      args.host, args.port)
        return EXIT_OK
    from ..engine import Engine
    from ..service.app import create_app
    from ..service.handlers import Service

    try:
        engine = Engine(**settings)
    except ValueError as exc:
        return usage_error(exc)
    service = Service(engine, limits, preload, report_long_input)
    service.rating_config = rating
    service.consistency_aspect = args.consistency_aspect
    return _serve(create_app(service, key), service, args, (CheckpointNotFoundError, CheckpointError), key is not None,
                  connections)


def _connection_flags_given(args: argparse.Namespace) -> list[str]:
    """The connection flags set to other than their defaults (they apply to ``--engine local``)."""
    from ..service.connections import ConnectionLimits

    defaults = ConnectionLimits()
    return [f"--{name.replace('_', '-')}" for name in ("header_timeout_s", "body_timeout_s", "min_body_rate",
                                                       "keep_alive_s", "max_connections")
            if getattr(args, name) != getattr(defaults, name)]


def _connection_limits(args: argparse.Namespace) -> tuple:
    """The connection flags as (:class:`~unieval_local.service.connections.ConnectionLimits`,
    the cap); the soft file limit is raised to the hard one first.

    Raises:
        ValueError: a flag out of range, or a cap that does not fit under the file limit (named).
    """
    from ..service.connections import ConnectionLimits, connection_cap, raise_file_limit

    names = ("header_timeout_s", "body_timeout_s", "min_body_rate", "keep_alive_s", "max_connections")
    try:
        limits = ConnectionLimits(**{name: getattr(args, name) for name in names})
    except ValueError as exc:  # name the flag, not the field
        flag = next((n for n in names if str(exc).startswith(n)), None)
        raise ValueError(str(exc).replace(flag, "--" + flag.replace("_", "-"), 1) if flag else exc) from None
    raise_file_limit()
    return limits, connection_cap(limits.max_connections)


def _drop_query_string(record) -> bool:
    """A filter of the ``uvicorn.access`` logger: the request path loses its query string
    (``/health?api_key=K`` is logged as ``/health``), so a key or text sent in a URL never
    reaches the access log. Every record passes."""
    if isinstance(record.args, tuple) and any(isinstance(a, str) and "?" in a for a in record.args):
        record.args = tuple(a.split("?", 1)[0] if isinstance(a, str) and a.startswith("/") else a
                            for a in record.args)
    return True


class _RepeatFilter:
    """A logging filter that lets each of ``messages`` (format strings, as logged) through at
    most once per ``interval_s`` seconds (default one minute); the next one that passes says
    how many were held back. For warnings any client can cause once per connection."""

    def __init__(self, messages: tuple[str, ...], interval_s: float = 60.0):
        self.messages, self.interval_s = frozenset(messages), interval_s
        self.passed: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def filter(self, record) -> bool:  # noqa: D102
        import time

        if record.msg not in self.messages:
            return True
        now = time.monotonic()
        if record.msg in self.passed and now - self.passed[record.msg] < self.interval_s:
            self.held[record.msg] = self.held.get(record.msg, 0) + 1
            return False
        held = self.held.pop(record.msg, 0)
        self.passed[record.msg] = now
        if held:
            record.msg = f"{record.msg} ({held} more like it in the last {self.interval_s:g} s, not logged)"
        return True


def _serve(app, service, args: argparse.Namespace, load_errors: tuple, has_key: bool, connections: tuple) -> int:
    """Run uvicorn until SIGTERM / Ctrl-C; the exit status.

    The port opens at once and ``/health`` answers 503 ``loading`` while the checkpoints load
    in a thread (one load per process); a checkpoint that does not load stops the server (exit
    3, its reason on stderr). At SIGTERM / Ctrl-C the service refuses new requests (503) at
    once, uvicorn stops accepting connections and waits for the requests in flight, the worker
    answers every accepted query, then the process exits 0. Connections are guarded by
    ``connections`` ((limits, cap): :mod:`unieval_local.service.connections`); the access log
    drops query strings, and uvicorn's per-connection warnings are logged at most once a minute.
    """
    import logging
    import threading

    import uvicorn

    from ..service.connections import guarded_server_class

    conn_limits, cap = connections

    class Server(guarded_server_class()):
        def handle_exit(self, sig, frame):  # noqa: D102  start draining at the signal, not after
            service.begin_drain()
            super().handle_exit(sig, frame)
            # uvicorn re-raises a captured signal after its graceful shutdown (the process would
            # die of SIGTERM before the worker drained): we exit 0 ourselves once drained instead
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, access_log=True,
                            lifespan="off", timeout_graceful_shutdown=int(args.request_timeout_s) + 30,
                            http="h11", ws="none", timeout_keep_alive=conn_limits.keep_alive_s)
    logging.getLogger("uvicorn.access").addFilter(_drop_query_string)
    logging.getLogger("uvicorn.error").addFilter(_RepeatFilter(PER_CONNECTION_WARNINGS))
    logging.getLogger("unieval_local.service.connections").setLevel(args.log_level.upper())
    server = Server(config, conn_limits, cap)
    failed: list[BaseException] = []

    def load() -> None:
        try:
            service.load()
        except Exception as exc:  # noqa: BLE001  reported below; /health says failed meanwhile
            failed.append(exc)
            server.should_exit = True
            return
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"unieval-local: ready on http://{host}:{args.port}: checkpoints {', '.join(service.preload)} "
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
    dropped = service.runs.running()
    if dropped:  # accepted with 202: nobody can poll them once the port is closed, and runs live in memory
        print(f"unieval-local: {dropped} non-blocking custom run(s) still running were dropped (runs are kept in "
              "memory only: a client polls GET /runs/{id} before the service stops)", file=sys.stderr, flush=True)
    print("unieval-local: stopped: every accepted request was answered", file=sys.stderr, flush=True)
    return EXIT_OK
