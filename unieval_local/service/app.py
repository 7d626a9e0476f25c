"""The ASGI app (FastAPI): routes, request models (OpenAPI at ``/docs`` and ``/openapi.json``),
Bearer auth, the body-size limit, JSON errors and request metrics, over a
:class:`~unieval_local.service.handlers.Service`.

Every error is JSON ``{"error": {"type", "message", "examples": [{"index", "field",
"message"}]}}``, never a traceback or an HTML page: 401 (missing or wrong key, with
``WWW-Authenticate: Bearer``; the key is compared in constant time), 404/405, 413 (a body over
``--max-body-mb``, refused from its Content-Length or while it streams in, before it is
parsed), 422 (an invalid request: every problem named), 429 (queue full, with ``Retry-After``),
503 (loading or draining), 504 (request timeout), 500 (the model or checkpoint failed).
"""


import hmac
import logging
import time
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ..wire.hosted import DEFAULT_ASPECT, DEFAULT_TASK
from .handlers import Service, ServiceError, error_body

__all__ = ["ERRORS", "CustomRunBody", "ErrorBody", "EvaluatorBody", "ScoreBody", "UniEvalBody", "create_app"]

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


#: The error answers every API route may give (documented in the OpenAPI schema).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in (
        (401, "missing or wrong API key (WWW-Authenticate: Bearer)"),
        (413, "body over --max-body-mb"),
        (422, "invalid request: every problem named"),
        (429, "queue full (--max-queued-queries); see Retry-After"),
        (503, "loading or draining"),
        (504, "not answered within --request-timeout-s"),
        (500, "the model or a checkpoint failed"),
    )}


def _from_validation(exc: Any) -> ServiceError:
    """A 422 naming every problem of a request that does not parse (``data[3].target`` -> index 3,
    field ``data.3.target``; a body that is not JSON -> field ``body`` with the character offset)."""
    examples = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            at = next((p for p in err.get("loc", ()) if isinstance(p, int)), None)
            why = (err.get("ctx") or {}).get("error") or "invalid JSON"
            examples.append({"index": None, "field": "body",
                             "message": f"the body is not valid JSON: {why}"
                                        f"{f' at character {at}' if at is not None else ''}"})
            continue
        loc = [p for p in err.get("loc", ()) if p != "body"]
        index = next((p for p in loc if isinstance(p, int)), None)
        field = ".".join(str(p) for p in loc) or "body"
        examples.append({"index": index, "field": field, "message": err.get("msg", "invalid")})
    return ServiceError(422, "InvalidRequest", f"{len(examples)} problem(s) in the request body", examples)


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes gets 413 before the app parses it
    (from its Content-Length, or counted as it streams in). A POST body is read as JSON
    whatever its Content-Type says (``curl -d`` sends a form type)."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if scope.get("method") == "POST" and b"json" not in headers.get(b"content-type", b""):
            # every body here is JSON: `curl -d` (form type) or no type at all is read as JSON
            kept = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-type"]
            scope = {**scope, "headers": kept + [(b"content-type", b"application/json")]}
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
    import json

    raw = json.dumps(body).encode()
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": raw})


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
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

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

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        err = _from_validation(exc)
        return JSONResponse(err.body(), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        log.error("internal error on %s: %s: %s", request.url.path, type(exc).__name__, exc)
        return JSONResponse(error_body("InternalError", f"{type(exc).__name__}: {' '.join(str(exc).split())}"),
                            status_code=500)

    @app.middleware("http")
    async def _observe(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        endpoint = getattr(route, "path", None) or "unmatched"
        service.metrics.observe(endpoint, response.status_code, time.perf_counter() - started)
        return response

    @app.get("/health", summary="200 once the models are loaded; 503 while loading or draining")
    async def health():
        status, body = service.health()
        return JSONResponse(body, status_code=status)

    @app.get("/info", dependencies=secured, responses=ERRORS, summary="version, signature, evaluators, limits")
    async def info():
        return {**service.info(), "auth": key is not None}

    @app.get("/metrics", dependencies=secured, responses=ERRORS, summary="Prometheus metrics (text exposition)")
    async def metrics():
        body, content_type = service.metrics.text()
        return Response(body, media_type=content_type)

    @app.post("/v1/unieval", dependencies=secured, responses=ERRORS, summary="the hosted UniEval metric: one query, <= 250 examples")
    async def unieval(body: UniEvalBody):
        return await service.unieval(body.config.model_dump(), body.data)

    @app.post("/v1/score", dependencies=secured, responses=ERRORS, summary="several aspects of one task (Scorer.evaluate as JSON)")
    async def score(body: ScoreBody):
        return await service.score(body.task, body.aspects, body.data, body.evidence)

    @app.post("/v1/summarization-evaluator", dependencies=secured, responses=ERRORS, summary="rate one summary 1-3 per metric")
    async def summarization_evaluator(body: EvaluatorBody):
        record = body.model_dump(exclude={"enabled_metrics"}, exclude_none=True)
        return await service.summarization_evaluator(record, body.enabled_metrics)

    @app.post("/v1/autoeval", dependencies=secured, responses=ERRORS, summary="the autoeval report of one record")
    async def autoeval(body: dict[str, Any]):
        return await service.autoeval(body)

    @app.post("/runs/custom", dependencies=secured, summary="a hosted custom run (summ metric)",
              status_code=200, responses={**ERRORS, 202: {"description": "accepted (is_blocking false): poll GET /runs/{id}"}})
    async def custom_run(body: CustomRunBody):
        status, run = await service.custom_run(body.model_dump(exclude_unset=True, exclude_none=False))
        headers = {"Location": f"/runs/{run['id']}"} if status == 202 else None
        return JSONResponse(run, status_code=status, headers=headers)

    @app.get("/runs/{run_id}", dependencies=secured, responses=ERRORS, summary="a custom run by id")
    async def get_run(run_id: str):
        return service.get_run(run_id)

    return BodyLimit(app, service.limits.max_body_bytes)


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


