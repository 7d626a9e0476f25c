"""The model runner: prompts in, P(Yes) out. The only module that imports torch.

Score of one query (UniEval, ``scorer.py``; contract "The score of one query"):
tokenize the prompt (``max_length`` tokens, the end cut off, ``</s>`` read as
the EOS token), run the encoder and ONE decoder step from
``decoder_start_token_id``, and take::

    p_yes = softmax(logits)[yes] / (softmax(logits)[yes] + softmax(logits)[no])
          = sigmoid(logit_yes - logit_no)

The sigmoid form is used: it is the same number in real arithmetic and never
gives 0/0 when both probabilities underflow.

An evaluator with ``readout="vocab"`` (SEAHORSE; TRUE's rule) is scored as the probability
of the positive answer over the WHOLE vocabulary, ``softmax(logits)[pos]``. The runner then
gives, as its two "logits", ``(l_pos, logsumexp over every other token's logit)``, so that the
same sigmoid of their difference is exactly that probability::

    sigmoid(l_pos - log sum_{j != pos} exp(l_j)) = exp(l_pos) / sum_j exp(l_j)

(float64 from the float32 logits; a row with a non-finite logit gives NaN). Nothing downstream
changes.

Work is done once per distinct prompt; prompts are sorted by token length and
packed into batches of at most ``batch_tokens`` padded tokens, then results are
put back in input order (bert_score / COMET length batching).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...settings import DTYPES as _DTYPES
from ...settings import BATCH_TOKENS, check_dtype, default
from .. import tokens
from ..base import Runner
from ..batching import attention_cells, run_batches, sort_by_length
from ..checkpoints import ResolvedCheckpoint
from ..tokenizer_identity import check_tokenizer_fits, describe_tokenizer
from .loading import _has_t5_layout, load_model
from ...errors import CheckpointError
from ...registry.evaluators import Evaluator, answer_ids
from ...progress import LogLines

__all__ = ["DTYPES", "T5Model", "T5Runner", "load_t5_model", "rescales_decoder_output", "t5_runner_factory",
           "vocab_pair"]

DTYPES = _DTYPES


def rescales_decoder_output(config) -> bool:
    """Whether transformers' loaded model multiplies the last decoder state by ``d_model**-0.5``
    before the LM head (its reading of the config; :func:`~unieval_local.models.stored.library_rescale`).
    The scores follow the STORED files instead (:func:`~unieval_local.models.stored.stored_rescale`,
    checked and set by :func:`~unieval_local.models.stored.reconcile` at load): transformers 5.0.0
    read untied T5 v1.1 checkpoints as rescaled."""
    from ..stored import library_rescale

    return library_rescale(config)


class T5Model:
    """A loaded T5 checkpoint: tokenizer, model on its device, the Yes/No token ids, and
    the exact single-step forward. Loaded once per (folder, device, dtype) per process
    (:func:`load_t5_model`) and shared by every :class:`T5Runner` over it.

    Args:
        checkpoint: the resolved checkpoint folder.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        dtype: ``float32`` (exact UniEval parity) or ``bfloat16``.

    Raises:
        CheckpointError: the folder does not load as a seq2seq model, its weights
            do not match its config (:func:`load_model`), or its tokenizer does not fit the
            model (:func:`~unieval_local.models.tokenizer_identity.check_tokenizer_fits`).
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, device: str, dtype: str):
        import torch

        self.checkpoint = checkpoint
        self.device = device
        self.dtype = check_dtype(dtype)
        path = Path(checkpoint.path)
        model, self.tokenizer = load_model(path, dtype)
        if not model.config.is_encoder_decoder:
            raise CheckpointError(f"{path} is not an encoder-decoder model")
        #: the tokenizer's class and flags (signatures), and a doubt about it (None: none)
        self.tokenizer_class = describe_tokenizer(self.tokenizer)
        self.tokenizer_doubt = check_tokenizer_fits(self.tokenizer, model.config,
                                                    rows=int(model.get_input_embeddings().weight.shape[0]),
                                                    where=str(path))
        self.model = model.to(device).eval()
        # we truncate ourselves (tokenize_full + truncate): silence the tokenizer's length warning
        self.tokenizer.model_max_length = int(1e12)
        self.vocab_size = int(model.config.vocab_size)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        facts = getattr(model, "unieval_stored_facts", None)
        # the stored config.json's decoder start id (checked against the loaded config at load)
        self.start_id = facts.start_id if facts is not None and facts.start_id is not None \
            else model.config.decoder_start_token_id
        if self.start_id is None:
            self.start_id = self.pad_id
        #: one forward at a time on this model (runners over it may be called from several threads)
        self.lock = threading.Lock()
        #: the token budget after an out-of-memory back-off (kept for the rest of the process)
        self.oom_budget: int | None = None
        config = model.config
        # the rescale the STORED config means (transformers' reading is checked against it at load)
        self._scale_decoder_outputs = facts.rescale if facts is not None else rescales_decoder_output(config)
        self.fast_ok = _has_t5_layout(self.model)
        #: the model's own forward agrees with the stored files (else only the fast path is exact)
        self.plain_ok = facts is None or facts.plain_forward_ok
        if not self.plain_ok and not self.fast_ok:
            from ..stored import REMEDY

            raise CheckpointError(f"{path}: the installed transformers' forward reads the decoder-output rescale "
                                  f"otherwise than config.json says, and the model lacks the T5 block layout of "
                                  f"this package's own forward; {REMEDY}")
        self.n_heads = int(getattr(config, "num_heads", 1))
        self.element_bytes = torch.finfo(getattr(torch, self.dtype)).bits // 8

    def tokenize_full(self, prompts: Sequence[str]) -> list[list[int]]:
        """Token ids of each prompt, untruncated, ending with EOS."""
        if not prompts:
            return []
        return tokens.encode(self.tokenizer, list(prompts))["input_ids"]

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
        return tokens.count_plain(self.tokenizer, texts)

    def cut(self, text: str, n_tokens: int) -> int:
        """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
        return tokens.cut(self.tokenizer, text, n_tokens)

    def cut_points(self, text: str, n_tokens: int) -> list[int]:
        """Offsets cutting ``text`` into parts of ``n_tokens`` tokens, from ONE tokenization of
        the whole text (linear in its length; see :meth:`TokenCounter.cut_points
        <unieval_local.pipeline.planning.TokenCounter.cut_points>`)."""
        return tokens.cut_points(self.tokenizer, text, n_tokens)

    # ------------------------------------------------------------------ forward
    def answer_rows(self, ids: tuple[int, int]):
        """The LM head's rows of the two answer tokens, shape (2, d_model) (the fast path's head)."""
        return self.model.get_output_embeddings().weight[list(ids)].detach()

    def head_rows(self):
        """The whole LM head, shape (vocab_size, d_model): the fast path's head for ``readout="vocab"``."""
        return self.model.get_output_embeddings().weight.detach()

    def _plain_logits(self, input_ids, mask):
        """(B, vocab_size) logits of the first decoder step from the model's own forward."""
        import torch

        decoder_ids = torch.full((input_ids.shape[0], 1), self.start_id, dtype=torch.long, device=input_ids.device)
        out = self.model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False)
        return out.logits[:, 0, :]

    def _plain_two_logits(self, input_ids, mask, ids: tuple[int, int]):
        """(B, 2) logits of the two answer tokens from the model's own forward (full vocabulary)."""
        return self._plain_logits(input_ids, mask)[:, list(ids)]

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
        # compute_bias returns a permuted view; made contiguous here, the (B, H, S, S) mask is too,
        # and SDPA reads it in place instead of copying it in every layer (a quarter of the CPU time)
        bias = first.compute_bias(length, length, device=h.device).to(h.dtype).contiguous()  # (1, H, S, S)
        valid = mask.bool()[:, None, None, :]
        attn_mask = torch.where(valid, bias, torch.finfo(h.dtype).min)  # (B, H, S, S), contiguous
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

    def _fast_two_logits(self, input_ids, mask, rows):
        """(B, len(rows)) logits of the tokens whose LM-head ``rows`` are given (the two answers:
        Yes and No; or the whole head for ``readout="vocab"``), computing only what the first
        decoder step needs.

        Exact rewrites of T5's forward for one decoder position (contract, and
        issue 3): (0) the encoder runs with its attention bias built once
        (:meth:`_encode`); (1) self-attention over one position has weight 1, so it is
        ``o(v(x))``; (2) cross-attention scores ``q_h . (W_k,h E)`` are computed as
        ``(W_k,h^T q_h) . E`` and values as ``W_v,h (sum_s a_hs E_s)``, so the
        encoder states are never projected through W_k / W_v (T5 does not scale
        scores and has no position bias in cross-attention); (3) only the given
        rows of the LM head are applied (for the pair readout, the Yes and No rows).
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
        return h @ rows.T

    def _use_fast(self, fast: bool) -> bool:
        """The package's own forward: asked for and possible, or the only exact one (the model's own
        forward disagrees with the stored files: :attr:`plain_ok`)."""
        return self.fast_ok and (fast or not self.plain_ok)

    def _two_logits(self, ids: list[list[int]], batch: Sequence[int], fast: bool, answers: tuple[int, int], rows,
                    readout: str = "pair"):
        """(B, 2) float64 "logits" whose sigmoid of the difference is the score, for the prompts
        ``batch`` of ``ids``, padded to the batch's longest.

        ``readout="pair"``: the logits of the answer tokens ``answers`` (ids; ``rows``: their
        LM-head rows). ``readout="vocab"``: ``(l_pos, logsumexp of every other logit)``
        (:func:`vocab_pair`; ``rows``: the whole head)."""
        import torch

        width = max(len(ids[i]) for i in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            input_ids[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
            mask[row, : len(ids[i])] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        if readout == "vocab":
            logits = (self._fast_two_logits(input_ids, mask, rows) if self._use_fast(fast)
                      else self._plain_logits(input_ids, mask))
            return vocab_pair(logits, answers[0])
        two = (self._fast_two_logits(input_ids, mask, rows) if self._use_fast(fast)
               else self._plain_two_logits(input_ids, mask, answers))
        return two.float().cpu().numpy().astype(np.float64)


def vocab_pair(logits, pos: int, rows_per_step: int = 64) -> np.ndarray:
    """``(l_pos, logsumexp_{j != pos} l_j)`` per row of ``logits`` (B, V), float64, shape (B, 2):
    the two numbers whose ``sigmoid(a - b)`` is ``softmax(logits)[pos]``, P(the positive token)
    over the whole vocabulary (SEAHORSE / TRUE, Honovich et al., 2022). The logits are taken to
    float64 on their device (exact from float32 or bfloat16), ``rows_per_step`` rows at a time (a vocabulary of 250k
    tokens is 2 MB a row in float64); ``torch.logsumexp`` subtracts the maximum, so nothing
    overflows. A row holding a NaN or an infinite logit gives NaN (the score is then NaN, as for
    any non-finite output of the model). A one-token vocabulary gives ``(l_pos, -inf)``.

    Raises:
        IndexError: ``pos`` is outside the vocabulary.
    """
    import torch

    if not 0 <= pos < logits.shape[-1]:
        raise IndexError(f"positive answer id {pos} outside the vocabulary of {logits.shape[-1]} logits")
    out = []
    for start in range(0, logits.shape[0], rows_per_step):
        x = logits[start:start + rows_per_step].to(torch.float64, copy=True)  # float32 / bfloat16 -> float64 exactly
        finite = torch.isfinite(x).all(dim=-1)
        positive = x[:, pos].clone()
        x[:, pos] = -torch.inf
        rest = torch.logsumexp(x, dim=-1)
        positive[~finite] = torch.nan
        out.append(torch.stack([positive, rest], dim=-1).cpu())
    if not out:
        return np.zeros((0, 2), dtype=np.float64)
    return torch.cat(out).numpy()


class T5Runner(Runner):
    """The :class:`~unieval_local.engine.Runner` over a loaded T5 checkpoint.

    Work is done once per distinct prompt; prompts are sorted by token length and
    packed into batches of at most ``batch_tokens`` padded tokens and ``attention_mib``
    MiB of encoder attention scores (bert_score / COMET length batching), then results
    are put back in input order.

    Args:
        model: the loaded checkpoint (:func:`load_t5_model`).
        evaluator: its :class:`~unieval_local.registry.evaluators.Evaluator`: the answer words
            (positive, negative) whose first token ids give the two logits, and the readout
            (``pair``: those two; ``vocab``: the positive one against the whole vocabulary).
        fingerprint: the checkpoint's content fingerprint (signatures, cache keys).
        batch_tokens: padded tokens (rows x longest prompt) per forward pass.
        attention_mib: MiB of encoder attention scores per forward pass (:func:`attention_cells`).
        fast_forward: our exact single-step forward (True) or the model's own ``forward``.
        progress: a progress bar over queries (``None``: only on a terminal).

    Raises:
        CheckpointError: the answer words have no distinct first tokens in this vocabulary, or
            one lies outside the model's rows.
    """

    def __init__(self, model: T5Model, *, evaluator: Evaluator, fingerprint: str, batch_tokens: int = BATCH_TOKENS["gpu"],
                 attention_mib: float = default("attention_mib"), fast_forward: bool = True,
                 progress: bool | None = False):
        if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, int) or batch_tokens < 1:
            raise ValueError(f"batch_tokens must be a positive integer, got {batch_tokens!r}")
        self.t5 = model
        self.evaluator = evaluator
        ckpt = model.checkpoint
        self.name = ckpt.hub_id or str(ckpt.path)
        self.fingerprint = fingerprint
        #: first token ids of the (positive, negative) answers, and their LM-head rows
        self.answer_ids = answer_ids(model.tokenizer, evaluator, rows=model.vocab_size)
        self.tokenizer_class = model.tokenizer_class
        self.tokenizer_doubt = model.tokenizer_doubt
        self.readout = evaluator.readout
        self._rows = model.head_rows() if self.readout == "vocab" else model.answer_rows(self.answer_ids)
        self.batch_tokens = batch_tokens
        self.attention_mib = attention_mib
        self.fast_forward = bool(fast_forward)
        self.progress = progress
        #: counts of the last :meth:`score` call: queries, distinct, batches, real_tokens, padded_tokens
        self.last_stats: dict[str, int] = {}

    # token arithmetic (TokenCounter)
    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as a whole prompt (with EOS), untruncated."""
        return self.t5.count(texts)

    def count_plain(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens."""
        return self.t5.count_plain(texts)

    def cut(self, text: str, n_tokens: int) -> int:
        """How many leading characters of ``text`` its first ``n_tokens`` tokens cover."""
        return self.t5.cut(text, n_tokens)

    def cut_points(self, text: str, n_tokens: int) -> list[int]:
        """Offsets cutting ``text`` into parts of ``n_tokens`` tokens (one tokenization: linear)."""
        return self.t5.cut_points(text, n_tokens)

    @property
    def max_cells(self) -> int:
        """The attention budget of one forward batch (:func:`attention_cells`: row x S x S cells
        per head that ``attention_mib`` allows), for a scheduler that forms batches itself."""
        return attention_cells(self.attention_mib, self.t5.n_heads, self.t5.element_bytes)

    @property
    def forward(self) -> str:
        """``fast`` when the single-step forward runs (asked for, and the checkpoint has the T5
        layout it relies on), else ``plain`` (the model's own forward)."""
        return "fast" if self.t5._use_fast(self.fast_forward) else "plain"

    def _two_logits(self, ids: list[list[int]], batch: Sequence[int], fast: bool):
        """(B, 2) logits of (positive, negative) answers for one batch (a seam for out-of-memory tests)."""
        return self.t5._two_logits(ids, batch, fast, self.answer_ids, self._rows, self.readout)

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p_yes, n_tokens)`` per prompt: P(Yes) in [0, 1] (float64, shape ``(len(prompts),)``),
        and each prompt's untruncated token count (more than ``max_length`` means the end was cut).

        Identical prompts are scored once; queries are sorted by token length and packed
        into batches of at most ``batch_tokens`` padded tokens and ``attention_mib`` MiB of
        encoder attention scores (:func:`attention_cells`). On an out-of-memory error
        (CUDA, or the CPU allocator's "can't allocate memory") the batch is retried with
        half the token budget, and the smaller budget is kept for the rest of the run;
        nothing is lost. Non-finite logits give NaN for that prompt. ``on_batch(done,
        total)`` is called after each forward batch with the distinct queries scored so far.

        Raises:
            ModelRuntimeError: out of memory on a single query, or any other runtime
                error of torch (CUDA/cuBLAS errors ...), with a one-line reason.
        """
        import torch
        from tqdm.auto import tqdm

        t5 = self.t5
        unique = list(dict.fromkeys(prompts))
        full = t5.tokenize_full(unique)
        n_tokens = np.array([len(x) for x in full], dtype=np.int64)
        ids = [t5.truncate(x, max_length) for x in full]
        lengths = [len(x) for x in ids]
        order = sort_by_length(lengths)
        scores = np.full(len(unique), np.nan, dtype=np.float64)
        cells = attention_cells(self.attention_mib, t5.n_heads, t5.element_bytes)
        stats = {"queries": len(prompts), "distinct": len(unique), "batches": 0,
                 "real_tokens": sum(lengths), "padded_tokens": 0}
        progress = self.progress
        # off a terminal (a SLURM log) a bar would not show: a log line every 30 s instead
        lines = (LogLines("queries", len(unique), announce=True) if progress is None and not sys.stderr.isatty()
                 else None)
        with t5.lock, torch.inference_mode(), tqdm(
            total=len(unique), desc="queries", unit="q", disable=None if progress is None else not progress,
            leave=False,
        ) as bar:
            def forward(batch: list[int]) -> None:
                two = self._two_logits(ids, batch, self.fast_forward)
                diff = two[:, 0] - two[:, 1]
                with np.errstate(over="ignore", invalid="ignore"):
                    scores[batch] = 1.0 / (1.0 + np.exp(-diff))

            def done(batch: list[int], end: int) -> None:
                bar.update(len(batch))
                if lines is not None:
                    lines.set(end)
                stats["padded_tokens"] += len(batch) * lengths[batch[0]]
                if on_batch is not None:
                    on_batch(end, len(order))

            stats["batches"] = run_batches(order, lengths, batch_tokens=self.batch_tokens, holder=t5, device=t5.device,
                                           forward=forward, max_cells=cells, on_batch=done)
        self.last_stats = stats
        index = {p: k for k, p in enumerate(unique)}
        where = [index[p] for p in prompts]
        return scores[where], n_tokens[where]


_MODELS: dict[tuple[str, str | None, str, str], T5Model] = {}
_MODELS_LOCK = threading.Lock()


def load_t5_model(checkpoint: ResolvedCheckpoint, device: str, dtype: str, fingerprint: str | None = None) -> T5Model:
    """Load (once per process) the model of ``(checkpoint folder, content fingerprint, device, dtype)``:
    a folder whose weights were replaced (another fingerprint) is loaded again, never answered by
    the model read from the old files."""
    key = (str(Path(checkpoint.path).resolve()), fingerprint, device, check_dtype(dtype))
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = T5Model(checkpoint, device, dtype)
        return model


def t5_runner_factory(checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator, *, device: str,
                      dtype: str, batch_tokens: int = BATCH_TOKENS["gpu"],
                      attention_mib: float = default("attention_mib"),
                      fast_forward: bool = True, progress: bool | None = False) -> T5Runner:
    """The default :data:`~unieval_local.engine.RunnerFactory`: a :class:`T5Runner` over the
    process-wide :func:`load_t5_model` of the checkpoint.

    Raises:
        CheckpointError: the checkpoint does not load (see :class:`T5Model`).
    """
    return T5Runner(load_t5_model(checkpoint, device, dtype, fingerprint), evaluator=evaluator, fingerprint=fingerprint,
                    batch_tokens=batch_tokens, attention_mib=attention_mib, fast_forward=fast_forward,
                    progress=progress)
