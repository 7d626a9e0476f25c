"""A DeBERTa tokenizer must add ``[CLS]`` and ``[SEP]`` where its stored files say, or it is
corrected, or the checkpoint is refused.

A DeBERTa(-v2/-v3) classifier was trained on ``[CLS] premise [SEP] hypothesis [SEP]`` (a pair,
mDeBERTa NLI) and ``[CLS] text [SEP]`` (one text, FactCG). transformers 5.1.0 builds the tokenizer
of a folder without ``tokenizer.json`` (``spm.model`` only) with no ``[CLS]`` and no ``[SEP]``
(the golden ids: ``At index 0 diff: 25 != 1``), and saves that tokenizer's ``tokenizer.json``
so (a post-processor without special tokens), which every release then reads: the model reads
another input and the scores move without a word. (5.1.x is excluded by ``pyproject.toml``; a
folder it wrote is still corrected here.)

:func:`check_special_layout` encodes :data:`PROBE_PAIR` (as a pair and its premise alone) and
compares with the layout built from the stored special ids (:func:`stored_special_ids`: the
tokenizer files' own record of ``[CLS]`` and ``[SEP]``). On a difference it installs DeBERTa's
template (``tokenizers`` ``TemplateProcessing``, with those stored ids) as the fast tokenizer's
post-processor and compares again; what still differs is refused with a
:class:`~unieval_local.errors.CheckpointError` naming the transformers release. Imports
``tokenizers`` and ``sentencepiece`` only when called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import CheckpointError

__all__ = ["LAYOUT_CHECKED", "PROBE_PAIR", "check_special_layout", "stored_special_ids"]

#: model types whose tokenizer lays a pair out as ``[CLS] A [SEP] B [SEP]`` (checked here)
LAYOUT_CHECKED = ("deberta", "deberta-v2")

#: the (premise, hypothesis) encoded by the check
PROBE_PAIR = ("The city council met on Tuesday.", "The council met.")


def _token(value: Any, default: str) -> str:
    """A special token as a tokenizer config holds it (a string or an AddedToken dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else default


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read {str(path)!r} ({type(exc).__name__}: {exc}): stage the checkpoint "
                              "again") from exc
    return data if isinstance(data, dict) else {}


def stored_special_ids(folder: str | Path, tokenizer) -> dict[str, tuple[str, int, str]]:
    """The ``cls`` and ``sep`` tokens of a checkpoint folder and their ids, as its files store them.

    The token strings come from ``tokenizer_config.json`` (``cls_token``, ``sep_token``; DeBERTa's
    ``[CLS]``/``[SEP]`` where absent). The id of each is the first record found of:
    ``tokenizer_config.json``'s ``added_tokens_decoder``, ``tokenizer.json``'s ``added_tokens``,
    ``spm.model``'s piece id; else the loaded tokenizer's vocabulary.

    Args:
        folder: the checkpoint folder. tokenizer: the tokenizer loaded from it (the last resort).

    Returns:
        ``{"cls": (token, id, source), "sep": (token, id, source)}``; ``source`` names the file
        (or ``"vocabulary"``) the id was read from.

    Raises:
        CheckpointError: a tokenizer file that exists but cannot be read (names it).
    """
    folder = Path(folder)
    config = _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    tokens = {"cls": _token(config.get("cls_token"), "[CLS]"), "sep": _token(config.get("sep_token"), "[SEP]")}
    records: list[tuple[str, dict[str, int]]] = []
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        records.append(("tokenizer_config.json", {_token(v, ""): int(k) for k, v in decoder.items()}))
    if (folder / "tokenizer.json").is_file():
        added = _read_json(folder / "tokenizer.json").get("added_tokens") or []
        records.append(("tokenizer.json", {a.get("content"): int(a["id"]) for a in added
                                           if isinstance(a, dict) and "id" in a}))
    if (folder / "spm.model").is_file():
        import sentencepiece as spm

        processor = spm.SentencePieceProcessor(model_file=str(folder / "spm.model"))
        unk = processor.unk_id()
        records.append(("spm.model", {t: processor.piece_to_id(t) for t in tokens.values()
                                      if processor.piece_to_id(t) != unk}))
    out = {}
    for role, token in tokens.items():
        found = next(((source, ids[token]) for source, ids in records if token in ids), None)
        source, token_id = found if found else ("vocabulary", tokenizer.convert_tokens_to_ids(token))
        out[role] = (token, int(token_id), source)
    return out


