"""What an endpoint's work is made of, between the HTTP layer and the scheduler: the body
:data:`Reader`, the prepared :class:`Work` of one HTTP request and its :class:`Answer`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..requests.base import Request

__all__ = ["Answer", "Reader", "Work"]

#: A request body reader: parses and validates the body (in a preparation thread) and returns
#: what the endpoint reads (its arguments); raises ServiceError (422) or BodyError.
Reader = Callable[[], Any]


@dataclass
class Answer:
    """One endpoint's answer.

    Attributes:
        body: the JSON answer (the endpoint's documented shape).
        notes: what the client should know besides it, in order, each once, server paths taken
            out; where they travel (a ``notes`` key, or the ``X-UniEval-Notes`` header) is the
            route's choice (:mod:`unieval_local.service.app`).
        status: the HTTP status (200; 202 for a custom run accepted without waiting).
        headers: extra response headers (``Location`` of a run).
    """

    body: Any
    notes: list[str] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Work:
    """One HTTP request's work, prepared off the loop: the requests to submit (planned), their
    estimated tokens, and ``finish(answers) -> body`` (run off the loop too)."""

    requests: list[Request]
    prepared: list[Any]
    tokens: int
    finish: Callable[[list[Any]], Any]
    long_input: str = "truncate"
