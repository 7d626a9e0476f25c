"""A float64 reference for the T5-family evaluators, computed from the checkpoint's STORED files only.

Why it exists: transformers 5.0.0 read the stored T5 config otherwise than its ``config.json``
said (its config object held ``scale_decoder_outputs=True`` for checkpoints whose file says
``tie_word_embeddings: false``), and a reference that loads the model through transformers shares
that reading, so it cannot see such a bug. Nothing here goes through a transformers config object,
model class or tokenizer:

- ``config.json`` is read with :mod:`json`;
- the tensors are read from the weight files themselves (``model.safetensors`` with
  ``safetensors.torch.load_file``, ``pytorch_model.bin`` with ``torch.load(weights_only=True)``,
  shards through ``model.safetensors.index.json`` / ``pytorch_model.bin.index.json``) and taken
  to float64;
- token ids come from ``spiece.model`` through ``sentencepiece`` directly
  (:class:`SentencePieceIds`): each stretch of text between the special tokens that the
  evaluators' prompts hold literally (``</s>``, ``<pad>``, ``<unk>``) is encoded by SentencePiece,
  the special token's own id is put between them, and EOS is appended. This is how T5's slow
  tokenizer (``legacy=True``) and the fast one of transformers 4.x (Metaspace, prepend "always")
  read such prompts, e.g. MiniCheck's ``"predict: " + chunk + "</s>" + claim``: the claim right
  after ``</s>`` starts with "▁";
- the forward is written here with plain torch operations, one query at a time, no batching, no
  padding (so no attention mask).

The forward (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer", JMLR 21(140), Sec. 2.1; T5 v1.1 and mT5, Xue et al., NAACL 2021):

- T5's layer norm is RMS norm without mean subtraction or bias: ``w * x / sqrt(mean(x^2) + eps)``
  (``layer_norm_epsilon``, default 1e-6), applied before each sub-layer (pre-norm), residual add
  after; a final norm after each stack.
- Attention is NOT scaled by ``1/sqrt(d_kv)`` (T5 folds the scale into the initialisation).
  Self-attention adds a learned relative position bias (one scalar per head and bucket, the table
  stored in block 0 of each stack and shared by all blocks); cross-attention has none. Buckets as
  Mesh TensorFlow's ``_relative_position_bucket`` (:func:`relative_position_bucket`:
  ``relative_attention_num_buckets``, default 32; ``relative_attention_max_distance``, default 128
  when absent, as older configs omit it), bidirectional in the encoder, causal in the decoder.
- The feed-forward from ``feed_forward_proj``: ``relu`` (T5: ``wo(relu(wi x))``) or
  ``gated-gelu`` (T5 v1.1 / mT5 / Flan-T5: ``wo(gelu_tanh(wi_0 x) * wi_1 x)``, the tanh
  approximation of GELU, transformers' ``gelu_new``); ``gated-ACT`` / ``ACT`` for ACT in relu,
  silu, gelu (exact erf) are read the same way.
- ONE decoder step from ``[decoder_start_token_id]`` (default: ``pad_token_id``, default 0). UniEval
  gets the same step by passing ``labels=[first id of "No"]``, which the model shifts right
  (UniEval ``scorer.py``; contract, "The score of one query").
- The LM head (the rule applied, from the stored files' meaning, :func:`head_rule`):
  ``tie_word_embeddings`` TRUE in config.json, or ABSENT for ``model_type`` ``t5``: the head is the
  shared embedding and the last decoder state is multiplied by ``d_model**-0.5`` first (original
  T5, whose output layer shares the input embedding). ``tie_word_embeddings`` FALSE: the stored
  ``lm_head.weight``, no rescale (T5 v1.1, every official UniEval checkpoint, MiniCheck/Flan-T5,
  SEAHORSE/mT5). ABSENT for ``model_type`` ``mt5`` / ``umt5``: untied (the default of their
  configs in transformers 4.x, which wrote these checkpoints: ``MT5Config(tie_word_embeddings=False)``;
  mT5 was released with an untied head). This is also what the package applies
  (``unieval_local.models.stored.stored_rescale``); transformers 5's MT5 never rescales, and its
  T5 reads the flag into ``scale_decoder_outputs``. A tied rule with no ``lm_head.weight``
  stored uses the embedding; an untied rule with none stored is an error.

Readouts:

- ``pair`` (UniEval ``scorer.py``; MiniCheck ``inference.py``): ``p = softmax(all logits)``,
  score ``p[pos] / (p[pos] + p[neg])``, the two answer tokens being the FIRST ids of the answer
  words as the tokenizer encodes them alone ("Yes"/"No"; MiniCheck "1"/"0"), computed in float64.
- ``vocab`` (SEAHORSE, Clark et al., 2023, arXiv 2305.13194, the model cards of
  google/seahorse-large-q1..q6; TRUE's rule, Honovich et al., 2022): ``softmax(all logits)[pos]``
  over every row of the head.

HHEM-2.1-Open (vectara/hallucination_evaluation_model, its model card and
``modeling_hhem_v2.py``): a T5 encoder (the foundation google/flan-t5-base's config: T5 v1.1)
whose tensors are stored under ``t5.transformer.`` and a linear head ``t5.classifier`` (weight and
bias) over the encoder's output; the prompt is the ``prompt`` of its ``config.json``
(``"<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise: {text1}\\n\\n
Hypothesis: {text2}"``), tokenized with the foundation's ``spiece.model``; the score is
``softmax(logits at position 0)[1]`` (position 0 is the literal ``<pad>``; class 1 "consistent").
HHEM itself does not truncate; over ``max_length`` this reference cuts the END OF THE PREMISE and
keeps ``"\\n\\nHypothesis: " + hypothesis`` (and EOS) whole, the rule unieval-local documents for
its ``hhem`` backend (``unieval_local/models/hhem/model.py``, ``HHEMModel.encode``).

Truncation for the seq2seq evaluators is right truncation as UniEval's tokenizer call
(``max_length``, ``truncation=True``): the first ``max_length - 1`` ids and the final EOS.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch

__all__ = ["HHEMReference", "SentencePieceIds", "T5Reference", "head_rule", "load_stored_tensors",
           "minicheck_chunks", "read_config", "relative_position_bucket", "truncate_right"]

F64 = torch.float64


# ----------------------------------------------------------------------------- stored files
def read_config(folder: str | Path) -> dict:
    """``config.json`` of ``folder`` as stored (:mod:`json`, no transformers)."""
    return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))


def _weight_files(folder: Path) -> list[Path]:
    """The weight files of ``folder``: the shards an index json lists, else the single file
    (safetensors preferred, as transformers does when both are there)."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            weight_map = json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"]
            return [folder / name for name in dict.fromkeys(weight_map.values())]
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return [folder / name]
    raise FileNotFoundError(f"{folder}: no model.safetensors, pytorch_model.bin or shard index")


