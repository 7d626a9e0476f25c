"""Key points of the source and claims of the summary written by a local instruct model (issue
44, item 3, in the seed formats: seed 001's ``n_key_points`` and ``max_n_claims``).

With a generator staged (the ``generator`` setting, or the staged ``g-eval`` model:
:func:`unieval_local.claims.resolve_generator`; ``none``: never), :func:`write_points` has it write,
for the records of one request in ONE batched greedy generation:

* up to ``n`` key points of each record's source that needs them (no ``key_points`` given):
  :func:`~unieval_local.text.claims.keypoints_messages`, read by
  :func:`~unieval_local.text.claims.parse_claims` and capped at ``n`` (``n``: the record's or the
  run's ``n_key_points``, else :func:`~unieval_local.text.keypoints.default_n_key_points` of the
  source's candidate sentences, as LexRank would take);
* with ``claims=True`` (the ``summ`` report) the atomic claims of each summary:
  :func:`~unieval_local.text.claims.claims_messages` (FActScore, Min et al. 2023, Sec. 3.1), read by
  ``parse_claims`` (the report caps them at ``max_n_claims``).

A record whose generation failed (``length``: hit :data:`MAX_NEW_TOKENS`; ``too_long``: the prompt
is over the window; ``not_a_list``: no ``- `` line) keeps today's key points (LexRank sentences)
or claims (the summary's sentences) and gets a row note naming the generator and why; a record
whose key points or claims were generated gets a row note saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..claims import MAX_NEW_TOKENS, STOP, _generator
from ..errors import CheckpointError
from ..text.claims import claims_messages, keypoints_messages, parse_claims
from ..text.language import writing_language

__all__ = ["MAX_NEW_TOKENS", "STOP", "Written", "write_points"]

# MAX_NEW_TOKENS (what a key-point or claim list may take) and STOP (a blank line ends a list) are
# fact/claims' own (unieval_local.claims): the same lists, written by the same generator.


@dataclass
class Written:
    """What the generator wrote for a request's records.

    Attributes:
        generator: its name, or None (none staged: nothing written).
        key_points: record index -> the generated key points (at most ``n``).
        claims: record index -> the generated claims (all of them; the report caps them).
        notes: record index -> row notes (what was generated, what fell back and why).
    """

    generator: str | None = None
    key_points: dict[int, list[str]] = field(default_factory=dict)
    claims: dict[int, list[str]] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)


def _language(engine: Any, record: Any) -> str:
    """The language to write a record's points in: its request group's (a language view of the
    engine), else the record's own, as :func:`~unieval_local.text.language.writing_language` reads it."""
    lang = getattr(engine, "group_language", None)
    if lang is None and isinstance(record, Mapping):
        lang = engine.record_language(record)
    return writing_language(lang)


def write_points(engine: Any, parsed: Sequence[Any], records: Sequence[Any], n_default: int | None,
                 claims: bool = False) -> Written:
    """Write the key points (and with ``claims`` the claims) of ``parsed``'s records (module
    docstring); records that are None, or that give ``key_points``, get no key points.

    Args:
        engine: the request's engine (a language view: its ``origin`` holds the generator).
        parsed: the parsed records (:class:`~unieval_local.reports.records.ReportRecord` or None).
        records: the input records (their language). n_default: the run's ``n_key_points``.

    Returns:
        :class:`Written` (empty with ``generator`` None when no generator is staged).

    Raises:
        CheckpointNotFoundError, CheckpointError: a ``NAME=DIR`` generator that is not there or
            is not an instruct model (the default ``g-eval`` folder that cannot write: nothing
            written, today's key points).
    """
    from ..text.keypoints import extract_key_points

    gen = _generator(getattr(engine, "origin", engine))
    if gen is None:
        return Written()
    name, runner = gen[0], gen[1]
    out = Written(generator=name)
    asks: list[tuple[int, str, int | None]] = []  # (record, "key_points" | "claims", n)
    prompts: list[str] = []
    try:
        for i, rec in enumerate(parsed):
            if rec is None:
                continue
            lang = _language(engine, records[i])
            if not rec.key_points and rec.source and rec.source.strip():
                n = rec.n_key_points if rec.n_key_points is not None else n_default
                if n is None:  # as many as LexRank would take from this source
                    n = len(extract_key_points(rec.source, None, splitter=engine.splitter))
                if n:
                    prompts.append(runner.chat_prompt(keypoints_messages(rec.source, n, lang)))
                    asks.append((i, "key_points", n))
            if claims and rec.target and rec.target.strip():
                prompts.append(runner.chat_prompt(claims_messages(rec.target, lang)))
                asks.append((i, "claims", None))
    except CheckpointError:
        if engine.settings.generator is not None:  # named by the user: refused
            raise
        return Written()  # the staged g-eval folder cannot write (no chat template): today's
    made = runner.generate(prompts, max_new_tokens=MAX_NEW_TOKENS, stop=STOP) if prompts else []
    for (i, what, n), g in zip(asks, made):
        got = parse_claims(g.text) if g.finish not in ("length", "too_long") else None
        label = "key points" if what == "key_points" else "claims"
        if got is None:
            why = g.finish if g.finish in ("length", "too_long") else "not_a_list"
            instead = "the source's LexRank sentences" if what == "key_points" else "the summary's sentences"
            out.notes.setdefault(i, []).append(f"the {label} were not generated ({why}: the generator {name} "
                                               f"failed); {instead} are used instead")
            continue
        (out.key_points if what == "key_points" else out.claims)[i] = got[:n] if n else got
        out.notes.setdefault(i, []).append(f"the {label} were written by the local generator {name}")
    return out
