"""Token arithmetic on a Hugging Face tokenizer, shared by every backend's
:class:`~unieval_local.pipeline.planning.TokenCounter` methods (plain texts, no special tokens
unless said), and the lock every call of a tokenizer takes (:func:`encode`). No torch.

A fast tokenizer's truncation and padding settings are state of its Rust object: a call that
truncates sets them and the next call that does not resets them, and two threads doing so at
once fail with "Already borrowed". The HTTP service plans requests (counting tokens) in handler
threads while the worker tokenizes a batch, so every call goes through :func:`encode`, which
holds one lock per tokenizer.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

__all__ = ["TokenArithmetic", "count_plain", "cut", "cut_points", "encode"]

_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def encode(tokenizer, *args, **kwargs):
    """``tokenizer(*args, **kwargs)`` under the tokenizer's own lock (module docstring)."""
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault(tokenizer, threading.Lock())
    with lock:
        return tokenizer(*args, **kwargs)


def count_plain(tokenizer, texts: Sequence[str]) -> list[int]:
    """Tokens of each text without special tokens."""
    if not texts:
        return []
    return [len(x) for x in encode(tokenizer, list(texts), add_special_tokens=False)["input_ids"]]


def cut(tokenizer, text: str, n_tokens: int) -> int:
    """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
    if n_tokens <= 0:
        return 0
    offsets = encode(tokenizer, text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if n_tokens >= len(offsets):
        return len(text)
    return offsets[n_tokens - 1][1]


def cut_points(tokenizer, text: str, n_tokens: int) -> list[int]:
    """Offsets cutting ``text`` into parts of ``n_tokens`` tokens, from ONE tokenization of the
    whole text (linear in its length; see :meth:`TokenCounter.cut_points
    <unieval_local.pipeline.planning.TokenCounter.cut_points>`)."""
    n_tokens = max(1, n_tokens)
    offsets = encode(tokenizer, text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    points = [offsets[k - 1][1] for k in range(n_tokens, len(offsets), n_tokens)]
    points = [p for i, p in enumerate(points) if 0 < p < len(text) and (i == 0 or p > points[i - 1])]
    return points + [len(text)]


class TokenArithmetic:
    """The plain-text token arithmetic of a runner whose ``model`` holds its ``tokenizer``
    (:class:`~unieval_local.pipeline.planning.TokenCounter`'s ``count_plain``, ``cut`` and
    ``cut_points``, through the functions above: one lock per tokenizer)."""

    model: Any

    def count_plain(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens."""
        return count_plain(self.model.tokenizer, texts)

    def cut(self, text: str, n_tokens: int) -> int:
        """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
        return cut(self.model.tokenizer, text, n_tokens)

    def cut_points(self, text: str, n_tokens: int) -> list[int]:
        """Offsets cutting ``text`` into parts of ``n_tokens`` tokens (one tokenization: linear)."""
        return cut_points(self.model.tokenizer, text, n_tokens)
