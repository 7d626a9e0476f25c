"""Notes and error messages in the HTTP service's words.

Lower floors write a setting as both the Python API and the CLI name it
(``strict_language / --strict-language``, ``--config FILE in the CLI, config= in Python``,
``model={'mdeberta-nli': DIR}``), since they do not know who reads them. Over HTTP neither is
the reader's: a client sets what its request body holds, and the operator starts ``serve``
with flags. :func:`in_http_words` rewrites those phrases at the service's boundary (as
:mod:`unieval_local.api` rewrites the CLI's ``--model DIR`` into ``model='DIR'``), so no lower
floor holds an HTTP string.
"""

from __future__ import annotations

import re

__all__ = ["MISSING_WORDS", "HTTP_NAMES", "in_http_words"]

_NAME = r"[\w.-]+"

#: (pattern, replacement) pairs, applied in order: the Python/CLI wording of a setting -> the
#: ``serve`` flag that sets it for every request (no request field sets these).
HTTP_NAMES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"strict_language / --strict-language"), "serve --strict-language"),
    (re.compile(r"consistency_aspect / --consistency-aspect"), "serve --consistency-aspect"),
    (re.compile(r"\(--consistency-aspect, consistency_aspect=\)"), "(serve --consistency-aspect)"),
    (re.compile(r"--config FILE in the CLI, config= in Python"), "serve --rating-config FILE.yaml"),
    (re.compile(rf"\(--model ({_NAME})=DIR, model=\{{'{_NAME}': DIR\}}\)"), r"(serve --model \1=DIR)"),
    (re.compile(rf"--model ({_NAME})=DIR \(model=\{{'{_NAME}': DIR\}} in Python\)"), r"serve --model \1=DIR"),
    (re.compile(rf"Scorer\(model=\{{'({_NAME})': DIR\}}\) in Python"), r"serve --model \1=DIR"),
    (re.compile(rf"model=\{{'({_NAME})': DIR(?:, \.\.\.)?\}}"), r"serve --model \1=DIR"),
    (re.compile(r"aspects=\[NAME\] asks for it"), '"aspects": [NAME] in the body asks for it'),
)

#: Top-level body keys a request model requires (/v1/summarization-evaluator's), said missing as
#: /v1/autoeval and /runs/custom say a record's missing summary (one wording on every endpoint),
#: not as pydantic's "Field required".
MISSING_WORDS: dict[str, str] = {"summary": "the summary is missing", "input": "the input is missing"}


def in_http_words(text: str) -> str:
    """``text`` with each Python/CLI phrase of :data:`HTTP_NAMES` in the service's words.

    Example:
        >>> in_http_words("not validated (strict_language / --strict-language refuses such examples)")
        'not validated (serve --strict-language refuses such examples)'
        >>> in_http_words("give it (--model mdeberta-nli=DIR, model={'mdeberta-nli': DIR}), or ...")
        'give it (serve --model mdeberta-nli=DIR), or ...'
    """
    for pattern, repl in HTTP_NAMES:
        text = pattern.sub(repl, text)
    return text
