"""The shared batching core of every backend: queries sorted by length and packed into
batches under a padded-token budget and an attention budget (bert_score / COMET length
batching), run with the out-of-memory back-off (:func:`run_batches`: the budget is halved and
the batch retried; the smaller budget is kept for the rest of the process). No torch at import."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ATTENTION_COPIES", "attention_cells", "is_oom", "first_line", "next_batch_end", "plan_batches",
           "run_batches", "sort_by_length"]


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


def run_batches(order: Sequence[int], lengths: Sequence[int], *, batch_tokens: int, holder, device: str,
                forward, max_cells: int | None = None, on_batch=None) -> int:
    """Run ``forward(batch)`` over the queries in ``order`` (sorted longest first), in consecutive
    batches of :func:`next_batch_end`, with the out-of-memory back-off every backend shares.

    Args:
        order, lengths: query indices (:func:`sort_by_length`) and each query's token length.
        batch_tokens: the padded-token budget; ``holder.oom_budget`` (a model's, process-wide),
            when set by an earlier out-of-memory error, lowers it.
        holder: the loaded model object whose ``oom_budget`` keeps the lowered budget.
        device: where it runs (``cuda...``: the CUDA cache is emptied after an out-of-memory error).
        forward: scores one batch (a list of query indices) and stores the results itself.
        max_cells: the attention budget (:func:`attention_cells`), or None.
        on_batch: called after each batch with ``(batch, queries done)``.

    Returns:
        The number of batches run.

    Raises:
        ModelRuntimeError: out of memory on a single query, or another runtime error of torch
            (one line: device, batch shape, reason).
    """
    import warnings

    from ..errors import ModelRuntimeError

    start = batches = 0
    while start < len(order):
        budget = min(batch_tokens, holder.oom_budget or batch_tokens)
        end = next_batch_end(order, lengths, start, budget, max_cells=max_cells)
        batch = list(order[start:end])
        try:
            forward(batch)
        except (RuntimeError, MemoryError) as exc:  # torch's errors; others are bugs and propagate
            if not is_oom(exc):
                raise ModelRuntimeError(
                    f"the model failed on {device} while scoring a batch of {len(batch)} queries x "
                    f"{lengths[batch[0]]} tokens: {type(exc).__name__}: {first_line(exc)}") from exc
            if device.startswith("cuda"):
                import torch

                torch.cuda.empty_cache()
            if len(batch) == 1:
                raise ModelRuntimeError(
                    f"out of memory on {device} on a single query of {lengths[batch[0]]} tokens "
                    f"({first_line(exc)}); lower --max-length or use a device with more memory") from exc
            holder.oom_budget = max(1, len(batch) * lengths[batch[0]] // 2)
            warnings.warn(f"out of memory with {len(batch)} queries x {lengths[batch[0]]} tokens; "
                          f"batch_tokens lowered to {holder.oom_budget} for the rest of the run",
                          RuntimeWarning, stacklevel=3)
            continue
        batches += 1
        start = end
        if on_batch is not None:
            on_batch(batch, start)
    return batches
