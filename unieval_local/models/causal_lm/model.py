"""Loading a decoder checkpoint for the ``causal-lm`` backend: strictly, from safetensors, after
a memory check made from its config alone.

Layouts: ``AutoModelForCausalLM`` of the ``llama``, ``qwen2`` and ``granite`` model types
(:data:`LAYOUTS`). A folder is refused with :class:`~unieval_local.errors.CheckpointError`
naming what is wrong: another model type, no ``*.safetensors`` weights, a missing, unexpected or
mismatched tensor, a tokenizer with more tokens than the embedding has rows, no chat template
(the prompt is built with the checkpoint's own template; the package never renders one), or a
readout word with no single-token form. The memory the parameters need is estimated from
``config.json`` (:func:`parameter_count`) and compared with the device's free memory before
any weight is read (:func:`check_memory`): a clear refusal rather than an out-of-memory crash.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ...errors import CheckpointError
from ...registry.evaluators import Evaluator
from ...settings import check_dtype
from ..batching import first_line
from ..checkpoints import ResolvedCheckpoint
from ..stored import (dtype_kwarg, explain_tokenizer_failure, reconcile, require_transformers,
                      stored_fast_tokenizer)
from ..strict_loading import load_strictly
from ..tokenizer_identity import check_tokenizer_fits, describe_tokenizer

__all__ = ["BFLOAT16_ABOVE", "CausalLMModel", "auto_dtype", "LAYOUTS", "check_memory", "free_memory", "parameter_count",
           "token_forms"]

#: The ``model_type`` values this backend loads (the first three have a generated test layout:
#: ``scripts/make_test_checkpoint.py --layout llama|qwen2|granite``; ``mistral``, Prometheus 2's, is
#: Llama's layout with a sliding window: its judges are tested on Llama-layout stand-ins and its
#: parameter count on a generated Mistral config, tests/test_judges.py).
LAYOUTS = ("llama", "qwen2", "granite", "mistral")

#: The oldest transformers the causal-lm backend runs on: tested on 4.57.6 and the newest; 4.46.1
#: failed (``logits_to_keep`` unknown to Granite, other numbers in batches: docs/development.md).
CAUSAL_LM_MIN_TRANSFORMERS = (4, 57, 0)

#: Parameters above which bfloat16 is the dtype to use (``verify`` loads such a model in bfloat16;
#: a float32 run of one is refused by :func:`check_memory` when it does not fit, naming bfloat16).
BFLOAT16_ABOVE = 3_000_000_000

_BYTES = {"float32": 4, "bfloat16": 2}


def parameter_count(config) -> int:
    """Parameters of a Llama-family decoder from its config (no weights read): the embedding,
    the LM head unless tied, and per layer the attention projections (q and o: hidden x hidden;
    k and v: hidden x kv_heads * head_dim, with biases for Qwen2), the gated MLP (3 x hidden x
    intermediate) and two norms; the final norm. Exact for the three :data:`LAYOUTS` (Qwen2-0.5B:
    494,032,768)."""
    h, v, n = config.hidden_size, config.vocab_size, config.num_hidden_layers
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    q, k = heads * head_dim, kv * head_dim
    attention = h * q + 2 * h * k + q * h
    if config.model_type == "qwen2" or getattr(config, "attention_bias", False):
        attention += q + 2 * k + (h if getattr(config, "attention_bias", False) else 0)
    layer = attention + 3 * h * config.intermediate_size + 2 * h
    head = 0 if getattr(config, "tie_word_embeddings", False) else v * h
    return v * h + head + n * layer + h


def auto_dtype(folder) -> tuple[str, int]:
    """``(dtype, parameters)`` the ``auto`` dtype gives the decoder in ``folder``: bfloat16 above
    :data:`BFLOAT16_ABOVE` parameters (counted from ``config.json``, nothing loaded), else float32;
    float32 and 0 when the config does not read (the load then names the problem)."""
    from transformers import AutoConfig

    try:
        n = parameter_count(AutoConfig.from_pretrained(folder, trust_remote_code=False))
    except (OSError, ValueError, KeyError, TypeError):
        return "float32", 0
    return ("bfloat16" if n > BFLOAT16_ABOVE else "float32"), n


def free_memory(device: str) -> int | None:
    """Free bytes on ``device``: CUDA's ``mem_get_info``; on CPU, ``MemAvailable`` of
    ``/proc/meminfo`` (None where unknown: the check is then skipped)."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index
        return int(torch.cuda.mem_get_info(index if index is not None else torch.cuda.current_device())[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_memory(config, dtype: str, device: str, where: str, free: int | None = None) -> int:
    """Refuse a model whose parameters do not fit the device's free memory (with 10% to spare
    for activations), before loading it.

    Args:
        config: the checkpoint's config. dtype: ``float32`` or ``bfloat16``. device: where it would run.
        where: the folder, for the message. free: free bytes (default: :func:`free_memory`).

    Returns:
        The bytes the parameters need.

    Raises:
        CheckpointError: they do not fit; the message gives both sizes and, for float32, the
            bfloat16 size.
    """
    n = parameter_count(config)
    need = n * _BYTES[check_dtype(dtype)]
    free = free_memory(device) if free is None else free
    if free is not None and need * 1.1 > free:
        hint = (f"; in bfloat16 it needs {n * 2 / 2**30:.1f} GiB (--dtype bfloat16)" if dtype == "float32" else "")
        raise CheckpointError(f"{where}: a {n / 1e9:.2f}B-parameter model needs {need / 2**30:.1f} GiB in {dtype} "
                              f"(+10%), but {device} has {free / 2**30:.1f} GiB free{hint}: not loaded")
    return need


def token_forms(tokenizer, word: str) -> tuple[int, ...]:
    """The single-token forms of ``word``: the ids of ``word`` and of ``" " + word`` each where it
    is one token (distinct ids; a SentencePiece tokenizer may give the same one twice)."""
    ids = []
    for form in (word, " " + word):
        enc = tokenizer.encode(form, add_special_tokens=False)
        if len(enc) == 1 and enc[0] not in ids:
            ids.append(enc[0])
    return tuple(ids)


class CausalLMModel:
    """A loaded decoder: tokenizer (with its chat template), model on its device, readout forms.

    Args:
        checkpoint: the resolved folder. evaluator: its spec (``answers``; ``g-eval``'s digits
            1..9 are checked too). device, dtype: where and how. free: free bytes for the memory
            check (default: measured).

    Raises:
        CheckpointError: see the module docstring.
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, evaluator: Evaluator, device: str, dtype: str,
                 free: int | None = None):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        path = self.path = Path(checkpoint.path)
        self.dtype = check_dtype(dtype)
        require_transformers(CAUSAL_LM_MIN_TRANSFORMERS, "the causal-lm backend (G-Eval, Granite Guardian)")
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001  named below
            raise CheckpointError(f"{path}: its config does not load: {first_line(exc)}") from None
        if config.model_type not in LAYOUTS:
            raise CheckpointError(f"{path}: a {config.model_type!r} model; the causal-lm backend loads "
                                  f"{', '.join(LAYOUTS)}")
        if not sorted(path.glob("*.safetensors")):
            raise CheckpointError(f"{path}: no *.safetensors weights (the causal-lm backend loads safetensors only)")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise CheckpointError(f"{path}: its tokenizer does not load: {explain_tokenizer_failure(path, exc)}") from None
        self.tokenizer = stored_fast_tokenizer(path, self.tokenizer)  # tokenizer.json's ids, not a class's rules
        plain = bool(getattr(evaluator.prompt_format, "plain", False))  # Themis: its raw prompt, no template
        if not self.tokenizer.chat_template and not plain:
            raise CheckpointError(f"{path}: its tokenizer has no chat template (tokenizer_config.json "
                                  "'chat_template' or chat_template.jinja): the judge's prompt is built with it")
        self.parameters = parameter_count(config)
        self.need_bytes = check_memory(config, self.dtype, device, str(path), free)
        model = load_strictly(AutoModelForCausalLM, path, "a causal LM", use_safetensors=True,
                              **dtype_kwarg(getattr(torch, self.dtype)))
        # the head, vocabulary, special ids and dtype as the stored files say (refused otherwise)
        reconcile(model, path, kind="causal-lm", dtype=self.dtype)
        rows = int(model.get_input_embeddings().weight.shape[0])
        if len(self.tokenizer) > rows:
            raise CheckpointError(f"{path}: its tokenizer has {len(self.tokenizer):,} tokens but the embedding has "
                                  f"{rows:,} rows: a tokenizer of another model")
        self.tokenizer_class = describe_tokenizer(self.tokenizer)
        self.tokenizer_doubt = check_tokenizer_fits(self.tokenizer, model.config, rows=rows, where=str(path))
        scale = getattr(evaluator.prompt_format, "scale", None)  # a judge that reasons: its ratings 1..K
        digits = 9 if evaluator.name == "g-eval" else scale or 0
        words = list(evaluator.answers) + [str(k) for k in range(1, digits + 1)]
        self.forms: dict[str, tuple[int, ...]] = {}
        for word in words:
            self.forms_of(word)
        self.tokenizer.model_max_length = int(1e12)  # we count and truncate ourselves
        self.model = model.to(device).eval()
        self.device = device
        self.rows = rows
        self.n_heads = int(config.num_attention_heads)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self.lock = threading.Lock()
        self.oom_budget: int | None = None

    def forms_of(self, word: str) -> tuple[int, ...]:
        """:func:`token_forms` of ``word``, remembered.

        Raises:
            CheckpointError: ``word`` has no single-token form in this tokenizer.
        """
        if word not in self.forms:
            ids = token_forms(self.tokenizer, word)
            if not ids:
                raise CheckpointError(f"{self.path}: the readout word {word!r} is not one token in its tokenizer "
                                      f"(neither {word!r} nor {' ' + word!r}): its probability cannot be read")
            self.forms[word] = ids
        return self.forms[word]
