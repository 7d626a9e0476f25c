"""The ASGI app (FastAPI): routes, request models (OpenAPI at ``/docs`` and ``/openapi.json``),
Bearer auth, the body-size limit, JSON errors and request metrics, over a
:class:`~unieval_local.service.handlers.Service`.

The event loop never parses a body: a route reads the body's bytes and hands the service a
reader (:func:`reader`: UTF-8 JSON parsing and the request model's validation) that runs in a
preparation thread with the rest of the request's preparation. The OpenAPI schema still
documents each request body by its model (:data:`BODIES`, in ``components``).

Every error is JSON ``{"error": {"type", "message", "examples": [{"index", "field",
"message"}]}}``, never a traceback or an HTML page: 401 (missing or wrong key, with
``WWW-Authenticate: Bearer``; the key is compared in constant time), 404/405, 413 (a body over
``--max-body-mb``, refused from its Content-Length or while it streams in, before it is
parsed), 422 (an invalid request: every problem named; a body that is empty, not UTF-8, not
JSON, nested too deeply, holding a number too long, or not an object names the field ``body``),
429 (queue full, with ``Retry-After``), 503 (loading, draining, or ``--max-runs`` runs all
running), 504 (request timeout), 500 (the model or checkpoint failed). No answer holds a path of
the server's files.

Notes (what the Python API would warn about the same request) travel in the answer where its
documented shape has room: ``notes`` in ``/v1/score``'s and ``/v1/autoeval``'s answers and in a
custom run's object (and each of its row results); in the ``X-UniEval-Notes`` header (ASCII JSON
list, at most 4 KB of whole notes) with ``X-UniEval-Notes-Count`` (all of them) for
``/v1/unieval`` and ``/v1/summarization-evaluator``, whose answers keep the hosted shapes exactly.
"""


import hmac
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from .. import notes
from ..schema import EvaluationResult
from ..fields import AUTOEVAL_NAMES, RATING_EVALUATOR_NAMES
from ..wire.autoeval import AutoevalReport
from ..wire.client_fields import name_problems, score_name_problems, unieval_name_problems
from ..wire.hosted import DEFAULT_ASPECT, DEFAULT_TASK
from ..wire.rating_evaluator import METRICS
from ..wire.http import NOTES_COUNT_HEADER, NOTES_HEADER, NOTES_HEADER_BYTES, ignored_keys_note, notes_headers, \
    parse_json_body
from .errors import ServiceError, error_body, in_client_words, problems_message, validation_error
from .handlers import Answer, Service

__all__ = ["BODIES", "ERRORS", "AutoevalAnswer", "CustomRunBody", "ErrorBody", "EvaluatorBody", "RunObject",
           "ScoreBody", "ScoreResult", "UniEvalBody", "create_app", "reader"]

log = logging.getLogger("unieval_local.service")

Example = dict[str, Any]


class UniEvalConfigBody(BaseModel):
    """The hosted metric's config: which (task, aspect) to score."""

    model_config = ConfigDict(populate_by_name=True)

    task: str = DEFAULT_TASK
    evaluation_aspect: str = Field(DEFAULT_ASPECT, validation_alias=AliasChoices("evaluation_aspect", "aspect"))


class UniEvalBody(BaseModel):
    """``POST /v1/unieval``: ``{"config": {"task", "evaluation_aspect"}, "data": [UniEvalData ...]}``
    (each example: ``target`` plus the fields the aspect needs: ``source``, ``references``,
    ``context``; UniEval's ``system_output`` / ``reference`` accepted). At most 250 examples."""

    config: UniEvalConfigBody = Field(default_factory=UniEvalConfigBody)
    data: list[Example]


class ScoreBody(BaseModel):
    """``POST /v1/score``: the package's own multi-aspect request (``Scorer.evaluate``'s arguments)."""

    task: str = DEFAULT_TASK
    aspects: list[str] | str | None = Field(None, description="aspect names; null or 'all': every aspect of the task")
    data: list[Example]
    evidence: bool = False


