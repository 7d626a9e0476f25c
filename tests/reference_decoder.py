"""A float64 causal decoder (llama, qwen2, granite) computed from the stored files alone, and the
two readouts of the ``causal-lm`` backend (G-Eval's rating, Granite Guardian's groundedness).

The golden tests (``tests/test_golden_scores_other.py``) compare the package's ``g-eval`` and
``granite-guardian-3.3-8b`` scores with this. Nothing here goes through transformers' config or
model classes: ``config.json`` is read with :mod:`json`, the weights with
``safetensors.safe_open``, the tokenizer with the ``tokenizers`` library (``tokenizer.json``),
the chat template (``tokenizer_config.json``'s ``chat_template`` or ``chat_template.jinja``) with
``jinja2`` directly, and the forward is written out below in plain torch ops in float64.

The architecture (Touvron et al., 2023, "Llama 2", Sec. 2.2; Qwen2 and Granite are the same
decoder with the differences named): token embeddings; per layer a pre-RMSNorm attention with
rotary position embeddings (Su et al., RoFormer, Eq. 34; ``rope_theta``, the half-split rotation
``rotate_half``), grouped-query attention (``num_key_value_heads``), a pre-RMSNorm SwiGLU MLP
(``down(silu(gate x) * up x)``); a final RMSNorm and the LM head (the embedding when
``tie_word_embeddings``). Qwen2: biases on q/k/v. Llama/Granite: ``attention_bias`` (q/k/v/o) and
``mlp_bias``. Granite: ``embedding_multiplier`` (embeddings scaled), ``attention_multiplier`` (the
attention scale instead of ``head_dim ** -0.5``), ``residual_multiplier`` (each block's output
scaled before the residual add), ``logits_scaling`` (logits divided by it). Any config value
outside this (RoPE scaling, partial rotary, sliding windows, another activation...) raises
:class:`NotImplementedError` naming it.

Readouts (``unieval_local/text/chat.py``'s module docstring, re-derived): the next-token softmax
over the whole vocabulary at the last prompt position; a word's probability sums its single-token
forms (the word, and the word after a space, each where the tokenizer makes it one token);
``labels``: P(words[0]) / (P(words[0]) + P(words[1])) (Granite Guardian: words ``no``/``yes``, so
1 - P(yes) renormalised over the two); ``rating`` (G-Eval, Liu et al., 2023, Sec. 2.3): the
expected rating E = sum_k k p(k) over the digits 1..K renormalised.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

__all__ = ["DecoderReference", "load_config", "load_state_dict"]

_LAYOUTS = ("llama", "qwen2", "granite")
_GRANITE_KEYS = ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")

#: keys that do not change a full-attention forward pass in eval mode
_IRRELEVANT = {
    "_name_or_path", "architectures", "attention_dropout", "bos_token_id", "dtype", "eos_token_id",
    "initializer_range", "max_position_embeddings", "model_type", "pad_token_id", "pretraining_tp",
    "torch_dtype", "transformers_version", "unieval_local_evaluator", "use_cache", "vocab_size",
    "output_attentions", "output_hidden_states", "return_dict", "tokenizer_class", "max_window_layers",
}
#: keys this reference reads (their values are checked below)
_USED = {
    "attention_bias", "head_dim", "hidden_act", "hidden_size", "intermediate_size", "layer_types", "mlp_bias",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "partial_rotary_factor", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings", "use_sliding_window",
    *_GRANITE_KEYS,
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


def _rope_theta(c: dict) -> float:
    """``rope_theta`` from a 4.x config (top level, ``rope_scaling`` beside it) or a 5.x one
    (``rope_parameters``); only the plain (``default``) rotary embedding.

    Raises:
        NotImplementedError: RoPE scaling of any kind, partial rotary, or two thetas that disagree.
    """
    scaling = c.get("rope_scaling")
    if scaling not in (None, {}) and (scaling.get("rope_type", scaling.get("type")) not in (None, "default")
                                      or set(scaling) - {"rope_type", "type", "rope_theta"}):
        raise NotImplementedError(f"rope_scaling {scaling!r}")
    params = c.get("rope_parameters") or {}
    if params.get("rope_type", "default") != "default" or set(params) - {"rope_type", "rope_theta"}:
        raise NotImplementedError(f"rope_parameters {params!r} (the default RoPE only)")
    if c.get("partial_rotary_factor", 1.0) != 1.0:
        raise NotImplementedError(f"partial_rotary_factor {c['partial_rotary_factor']}")
    thetas = {float(x) for x in (c.get("rope_theta"), params.get("rope_theta"),
                                 (scaling or {}).get("rope_theta")) if x is not None}
    if len(thetas) > 1:
        raise NotImplementedError(f"rope_theta given twice with other values: {sorted(thetas)}")
    return thetas.pop() if thetas else 10000.0  # the default of all three model families


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderReference:
    """A llama / qwen2 / granite decoder folder read directly (module docstring).

    Raises:
        NotImplementedError: a model type or config value not implemented (named).
        KeyError: a tensor the config needs is not stored; ValueError: a stored tensor is not used.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        c = self.config = load_config(self.folder)
        self.kind = c.get("model_type")
        if self.kind not in _LAYOUTS:
            raise NotImplementedError(f"model_type {self.kind!r} (only {', '.join(_LAYOUTS)})")
        unknown = sorted(set(c) - _IRRELEVANT - _USED)
        if unknown:
            raise NotImplementedError(f"{folder}: config keys this reference does not know: {unknown}")
        if c.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"hidden_act {c['hidden_act']!r} (SwiGLU with silu only)")
        if self.kind != "granite" and any(k in c for k in _GRANITE_KEYS):
            raise NotImplementedError(f"granite multipliers in a {self.kind} config: "
                                      f"{[k for k in _GRANITE_KEYS if k in c]}")
        if self.kind == "qwen2":
            if c.get("use_sliding_window", False):
                raise NotImplementedError("use_sliding_window true (sliding-window attention)")
            if any(t != "full_attention" for t in c.get("layer_types") or []):
                raise NotImplementedError(f"layer_types {c['layer_types']!r}")
            if c.get("attention_bias") is not None or c.get("mlp_bias") is not None:
                raise NotImplementedError("attention_bias / mlp_bias in a qwen2 config (qwen2 has fixed biases)")
        else:
            if c.get("layer_types") is not None and any(t != "full_attention" for t in c["layer_types"]):
                raise NotImplementedError(f"layer_types {c['layer_types']!r}")
            if c.get("sliding_window") is not None or c.get("use_sliding_window"):
                raise NotImplementedError("sliding_window in a llama/granite config")
        self.hidden = int(c["hidden_size"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        if self.heads % self.kv_heads:
            raise NotImplementedError(f"{self.heads} heads over {self.kv_heads} key/value heads")
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.layers = int(c["num_hidden_layers"])
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = _rope_theta(c)
        self.tied = bool(c.get("tie_word_embeddings", False))
        if self.kind == "qwen2":
            self.qkv_bias, self.o_bias, self.mlp_bias = True, False, False
        else:
            self.qkv_bias = self.o_bias = bool(c.get("attention_bias", False))
            self.mlp_bias = bool(c.get("mlp_bias", False))
        granite = self.kind == "granite"
        self.embedding_multiplier = float(c.get("embedding_multiplier", 1.0)) if granite else 1.0
        self.residual_multiplier = float(c.get("residual_multiplier", 1.0)) if granite else 1.0
        self.logits_scaling = float(c.get("logits_scaling", 1.0)) if granite else 1.0
        self.scale = float(c.get("attention_multiplier", 1.0)) if granite else self.head_dim ** -0.5
        self.state = load_state_dict(self.folder)
        self._used: set[str] = set()
        self._check_tensors()
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self._template = None

    # ----------------------------------------------------------------------------------- weights
    def w(self, key: str) -> torch.Tensor:
        if key not in self.state:
            raise KeyError(f"{self.folder}: tensor {key!r} is not stored")
        self._used.add(key)
        return self.state[key]

    def _layer(self, i: int) -> dict[str, torch.Tensor | None]:
        p = f"model.layers.{i}."
        out: dict[str, torch.Tensor | None] = {"in_norm": self.w(p + "input_layernorm.weight"),
                                               "post_norm": self.w(p + "post_attention_layernorm.weight")}
        for name, bias in (("q", self.qkv_bias), ("k", self.qkv_bias), ("v", self.qkv_bias), ("o", self.o_bias)):
            out[name] = self.w(p + f"self_attn.{name}_proj.weight")
            out[name + "_b"] = self.w(p + f"self_attn.{name}_proj.bias") if bias else None
        for name in ("gate", "up", "down"):
            out[name] = self.w(p + f"mlp.{name}_proj.weight")
            out[name + "_b"] = self.w(p + f"mlp.{name}_proj.bias") if self.mlp_bias else None
        return out

    def _check_tensors(self) -> None:
        embed = self.w("model.embed_tokens.weight")
        self.w("model.norm.weight")
        for i in range(self.layers):
            layer = self._layer(i)
            if layer["q"].shape != (self.heads * self.head_dim, self.hidden) or \
                    layer["k"].shape != (self.kv_heads * self.head_dim, self.hidden):
                raise ValueError(f"layer {i}: q/k shapes {tuple(layer['q'].shape)}/{tuple(layer['k'].shape)} do not "
                                 "match the config")
        if self.tied:
            stored = self.state.get("lm_head.weight")
            if stored is not None and not torch.equal(stored, embed):
                raise ValueError(f"{self.folder}: tie_word_embeddings true but a different lm_head.weight is stored")
            self._used.add("lm_head.weight")
        else:
            self.w("lm_head.weight")
        extra = sorted(set(self.state) - self._used)
        if extra:
            raise ValueError(f"{self.folder}: stored tensors this reference does not use: {extra[:8]}")

    def head(self) -> torch.Tensor:
        return self.w("model.embed_tokens.weight") if self.tied else self.w("lm_head.weight")

    # ---------------------------------------------------------------------------------- forward
    @staticmethod
    def _linear(x, weight, bias):
        y = x @ weight.T
        return y + bias if bias is not None else y

    @torch.no_grad()
    def last_logits(self, ids: list[int]) -> torch.Tensor:
        """float64 logits ``(vocab,)`` at the last position of one unpadded sequence (positions 0..n-1)."""
        n = len(ids)
        h = self.w("model.embed_tokens.weight")[torch.tensor(ids)] * self.embedding_multiplier
        d = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()  # (n, d)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        group = self.heads // self.kv_heads
        for i in range(self.layers):
            L = self._layer(i)
            x = _rms_norm(h, L["in_norm"], self.eps)
            q = self._linear(x, L["q"], L["q_b"]).view(n, self.heads, d).transpose(0, 1)
            k = self._linear(x, L["k"], L["k_b"]).view(n, self.kv_heads, d).transpose(0, 1)
            v = self._linear(x, L["v"], L["v_b"]).view(n, self.kv_heads, d).transpose(0, 1)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            k = k.repeat_interleave(group, dim=0)  # query head j reads key/value head j // group
            v = v.repeat_interleave(group, dim=0)
            scores = (q @ k.transpose(-1, -2)) * self.scale
            scores = scores.masked_fill(~causal, float("-inf"))
            attn = torch.softmax(scores, dim=-1) @ v  # (heads, n, d)
            out = self._linear(attn.transpose(0, 1).reshape(n, self.heads * d), L["o"], L["o_b"])
            h = h + out * self.residual_multiplier
            x = _rms_norm(h, L["post_norm"], self.eps)
            gate = self._linear(x, L["gate"], L["gate_b"])
            mlp = self._linear(torch.nn.functional.silu(gate) * self._linear(x, L["up"], L["up_b"]),
                               L["down"], L["down_b"])
            h = h + mlp * self.residual_multiplier
        last = _rms_norm(h[-1], self.w("model.norm.weight"), self.eps)
        return (last @ self.head().T) / self.logits_scaling

    def next_token_probabilities(self, ids: list[int]) -> torch.Tensor:
        """float64 softmax over the whole vocabulary after ``ids``."""
        return torch.softmax(self.last_logits(ids), dim=-1)

    # ------------------------------------------------------------------------- text and readouts
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without added special tokens (a rendered chat writes its own)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def forms(self, word: str) -> list[int]:
        """The single-token forms of ``word``: the ids of ``word`` and of ``" " + word``, each where it
        is one token, distinct.

        Raises:
            KeyError: neither is one token.
        """
        ids: list[int] = []
        for form in (word, " " + word):
            enc = self.encode(form)
            if len(enc) == 1 and enc[0] not in ids:
                ids.append(enc[0])
        if not ids:
            raise KeyError(f"{self.folder}: {word!r} has no single-token form")
        return ids

    def word_mass(self, probs: torch.Tensor, words: list[str]) -> torch.Tensor:
        """Each word's probability: the sum over its single-token forms."""
        return torch.stack([probs[self.forms(w)].sum() for w in words])

    def chat_template(self) -> str:
        """The folder's chat template: ``chat_template.jinja`` or ``tokenizer_config.json``'s key."""
        jinja = self.folder / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        template = json.loads((self.folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template")
        if not isinstance(template, str):
            raise NotImplementedError(f"{self.folder}: no single chat template string")
        return template

    def render(self, messages: list[dict], *, documents: list[dict] | None = None, continue_final: bool = False,
               add_generation_prompt: bool = False, **variables) -> str:
        """The chat text through the folder's template, rendered with jinja2 as chat templates are
        (a sandbox, ``trim_blocks`` and ``lstrip_blocks``). ``continue_final``: the last message's
        content is continued: the text is cut right after it (what follows it, the end-of-turn
        markup, is dropped)."""
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        if self._template is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
            self._template = env.from_string(self.chat_template())
        messages = [dict(m) for m in messages]
        mark = "\ue0ffCONTINUE\ue0ff"
        if continue_final:
            messages[-1]["content"] = messages[-1]["content"] + mark
        text = self._template.render(messages=messages, documents=documents, tools=None,
                                     add_generation_prompt=add_generation_prompt, **variables)
        if continue_final:
            if text.count(mark) != 1:
                raise ValueError("the template does not show the final message once")
            text = text[:text.index(mark)]
        return text

    def geval_rating(self, ids: list[int], scale: int) -> tuple[float, list[float]]:
        """G-Eval's expected rating ``E = sum_k k p(k)`` over the digits 1..``scale``
        renormalised, and ``p``."""
        p = self.word_mass(self.next_token_probabilities(ids), [str(k) for k in range(1, scale + 1)])
        p = p / p.sum()
        return float((torch.arange(1, scale + 1, dtype=torch.float64) * p).sum()), p.tolist()

    def labels_readout(self, ids: list[int], words: tuple[str, str]) -> float:
        """P(words[0]) / (P(words[0]) + P(words[1])) at the next token."""
        m = self.word_mass(self.next_token_probabilities(ids), list(words))
        return float(m[0] / m.sum())
