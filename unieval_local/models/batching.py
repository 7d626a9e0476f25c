"""The shared batching core of every backend: queries sorted by length and packed into
batches under a padded-token budget and an attention budget (bert_score / COMET length
batching), and how an out-of-memory error is recognised (the runner halves its budget and
retries). No torch."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ATTENTION_COPIES", "attention_cells", "is_oom", "first_line", "next_batch_end", "plan_batches",
           "sort_by_length"]


def sort_by_length(lengths: Sequence[int]) -> list[int]:
    """Query indices, longest first (ties by index: deterministic)."""
    return sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def next_batch_end(order: Sequence[int], lengths: Sequence[int], start: int, batch_tokens: int,
                   min_fill: float = 0.75, max_cells: int | None = None) -> int:
    """End (exclusive) of the batch that starts at ``order[start]``.

    The batch grows while ``n_queries * longest_length <= batch_tokens`` (padded
    tokens), ``n_queries * longest_length**2 <= max_cells`` (attention scores per
    head: the encoder's (rows, heads, S, S) attention grows with the square of the
    length, so a token budget alone does not bound memory), and the next query is at
    least ``min_fill`` times as long as the longest (the first: ``order`` is sorted
    longest first), so that no query is padded by more than a quarter. A query longer
    than the budgets gets a batch of its own.
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    longest = max(lengths[order[start]], 1)
    rows = batch_tokens // longest
    if max_cells is not None:
        rows = min(rows, max_cells // (longest * longest))
    limit = min(len(order), start + max(1, rows))
    end = start + 1
    while end < limit and lengths[order[end]] >= min_fill * longest:
        end += 1
    return end


def plan_batches(lengths: Sequence[int], batch_tokens: int, max_cells: int | None = None) -> list[list[int]]:
    """Group query indices into batches of at most ``batch_tokens`` padded tokens
    (and ``max_cells`` attention scores per head, see :func:`next_batch_end`).

    Queries are sorted by length, longest first, and cut into consecutive
    batches with :func:`next_batch_end` (the runner does the same, adapting
    the budget after an out-of-memory error).

    Returns:
        Lists of indices into ``lengths``; every index appears exactly once.
    """
    order = sort_by_length(lengths)
    batches, start = [], 0
    while start < len(order):
        end = next_batch_end(order, lengths, start, batch_tokens, max_cells=max_cells)
        batches.append(order[start:end])
        start = end
    return batches


#: (rows, heads, S, S) tensors alive at once in the encoder's attention: the additive mask
#: (position bias with the padded keys at -inf, built once per batch) and, in each layer, the
#: attention scores beside it. Measured on CPU (float32, 16 heads, 1,024 tokens): each extra
#: row of a batch raised the peak resident memory by 2.1x one (1, 16, 1024, 1024) tensor.
ATTENTION_COPIES = 2


def attention_cells(attention_mib: float, n_heads: int, element_bytes: int) -> int:
    """How many (row x S x S) attention cells per head fit ``attention_mib`` MiB:
    ``attention_mib * 2**20 / (ATTENTION_COPIES * n_heads * element_bytes)``.

    The encoder's attention of one forward pass holds :data:`ATTENTION_COPIES` tensors of
    rows x heads x S x S values (S: the batch's longest prompt): the additive mask and the
    scores; e.g. T5-large (16 heads) in float32 at 1,024 tokens takes 2 x 64 MiB per row, so
    1,024 MiB allows 8 rows (as many as the default 8,192 batch tokens).
    """
    per_cell = ATTENTION_COPIES * max(1, n_heads) * max(1, element_bytes)
    return max(1, int(attention_mib * 2**20 // per_cell))


#: Messages of allocation failures that are not ``torch.OutOfMemoryError``: CUDA's
#: older RuntimeError, and the CPU allocator's (``DefaultCPUAllocator: can't allocate memory``).
_OOM_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory", "defaultcpuallocator")


def is_oom(exc: BaseException) -> bool:
    """True for an allocation failure the batch back-off can handle (GPU or CPU)."""
    import torch

    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _OOM_MESSAGES))


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (CUDA errors add pages of hints)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