class EvaluatorBody(BaseModel):
    """``POST /v1/summarization-evaluator``: one summary to rate (the rating evaluator's SummaryData)."""

    model_config = ConfigDict(extra="allow")

    input: str
    summary: str
    references: list[str] | None = None
    enabled_metrics: list[str] | str | None = None


class Metric(BaseModel):
    """One metric of a custom-run evaluation."""

    model_config = ConfigDict(extra="allow")

    metric: str
    metric_args: dict[str, Any] | None = None


class Evaluation(BaseModel):
    """One evaluation of a custom run: its metrics and data rows ``{input, output}``."""

    model_config = ConfigDict(extra="allow")

    metrics: list[Metric] | None = None
    threshold: float | None = None
    model_slug: str | None = None
    data: list[Example]


class CustomRunBody(BaseModel):
    """``POST /runs/custom``: the hosted custom-run request body, as its users send it."""

    model_config = ConfigDict(extra="allow")

    threshold: float | None = None
    model_slug: str | None = None
    is_blocking: bool = True
    data_collection_id: str | None = None
    evaluations: list[Evaluation]


class ErrorDetail(BaseModel):
    """One problem: the example's index (None when the request as a whole is at fault), the field, what is wrong."""

    index: int | None = None
    field: str
    message: str


class ErrorInfo(BaseModel):
    """What went wrong: a short type (``Unauthorized``, ``InvalidExample``, ``QueueFull`` ...), a message, the problems."""

    type: str
    message: str
    examples: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"type", "message", "examples": [{"index", "field", "message"}]}}``."""

    error: ErrorInfo


class ScoreResult(EvaluationResult):
    """``POST /v1/score``'s answer: :class:`~unieval_local.schema.EvaluationResult` (what
    ``Scorer.evaluate`` returns) and, when there are any, the notes the Python API would warn."""

    notes: list[str] | None = Field(None, description="what the Python API would warn about this request "
                                                      "(ignored keys, input hints, languages, truncation ...)")


class AutoevalAnswer(AutoevalReport):
    """``POST /v1/autoeval``'s answer: the record's autoeval report and, when there are any, notes."""

    notes: list[str] | None = Field(None, description="the record's and the run's notes (truncated queries, "
                                                      "languages, ignored keys ...)")


class RunObject(BaseModel):
    """A custom run (``POST /runs/custom``, ``GET /runs/{id}``). A row result is ``{"index", "id",
    **the summ report, "notes"?}`` (``notes``: that row's own, when it has any) or ``{"index", "id",
    "error": {"field", "message"}}``."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: str = "run"
    status: str = Field(description="running, completed or failed")
    created_at: str
    completed_at: str | None = None
    is_blocking: bool = True
    data_collection_id: str | None = None
    threshold: float | None = None
    model_slug: str | None = None
    evaluations: list[dict[str, Any]] = Field(default_factory=list, description="per evaluation {index, threshold, "
                                              "metrics: [{metric, metric_args, aggregate, results: [row result]}]}")
    notes: list[str] = Field(default_factory=list, description="the run's notes (ignored keys, report notes, "
                                                               "truncation, languages ...)")
    error: dict[str, Any] | None = None


#: The error answers every API route may give (documented in the OpenAPI schema).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in (
        (401, "missing or wrong API key (WWW-Authenticate: Bearer)"),
        (413, "body over --max-body-mb, or a request over --max-request-queries"),
        (422, "invalid request: every problem named (field 'body' for a body that cannot be read)"),
        (429, "queue full (--max-queued-queries); see Retry-After"),
        (503, "loading or draining"),
        (504, "not answered within --request-timeout-s"),
        (500, "the model or a checkpoint failed"),
    )}

