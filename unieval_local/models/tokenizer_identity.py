"""Is a loaded tokenizer its model's? Cheap checks at load (no forward pass), for every backend.

A tokenizer from another model loads without a word and gives other token ids, so other scores
under the same checkpoint name (a MiniCheck folder holding another model's tokenizer scored 0.8203
instead of 0.6898). What can be told from the tokenizer and the model's config alone
(:func:`check_tokenizer_fits`):

* its vocabulary against the embedding rows: a tokenizer with MORE tokens than the model has rows
  is refused (its ids past the rows have no embedding); one far smaller (more than
  :func:`slack` rows unused: T5 and Flan-T5 leave 28 of 32,128 rows, mT5 12 of 250,112, mDeBERTa
  998 of 251,000) is suspicious: warned about and signed ``identity:unverified``;
* its special tokens against the config: ``pad_token_id`` and ``eos_token_id`` as the config
  states them, T5's decoder start (the pad token), and every special id inside the rows;
* the evaluator's readout tokens (:func:`~unieval_local.registry.evaluators.answer_ids`, checked by
  the T5 runner) inside the rows.

Besides, a folder with a record of its files (a download manifest, an HF cache snapshot) is
checked against it when it resolves (:func:`~unieval_local.models.manifest.check_recorded_files`):
a changed or added tokenizer file is refused by name.

What cannot be caught: in a folder WITHOUT such a record (a folder of your own, a generated one
without ``--manifest``), a tokenizer with the same special ids and about as many pieces as the
model has rows, but other pieces (e.g. another SentencePiece model of the same size, or the
generated mt5 layout's tokenizer in a generated t5 folder): it loads, fits, and scores other
numbers. Stage checkpoints with ``unieval-local download`` (it writes the manifest) to be covered.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import CheckpointError

__all__ = ["check_tokenizer_fits", "describe_tokenizer", "slack"]


def slack(rows: int) -> int:
    """How many embedding rows a tokenizer may leave unused before it is suspicious:
    ``max(128, rows // 200)`` (real checkpoints pad their rows to a multiple of 64 or 128, or
    by under 0.4%: T5 28 of 32,128, mT5 12 of 250,112, mDeBERTa 998 of 251,000 (slack 1,255),
    DeBERTa-v3 99 of 128,100; the generated mt5 layout under 128)."""
    return max(128, rows // 200)


def describe_tokenizer(tokenizer) -> str:
    """The tokenizer's class and the flags that change its ids, for signatures:
    ``T5Tokenizer+extra:100`` (transformers 5's fast T5 tokenizer with T5's 100 sentinels),
    ``DebertaV2Tokenizer+add_prefix_space``, ``T5TokenizerFast+legacy`` (transformers 4); flags:
    ``legacy`` (T5's old handling of text after special tokens), ``add_prefix_space``, ``lower``
    (lower-cases), ``extra:N`` (N additional special tokens, as its config lists them),
    ``bos``/``eos`` (such tokens added to each text where its config says so)."""
    flags = []
    init = getattr(tokenizer, "init_kwargs", None) or {}
    for flag in ("legacy", "add_prefix_space"):
        value = init.get(flag, getattr(tokenizer, flag, None))
        if value is True:
            flags.append(flag)
    if init.get("do_lower_case") is True:
        flags.append("lower")
    extra = init.get("additional_special_tokens")
    extra = len(extra) if isinstance(extra, (list, tuple)) else 0
    if extra:
        flags.append(f"extra:{extra}")
    for flag in ("add_bos_token", "add_eos_token"):
        if init.get(flag) is True:
            flags.append(flag[4:7])
    return "+".join([type(tokenizer).__name__, *flags])


def _stated(config: Any, key: str) -> int | None:
    value = getattr(config, key, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_tokenizer_fits(tokenizer, config: Any, *, rows: int, where: str) -> str | None:
    """Check a loaded tokenizer against its model (module docstring).

    Args:
        tokenizer: the loaded Hugging Face tokenizer.
        config: the model's config (``pad_token_id``, ``eos_token_id``, ``decoder_start_token_id``,
            ``model_type`` read where set).
        rows: the model's input-embedding rows (``config.vocab_size`` once strictly loaded).
        where: the folder, for messages.

    Returns:
        None when nothing is suspicious, else why the tokenizer is doubtful (its vocabulary is
        far smaller than the rows); a ``UserWarning`` says so too. The caller signs the result
        ``identity:unverified`` then.

    Raises:
        CheckpointError: more tokens than rows, a special id that differs from the config's or
            lies outside the rows; the message names the tokenizer's and the config's numbers.
    """
    size = len(tokenizer)
    named = f"{type(tokenizer).__name__} of {where!r}"
    if size > rows:
        raise CheckpointError(
            f"{named} has {size:,} tokens but the model has {rows:,} embedding rows: a tokenizer of another model "
            "(its ids past the rows have no embedding). Put the checkpoint's own tokenizer files back (unieval-local "
            "download stages them)")
    wrong = []
    for key, token_id in (("pad_token_id", tokenizer.pad_token_id), ("eos_token_id", tokenizer.eos_token_id)):
        stated = _stated(config, key)
        if stated is not None and token_id is not None and stated != token_id:
            wrong.append(f"{key} {token_id} (config.json: {stated})")
    start = _stated(config, "decoder_start_token_id")
    if getattr(config, "model_type", None) in ("t5", "mt5") and start is not None and tokenizer.pad_token_id is not None \
            and start != tokenizer.pad_token_id:
        wrong.append(f"pad_token_id {tokenizer.pad_token_id} (config.json's decoder_start_token_id, T5's pad: {start})")
    outside = sorted({i for i in (tokenizer.all_special_ids or []) if i is not None and not 0 <= i < rows})
    if outside:
        wrong.append(f"special ids {outside} outside the {rows:,} rows")
    if wrong:
        raise CheckpointError(
            f"{named} does not fit its model: {'; '.join(wrong)}; a tokenizer of another model gives other ids, "
            "so other scores. Put the checkpoint's own tokenizer files back (unieval-local download stages them)")
    if rows - size > slack(rows):
        doubt = (f"{named} has {size:,} tokens for {rows:,} embedding rows ({rows - size:,} unused, more than "
                 f"{slack(rows):,}): possibly another model's tokenizer; scores are signed identity:unverified")
        warnings.warn(doubt, UserWarning, stacklevel=3)
        return doubt
    return None