def _layout_diffs(tokenizer, cls_id: int, sep_id: int) -> list[str]:
    """Where ``tokenizer``'s encodings of :data:`PROBE_PAIR` (pair; premise alone) differ from
    ``[CLS] A [SEP] B [SEP]`` / ``[CLS] A [SEP]`` with the stored ids ([] when they agree)."""
    premise, hypothesis = PROBE_PAIR
    a = list(tokenizer(premise, add_special_tokens=False)["input_ids"])
    b = list(tokenizer(hypothesis, add_special_tokens=False)["input_ids"])
    want_pair, want_one = [cls_id, *a, sep_id, *b, sep_id], [cls_id, *a, sep_id]
    got_pair = list(tokenizer(premise, hypothesis)["input_ids"])
    got_one = list(tokenizer(premise)["input_ids"])
    out = []
    if got_pair != want_pair:
        out.append(f"the pair {PROBE_PAIR!r} as {got_pair} (stored layout: {want_pair})")
    if got_one != want_one:
        out.append(f"the text {premise!r} as {got_one} (stored layout: {want_one})")
    return out


def _install_template(tokenizer, cls: tuple[str, int, str], sep: tuple[str, int, str]) -> bool:
    """Give a fast tokenizer's backend DeBERTa's post-processor with the stored ids; False when
    the tokenizer has no ``tokenizers`` backend (a slow one)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    from tokenizers.processors import TemplateProcessing

    (c, cid, _), (s, sid, _) = cls, sep
    backend.post_processor = TemplateProcessing(single=f"{c}:0 $A:0 {s}:0", pair=f"{c}:0 $A:0 {s}:0 $B:1 {s}:1",
                                                special_tokens=[(c, cid), (s, sid)])
    return True


def check_special_layout(folder: str | Path, tokenizer, model_type: str | None, transformers_version: str) -> str:
    """Make sure a loaded DeBERTa tokenizer adds ``[CLS]``/``[SEP]`` as its stored files say;
    correct the known case (module docstring).

    Args:
        folder: the checkpoint folder (its tokenizer files).
        tokenizer: the tokenizer loaded from it; its backend's post-processor may be replaced (in
            place) by DeBERTa's template with the stored ids.
        model_type: the model config's ``model_type``; only :data:`LAYOUT_CHECKED` types are
            checked (another family lays pairs out otherwise).
        transformers_version: the running release, for messages.

    Returns:
        One line for ``verify``: the layout agrees as loaded, agrees after the correction (and what
        the release did), or was not checked (another model type).

    Raises:
        CheckpointError: the encodings still differ from the stored layout after the correction (or
            the tokenizer has no fast backend to correct): the message names the transformers
            release, the folder, the ids got and wanted, and the fix.
    """
    if model_type not in LAYOUT_CHECKED:
        return f"special-token layout not checked ({model_type or 'unknown'} model type)"
    ids = stored_special_ids(folder, tokenizer)
    cls, sep = ids["cls"], ids["sep"]
    named = f"{cls[0]}={cls[1]} ({cls[2]}), {sep[0]}={sep[1]} ({sep[2]})"
    before = _layout_diffs(tokenizer, cls[1], sep[1])
    if not before:
        return f"special tokens where the stored files say ({named})"
    after = _layout_diffs(tokenizer, cls[1], sep[1]) if _install_template(tokenizer, cls, sep) else before
    if not after:
        return (f"special tokens where the stored files say ({named}) after installing DeBERTa's template: "
                f"transformers {transformers_version}'s {type(tokenizer).__name__} encoded {before[0]}")
    raise CheckpointError(
        f"checkpoint {str(folder)!r}: the {type(tokenizer).__name__} transformers {transformers_version} builds from it "
        f"encodes {after[0]}, even with DeBERTa's template installed; the model was trained on {cls[0]} ... {sep[0]} "
        f"as its files store them ({named}), so its scores would be wrong. Fix: install a transformers release the "
        "package admits (pip install 'transformers>=4.46.1,!=5.0.*,!=5.1.*'), or stage the checkpoint's own "
        "tokenizer files again (unieval-local download)")