#: The notes headers of the answers whose shape has no room for notes (documented in the OpenAPI schema).
NOTES_HEADERS: dict[str, dict[str, Any]] = {
    NOTES_HEADER: {"schema": {"type": "string"},
                   "description": f"the answer's notes (what the Python API would warn): a JSON list of strings, "
                                  f"ASCII-escaped, at most {NOTES_HEADER_BYTES} bytes of whole notes (the last ones "
                                  "left out beyond); absent when there is none"},
    NOTES_COUNT_HEADER: {"schema": {"type": "integer"}, "description": "how many notes the answer has in all"},
}

#: Each POST route's request body model (None: any JSON object); documented in the OpenAPI
#: schema although the routes read the body's bytes themselves (to parse them off the loop).
BODIES: dict[str, type[BaseModel] | None] = {
    "/v1/unieval": UniEvalBody, "/v1/score": ScoreBody, "/v1/summarization-evaluator": EvaluatorBody,
    "/v1/autoeval": None, "/runs/custom": CustomRunBody,
}


def _record_keys() -> set[str]:
    """The keys a report record is read from (:class:`~unieval_local.reports.records.ReportRecord`'s
    fields, the other evaluators' names for them, and the ids a report keeps)."""
    from ..fields import ALIASES
    from ..reports.records import ReportRecord

    return set(ReportRecord.model_fields) | {a.name for a in ALIASES if a.read != "hint"} | \
        {"id", "doc_id", "system_id"}


def _ignored(value: dict[str, Any], known: Collection[str], parts: dict[str, Collection[str]] | None = None) -> None:
    """Note the keys of ``value`` (and of its object parts ``parts``: name -> their known keys)
    that the endpoint does not read."""
    found = [ignored_keys_note(value, known)]
    for name, keys in (parts or {}).items():
        if isinstance(value.get(name), dict):
            found.append(ignored_keys_note(value[name], keys, name))
    for text in found:
        if text:
            notes.note(text, warn=False)


