"""What the HTTP service's requests and answers look like on the wire, apart from the endpoints'
own shapes: a request body read from its bytes (:func:`parse_json_body`: UTF-8 JSON, every way
it can fail named for the field ``body``), the body keys an endpoint does not read
(:func:`ignored_keys_note`), notes sent as response headers (:func:`notes_headers`), and the
server's file paths kept out of what a client reads (:class:`PathRedactor`,
:func:`public_checkpoints`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

__all__ = ["NOTES_COUNT_HEADER", "NOTES_HEADER", "NOTES_HEADER_BYTES", "BodyError", "PathRedactor", "known_paths",
           "ignored_keys_note", "notes_headers", "parse_json_body", "public_checkpoints"]

#: The response header that carries an answer's notes where its body has no room for them:
#: ASCII-escaped JSON, a list of strings (``json.dumps(notes, ensure_ascii=True)``).
NOTES_HEADER = "X-UniEval-Notes"
#: The response header giving how many notes the answer has (the notes header may hold fewer).
NOTES_COUNT_HEADER = "X-UniEval-Notes-Count"
#: The most bytes :data:`NOTES_HEADER` holds: whole notes are left out from the end beyond it.
NOTES_HEADER_BYTES = 4096


class BodyError(ValueError):
    """A request body that is not a usable JSON document (the message says why and where; an
    HTTP service answers it as a 422 naming the field ``body``)."""


def parse_json_body(raw: bytes) -> Any:
    """The JSON value of a request body.

    Args:
        raw: the body's bytes, UTF-8 (RFC 8259; a leading byte-order mark is skipped).

    Returns:
        The parsed value (``json.loads``: objects as dicts, any JSON value at the top).

    Raises:
        BodyError: the body is empty or whitespace; not valid UTF-8 (the byte and its offset);
            not JSON (what was expected, line, column and character offset); nested deeper than
            the parser's recursion limit (about 1,000 levels); or holding an integer longer than
            Python converts (``sys.get_int_max_str_digits()``, 4,300 digits by default).

    Example:
        >>> parse_json_body(b'{"data": []}')
        {'data': []}
    """
    if not raw.strip():
        raise BodyError("the body is empty: send a JSON object (Content-Type: application/json)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the body is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start}: "
                        f"{exc.reason}); send JSON encoded as UTF-8") from None
    text = text.removeprefix("\ufeff")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BodyError(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
                        f"(character {exc.pos})") from None
    except RecursionError:
        raise BodyError("the body is not usable JSON: its arrays and objects are nested too deeply "
                        f"(more than about {sys.getrecursionlimit()} levels)") from None
    except ValueError as exc:  # an integer over sys.get_int_max_str_digits() digits
        limit = sys.get_int_max_str_digits()
        raise BodyError(f"the body is not usable JSON: a number has more than {limit} digits"
                        if "digits" in str(exc) else f"the body is not usable JSON: {exc}") from None


def ignored_keys_note(keys: Iterable[str], known: Collection[str], where: str = "") -> str | None:
    """A note naming the keys of a body (or of its part ``where``, e.g. ``config``) that the
    endpoint does not read, each with a did-you-mean when it is close to a known key
    (:func:`difflib.get_close_matches`); None when every key is known.

    Example:
        >>> print(ignored_keys_note(["task", "aspec"], ["task", "aspect"], "config"))
        request body keys ignored: config.aspec (did you mean 'aspect'?)
    """
    unknown = [k for k in keys if k not in known]
    if not unknown:
        return None
    names = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.75)
        names.append(f"{where + '.' if where else ''}{key}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"request body keys ignored: {', '.join(names)}"


def notes_headers(notes: Iterable[str], limit: int = NOTES_HEADER_BYTES) -> dict[str, str]:
    """The response headers of an answer's notes: ``{NOTES_HEADER: json, NOTES_COUNT_HEADER: n}``,
    or ``{}`` when there is none.

    The notes header is ``json.dumps(kept, ensure_ascii=True)`` (ASCII only, no line break: a
    valid header value); ``kept`` is the notes in order, whole notes left out from the end until it
    is at most ``limit`` bytes (it may be ``[]`` when the first note alone is longer). The count
    header is the number of ALL notes, so a client sees when some were left out.
    """
    notes = list(notes)
    if not notes:
        return {}
    kept = list(notes)
    while kept and len(json.dumps(kept, ensure_ascii=True)) > limit:
        kept.pop()
    return {NOTES_HEADER: json.dumps(kept, ensure_ascii=True), NOTES_COUNT_HEADER: str(len(notes))}


#: An absolute POSIX path: a slash (not inside a word, a URL or another path; a ``file://`` URL's
#: path counts), then characters that are not blanks, quotes or brackets.
_ABSOLUTE = re.compile(r"(?:(?<=file://)|(?<![\w.~/:-]))(/[^\s'\"`<>|,;()\[\]{}]+)")
#: A Windows path: a drive letter, a colon and a backslash.
_WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:\\[^\s'\"`<>|,;()\[\]{}]*")


class PathRedactor:
    """Server paths out of text a client reads (error messages, notes, signatures), so an answer
    names checkpoints by evaluator and content hash, never by the server's folders.

    Args:
        known: returns ``{path: name}``: folders whose name a client may read instead (a
            checkpoint folder -> its evaluator name); read at every call (checkpoints resolve lazily).

    Calling the redactor replaces each known path (the longest first; what follows it, e.g.
    ``/config.json``, stays) by its name, then, as the last line of defence, every other absolute
    path whose first folder exists on this machine (``/tmp/...``, ``/home/...``; not ``/v1/score``
    nor ``/runs/{id}``, which are routes) and every Windows path by ``<path>``.

    Example:
        >>> redact = PathRedactor(lambda: {"/srv/ckpt/unieval-sum": "unieval-sum"})
        >>> redact("cannot read /srv/ckpt/unieval-sum/config.json; see GET /runs/{id}")
        'cannot read unieval-sum/config.json; see GET /runs/{id}'
    """

    def __init__(self, known: Callable[[], Mapping[str, str]] = dict):
        self.known = known

    def __call__(self, text: str) -> str:
        """``text`` with the server's paths replaced (class docstring)."""
        if not isinstance(text, str) or ("/" not in text and "\\" not in text):
            return text
        names: dict[str, str] = {}
        for path, name in self.known().items():  # as given (relative too, when it names a folder), and resolved
            for variant in {str(path), os.path.abspath(str(path)), os.path.realpath(str(path))}:
                if len(variant) > 1 and (os.path.isabs(variant) or "/" in variant or os.sep in variant):
                    names[variant.rstrip("/")] = name
        for path in sorted(names, key=len, reverse=True):
            text = text.replace(path, names[path])
        roots = _root_entries()
        text = _ABSOLUTE.sub(lambda m: _unless_route(m.group(1), roots), text)
        return _WINDOWS.sub("<path>", text)


