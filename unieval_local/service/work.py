"""What an endpoint's work is made of, between the HTTP layer and the scheduler: the body
:data:`Reader`, the prepared :class:`Work` of one HTTP request and its :class:`Answer`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..requests.base import Request

__all__ = ["Answer", "RatingConfigFile", "Reader", "Work", "named_checkpoints"]

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


@dataclass(frozen=True)
class RatingConfigFile:
    """The rating config a service rates with (``serve --rating-config FILE``): templates, fitted
    cut points, rules, read once at start as ``report --format rating --config FILE`` reads it.

    Attributes:
        config: the :class:`~unieval_local.reports.RatingConfig`.
        name: the file's name alone (its folder is a server path, never shown).
        sha256: the SHA-256 of the file's bytes as read (64 hex digits), so a client can tell
            which copy of a config rated its summaries.
    """

    config: Any
    name: str
    sha256: str

    @classmethod
    def load(cls, path: str) -> "RatingConfigFile":
        """Read and validate ``path`` (:func:`~unieval_local.reports.options.load_options` with
        :class:`~unieval_local.reports.RatingConfig`, the loader of ``report --config``).

        Raises:
            ValueError: unreadable file, YAML syntax, not a mapping, an invalid setting (the
                message names the file and the key).
        """
        import hashlib
        import os

        from ..reports.options import load_options
        from ..reports.rating import RatingConfig

        config = load_options(RatingConfig, path)
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        return cls(config, os.path.basename(os.fspath(path)), digest)

    def public(self) -> dict[str, str]:
        """What ``/info`` says of it: ``{"file": name, "sha256": hex}`` (no folder)."""
        return {"file": self.name, "sha256": self.sha256}


def named_checkpoints(rating: RatingConfigFile | None, consistency_aspect: str | None) -> dict[str, str]:
    """The checkpoints that ``serve``'s options name, each with the option that names it (for the
    one-line refusal at start, as ``report`` refuses the same set-up before loading): the G-Eval
    judge's model (``--rating-config`` with ``judge: g-eval``), the rating config's own checker and
    ``metric_aspects``, and the ``--consistency-aspect`` checker of the report endpoints.

    Example:
        >>> named_checkpoints(None, "fact/consistency")
        {'unieval-fact': '--consistency-aspect fact/consistency'}
    """
    from ..registry.tasks import DEFAULT_REGISTRY
    from ..reports.options import resolve_consistency_aspect

    named: dict[str, str] = {}
    if rating is not None:
        config, where = rating.config, f"--rating-config {rating.name}"
        if config.judge == "g-eval":
            for m in config.enabled_metrics:
                aspect = DEFAULT_REGISTRY.get_aspect("summarization", f"geval_{m}")
                named.setdefault(aspect.checkpoint, f"{where} (judge: g-eval)")
        else:
            if "consistency_aspect" in config.model_fields_set:
                aspect = resolve_consistency_aspect(DEFAULT_REGISTRY, config.consistency_aspect)
                named.setdefault(aspect.checkpoint, f"{where} (consistency_aspect: {config.consistency_aspect})")
            for metric, name in config.metric_aspects.items():
                aspect = resolve_consistency_aspect(DEFAULT_REGISTRY, name)
                named.setdefault(aspect.checkpoint, f"{where} (metric_aspects.{metric}: {name})")
    if consistency_aspect is not None:
        aspect = resolve_consistency_aspect(DEFAULT_REGISTRY, consistency_aspect)
        named.setdefault(aspect.checkpoint, f"--consistency-aspect {consistency_aspect}")
    return named
