"""Token arithmetic on a Hugging Face tokenizer, shared by every backend's
:class:`~unieval_local.pipeline.planning.TokenCounter` methods (plain texts, no special tokens
unless said). No torch."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["count_plain", "cut", "cut_points"]


def count_plain(tokenizer, texts: Sequence[str]) -> list[int]:
    """Tokens of each text without special tokens."""
    if not texts:
        return []
    return [len(x) for x in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def cut(tokenizer, text: str, n_tokens: int) -> int:
    """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
    if n_tokens <= 0:
        return 0
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if n_tokens >= len(offsets):
        return len(text)
    return offsets[n_tokens - 1][1]


def cut_points(tokenizer, text: str, n_tokens: int) -> list[int]:
    """Offsets cutting ``text`` into parts of ``n_tokens`` tokens, from ONE tokenization of the
    whole text (linear in its length; see :meth:`TokenCounter.cut_points
    <unieval_local.pipeline.planning.TokenCounter.cut_points>`)."""
    n_tokens = max(1, n_tokens)
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    points = [offsets[k - 1][1] for k in range(n_tokens, len(offsets), n_tokens)]
    points = [p for i, p in enumerate(points) if 0 < p < len(text) and (i == 0 or p > points[i - 1])]
    return points + [len(text)]