def load_stored_tensors(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every stored tensor of ``folder`` by its stored name, as float64 (integer tensors as stored).

    safetensors files are read with ``safetensors.torch.load_file``, ``.bin`` files with
    ``torch.load(weights_only=True)`` (no code runs); shards through their index json.
    """
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for path in _weight_files(Path(folder)):
        part = (load_file(str(path)) if path.suffix == ".safetensors"
                else torch.load(path, map_location="cpu", weights_only=True))
        for name, tensor in part.items():
            state[name] = tensor.to(F64) if tensor.is_floating_point() else tensor
    return state


def head_rule(config: dict) -> bool:
    """True when the stored config means a TIED head with the ``d_model**-0.5`` rescale (module
    docstring): ``tie_word_embeddings`` true, or absent for ``t5``; absent for ``mt5``/``umt5``
    means untied (their 4.x config default)."""
    if "tie_word_embeddings" in config and config["tie_word_embeddings"] is not None:
        return bool(config["tie_word_embeddings"])
    return config.get("model_type") not in ("mt5", "umt5")


# ----------------------------------------------------------------------------- token ids
class SentencePieceIds:
    """Token ids of a prompt from ``spiece.model`` with ``sentencepiece`` directly (module docstring).

    The literal special tokens ``</s>``, ``<pad>`` and ``<unk>`` are read as their ids (T5's
    tokenizer treats them as added tokens); the text between them is encoded by SentencePiece
    (its own normalization: charsmap, whitespace runs removed, a "▁" prepended); EOS is appended.
    """

    def __init__(self, model_file: str | Path):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        self.eos = self.sp.eos_id()
        self.specials = {"</s>": self.eos, "<pad>": self.sp.pad_id(), "<unk>": self.sp.unk_id()}
        assert min(self.specials.values()) >= 0, "spiece.model lacks pad/eos/unk ids"
        self._split = re.compile("(" + "|".join(re.escape(s) for s in self.specials) + ")")

    def plain(self, text: str) -> list[int]:
        """Ids of ``text`` with its special tokens read as such, no EOS appended."""
        ids: list[int] = []
        for part in self._split.split(text):
            if part in self.specials:
                ids.append(self.specials[part])
            elif part:
                ids += self.sp.encode(part)
        return ids

    def __call__(self, text: str) -> list[int]:
        """Ids of ``text`` then EOS (what T5's tokenizer gives with its special tokens)."""
        return self.plain(text) + [self.eos]

    def first_id(self, word: str) -> int:
        """The first id of ``word`` encoded alone (UniEval's ``tokenizer("Yes").input_ids[0]``);
        raises if it is the unknown token."""
        first = self(word)[0]
        if first == self.sp.unk_id():
            raise ValueError(f"{word!r} has no piece of its own in this vocabulary")
        return first


def truncate_right(ids: list[int], max_length: int) -> list[int]:
    """Right truncation as the T5 tokenizer's ``truncation=True``: the first ``max_length - 1``
    ids and the final EOS."""
    return ids if len(ids) <= max_length else ids[: max_length - 1] + ids[-1:]


# ----------------------------------------------------------------------------- the T5 blocks
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """T5's layer norm: ``weight * x / sqrt(mean(x^2) + eps)`` over the last axis (no mean, no bias)."""
    return weight * (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps))


def relative_position_bucket(relative: torch.Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
    """Mesh TensorFlow's T5 bucket of each ``relative = key position - query position``: half the
    buckets per direction when bidirectional (keys after the query in the upper half); the
    first half of a direction's buckets are exact distances, the rest logarithmic up to
    ``max_distance``, beyond which all share the last bucket. The logarithm is taken in
    float32, as in the original (the boundaries do not move in float64 for 16/32 buckets and
    distance 128, checked when this was written)."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = torch.clamp(-relative, min=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return bucket + torch.where(distance < max_exact, distance, large)


def _activation(name: str):
    if name == "relu":
        return torch.relu
    if name == "gelu_new":  # the tanh approximation (T5 v1.1's gelu)
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    if name == "gelu":
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "silu":
        return lambda x: x * torch.sigmoid(x)
    raise ValueError(f"unsupported activation {name!r}")


class _Shape:
    """The architecture numbers of a T5 config dict (T5Config's documented defaults where absent)."""

    def __init__(self, config: dict):
        self.d_model = int(config["d_model"])
        self.heads = int(config["num_heads"])
        self.d_kv = int(config.get("d_kv", self.d_model // self.heads))
        self.layers = int(config["num_layers"])
        self.decoder_layers = int(config.get("num_decoder_layers") or self.layers)
        self.eps = float(config.get("layer_norm_epsilon", 1e-6))
        self.buckets = int(config.get("relative_attention_num_buckets", 32))
        self.max_distance = int(config.get("relative_attention_max_distance") or 128)
        proj = str(config.get("feed_forward_proj", "relu"))
        self.gated = proj.startswith("gated-")
        act = proj.split("-", 1)[1] if self.gated else proj
        self.act = _activation("gelu_new" if proj == "gated-gelu" else act)


class _Stack:
    """The tensors of one T5 stack (``prefix`` = ``encoder.``, ``decoder.`` or HHEM's
    ``t5.transformer.encoder.``) and the sub-layers over them."""

    def __init__(self, state: dict[str, torch.Tensor], prefix: str, shape: _Shape, n_layers: int):
        self.w, self.p, self.s, self.n = state, prefix, shape, n_layers

    def t(self, name: str) -> torch.Tensor:
        return self.w[self.p + name]

    def attention(self, x: torch.Tensor, memory: torch.Tensor, where: str, bias: torch.Tensor | None) -> torch.Tensor:
        """Multi-head attention of queries ``x`` (Q, d) over ``memory`` (K, d), unscaled scores,
        ``bias`` (H, Q, K) added (or none), output projected by ``o``."""
        s = self.s
        q = (x @ self.t(f"{where}.q.weight").T).view(-1, s.heads, s.d_kv).transpose(0, 1)  # (H, Q, dk)
        k = (memory @ self.t(f"{where}.k.weight").T).view(-1, s.heads, s.d_kv).transpose(0, 1)
        v = (memory @ self.t(f"{where}.v.weight").T).view(-1, s.heads, s.d_kv).transpose(0, 1)
        scores = q @ k.transpose(1, 2)  # (H, Q, K): no 1/sqrt(d_kv) in T5
        if bias is not None:
            scores = scores + bias
        out = torch.softmax(scores, dim=-1) @ v  # (H, Q, dk)
        return out.transpose(0, 1).reshape(-1, s.heads * s.d_kv) @ self.t(f"{where}.o.weight").T

    def position_bias(self, q_len: int, k_len: int, bidirectional: bool, query_offset: int = 0) -> torch.Tensor:
        """(H, Q, K) bias from block 0's ``relative_attention_bias`` table."""
        table = self.t("block.0.layer.0.SelfAttention.relative_attention_bias.weight")  # (buckets, H)
        queries = torch.arange(q_len)[:, None] + query_offset
        keys = torch.arange(k_len)[None, :]
        buckets = relative_position_bucket(keys - queries, bidirectional, self.s.buckets, self.s.max_distance)
        return table[buckets].permute(2, 0, 1)

    def feed_forward(self, x: torch.Tensor, where: str) -> torch.Tensor:
        s = self.s
        if s.gated:
            hidden = s.act(x @ self.t(f"{where}.wi_0.weight").T) * (x @ self.t(f"{where}.wi_1.weight").T)
        else:
            hidden = s.act(x @ self.t(f"{where}.wi.weight").T)
        return hidden @ self.t(f"{where}.wo.weight").T

    def encode(self, embeddings: torch.Tensor) -> torch.Tensor:
        """The encoder over one sequence of embeddings (S, d) -> (S, d), final norm applied."""
        s, h = self.s, embeddings
        bias = self.position_bias(h.shape[0], h.shape[0], bidirectional=True)
        for i in range(self.n):
            b = f"block.{i}.layer"
            x = rms_norm(h, self.t(f"{b}.0.layer_norm.weight"), s.eps)
            h = h + self.attention(x, x, f"{b}.0.SelfAttention", bias)
            h = h + self.feed_forward(rms_norm(h, self.t(f"{b}.1.layer_norm.weight"), s.eps), f"{b}.1.DenseReluDense")
        return rms_norm(h, self.t("final_layer_norm.weight"), s.eps)

    def decode_first_step(self, start: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """The decoder's state (d,) at position 0 from the start token's embedding ``start`` (1, d),
        attending to itself (causal bias of distance 0) and to the encoder output ``memory``."""
        s, h = self.s, start
        bias = self.position_bias(1, 1, bidirectional=False)
        for i in range(self.n):
            b = f"block.{i}.layer"
            x = rms_norm(h, self.t(f"{b}.0.layer_norm.weight"), s.eps)
            h = h + self.attention(x, x, f"{b}.0.SelfAttention", bias)
            h = h + self.attention(rms_norm(h, self.t(f"{b}.1.layer_norm.weight"), s.eps), memory,
                                   f"{b}.1.EncDecAttention", None)
            h = h + self.feed_forward(rms_norm(h, self.t(f"{b}.2.layer_norm.weight"), s.eps), f"{b}.2.DenseReluDense")
        return rms_norm(h, self.t("final_layer_norm.weight"), s.eps)[0]


def _embedding(state: dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    for name in (f"{prefix}shared.weight", f"{prefix}encoder.embed_tokens.weight", f"{prefix}decoder.embed_tokens.weight"):
        if name in state:
            return state[name]
    raise KeyError(f"no shared embedding stored under {prefix!r}")


# ----------------------------------------------------------------------------- seq2seq evaluators
class T5Reference:
    """T5 / T5 v1.1 / mT5 seq2seq scoring in float64 from ``folder``'s stored files (module docstring).

    Args:
        folder: a checkpoint folder with ``config.json``, weights and ``spiece.model``.

    Attributes:
        tied: the head rule applied (:func:`head_rule`): shared embedding and d_model**-0.5 rescale.
        ids: the :class:`SentencePieceIds` of the folder.
    """

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        self.folder = folder
        self.config = read_config(folder)
        self.shape = _Shape(self.config)
        state = load_stored_tensors(folder)
        self.embedding = _embedding(state, "")
        self.tied = head_rule(self.config)
        if self.tied:
            self.head = self.embedding
            self.head_scale = self.shape.d_model ** -0.5
        else:
            if "lm_head.weight" not in state:
                raise KeyError(f"{folder}: config.json says the head is untied, but no lm_head.weight is stored")
            self.head = state["lm_head.weight"]
            self.head_scale = 1.0
        self.encoder = _Stack(state, "encoder.", self.shape, self.shape.layers)
        self.decoder = _Stack(state, "decoder.", self.shape, self.shape.decoder_layers)
        pad = self.config.get("pad_token_id", 0)
        start = self.config.get("decoder_start_token_id")
        self.start_id = int(start if start is not None else (pad if pad is not None else 0))
        self.ids = SentencePieceIds(folder / "spiece.model")
        self._memo: dict[tuple, torch.Tensor] = {}

    def token_ids(self, prompt: str, max_length: int) -> list[int]:
        """The prompt's ids (specials read, EOS appended), right-truncated to ``max_length``."""
        return truncate_right(self.ids(prompt), max_length)

    def logits_of_ids(self, ids: list[int]) -> torch.Tensor:
        """(rows,) float64 logits of the first decoder step for the input ids ``ids``."""
        key = tuple(ids)
        if key not in self._memo:
            with torch.no_grad():
                memory = self.encoder.encode(self.embedding[torch.tensor(ids)])
                state = self.decoder.decode_first_step(self.embedding[torch.tensor([self.start_id])], memory)
                self._memo[key] = (state * self.head_scale) @ self.head.T
        return self._memo[key]

    def logits(self, prompt: str, max_length: int) -> torch.Tensor:
        """(rows,) float64 logits of the first decoder step for ``prompt`` cut to ``max_length``."""
        return self.logits_of_ids(self.token_ids(prompt, max_length))

    def pair(self, prompt: str, answers: tuple[str, str] = ("Yes", "No"), max_length: int = 1024) -> float:
        """UniEval's / MiniCheck's score: ``p[pos] / (p[pos] + p[neg])`` of the full-vocabulary
        softmax, ``pos``/``neg`` the first ids of ``answers``."""
        pos, neg = (self.ids.first_id(w) for w in answers)
        p = torch.softmax(self.logits(prompt, max_length), dim=-1)
        return float(p[pos] / (p[pos] + p[neg]))

    def vocab(self, prompt: str, positive: str = "1", max_length: int = 2048) -> float:
        """SEAHORSE's score: ``softmax(all logits)[pos]``, ``pos`` the first id of ``positive``."""
        pos = self.ids.first_id(positive)
        return float(torch.softmax(self.logits(prompt, max_length), dim=-1)[pos])


def minicheck_chunks(document: str, splitter, chunk_words: int = 500) -> list[str]:
    """MiniCheck's document chunks (``minicheck/inference.py``; contract, "MiniCheck"): sentences
    by ``splitter`` (NLTK Punkt) per ``'\\n'``-separated block with a ``'\\n'`` item kept between
    blocks; items packed while the running count of ``len(item.split())`` stays at most
    ``chunk_words`` (an item that does not fit starts the next chunk); each chunk
    ``' '.join(items).replace(' \\n ', '\\n').strip()``, empty ones dropped."""
    items: list[str] = []
    for block in document.split("\n"):
        items += list(splitter(block))
        items.append("\n")
    items = items[:-1] or [""]
    groups, current, count = [], [], 0
    for item in items:
        n = len(item.split())
        if count + n > chunk_words:
            groups.append(current)
            current, count = [item], n
        else:
            current.append(item)
            count += n
    if current:
        groups.append(current)
    chunks = [" ".join(g).replace(" \n ", "\n").strip() for g in groups]
    return [c for c in chunks if c]


# ----------------------------------------------------------------------------- HHEM
class HHEMReference:
    """HHEM-2.1-Open's P(consistent) in float64 from its stored files (module docstring).

    Args:
        folder: the HHEM folder (``config.json`` with ``prompt`` and ``foundation``, ``model.safetensors``
            with ``t5.``-prefixed tensors).
        foundation: the foundation folder (its ``config.json`` and ``spiece.model``); default: the
            folder named like the foundation (``flan-t5-base``) beside ``folder``.
    """

    PREFIX = "t5.transformer."

    def __init__(self, folder: str | Path, foundation: str | Path | None = None):
        folder = Path(folder)
        config = read_config(folder)
        self.prompt = config["prompt"]
        base = Path(foundation) if foundation else folder.parent / str(config.get("foundation", "google/flan-t5-base")).split("/")[-1]
        self.shape = _Shape(read_config(base))
        state = load_stored_tensors(folder)
        self.embedding = _embedding(state, self.PREFIX)
        self.encoder = _Stack(state, self.PREFIX + "encoder.", self.shape, self.shape.layers)
        self.classifier_w = state["t5.classifier.weight"]  # (2, d)
        self.classifier_b = state["t5.classifier.bias"]
        # class 1 ("consistent", HHEM's transformed_probs[:, 1]) unless config.json names the labels otherwise
        labels = config.get("id2label") or {}
        named = [int(k) for k, v in labels.items() if str(v).lower() == "consistent"]
        self.label = named[0] if named else 1
        self.ids = SentencePieceIds(base / "spiece.model")
        head, _, _ = self.prompt.partition("{text1}")
        self.middle = self.prompt.partition("{text1}")[2].partition("{text2}")[0]  # "\n\nHypothesis: "
        assert head.startswith("<pad>") and self.middle, self.prompt

    def token_ids(self, premise: str, hypothesis: str, max_length: int) -> list[int]:
        """The prompt's ids; over ``max_length``, the premise's end is cut and the hypothesis kept."""
        ids = self.ids(self.prompt.format(text1=premise, text2=hypothesis))
        if len(ids) <= max_length:
            return ids
        tail = self.ids(self.middle + hypothesis)
        return (ids[: max(1, max_length - len(tail))] + tail)[:max_length]

    def __call__(self, premise: str, hypothesis: str, max_length: int = 2048) -> float:
        ids = self.token_ids(premise, hypothesis, max_length)
        with torch.no_grad():
            h = self.encoder.encode(self.embedding[torch.tensor(ids)])
            logits = h[0] @ self.classifier_w.T + self.classifier_b
        return float(torch.softmax(logits, dim=-1)[self.label])