def _root_entries() -> frozenset[str]:
    try:
        return frozenset(os.listdir("/"))
    except OSError:
        return frozenset()


def _unless_route(path: str, roots: frozenset[str]) -> str:
    """``<path>`` for a path of at least two parts under an existing root folder, else the text as it was."""
    trimmed = path.rstrip(".")
    parts = trimmed.lstrip("/").split("/")
    if len(parts) >= 2 and parts[0] in roots:
        return "<path>" + path[len(trimmed):]
    return path


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def public_checkpoints(identities: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a client may read of the checkpoints in use: per checkpoint name (its evaluator),
    ``{"evaluator", "fingerprint", "revision", "max_length", "identity"}`` plus ``hub_id`` when the
    checkpoint is known by one; never its folder.

    Args:
        identities: :meth:`Engine.checkpoint_identities
            <unieval_local.engine.Engine.checkpoint_identities>` (``checkpoint`` is a hub id or a
            folder; ``fingerprint`` the content SHA-256).

    Returns:
        ``fingerprint``: the first 12 hex digits of the content fingerprint (as the signature
        string gives it), or None.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, ident in identities.items():
        fp = ident.get("fingerprint")
        entry = {"evaluator": name, "fingerprint": fp[:12] if isinstance(fp, str) else None,
                 "revision": ident.get("revision"), "max_length": ident.get("max_length"),
                 "identity": ident.get("identity")}
        ckpt = ident.get("checkpoint")
        if isinstance(ckpt, str) and _HUB_ID.fullmatch(ckpt) and not os.path.exists(ckpt):
            entry["hub_id"] = ckpt
        out[name] = entry
    return out


def known_paths(engine: Any) -> dict[str, str]:
    """Server folders a client may read a name for (:class:`PathRedactor`): each resolved
    checkpoint's folder (its name), and the folders of the engine's ``model`` setting."""
    known: dict[str, str] = {}
    model = engine.model
    if isinstance(model, Mapping):
        known.update({str(path): str(name) for name, path in model.items() if path})
    elif isinstance(model, (str, os.PathLike)):
        known[str(model)] = os.path.basename(str(model).rstrip("/\\")) or "<path>"
    for name in engine.resolved_checkpoints():
        try:
            known[str(engine.checkpoint(name).path)] = name
        except Exception:  # noqa: BLE001  a checkpoint that no longer resolves: the regex still applies
            continue
    return known