def reader(raw: bytes, model: type[BaseModel] | None, unpack: Callable[[Any], Any],
           known: Callable[[], tuple[Collection[str], dict[str, Collection[str]]]] | None = None,
           check: Callable[[Any, dict[str, Any]], list[dict[str, Any]]] | None = None) -> Callable[[], Any]:
    """A body reader for the service (:data:`~unieval_local.service.handlers.Reader`), run off the loop.

    Args:
        raw: the body's bytes.
        model: the request model the body must fit (None: any JSON object).
        unpack: the validated body (the model instance, or the dict) -> what the endpoint reads.
        known: ``(top-level keys, {part: its keys})`` the endpoint reads: other keys get a note
            (with a did-you-mean), as the Python API would refuse an unknown keyword.
        check: ``(validated body, parsed JSON) -> problems`` the model cannot see (names the
            registry or a metric list must know), each naming its field as the body wrote it.

    Returns:
        A function that parses, validates, notes ignored keys and returns ``unpack(body)``; once
        called, its ``body`` attribute is the parsed JSON (errors raised later name fields in its words).

    Raises (from the function):
        BodyError: the bytes are not usable JSON (:func:`~unieval_local.wire.http.parse_json_body`).
        ServiceError: 422: the body is not an object, or does not fit ``model`` (every problem named).
    """
    def read() -> Any:
        value = parse_json_body(raw)
        if not isinstance(value, dict):
            kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
            kind = kinds.get(type(value), "a number")
            raise ServiceError(422, "InvalidRequest", "the request body cannot be read",
                               [{"index": None, "field": "body", "message": f"the body must be a JSON object "
                                                                            f"({{...}}), got {kind}"}])
        read.body = value  # type: ignore[attr-defined]
        body: Any = value
        if model is not None:
            try:
                body = model.model_validate(value)
            except ValidationError as exc:
                raise validation_error(exc, value) from None
        if known is not None:
            _ignored(value, *known())
        if check is not None and (problems := check(body, value)):
            raise ServiceError(422, "InvalidRequest", problems[0]["message"] if len(problems) == 1 else
                               problems_message(len(problems), "the request body"), problems)
        return unpack(body)

    read.body = None  # type: ignore[attr-defined]
    return read


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes gets 413 before the app parses it
    (from its Content-Length, or counted as it streams in). (A POST body is read as JSON
    whatever its Content-Type says, ``curl -d`` sends a form type: the routes parse the bytes.)"""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        too_large = error_body("PayloadTooLarge", f"the request body is over {self.limit} bytes (--max-body-mb); "
                                                  "split the request")
        if length is not None and length.isdigit() and int(length) > self.limit:
            return await _send_json(send, 413, too_large)
        seen, refused = 0, False

        async def counted():
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # answer 413 now; the app sees the client gone
                    refused = True
                    await _send_json(send, 413, too_large)
                    return {"type": "http.disconnect"}
            return message

        async def watched(message):
            if not refused:
                await send(message)

        try:
            await self.app(scope, counted, watched)
        except Exception:
            if not refused:
                raise


async def _send_json(send, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    raw = json.dumps(body).encode()
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": raw})


def _render(body: Any) -> bytes:
    """``body`` as the JSON bytes of a response (as Starlette's JSONResponse renders it)."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


def _openapi_components(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the request body models of :data:`BODIES` (and the models they use) in its
    ``components``, where the routes' ``openapi_extra`` refers to them, normalized as FastAPI
    normalizes its own (``exclude_none``)."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.openapi.models import OpenAPI
    from pydantic.json_schema import models_json_schema

    models = [m for m in BODIES.values() if m is not None]
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")
    found = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in defs.get("$defs", {}).items():
        found.setdefault(name, definition)
    schema["components"]["schemas"] = dict(sorted(found.items()))
    return jsonable_encoder(OpenAPI(**schema), by_alias=True, exclude_none=True)


def _body_doc(path: str) -> dict[str, Any]:
    """The ``openapi_extra`` of a POST route: its request body, documented by its model."""
    model = BODIES[path]
    schema = {"$ref": f"#/components/schemas/{model.__name__}"} if model is not None else \
        {"additionalProperties": True, "title": "Body", "type": "object"}
    return {"requestBody": {"content": {"application/json": {"schema": schema}}, "required": True}}


def create_app(service: Service, api_key: str | None = None) -> Any:
    """The FastAPI app of ``service``.

    Args:
        service: the :class:`~unieval_local.service.handlers.Service`.
        api_key: the Bearer key every endpoint but ``/health`` (and the docs) requires; None: no auth.

    Returns:
        An ASGI app (FastAPI, wrapped in the body-size limit).

    Raises:
        MissingExtraError: the ``serve`` extra is not installed.
    """
    from ..extras import require

    require("serve")
    from fastapi import Depends, FastAPI, Request

    from .._version import __version__

    key = api_key.encode() if api_key else None

    def auth(request: Request) -> None:
        if key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key):
            raise ServiceError(401, "Unauthorized", "missing or wrong API key: send 'Authorization: Bearer KEY'",
                               headers={"WWW-Authenticate": "Bearer"})

    app = FastAPI(title="unieval-local", version=__version__, docs_url=None, redoc_url=None,
                  description="UniEval-style evaluation with local checkpoints: the hosted evaluators' requests, "
                              "answered on your own machine. Every route but /health, /docs and /openapi.json "
                              "needs 'Authorization: Bearer KEY' when the service has a key.")
    secured = [Depends(auth)]
    if key is not None:  # declared in the OpenAPI schema, so /docs' "Authorize" can send it
        from fastapi.security import HTTPBearer

        secured.append(Depends(HTTPBearer(auto_error=False, description="the service's API key")))
    _docs(app)
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _openapi_components(generated())
        return app.openapi_schema

    app.openapi = openapi
    _error_handlers(app, service)
    _routes(app, service, secured, key is not None)
    return BodyLimit(app, service.limits.max_body_bytes)


def _error_handlers(app: Any, service: Service) -> None:
    """Every error as JSON (:class:`~unieval_local.service.errors.ServiceError`, validation, 404/405,
    anything else as a 500 with server paths taken out), and the request metrics."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        err = validation_error(exc)
        return JSONResponse(err.body(), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        log.error("internal error on %s: %s: %s", request.url.path, type(exc).__name__, exc)
        err = service.error(exc)
        return JSONResponse(error_body("InternalError", f"{type(exc).__name__}: {' '.join(err.message.split())}"),
                            status_code=500)

    @app.middleware("http")
    async def _observe(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        endpoint = getattr(route, "path", None) or "unmatched"
        service.metrics.observe(endpoint, response.status_code, time.perf_counter() - started)
        return response


def _routes(app: Any, service: Service, secured: list, has_key: bool) -> None:
    """The routes: each POST route reads its body's bytes, hands the service a :func:`reader`,
    and answers with the notes where the route's shape has room (module docstring)."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response
    from starlette.requests import ClientDisconnect

    async def body(request: Request) -> bytes:
        try:
            return await request.body()
        except ClientDisconnect:  # the body limit refused it (413 sent), or the client went away
            raise ServiceError(400, "ClientDisconnected", "the client went away before the body was read") from None

    async def until_gone(request: Request, call: Any, read: Any, where: str = "score",
                         canonical: dict[str, str] | None = None) -> Answer:
        """The service call's answer (an error names the fields in the words of ``read``'s body:
        :func:`~unieval_local.service.errors.in_client_words`); when the client goes away first,
        the call is cancelled (its queued work is dropped: :meth:`Service._wait`) and nobody is answered."""
        import asyncio

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        work, gone = asyncio.ensure_future(call), asyncio.ensure_future(disconnected())
        try:
            done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if work in done:
            try:
                return work.result()
            except ServiceError as exc:
                raise in_client_words(exc, read.body, where, canonical) from None
        work.cancel()
        raise ServiceError(400, "ClientDisconnected", "the client went away before its answer was ready")

    async def respond(answer: Answer, notes_in: str) -> Response:
        """The answer's response: its notes under ``notes`` (``body``), in the notes headers
        (``header``), or already in the body (``run``); the JSON rendered off the loop."""
        content, headers = answer.body, dict(answer.headers)
        if notes_in == "body" and answer.notes:
            content = {**content, "notes": answer.notes}
        elif notes_in == "header":
            headers.update(notes_headers(answer.notes))
        raw, _ = await service.off_loop(_render, content)
        return Response(raw, status_code=answer.status, headers=headers, media_type="application/json")

    score_keys = (set(ScoreBody.model_fields), {})
    unieval_keys = ({"config", "data"}, {"config": {"task", "evaluation_aspect", "aspect"}})

    @app.get("/health", summary="200 once the models are loaded; 503 while loading or draining")
    async def health():
        status, answer = service.health()
        return JSONResponse(answer, status_code=status)

    @app.get("/info", dependencies=secured, responses=ERRORS, summary="version, signature, evaluators, limits")
    async def info():  # rating_config: serve --rating-config's file name and SHA-256 (null: the defaults)
        rating = service.rating_config
        return {**service.info(), "auth": has_key, "rating_config": rating.public() if rating is not None else None}

    @app.get("/metrics", dependencies=secured, responses=ERRORS, summary="Prometheus metrics (text exposition)")
    async def metrics():
        text, content_type = service.metrics.text()
        return Response(text, media_type=content_type)

    @app.post("/v1/unieval", dependencies=secured, openapi_extra=_body_doc("/v1/unieval"),
              responses={**ERRORS, 200: {"description": "the hosted metric's {overall, examples}",
                                         "headers": NOTES_HEADERS}},
              summary="the hosted UniEval metric: one query, <= 250 examples")
    async def unieval(request: Request):
        read = reader(await body(request), UniEvalBody, lambda b: (b.config.model_dump(), b.data), lambda: unieval_keys,
                      lambda _, raw: unieval_name_problems(service.engine.registry, raw))
        return await respond(await until_gone(request, service.unieval(read), read), "header")

    @app.post("/v1/score", dependencies=secured, openapi_extra=_body_doc("/v1/score"),
              responses={**ERRORS, 200: {"model": ScoreResult, "description": "Scorer.evaluate's result, with notes"}},
              summary="several aspects of one task (Scorer.evaluate as JSON)")
    async def score(request: Request):
        read = reader(await body(request), ScoreBody, lambda b: (b.task, b.aspects, b.data, b.evidence),
                      lambda: score_keys, lambda _, raw: score_name_problems(service.engine.registry, raw))
        return await respond(await until_gone(request, service.score(read), read), "body")

    @app.post("/v1/summarization-evaluator", dependencies=secured,
              openapi_extra=_body_doc("/v1/summarization-evaluator"),
              responses={**ERRORS, 200: {"description": "the rating evaluator's {summary}", "headers": NOTES_HEADERS}},
              summary="rate one summary 1-3 per metric")
    async def summarization_evaluator(request: Request):
        read = reader(await body(request), EvaluatorBody,
                      lambda b: (b.model_dump(exclude={"enabled_metrics"}, exclude_none=True), b.enabled_metrics),
                      lambda: (_record_keys() | {"enabled_metrics"}, {}),
                      lambda b, _: name_problems(b.enabled_metrics, "enabled_metrics", METRICS, "metric"))
        return await respond(await until_gone(request, service.summarization_evaluator(read), read, "reports",
                                              RATING_EVALUATOR_NAMES), "header")

    @app.post("/v1/autoeval", dependencies=secured, openapi_extra=_body_doc("/v1/autoeval"),
              responses={**ERRORS, 200: {"model": AutoevalAnswer, "description": "the record's autoeval report"}},
              summary="the autoeval report of one record")
    async def autoeval(request: Request):
        read = reader(await body(request), None, lambda b: b, lambda: (_record_keys(), {}))
        return await respond(await until_gone(request, service.autoeval(read), read, "reports", AUTOEVAL_NAMES), "body")

    @app.post("/runs/custom", dependencies=secured, openapi_extra=_body_doc("/runs/custom"),
              summary="a hosted custom run (summ metric)", status_code=200,
              responses={**ERRORS, 200: {"model": RunObject, "description": "the finished run (is_blocking true)"},
                         202: {"model": RunObject, "description": "accepted (is_blocking false): poll GET /runs/{id}"},
                         503: {"model": ErrorBody, "description": "loading, draining, or --max-runs runs kept and "
                                                                  "all running (non-blocking run; Retry-After)"}})
    async def custom_run(request: Request):
        read = reader(await body(request), CustomRunBody,
                      lambda b: b.model_dump(exclude_unset=True, exclude_none=False))
        return await respond(await service.custom_run(read), "run")

    @app.get("/runs/{run_id}", dependencies=secured, responses={**ERRORS, 200: {"model": RunObject}},
             summary="a custom run by id")
    async def get_run(run_id: str):
        return await respond(Answer(service.get_run(run_id), headers={"X-UniEval-Long-Input": service.report_long_input}),
                             "run")


def _docs(app: Any) -> None:
    """``/docs``: Swagger UI from the files of the swagger-ui-bundle package (served here: an
    air-gapped browser cannot reach a CDN); without that package, only ``/openapi.json``."""
    try:
        import swagger_ui_bundle
    except ImportError:
        return
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return get_swagger_ui_html(openapi_url="/openapi.json", title="unieval-local",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon-32x32.png")


