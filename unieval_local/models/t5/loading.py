"""Loading a T5 checkpoint strictly, and the checks that need no model: the weight files of a
folder (single files or shards), the tensor names they store, non-finite tensors, and a config
that ties an LM head the weights store untied. torch and transformers are imported inside the
functions that need them."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

from ...errors import CheckpointError
from ...settings import check_dtype
from ..stored import dtype_kwarg, explain_tokenizer_failure, read_config, reconcile
from ..weights import iter_stored_tensors, weight_files
from .spm_check import check_tokenizer

__all__ = ["check_head_matches_config", "iter_stored_tensors", "load_model", "non_finite_tensors",
           "stored_weight_names", "weight_files"]


def _has_t5_layout(model) -> bool:
    """True when the model has the T5 block layout the fast single-step path relies on."""
    try:
        block = model.get_decoder().block[0]
        return (hasattr(block.layer[0], "SelfAttention") and hasattr(block.layer[1], "EncDecAttention")
                and not block.layer[1].EncDecAttention.has_relative_attention_bias
                and len(block.layer) == 3)
    except (AttributeError, IndexError, TypeError):
        return False


#: Embedding keys a T5 checkpoint may leave out: they are one tensor (``shared``) in memory.
_EMBEDDING_KEYS = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


_HEAD_KEY = "lm_head.weight"


def stored_weight_names(folder: Path) -> set[str]:
    """Names of the tensors stored in a checkpoint's weight files (safetensors headers only;
    pickled ``.bin`` files are memory-mapped, not read).

    Raises:
        CheckpointError: no weight file, or one that cannot be opened (truncated, corrupt).
    """
    files = weight_files(folder)
    if not files:
        raise CheckpointError(f"checkpoint folder {str(folder)!r} has no weights "
                              "(model.safetensors or pytorch_model.bin)")
    names: set[str] = set()
    missing = [f for f in files if not f.is_file()]
    if missing:
        index = next((i for i in ("model.safetensors.index.json", "pytorch_model.bin.index.json")
                      if (folder / i).is_file()), "the index")
        raise CheckpointError(f"checkpoint folder {str(folder)!r}: {len(missing)} of {len(files)} weight shards "
                              f"listed in {index} are missing ({', '.join(f.name for f in missing[:6])}"
                              f"{' ...' if len(missing) > 6 else ''}): stage the checkpoint again")
    for f in files:
        try:
            if f.suffix == ".safetensors":
                from safetensors import safe_open

                with safe_open(str(f), "pt") as fh:
                    names.update(fh.keys())
            else:
                import torch

                names.update(torch.load(f, map_location="cpu", mmap=True, weights_only=True).keys())
        except Exception as exc:
            raise CheckpointError(f"cannot open weight file {str(f)!r} ({type(exc).__name__}: {exc}); "
                                  "it is truncated or corrupt: stage the checkpoint again") from exc
    return names


def non_finite_tensors(folder: Path) -> list[str]:
    """Names of the stored tensors that hold a NaN or an infinity (``verify`` checks every tensor).

    Raises:
        CheckpointError: a weight file cannot be read.
    """
    import torch

    return sorted(k for k, v in iter_stored_tensors(folder) if v.is_floating_point() and not torch.isfinite(v).all())


def check_head_matches_config(folder: Path, stored: set[str], tied: bool) -> None:
    """Refuse a folder whose config says the LM head is tied to the embeddings (or omits the
    key: transformers' default is tied) while its weights store an ``lm_head.weight`` of its
    own that differs from them. transformers then scales the decoder output by d_model^-0.5
    as for a tied head (T5), and every score moves without a word.

    Raises:
        CheckpointError: naming both (the config's flag and the two stored tensors).
    """
    if not tied or _HEAD_KEY not in stored:
        return
    embedding = next((k for k in _EMBEDDING_KEYS if k in stored), None)
    if embedding is None:
        return
    import torch

    tensors = dict(iter_stored_tensors(folder, {_HEAD_KEY, embedding}))
    head, emb = tensors.get(_HEAD_KEY), tensors.get(embedding)
    if head is None or emb is None or (head.shape == emb.shape and torch.equal(head, emb)):
        return
    flag = ("says \"tie_word_embeddings\": true" if read_config(folder).get("tie_word_embeddings") is True
            else "omits \"tie_word_embeddings\" (transformers reads it as true: a tied head)")
    raise CheckpointError(
        f"checkpoint {str(folder)!r}: config.json {flag}, but the weights store an {_HEAD_KEY} that differs from "
        f"{embedding}; transformers would rescale the decoder output as for a tied head and every score would "
        "change. A T5 v1.1 checkpoint (the official UniEval layout) has an untied head: set "
        "\"tie_word_embeddings\": false in its config.json, or stage the checkpoint again")


def _stored_tie_flag(folder: Path) -> bool:
    """``tie_word_embeddings`` as written in the folder's ``config.json`` (default True, as in
    transformers 4.x): False for T5 v1.1 checkpoints, whose LM head is its own tensor."""
    return read_config(folder).get("tie_word_embeddings", True) is not False


class _DropLogRecords:
    """A logging filter that drops transformers records containing any of ``needles``."""

    def __init__(self, needles: Sequence[str]):
        self.needles = tuple(needles)

    def filter(self, record) -> bool:
        message = record.getMessage()
        return not any(n in message for n in self.needles)


def load_model(folder: str | Path, dtype: str = "float32"):
    """Load a seq2seq checkpoint and its tokenizer, refusing any mismatch between files and config.

    transformers loads a checkpoint whose weight file lacks a tensor (or holds one of
    another shape) with randomly initialised weights and only logs a table; the
    scores would then change from run to run. Here the load report
    (``output_loading_info``) AND the stored tensor names are checked, and any
    missing, unexpected or mismatched tensor is refused. The embedding keys that
    T5 stores once (``shared.weight``; ``encoder/decoder.embed_tokens.weight``, and
    ``lm_head.weight`` when the config ties it) may be absent, since they are one
    tensor in memory; a checkpoint whose config says ``tie_word_embeddings: false``
    (T5 v1.1, the official UniEval layout) must store its own ``lm_head.weight``.
    transformers 5's warning that such a head is "NOT tied" is expected for that
    layout and silenced (only that message, only then).

    Args:
        folder: the checkpoint folder (``config.json``, weights, tokenizer files).
        dtype: ``float32`` or ``bfloat16``.

    Returns:
        ``(model, tokenizer)``, the model in eval mode on the CPU.

    Raises:
        CheckpointError: the folder does not load, a weight file cannot be opened,
            tensors are missing, unexpected or of another shape (named, up to 12 each),
            the config says the LM head is tied while the stored one differs from the
            embeddings (:func:`check_head_matches_config`), or the tokenizer's ids differ from
            SentencePiece's encoding with ``spiece.model`` (:func:`~.spm_check.check_tokenizer`,
            which first rebuilds a tokenizer that lacks SentencePiece's normalization), or the loaded
            model disagrees with the stored files beyond repair (:func:`~unieval_local.models.stored.reconcile`;
            its facts, the rescale and start id the scores must use, are kept as
            ``model.unieval_stored_facts``).
    """
    import torch
    import transformers
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    folder = Path(folder)
    torch_dtype = getattr(torch, check_dtype(dtype))
    stored = stored_weight_names(folder)
    tied = _stored_tie_flag(folder)
    check_head_matches_config(folder, stored, tied)
    # transformers' own report of a bad load is replaced by the CheckpointError below
    needles = ["LOAD REPORT", "checkpoint seem corrupted"] + ([] if tied else ["will NOT tie them"])
    quiet = _DropLogRecords(needles)
    # on the emitting loggers themselves (a handler filter would not stop the record
    # reaching handlers further up, e.g. the root logger's) and on transformers' handlers
    filtered = [logging.getLogger(n) for n in ("transformers.modeling_utils", "transformers.utils.loading_report")]
    filtered += logging.getLogger("transformers").handlers
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    for h in filtered:
        h.addFilter(quiet)
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        except Exception as exc:
            raise CheckpointError(f"cannot load the tokenizer of checkpoint {str(folder)!r}: "
                                  f"{explain_tokenizer_failure(folder, exc)}") from exc
        model, info = AutoModelForSeq2SeqLM.from_pretrained(
            folder, trust_remote_code=False, output_loading_info=True, ignore_mismatched_sizes=True,
            **dtype_kwarg(torch_dtype))
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"cannot load checkpoint {str(folder)!r}: {type(exc).__name__}: {exc}") from exc
    finally:
        for h in filtered:
            h.removeFilter(quiet)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    expected = set(model.state_dict())
    ignored = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_unexpected", None) or [])]
    optional = set(_EMBEDDING_KEYS) | ({_HEAD_KEY} if tied else set())
    missing = set(info.get("missing_keys") or ()) | (expected - stored - optional)
    if expected & set(_EMBEDDING_KEYS) and not stored & (optional & expected):
        missing |= {"shared.weight"}  # no copy of the embedding at all
    unexpected = {k for k in set(info.get("unexpected_keys") or ()) | (stored - expected)
                  if not any(p.search(k) for p in ignored)}
    mismatched = [f"{m[0]} (file {list(m[1])} vs config {list(m[2])})" if isinstance(m, tuple) else str(m)
                  for m in sorted(info.get("mismatched_keys") or (), key=str)]
    problems = []
    for what, names in (("missing", sorted(missing)), ("unexpected", sorted(unexpected)), ("of another shape", mismatched)):
        if names:
            problems.append(f"{len(names)} {what}: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}")
    if problems:
        raise CheckpointError(
            f"checkpoint {str(folder)!r}: its weights do not match its config.json ({'; '.join(problems)}); "
            "transformers would give missing or re-shaped tensors random values and ignore unexpected ones, so "
            "the scores would be meaningless. Stage the checkpoint again (unieval-local download) or fix its "
            "config.json")
    check_tokenizer(folder, tokenizer)
    model.unieval_stored_facts = reconcile(model, folder, kind="seq2seq", dtype=check_dtype(dtype))
    return model.eval(), tokenizer
