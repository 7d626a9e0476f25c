"""A float64 DeBERTa-v2/v3 sequence classifier computed from the stored files alone.

The golden tests (``tests/test_golden_scores_other.py``) compare the package's classifier scores
(``mdeberta-nli``, ``factcg-deberta-large``) with this. Nothing here goes through transformers'
config or model classes: ``config.json`` is read with :mod:`json`, the weights with
``safetensors.safe_open`` (or ``torch.load(weights_only=True)`` for ``pytorch_model.bin``), the
tokenizer with the ``tokenizers`` library (``tokenizer.json``), and the forward pass is written
out below in plain torch ops in float64 (He et al., "DeBERTa: Decoding-enhanced BERT with
Disentangled Attention", ICLR 2021, Sec. 3.1 and Eq. 2-4; DeBERTa-v3's settings: relative
positions in log buckets, attention keys shared with the position projections, a LayerNorm on
the relative embeddings).

What it implements (everything else a config sets raises :class:`NotImplementedError` naming it,
so a setting is never silently ignored):

* embeddings: word embeddings, absolute position embeddings when ``position_biased_input``,
  LayerNorm (``layer_norm_eps``); no ``embedding_size`` projection, no token types
  (``type_vocab_size`` 0: the package passes none);
* disentangled attention: content->content, content->position (``c2p``) and position->content
  (``p2c``) as ``pos_att_type`` lists them, scaled by ``sqrt(head_dim * (1 + #terms))``;
  ``relative_attention``, ``position_buckets`` (log buckets, computed in float64 as the original
  DeBERTa code does with numpy), ``max_relative_positions`` (< 1: ``max_position_embeddings``),
  ``share_att_key`` (true: the query/key projections also project the relative embeddings;
  false: ``pos_key_proj`` / ``pos_query_proj``), ``norm_rel_ebd`` (``none`` or ``layer_norm``);
* the feed-forward (``hidden_act`` ``gelu``: the exact erf form), post-LayerNorm residuals;
* ContextPooler (``pooler.dense`` on token 0, then ``pooler_hidden_act``) and the classifier;
  softmax over the labels; the label index read from ``config.json``'s ``id2label``.

One sequence at a time, unpadded (the attention mask is all ones), so padding and batching stay
the package's business: its values must not depend on them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

__all__ = ["DebertaReference", "load_config", "load_state_dict", "log_bucket"]

#: config keys that do not change the forward pass of a classifier in eval mode (dropouts,
#: initialisation, bookkeeping, generation and MLM-head settings, the package's identity key)
_IRRELEVANT = {
    "_name_or_path", "architectures", "attention_probs_dropout_prob", "bos_token_id", "cls_dropout", "dtype",
    "eos_token_id", "finetuning_task", "hidden_dropout_prob", "initializer_range", "legacy", "model_type",
    "output_attentions", "output_hidden_states", "pad_token_id", "pooler_dropout", "return_dict",
    "tie_word_embeddings", "tokenizer_class", "torch_dtype", "transformers_version", "unieval_local_evaluator",
    "use_cache", "vocab_size", "max_length", "chunk_size_feed_forward", "is_encoder_decoder",
}
#: config keys this reference reads (their values are checked below)
_USED = {
    "attention_head_size", "conv_kernel_size", "embedding_size", "hidden_act", "hidden_size", "id2label",
    "intermediate_size", "label2id", "layer_norm_eps", "max_position_embeddings", "max_relative_positions",
    "norm_rel_ebd", "num_attention_heads", "num_hidden_layers", "num_labels", "pooler_hidden_act",
    "pooler_hidden_size", "pos_att_type", "position_biased_input", "position_buckets", "problem_type",
    "relative_attention", "share_att_key", "type_vocab_size",
}


def load_config(folder: Path) -> dict:
    """``config.json`` of ``folder`` as plain JSON."""
    return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))


def load_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    """Every stored tensor of ``folder`` in float64, read directly from its weight files
    (:func:`reference_t5.load_stored_tensors`: safetensors or ``pytorch_model.bin``, shards
    through their index; integer tensors as stored)."""
    from reference_t5 import load_stored_tensors

    return load_stored_tensors(folder)


def log_bucket(relative: torch.Tensor, bucket_size: int, max_position: int) -> torch.Tensor:
    """DeBERTa's log-bucketed relative positions (``make_log_bucket_position`` of the original
    code, which computes it with numpy in float64): distances below ``bucket_size // 2`` kept,
    longer ones mapped logarithmically onto ``mid .. 2 mid - 1``, sign kept."""
    mid = bucket_size // 2
    rel = relative.to(torch.float64)
    sign = torch.sign(rel)
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.full_like(rel, mid - 1), rel.abs())
    log_pos = torch.ceil(torch.log(abs_pos / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, rel, log_pos * sign).to(torch.long)


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, the exact form x * Phi(x) (transformers' and DeBERTa's ``gelu``)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


_ACTIVATIONS = {"gelu": _gelu, "tanh": torch.tanh, "relu": torch.relu}


class _SlowTokenizer:
    """A folder without ``tokenizer.json`` (transformers 4.x saves DeBERTa's SentencePiece tokenizer
    as ``spm.model`` alone): its tokenizer through transformers, with the ``tokenizers`` library's
    ``encode(a, b).ids`` interface. Token ids are checked elsewhere (tests/test_golden_ids.py)."""

    class _Encoding:
        def __init__(self, ids):
            self.ids = ids

    def __init__(self, folder):
        from transformers import AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(folder)

    def encode(self, text, pair=None, add_special_tokens=True):
        return self._Encoding(self._tok(text, pair, add_special_tokens=add_special_tokens).input_ids)


class DebertaReference:
    """A DeBERTa-v2/v3 classifier folder read directly (module docstring).

    Args:
        folder: the checkpoint folder (``config.json``, weights, ``tokenizer.json``).

    Raises:
        NotImplementedError: a config value this reference does not implement (named).
        KeyError: a tensor the config needs is not stored; ValueError: a stored tensor is not used.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        c = self.config = load_config(self.folder)
        unknown = sorted(set(c) - _IRRELEVANT - _USED)
        if unknown:
            raise NotImplementedError(f"{folder}: config keys this reference does not know: {unknown}")
        if c.get("model_type") != "deberta-v2":
            raise NotImplementedError(f"model_type {c.get('model_type')!r} (only deberta-v2)")
        self.hidden = int(c["hidden_size"])
        self.heads = int(c["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        if self.head_dim * self.heads != self.hidden:
            raise NotImplementedError("hidden_size not a multiple of num_attention_heads")
        if c.get("attention_head_size", self.head_dim) != self.head_dim:
            raise NotImplementedError(f"attention_head_size {c['attention_head_size']}")
        if c.get("embedding_size", self.hidden) != self.hidden:
            raise NotImplementedError(f"embedding_size {c['embedding_size']} != hidden_size (embed_proj)")
        if c.get("type_vocab_size", 0) != 0:
            raise NotImplementedError(f"type_vocab_size {c['type_vocab_size']} (token type embeddings)")
        if c.get("conv_kernel_size", 0) > 0:
            raise NotImplementedError(f"conv_kernel_size {c['conv_kernel_size']} (the ConvLayer)")
        for key, default in (("hidden_act", "gelu"), ("pooler_hidden_act", "gelu")):
            if c.get(key, default) not in _ACTIVATIONS:
                raise NotImplementedError(f"{key} {c.get(key)!r}")
        self.act = _ACTIVATIONS[c.get("hidden_act", "gelu")]
        self.pooler_act = _ACTIVATIONS[c.get("pooler_hidden_act", "gelu")]
        if c.get("pooler_hidden_size", self.hidden) != self.hidden:
            raise NotImplementedError(f"pooler_hidden_size {c['pooler_hidden_size']} != hidden_size")
        if c.get("problem_type") not in (None, "single_label_classification"):
            raise NotImplementedError(f"problem_type {c['problem_type']!r} (softmax over labels only)")
        self.eps = float(c.get("layer_norm_eps", 1e-7))
        self.max_positions = int(c.get("max_position_embeddings", 512))
        self.position_biased_input = bool(c.get("position_biased_input", True))
        self.relative_attention = bool(c.get("relative_attention", False))
        pos_att = c.get("pos_att_type") or []
        if isinstance(pos_att, str):  # DeBERTa-v2's original form "p2c|c2p"
            pos_att = [x.strip() for x in pos_att.lower().split("|") if x.strip()]
        if set(pos_att) - {"c2p", "p2c"}:
            raise NotImplementedError(f"pos_att_type {pos_att!r} (c2p and p2c only)")
        self.pos_att = set(pos_att)
        norm = [x.strip() for x in str(c.get("norm_rel_ebd", "none")).lower().split("|")]
        if set(norm) - {"none", "layer_norm"}:
            raise NotImplementedError(f"norm_rel_ebd {c['norm_rel_ebd']!r}")
        self.norm_rel = "layer_norm" in norm
        self.share_att_key = bool(c.get("share_att_key", False))
        self.buckets = int(c.get("position_buckets", -1))
        self.max_relative = int(c.get("max_relative_positions", -1))
        if self.max_relative < 1:
            self.max_relative = self.max_positions
        self.span = self.buckets if self.buckets > 0 else self.max_relative
        # labels, from the JSON itself
        id2label = {int(k): str(v) for k, v in (c.get("id2label") or {}).items()}
        label2id = {str(k): int(v) for k, v in (c.get("label2id") or {}).items()}
        if id2label and label2id and {v: k for k, v in id2label.items()} != label2id:
            raise ValueError(f"{folder}: id2label {id2label} and label2id {label2id} disagree")
        self.id2label = id2label
        self.num_labels = int(c.get("num_labels", len(id2label) or 2))
        self.layers = int(c["num_hidden_layers"])
        self.state = load_state_dict(self.folder)
        self._used: set[str] = set()
        self._check_tensors()
        self._tokenizer = None

    # ----------------------------------------------------------------------------------- weights
    def w(self, key: str) -> torch.Tensor:
        """The stored tensor ``key`` (a KeyError naming it and the folder when absent)."""
        if key not in self.state:
            raise KeyError(f"{self.folder}: tensor {key!r} is not stored")
        self._used.add(key)
        return self.state[key]

    def _check_tensors(self) -> None:
        """Touch every tensor the config needs (KeyError when one is missing); no other may be stored."""
        p = "deberta."
        self.w(p + "embeddings.word_embeddings.weight")
        if self.position_biased_input:
            self.w(p + "embeddings.position_embeddings.weight")
        for name in ("embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"):
            self.w(p + name)
        if self.relative_attention:
            rel = self.w(p + "encoder.rel_embeddings.weight")
            if rel.shape[0] != 2 * self.span:
                raise ValueError(f"rel_embeddings has {rel.shape[0]} rows, the config implies {2 * self.span}")
        if self.norm_rel:  # built (and stored) by transformers even without relative attention, then unused
            self.w(p + "encoder.LayerNorm.weight"), self.w(p + "encoder.LayerNorm.bias")
        for i in range(self.layers):
            self._layer_weights(i)
        for name in ("pooler.dense.weight", "pooler.dense.bias", "classifier.weight", "classifier.bias"):
            self.w(name)
        if self.w("classifier.weight").shape[0] != self.num_labels:
            raise ValueError(f"the classifier has {self.w('classifier.weight').shape[0]} outputs, the config "
                             f"{self.num_labels} labels")
        extra = sorted(set(self.state) - self._used
                       - {"deberta.embeddings.position_ids"})  # a buffer some 4.x versions stored
        if extra:
            raise ValueError(f"{self.folder}: stored tensors this reference does not use: {extra[:8]}")

    def _layer_weights(self, i: int) -> dict[str, torch.Tensor]:
        p = f"deberta.encoder.layer.{i}."
        names = {
            "q": "attention.self.query_proj", "k": "attention.self.key_proj", "v": "attention.self.value_proj",
            "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
            "fo": "output.dense", "fln": "output.LayerNorm",
        }
        if self.relative_attention and not self.share_att_key:
            if "c2p" in self.pos_att:
                names["pk"] = "attention.self.pos_key_proj"
            if "p2c" in self.pos_att:
                names["pq"] = "attention.self.pos_query_proj"
        out = {}
        for short, name in names.items():
            out[short + ".w"] = self.w(p + name + ".weight")
            out[short + ".b"] = self.w(p + name + ".bias")
        return out

    # -------------------------------------------------------------------------------- tokenizer
    @property
    def tokenizer(self):
        """The folder's ``tokenizer.json`` through the ``tokenizers`` library (no padding, no truncation)."""
        if self._tokenizer is None:
            if not (self.folder / "tokenizer.json").is_file():  # saved by transformers 4.x: spm.model only
                self._tokenizer = _SlowTokenizer(self.folder)
                return self._tokenizer
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
            tok.no_padding()
            tok.no_truncation()
            self._tokenizer = tok
        return self._tokenizer

    def encode_pair(self, premise: str, hypothesis: str, max_length: int) -> list[int]:
        """``[CLS] premise [SEP] hypothesis [SEP]`` (the tokenizer's own template).

        Raises:
            NotImplementedError: longer than ``max_length`` (the premise would be cut: not reproduced here).
        """
        ids = self.tokenizer.encode(premise, hypothesis, add_special_tokens=True).ids
        if len(ids) > max_length:
            raise NotImplementedError(f"a pair of {len(ids)} tokens > {max_length}: truncation is not reproduced")
        return ids

    def encode_text(self, text: str, max_length: int) -> list[int]:
        """``[CLS] text [SEP]`` (FactCG's single sequence).

        Raises:
            NotImplementedError: longer than ``max_length`` (its end would be cut: not reproduced here).
        """
        ids = self.tokenizer.encode(text, add_special_tokens=True).ids
        if len(ids) > max_length:
            raise NotImplementedError(f"a text of {len(ids)} tokens > {max_length}: truncation is not reproduced")
        return ids

    def label_index(self, name: str) -> int:
        """The output index ``id2label`` gives the label ``name`` (case-insensitive), exactly once."""
        found = [i for i, v in self.id2label.items() if v.lower() == name.lower()]
        if len(found) != 1:
            raise KeyError(f"{self.folder}: label {name!r} is not named once in id2label {self.id2label}")
        return found[0]

    # ---------------------------------------------------------------------------------- forward
    def _relative_positions(self, n: int) -> torch.Tensor:
        ids = torch.arange(n)
        rel = ids[:, None] - ids[None, :]  # query - key
        if self.buckets > 0 and self.max_relative > 0:
            rel = log_bucket(rel, self.buckets, self.max_relative)
        return rel

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(n, hidden) -> (heads, n, head_dim)."""
        return x.view(x.shape[0], self.heads, self.head_dim).transpose(0, 1)

    def _attention(self, h: torch.Tensor, lw: dict, rel_emb: torch.Tensor | None, rel_pos: torch.Tensor | None):
        n = h.shape[0]
        q = self._heads(h @ lw["q.w"].T + lw["q.b"])
        k = self._heads(h @ lw["k.w"].T + lw["k.b"])
        v = self._heads(h @ lw["v.w"].T + lw["v.b"])
        factor = 1 + len(self.pos_att)
        scale = math.sqrt(self.head_dim * factor)
        scores = q @ k.transpose(-1, -2) / scale  # content -> content
        if self.relative_attention and self.pos_att:
            span = self.span
            r = rel_emb[: 2 * span]
            if self.share_att_key:
                pos_k = self._heads(r @ lw["k.w"].T + lw["k.b"])
                pos_q = self._heads(r @ lw["q.w"].T + lw["q.b"])
            else:
                pos_k = self._heads(r @ lw["pk.w"].T + lw["pk.b"]) if "c2p" in self.pos_att else None
                pos_q = self._heads(r @ lw["pq.w"].T + lw["pq.b"]) if "p2c" in self.pos_att else None
            if "c2p" in self.pos_att:
                # query i, key j: q_i . pos_k[delta(i, j)], delta = clamp(bucket(i - j) + span)
                c2p = q @ pos_k.transpose(-1, -2)  # (heads, n, 2 span)
                index = torch.clamp(rel_pos + span, 0, 2 * span - 1)
                scores = scores + torch.gather(c2p, -1, index.expand(self.heads, n, n)) / scale
            if "p2c" in self.pos_att:
                # query i, key j: k_j . pos_q[delta(j, i)], delta = clamp(-bucket(j - i) + span)
                p2c = k @ pos_q.transpose(-1, -2)  # (heads, n keys, 2 span)
                index = torch.clamp(-rel_pos + span, 0, 2 * span - 1)  # [j, i] = -bucket(j - i) + span
                scores = scores + torch.gather(p2c, -1, index.expand(self.heads, n, n)).transpose(-1, -2) / scale
        probs = torch.softmax(scores, dim=-1)
        context = (probs @ v).transpose(0, 1).reshape(n, self.hidden)
        out = context @ lw["ao.w"].T + lw["ao.b"]
        return _layer_norm(out + h, lw["aln.w"], lw["aln.b"], self.eps)

    @torch.no_grad()
    def logits(self, ids: list[int]) -> torch.Tensor:
        """float64 logits ``(num_labels,)`` of one token sequence (unpadded)."""
        n = len(ids)
        if self.position_biased_input and n > self.max_positions:
            raise ValueError(f"{n} tokens > max_position_embeddings {self.max_positions}")
        p = "deberta."
        x = self.w(p + "embeddings.word_embeddings.weight")[torch.tensor(ids)]
        if self.position_biased_input:
            x = x + self.w(p + "embeddings.position_embeddings.weight")[:n]
        h = _layer_norm(x, self.w(p + "embeddings.LayerNorm.weight"), self.w(p + "embeddings.LayerNorm.bias"), self.eps)
        rel_emb = rel_pos = None
        if self.relative_attention:
            rel_emb = self.w(p + "encoder.rel_embeddings.weight")
            if self.norm_rel:
                rel_emb = _layer_norm(rel_emb, self.w(p + "encoder.LayerNorm.weight"),
                                      self.w(p + "encoder.LayerNorm.bias"), self.eps)
            rel_pos = self._relative_positions(n)
        for i in range(self.layers):
            lw = self._layer_weights(i)
            a = self._attention(h, lw, rel_emb, rel_pos)
            f = self.act(a @ lw["fi.w"].T + lw["fi.b"]) @ lw["fo.w"].T + lw["fo.b"]
            h = _layer_norm(f + a, lw["fln.w"], lw["fln.b"], self.eps)
        pooled = self.pooler_act(h[0] @ self.w("pooler.dense.weight").T + self.w("pooler.dense.bias"))
        return pooled @ self.w("classifier.weight").T + self.w("classifier.bias")

    def probabilities(self, ids: list[int]) -> torch.Tensor:
        """float64 softmax over the labels of one sequence."""
        return torch.softmax(self.logits(ids), dim=-1)
