"""Greedy generation for the ``causal-lm`` backend (:meth:`CausalLMRunner.generate
<unieval_local.models.causal_lm.runner.CausalLMRunner.generate>` delegates here).

What transformers' ``generate`` gives is used as it is: greedy decoding (``do_sample=False``,
``num_beams=1``) with the key/value cache (``use_cache=True``), ``max_new_tokens``, the
end-of-sequence ids (the model's ``generation_config`` and the tokenizer's) and its
``stop_strings`` criterion (which needs the tokenizer); the position ids follow the attention
mask of the left-padded batch (``GenerationMixin`` derives them from it), so a prompt's tokens do
not depend on its batch. What it lacks is written here:

- batching: identical prompts run once; the rest sorted by length and grouped under the
  runner's padded-token budget, counting each row as its prompt plus ``max_new_tokens``
  (:func:`~unieval_local.models.batching.run_batches`: the out-of-memory back-off every backend
  shares);
- the window: a prompt whose tokens plus ``max_new_tokens`` exceed ``max_length`` is not run
  (``finish="too_long"``, nothing generated), never truncated;
- the ending of each row (:func:`finish_row`): the text cut at the first stop string, the
  end-of-sequence token left out of the text, the finish reason;
- progress over prompts (:class:`~unieval_local.progress.Progress`).

Prefix reuse (the scoring path's shared-prefix key/value cache) is not applied to generation.
On the float32 test stand-ins a prompt's ids alone equal its ids in any batch
(``tests/test_generation.py``); on real models in bfloat16, padding changes the arithmetic a
little and a near-tie can flip a greedy token.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...progress import Progress
from .. import tokens
from ..base import Generation
from ..batching import run_batches, sort_by_length

__all__ = ["eos_ids", "finish_row", "generate"]


def eos_ids(model) -> tuple[int, ...]:
    """The ids that end a generation: the model's ``generation_config.eos_token_id`` (an id or a
    list) and the tokenizer's ``eos_token_id``, distinct, in that order."""
    found: list[int] = []
    configured = getattr(getattr(model.model, "generation_config", None), "eos_token_id", None)
    for value in ([configured] if isinstance(configured, int) else list(configured or [])) + \
            [model.tokenizer.eos_token_id]:
        if value is not None and int(value) not in found:
            found.append(int(value))
    return tuple(found)


def _decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def finish_row(tokenizer, new: Sequence[int], eos: Sequence[int], stop: Sequence[str]) -> Generation:
    """One row's :class:`~unieval_local.models.base.Generation` from its new ids as ``generate``
    returned them (finished rows padded after their end).

    The row ends at its first end-of-sequence id (``eos``; the text leaves it out, ``token_ids``
    keep it). When the text before it holds a stop string, the text is cut before the earliest
    one and ``token_ids`` end at the token that completed it (the shortest prefix whose text holds
    a stop string: binary search); ``finish="stop"``. Otherwise ``eos``, or ``length`` when no
    end came.
    """
    new = [int(t) for t in new]
    ends = set(eos)
    e = next((k for k, t in enumerate(new) if t in ends), len(new))
    text = _decode(tokenizer, new[:e])
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    if found:
        lo, hi = 1, e  # the shortest prefix of new[:e] whose text holds a stop string
        while lo < hi:
            mid = (lo + hi) // 2
            if any(s in _decode(tokenizer, new[:mid]) for s in stop):
                hi = mid
            else:
                lo = mid + 1
        return Generation(text[:min(found)], tuple(new[:lo]), "stop")
    if e < len(new):
        return Generation(text, tuple(new[:e + 1]), "eos")
    return Generation(text, tuple(new), "length")


