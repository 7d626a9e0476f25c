"""The service's error answers, without the HTTP framework: :class:`ServiceError` (status, type,
message, per-example problems, headers), the one JSON shape of every error (:func:`error_body`),
and the error of each exception a request can raise (:func:`service_error`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import (
    CheckpointError,
    CheckpointNotFoundError,
    ExampleProblem,
    InvalidExampleError,
    NonFiniteScoreError,
    RequestTooLargeError,
    UniEvalError,
    UnknownTaskError,
)
from ..wire.client_fields import body_path, client_loc, client_problems, missing_key_hint
from ..wire.http import BodyError
from .core import DrainingError, QueueFullError, RequestTooCostlyError
from .words import MISSING_WORDS

__all__ = ["ServiceError", "error_body", "in_client_words", "problems_message", "service_error", "validation_error"]


def problems_message(n: int, where: str) -> str:
    """``1 problem in WHERE`` / ``N problems in WHERE``: the message of a 422 that lists ``n`` problems."""
    return f"{n} problem{'' if n == 1 else 's'} in {where}"


class ServiceError(Exception):
    """An HTTP error answer: ``{"error": {"type", "message", "examples": [{"index", "field", "message"}]}}``.

    Args:
        status: the HTTP status (401, 404, 413, 422, 429, 503, 504, 500).
        type: a short name (``InvalidRequest``, ``QueueFull`` ...).
        message: what is wrong and what to do.
        examples: per-example problems (empty when the request as a whole is at fault).
        headers: extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(self, status: int, type: str, message: str, examples: Sequence[Mapping[str, Any]] = (),
                 headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.type, self.message = status, type, message
        self.examples = [dict(e) for e in examples]
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(self.type, self.message, self.examples)


def error_body(type: str, message: str, examples: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``{"error": {"type", "message", "examples"}}``: every error answer's shape."""
    return {"error": {"type": type, "message": message, "examples": [dict(e) for e in examples]}}


def validation_error(exc: Any, body: Any = None, missing: Mapping[str, str] = MISSING_WORDS) -> ServiceError:
    """A 422 naming every problem of a body that does not fit its model (a pydantic
    ``ValidationError`` or FastAPI's ``RequestValidationError``) by its path in the body the
    client sent (:func:`~unieval_local.wire.client_fields.body_path`: ``data[3]``,
    ``enabled_metrics[1]``, ``evaluations[0].data[2].input``); ``index`` is the example's
    position for a problem under ``data``, else None. A required key that is missing gets a
    did-you-mean for a misspelt key of ``body`` (the parsed JSON; ``sumary`` -> ``summary``);
    ``missing`` (body path -> words; :data:`~unieval_local.service.words.MISSING_WORDS`) says a
    missing key as the endpoints that read the same field from a record do (``summary``: ``the
    summary is missing``), not pydantic's ``Field required``."""
    errors = [(err, [p for p in err.get("loc", ()) if p != "body"]) for err in exc.errors()]
    fitting = errors if body is None else \
        [(err, loc) for err, loc in ((e, client_loc(body, loc)) for e, loc in errors) if loc is not None]
    examples = []  # another union member's complaint is left out, unless no member fits the value
    for err, loc in fitting or [(err, client_loc(body, loc, drop=False)) for err, loc in errors]:
        index = loc[1] if len(loc) > 1 and loc[0] == "data" and isinstance(loc[1], int) else None
        hint = missing_key_hint(body, loc) if err.get("type") == "missing" else ""
        path = body_path(loc)
        said = missing.get(path) if err.get("type") == "missing" else None
        examples.append({"index": index, "field": path, "message": (said or err.get("msg", "invalid")) + hint})
    return ServiceError(422, "InvalidRequest", problems_message(len(examples), "the request body"), examples)


def in_client_words(err: ServiceError, body: Any, where: str, canonical: Mapping[str, str] | None = None
                    ) -> ServiceError:
    """``err`` with its per-example problems' fields in the words of ``body``, the parsed body
    the client sent (:func:`~unieval_local.wire.client_fields.client_problems`): an example's
    ``system_output`` is named ``system_output``, not ``target``.

    Args:
        where: ``score`` (the examples are ``body["data"]``) or ``reports`` (the body is the one
            record, index 0).
        canonical: our field -> the endpoint's name for a field the example did not give at all.
    """
    if not err.examples or not isinstance(body, Mapping):
        return err

    def record(index: Any) -> Any:
        if where == "reports":
            return body if index == 0 else None
        data = body.get("data")
        return data[index] if isinstance(data, list) and isinstance(index, int) and 0 <= index < len(data) else None

    examples = client_problems(err.examples, record, where, canonical)
    message = err.message
    if len(examples) == 1 and err.message == err.examples[0].get("message"):  # a one-problem message: renamed too
        message = examples[0]["message"]
    return ServiceError(err.status, err.type, message, examples, err.headers)


def _problems(problems: Sequence[ExampleProblem]) -> list[dict[str, Any]]:
    return [{"index": p.index, "field": p.field, "message": (f"aspect {p.aspect!r}: " if p.aspect else "") + p.message}
            for p in problems]


def service_error(exc: BaseException) -> ServiceError:
    """The HTTP error of an exception a request raised (its answer never holds a traceback).

    InvalidExampleError -> 422 with every problem; a body that is not usable JSON
    (:class:`~unieval_local.wire.http.BodyError`) or nested too deeply to handle (RecursionError)
    -> 422 naming the field ``body``; UnknownTaskError, RequestTooLargeError, other ValueError ->
    422; a checkpoint the request needs that cannot be found or used -> 422
    ``CheckpointUnavailable``; NonFiniteScoreError -> 422 naming the examples;
    RequestTooCostlyError -> 413; QueueFullError -> 429 with Retry-After; DrainingError -> 503;
    anything else (a checkpoint that does not run, the model failing) -> 500 with its one-line
    message. Messages may hold server paths: :meth:`Service.error
    <unieval_local.service.handlers.Service.error>` takes them out.
    """
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, InvalidExampleError):
        return ServiceError(422, "InvalidExample", problems_message(len(exc.problems), "the request's examples"),
                            _problems(exc.problems))
    if isinstance(exc, (BodyError, RecursionError)):
        why = str(exc) if isinstance(exc, BodyError) else ("the body's arrays and objects are nested too deeply "
                                                           "to handle")
        return ServiceError(422, "InvalidRequest", "the request body cannot be read",
                            [{"index": None, "field": "body", "message": why}])
    if isinstance(exc, NonFiniteScoreError):
        return ServiceError(422, "NonFiniteScore", str(exc),
                            [{"index": i, "field": "value", "message": "the model gave a non-finite score"}
                             for i in exc.indices])
    if isinstance(exc, RequestTooCostlyError):
        return ServiceError(413, "RequestTooCostly", str(exc))
    if isinstance(exc, QueueFullError):
        return ServiceError(429, "QueueFull", str(exc), headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, DrainingError):
        return ServiceError(503, "Draining", str(exc), headers={"Retry-After": "5"})
    if isinstance(exc, (UnknownTaskError, RequestTooLargeError, ValueError)):
        return ServiceError(422, "InvalidRequest", " ".join(str(exc).split()))
    if isinstance(exc, (CheckpointError, CheckpointNotFoundError)):  # the request asks for an evaluator not served
        return ServiceError(422, "CheckpointUnavailable",
                            f"{' '.join(str(exc).split())} (this service cannot score that task/aspect: start it "
                            "with --model NAME=DIR for that evaluator; GET /info lists what is loaded)")
    kind = type(exc).__name__ if isinstance(exc, UniEvalError) else "InternalError"
    return ServiceError(500, kind, " ".join(str(exc).split()) or kind)
