"""The model runner: prompts in, P(Yes) out. The only module that imports torch.

Score of one query (UniEval, ``scorer.py``; contract "The score of one query"):
tokenize the prompt (``max_length`` tokens, the end cut off, ``</s>`` read as
the EOS token), run the encoder and ONE decoder step from
``decoder_start_token_id``, and take::

    p_yes = softmax(logits)[yes] / (softmax(logits)[yes] + softmax(logits)[no])
          = sigmoid(logit_yes - logit_no)

The sigmoid form is used: it is the same number in real arithmetic and never
gives 0/0 when both probabilities underflow.

Work is done once per distinct prompt; prompts are sorted by token length and
packed into batches of at most ``batch_tokens`` padded tokens, then results are
put back in input order (bert_score / COMET length batching).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from .checkpoints import ResolvedCheckpoint, yes_no_ids
from .errors import CheckpointError

DTYPES = ("float32", "bfloat16")


class Runner(Protocol):
    """Anything that turns prompts into P(Yes): the T5 runner, or a fake in tests."""

    def p_yes(self, prompts: Sequence[str], *, max_length: int, batch_tokens: int,
              progress: bool | None = False, fast_forward: bool = True) -> np.ndarray:
        """Return a float64 array, shape ``(len(prompts),)``, values in [0, 1] (NaN if
        the model gave non-finite logits)."""
        ...


def resolve_device(device: str | None) -> str:
    """``cuda`` when available and ``device`` is None, else ``cpu``; else ``device`` checked.

    Raises:
        ValueError: ``cuda`` asked for where torch sees no CUDA device.
    """
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    dev = str(device)
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {dev!r} asked for, but torch sees no CUDA device")
    torch.device(dev)  # raises on nonsense
    return dev


def check_dtype(dtype: str) -> str:
    """Validate a dtype name.

    Raises:
        ValueError: ``float16`` (T5 overflows to NaN in float16) or an unknown name.
    """
    if dtype in ("float16", "fp16", "half"):
        raise ValueError("float16 is refused: T5 activations overflow to NaN in float16; "
                         "use bfloat16 (GPU) or float32")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def sort_by_length(lengths: Sequence[int]) -> list[int]:
    """Query indices, longest first (ties by index: deterministic)."""
    return sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def next_batch_end(order: Sequence[int], lengths: Sequence[int], start: int, batch_tokens: int,
                   min_fill: float = 0.75) -> int:
    """End (exclusive) of the batch that starts at ``order[start]``.

    The batch grows while ``n_queries * longest_length <= batch_tokens`` and
    the next query is at least ``min_fill`` times as long as the longest (the
    first: ``order`` is sorted longest first), so that no query is padded by
    more than a quarter. A query longer than the budget gets a batch of its own.
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    longest = lengths[order[start]]
    limit = min(len(order), start + max(1, batch_tokens // max(longest, 1)))
    end = start + 1
    while end < limit and lengths[order[end]] >= min_fill * longest:
        end += 1
    return end


def plan_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group query indices into batches of at most ``batch_tokens`` padded tokens.

    Queries are sorted by length, longest first, and cut into consecutive
    batches with :func:`next_batch_end` (the runner does the same, adapting
    the budget after an out-of-memory error).

    Returns:
        Lists of indices into ``lengths``; every index appears exactly once.
    """
    order = sort_by_length(lengths)
    batches, start = [], 0
    while start < len(order):
        end = next_batch_end(order, lengths, start, batch_tokens)
        batches.append(order[start:end])
        start = end
    return batches


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


def _has_t5_layout(model) -> bool:
    """True when the model has the T5 block layout the fast single-step path relies on."""
    try:
        block = model.get_decoder().block[0]
        return (hasattr(block.layer[0], "SelfAttention") and hasattr(block.layer[1], "EncDecAttention")
                and not block.layer[1].EncDecAttention.has_relative_attention_bias
                and len(block.layer) == 3)
    except (AttributeError, IndexError, TypeError):
        return False


class T5Runner:
    """A loaded T5 checkpoint that scores Boolean-QA prompts.

    Args:
        checkpoint: the resolved checkpoint folder.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        dtype: ``float32`` (exact UniEval parity) or ``bfloat16``.

    Raises:
        CheckpointError: the folder does not load as a seq2seq model with a
            tokenizer that has distinct Yes/No tokens.
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, device: str, dtype: str):
        import torch
        import transformers
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.checkpoint = checkpoint
        self.device = device
        self.dtype = check_dtype(dtype)
        torch_dtype = getattr(torch, dtype)
        path = Path(checkpoint.path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
            bars = transformers.utils.logging.is_progress_bar_enabled()
            transformers.utils.logging.disable_progress_bar()
            try:
                model = AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=False, **{key: torch_dtype})
            finally:
                if bars:
                    transformers.utils.logging.enable_progress_bar()
        except Exception as exc:
            raise CheckpointError(f"cannot load checkpoint {str(path)!r}: {type(exc).__name__}: {exc}") from exc
        if not model.config.is_encoder_decoder:
            raise CheckpointError(f"{path} is not an encoder-decoder model")
        self.model = model.to(device).eval()
        # we truncate ourselves (tokenize_full + truncate): silence the tokenizer's length warning
        self.tokenizer.model_max_length = int(1e12)
        self.yes_id, self.no_id = yes_no_ids(self.tokenizer)
        if max(self.yes_id, self.no_id) >= model.config.vocab_size:
            raise CheckpointError(f"Yes/No ids {self.yes_id}/{self.no_id} exceed vocab_size {model.config.vocab_size}")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.start_id = model.config.decoder_start_token_id
        if self.start_id is None:
            self.start_id = self.pad_id
        self._lock = threading.Lock()
        self.oom_budget: int | None = None
        #: counts of the last ``p_yes`` call: queries, distinct, batches, real_tokens, padded_tokens
        self.last_stats: dict[str, int] = {}
        config = model.config
        self._scale_decoder_outputs = bool(getattr(config, "scale_decoder_outputs", config.tie_word_embeddings))
        self._yes_no_rows = self.model.get_output_embeddings().weight[[self.yes_id, self.no_id]].detach()
        self.fast_ok = _has_t5_layout(self.model)

    def tokenize_full(self, prompts: Sequence[str]) -> list[list[int]]:
        """Token ids of each prompt, untruncated, ending with EOS."""
        if not prompts:
            return []
        return self.tokenizer(list(prompts))["input_ids"]

    @staticmethod
    def truncate(ids: list[int], max_length: int) -> list[int]:
        """Right truncation as transformers does it for T5: keep ``max_length - 1``
        tokens and the final EOS."""
        return ids if len(ids) <= max_length else ids[: max_length - 1] + ids[-1:]

    def tokenize(self, prompts: Sequence[str], max_length: int) -> list[list[int]]:
        """Token ids of each prompt, cut to ``max_length`` (EOS kept at the end)."""
        return [self.truncate(x, max_length) for x in self.tokenize_full(prompts)]

    # ------------------------------------------------------------------ token arithmetic
    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as a whole prompt (with EOS), untruncated."""
        return [len(x) for x in self.tokenize_full(texts)]

    def count_plain(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens."""
        if not texts:
            return []
        return [len(x) for x in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def cut(self, text: str, n_tokens: int) -> int:
        """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
        if n_tokens <= 0:
            return 0
        offsets = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if n_tokens >= len(offsets):
            return len(text)
        return offsets[n_tokens - 1][1]

    # ------------------------------------------------------------------ forward
    def _plain_two_logits(self, input_ids, mask):
        """(B, 2) logits of Yes and No from the model's own forward (full vocabulary)."""
        import torch

        decoder_ids = torch.full((input_ids.shape[0], 1), self.start_id, dtype=torch.long, device=input_ids.device)
        out = self.model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False)
        return out.logits[:, 0, [self.yes_id, self.no_id]]

    def _encode(self, input_ids, mask):
        """T5's encoder, with the attention bias built once per batch instead of once per layer.

        Same operations as ``T5Stack.forward`` for the encoder (relative position
        bias of block 0 shared by all blocks, padded keys at the dtype's minimum,
        unscaled scores), but the (B, H, S, S) additive mask that transformers'
        SDPA path rebuilds in every layer is made once and reused.
        """
        import torch
        import torch.nn.functional as F

        encoder = self.model.get_encoder()
        h = encoder.embed_tokens(input_ids)
        batch, length, _ = h.shape
        first = encoder.block[0].layer[0].SelfAttention
        bias = first.compute_bias(length, length, device=h.device).to(h.dtype)  # (1, H, S, S)
        valid = mask.bool()[:, None, None, :]
        attn_mask = torch.where(valid, bias, torch.finfo(h.dtype).min)  # (B, H, S, S)
        for block in encoder.block:
            sa_layer, ff_layer = block.layer[0], block.layer[-1]
            sa = sa_layer.SelfAttention
            x = sa_layer.layer_norm(h)
            shape = (batch, length, sa.n_heads, sa.key_value_proj_dim)
            q, k, v = (proj(x).view(shape).transpose(1, 2) for proj in (sa.q, sa.k, sa.v))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=0.0, scale=1.0)
            h = h + sa.o(out.transpose(1, 2).reshape(batch, length, -1))
            h = ff_layer(h)
        return encoder.final_layer_norm(h)

    def _fast_two_logits(self, input_ids, mask):
        """(B, 2) logits of Yes and No, computing only what the first decoder step needs.

        Exact rewrites of T5's forward for one decoder position (contract, and
        issue 3): (0) the encoder runs with its attention bias built once
        (:meth:`_encode`); (1) self-attention over one position has weight 1, so it is
        ``o(v(x))``; (2) cross-attention scores ``q_h . (W_k,h E)`` are computed as
        ``(W_k,h^T q_h) . E`` and values as ``W_v,h (sum_s a_hs E_s)``, so the
        encoder states are never projected through W_k / W_v (T5 does not scale
        scores and has no position bias in cross-attention); (3) only the Yes and
        No rows of the LM head are applied.
        """
        import torch

        model = self.model
        enc = self._encode(input_ids, mask)  # (B, S, d)
        dec = model.get_decoder()
        batch, _, d_model = enc.shape
        bias = (1.0 - mask[:, None, :].to(enc.dtype)) * torch.finfo(enc.dtype).min  # (B, 1, S)
        start = torch.full((batch, 1), self.start_id, dtype=torch.long, device=enc.device)
        h = dec.embed_tokens(start)  # (B, 1, d)
        for block in dec.block:
            sa_layer, ca_layer, ff_layer = block.layer[0], block.layer[1], block.layer[2]
            sa = sa_layer.SelfAttention
            h = h + sa.o(sa.v(sa_layer.layer_norm(h)))
            ca = ca_layer.EncDecAttention
            heads, dk = ca.n_heads, ca.key_value_proj_dim
            q = ca.q(ca_layer.layer_norm(h)).view(batch, heads, dk)  # (B, H, dk)
            u = torch.einsum("bhk,hkd->bhd", q, ca.k.weight.view(heads, dk, d_model))  # (B, H, d)
            scores = torch.bmm(u, enc.transpose(1, 2)) + bias  # (B, H, S)
            weights = torch.softmax(scores.float(), dim=-1).to(enc.dtype)
            ctx = torch.bmm(weights, enc)  # (B, H, d)
            v = torch.einsum("bhd,hkd->bhk", ctx, ca.v.weight.view(heads, dk, d_model))  # (B, H, dk)
            h = h + ca.o(v.reshape(batch, 1, heads * dk))
            h = ff_layer(h)
        h = dec.final_layer_norm(h)[:, 0, :]
        if self._scale_decoder_outputs:
            h = h * (d_model**-0.5)
        return h @ self._yes_no_rows.T

    def _two_logits(self, ids: list[list[int]], batch: Sequence[int], fast: bool):
        import torch

        width = max(len(ids[i]) for i in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            input_ids[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
            mask[row, : len(ids[i])] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        two = self._fast_two_logits(input_ids, mask) if fast and self.fast_ok else self._plain_two_logits(input_ids, mask)
        return two.float().cpu().numpy().astype(np.float64)

    def p_yes(self, prompts: Sequence[str], *, max_length: int = 1024, batch_tokens: int = 8192,
              progress: bool | None = False, fast_forward: bool = True) -> np.ndarray:
        """P(Yes) of each prompt; float64 array of shape ``(len(prompts),)``, values in [0, 1].

        Identical prompts are scored once; queries are sorted by token length
        and packed into batches of at most ``batch_tokens`` padded tokens. On a
        CUDA out-of-memory error the batch is retried with half the budget, and
        the smaller budget is kept for the rest of the run; nothing is lost.
        Non-finite logits give NaN for that prompt.

        Raises:
            RuntimeError: out of memory with a single query in the batch.
        """
        return self.score_prompts(prompts, max_length=max_length, batch_tokens=batch_tokens, progress=progress,
                                  fast_forward=fast_forward)[0]

    def score_prompts(self, prompts: Sequence[str], *, max_length: int = 1024, batch_tokens: int = 8192,
                      progress: bool | None = False, fast_forward: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(p_yes, n_tokens)`` per prompt: :meth:`p_yes`, plus each prompt's untruncated
        token count (more than ``max_length`` means the end was cut)."""
        import torch
        from tqdm.auto import tqdm

        unique = list(dict.fromkeys(prompts))
        full = self.tokenize_full(unique)
        n_tokens = np.array([len(x) for x in full], dtype=np.int64)
        ids = [self.truncate(x, max_length) for x in full]
        lengths = [len(x) for x in ids]
        order = sort_by_length(lengths)
        scores = np.full(len(unique), np.nan, dtype=np.float64)
        stats = {"queries": len(prompts), "distinct": len(unique), "batches": 0,
                 "real_tokens": sum(lengths), "padded_tokens": 0}
        with self._lock, torch.inference_mode(), tqdm(
            total=len(unique), desc="queries", unit="q", disable=None if progress is None else not progress,
            leave=False,
        ) as bar:
            start = 0
            while start < len(order):
                budget = min(batch_tokens, self.oom_budget or batch_tokens)
                end = next_batch_end(order, lengths, start, budget)
                batch = order[start:end]
                try:
                    two = self._two_logits(ids, batch, fast_forward)
                except Exception as exc:
                    if not _is_oom(exc):
                        raise
                    if self.device.startswith("cuda"):
                        torch.cuda.empty_cache()
                    padded = len(batch) * lengths[batch[0]]
                    if len(batch) == 1:
                        raise RuntimeError(
                            f"out of memory on a single query of {lengths[batch[0]]} tokens; "
                            "lower --max-length or use a larger device") from exc
                    self.oom_budget = max(1, padded // 2)
                    warnings.warn(f"out of memory with {len(batch)} queries x {lengths[batch[0]]} tokens; "
                                  f"batch_tokens lowered to {self.oom_budget} for the rest of the run",
                                  RuntimeWarning, stacklevel=2)
                    continue
                diff = two[:, 0] - two[:, 1]
                with np.errstate(over="ignore", invalid="ignore"):
                    scores[batch] = 1.0 / (1.0 + np.exp(-diff))
                bar.update(len(batch))
                stats["batches"] += 1
                stats["padded_tokens"] += len(batch) * lengths[batch[0]]
                start = end
        self.last_stats = stats
        index = {p: k for k, p in enumerate(unique)}
        where = [index[p] for p in prompts]
        return scores[where], n_tokens[where]


_RUNNERS: dict[tuple[str, str, str], T5Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def load_runner(checkpoint: ResolvedCheckpoint, device: str, dtype: str) -> T5Runner:
    """Load (once per process) the runner for ``(checkpoint folder, device, dtype)``."""
    key = (str(Path(checkpoint.path).resolve()), device, check_dtype(dtype))
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = T5Runner(checkpoint, device, dtype)
        return runner


def library_versions() -> tuple[str, str]:
    """``(torch.__version__, transformers.__version__)``."""
    import torch
    import transformers

    return torch.__version__, transformers.__version__