def _check(prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str], max_length: int) -> None:
    if isinstance(prompts, str):
        raise TypeError("prompts must be a sequence of rendered prompts, not one string")
    for i, p in enumerate(prompts):
        if not isinstance(p, str) or not p:
            raise ValueError(f"prompt {i}: a rendered prompt must be a non-empty string, got {p!r:.60}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    if isinstance(stop, str):
        raise TypeError("stop must be a sequence of strings, not one string")
    for i, s in enumerate(stop):
        if not isinstance(s, str) or not s:
            raise ValueError(f"stop string {i}: must be a non-empty string, got {s!r}")


def generate(model, prompts: Sequence[str], *, max_new_tokens: int, stop: Sequence[str] = (), max_length: int,
             batch_tokens: int, max_cells: int | None = None, progress: bool | None = None) -> list[Generation]:
    """Greedy continuations of rendered prompts, batched, in input order.

    Args:
        model: a loaded :class:`~unieval_local.models.causal_lm.model.CausalLMModel`.
        prompts: rendered texts (a chat template's output, possibly with text appended); their
            ids are taken without added special tokens (the template writes them).
        max_new_tokens: the most tokens to generate per prompt (>= 1).
        stop: strings that end a generation where they first appear (cut from the text).
        max_length: the window: a prompt whose tokens plus ``max_new_tokens`` exceed it is not
            run (``too_long``).
        batch_tokens: padded tokens per batch, each row counted as prompt + ``max_new_tokens``.
        max_cells: the attention budget (:func:`~unieval_local.models.batching.attention_cells`).
        progress: a bar over prompts (``None``: on a terminal, log lines otherwise; False: none).

    Returns:
        One :class:`~unieval_local.models.base.Generation` per prompt (:func:`finish_row`).

    Raises:
        ValueError / TypeError: an empty or non-string prompt (its index), a bad
            ``max_new_tokens``, ``max_length`` or stop string.
        ModelRuntimeError: the model failed (out of memory on a single prompt included).
    """
    import torch
    from transformers import GenerationConfig

    _check(prompts, max_new_tokens, stop, max_length)
    stop = tuple(stop)
    distinct = list(dict.fromkeys(prompts))
    ids = [tokens.encode(model.tokenizer, p, add_special_tokens=False)["input_ids"] for p in distinct]
    results: list[Generation | None] = [None] * len(distinct)
    run = []
    for i, x in enumerate(ids):
        if len(x) + max_new_tokens > max_length:
            results[i] = Generation("", (), "too_long")
        else:
            run.append(i)
    eos = eos_ids(model)
    config = GenerationConfig(do_sample=False, num_beams=1, use_cache=True, max_new_tokens=max_new_tokens,
                              eos_token_id=list(eos), pad_token_id=model.pad_id, stop_strings=list(stop) or None,
                              temperature=None, top_p=None, top_k=None)
    total = [len(x) + max_new_tokens for x in ids]
    bar = Progress(len(distinct), enabled=progress, what="prompts")
    bar.set(len(distinct) - len(run))
    device = model.device

    def forward(batch: list[int]) -> None:
        width = max(len(ids[i]) for i in batch)
        input_ids = torch.full((len(batch), width), model.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            input_ids[row, width - len(ids[i]):] = torch.tensor(ids[i])
            mask[row, width - len(ids[i]):] = 1
        with torch.inference_mode():
            out = model.model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                       generation_config=config, tokenizer=model.tokenizer if stop else None)
        new = out[:, width:].cpu().tolist()
        for row, i in enumerate(batch):
            results[i] = finish_row(model.tokenizer, new[row], eos, stop)

    def done(batch: list[int], end: int) -> None:
        bar.set(bar.done + len(batch))

    try:
        with model.lock:
            order = [run[j] for j in sort_by_length([len(ids[i]) for i in run])]
            run_batches(order, total, batch_tokens=batch_tokens, holder=model, device=device, forward=forward,
                        max_cells=max_cells, on_batch=done)
    finally:
        bar.close()
    index = {p: k for k, p in enumerate(distinct)}
    return [results[index[p]] for p in prompts]
