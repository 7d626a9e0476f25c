"""The loaded T5 / mT5 tokenizer must give SentencePiece's own ids, or the checkpoint is refused.

T5 and mT5 checkpoints were trained on the ids of their SentencePiece model (``spiece.model``);
transformers 5 does not run SentencePiece but rebuilds a ``tokenizers`` Unigram from the model's
pieces, with SentencePiece's normalization only when the model has a ``precompiled_charsmap``,
and a fixed pre-tokenizer that splits at every Unicode whitespace. Measured here (transformers
5.24, tokenizers 0.23): for a model trained with SentencePiece's default ``nmt_nfkc`` rule (T5's,
mT5's) the ids equal ``SentencePieceProcessor.encode`` with or without ``tokenizer.json``; for one
without a charsmap (``normalization_rule_name=identity``) the tokenizer loads without a word but
reads a newline, a tab, U+3000 and U+00A0 as spaces where SentencePiece does not (other ids, so
other scores). A ``tokenizer.json``'s own normalizer and pre-tokenizer are not used by
transformers 5's ``T5Tokenizer`` (only its vocabulary and charsmap).

:func:`check_tokenizer` compares the loaded tokenizer with SentencePiece on :data:`PROBES` (English,
Chinese, Indonesian and the other SEAHORSE languages, whitespace and Unicode-normalization cases);
on a difference it rebuilds the tokenizer's normalizer and pre-tokenizer from ``spiece.model``'s
normalizer spec (what SentencePiece does: the charsmap, extra-whitespace removal, the dummy
prefix) and compares again; what still differs is refused with a :class:`CheckpointError` naming
the file and the fix. Imports ``sentencepiece`` and ``tokenizers`` when called.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import CheckpointError

__all__ = ["PROBES", "check_tokenizer", "disagreements"]

#: Texts whose ids must equal SentencePiece's (+ EOS). None holds ``</s>`` (read as EOS by the
#: tokenizer on purpose, as UniEval's prompts need) or a sentinel ``<extra_id_N>``.
PROBES: tuple[str, ...] = (
    "The city council approved a new budget on Tuesday.",
    "premise: The bakery won a prize for its bread. hypothesis: A bakery won a prize.",
    "市议会周二通过了新的公共交通预算。",
    "premise: 北部城区的居民抱怨公共汽车迟到。 hypothesis: 公交车经常迟到。",
    "Dewan kota menyetujui anggaran baru pada hari Selasa.",
    "Der Stadtrat hat am Dienstag einen neuen Haushalt beschlossen.",
    "El ayuntamiento aprobó un nuevo presupuesto el martes.",
    "Городской совет во вторник утвердил новый бюджет.",
    "Belediye meclisi salı günü yeni bütçeyi onayladı.",
    "Hội đồng thành phố đã thông qua ngân sách mới vào thứ Ba.",
    "line one\nline two\n\nline three", "a\ttab", "  leading,  double  and trailing spaces  ",
    "ideographic\u3000space and no-break\u00a0space", "ＡＢＣ１２３ full width, ① ﬁ ligature",
    "café vs cafe\u0301", "rare 齉 and 𝄞 characters", "1", "0", "Yes", "No", "",
)


def _spm_ids(processor, text: str) -> list[int]:
    return list(processor.encode(text)) + [processor.eos_id()]


def disagreements(tokenizer, processor, texts=PROBES) -> list[tuple[str, list[int], list[int]]]:
    """``(text, tokenizer ids, SentencePiece ids + EOS)`` for each text of ``texts`` on which a
    Hugging Face tokenizer and a ``sentencepiece.SentencePieceProcessor`` disagree ([] when none)."""
    out = []
    for text in texts:
        ours, theirs = list(tokenizer(text)["input_ids"]), _spm_ids(processor, text)
        if ours != theirs:
            out.append((text, ours, theirs))
    return out


def _rebuild_from_spec(tokenizer, proto) -> None:
    """Give ``tokenizer``'s backend SentencePiece's normalization as ``proto``'s normalizer spec
    states it: the precompiled charsmap (if any), leading/trailing/repeated spaces removed
    (``remove_extra_whitespaces``), spaces as U+2581, a U+2581 prepended (``add_dummy_prefix``),
    pieces split only at U+2581 (``split_by_whitespace``), never at other whitespace."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    spec = proto.normalizer_spec
    steps = [normalizers.Precompiled(spec.precompiled_charsmap)] if spec.precompiled_charsmap else []
    if spec.remove_extra_whitespaces:
        steps += [normalizers.Replace(Regex(r"^ +| +$"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    backend = tokenizer.backend_tokenizer
    backend.normalizer = normalizers.Sequence(steps)
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="always" if spec.add_dummy_prefix else "never",
        split=bool(proto.trainer_spec.split_by_whitespace))


def _show(tokenizer, processor, diff: tuple[str, list[int], list[int]]) -> str:
    text, ours, theirs = diff
    return (f"{text!r}: {tokenizer.convert_ids_to_tokens(ours)} vs SentencePiece "
            f"{[processor.id_to_piece(i) for i in theirs]}")


def _has_charsmap(normalizer) -> bool:
    """True when a ``tokenizer.json`` normalizer (a dict, or a ``Sequence`` of them) holds a
    ``Precompiled`` step with a charsmap (SentencePiece's normalization rule)."""
    if not isinstance(normalizer, dict):
        return False
    if normalizer.get("type") == "Sequence":
        return any(_has_charsmap(n) for n in normalizer.get("normalizers") or [])
    return normalizer.get("type") == "Precompiled" and bool(normalizer.get("precompiled_charsmap"))


def _check_json_only(folder: Path, tokenizer) -> str:
    """A folder with ``tokenizer.json`` and no ``spiece.model``. With SentencePiece's charsmap in
    the file, transformers follows it (measured: SentencePiece's ids); without one (the failure
    class), the loaded tokenizer must equal the file's own pipeline (``tokenizers.Tokenizer.from_file``)
    on :data:`PROBES`, else it is refused."""
    import json

    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        return "no spiece.model or tokenizer.json: ids not compared"
    try:
        normalizer = json.loads(path.read_text(encoding="utf-8")).get("normalizer")
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read {str(path)!r} ({type(exc).__name__}: {exc}): stage the checkpoint "
                              "again") from exc
    if _has_charsmap(normalizer):
        return "not compared with SentencePiece (no spiece.model); tokenizer.json holds SentencePiece's charsmap"
    own = Tokenizer.from_file(str(path))
    bad = [t for t in PROBES if list(tokenizer(t)["input_ids"]) != own.encode(t).ids]
    if bad:
        raise CheckpointError(
            f"checkpoint {str(folder)!r}: {str(path)!r} has no SentencePiece charsmap, and the tokenizer transformers "
            f"builds from it gives other token ids than the file's own pipeline on {len(bad)} of {len(PROBES)} probe "
            f"texts, e.g. {bad[0]!r} ({tokenizer.tokenize(bad[0])} vs {own.encode(bad[0]).tokens}), so the scores "
            "would not be the model's. Fix: put the checkpoint's spiece.model beside it (then SentencePiece's own "
            "ids are checked, and a tokenizer without a precompiled_charsmap is rebuilt to match them)")
    return f"ids equal tokenizer.json's own pipeline on {len(PROBES)} probe texts (no spiece.model to compare)"


def check_tokenizer(folder: str | Path, tokenizer) -> str:
    """Make sure a loaded T5/mT5 tokenizer gives SentencePiece's ids; repair the known case.

    Args:
        folder: the checkpoint folder (``spiece.model`` and/or ``tokenizer.json``).
        tokenizer: the tokenizer loaded from it (``AutoTokenizer``); its backend's normalizer
            and pre-tokenizer may be replaced (in place) by SentencePiece's.

    Returns:
        One line for ``verify``: the ids agree as loaded, agree after the rebuild (and why), or
        were compared with ``tokenizer.json``'s own pipeline only (no ``spiece.model``).

    Raises:
        CheckpointError: the ids differ from ``spiece.model``'s SentencePiece encoding (+ EOS) on a
            probe text even after the rebuild (e.g. a model with ``byte_fallback``, which
            transformers' T5 tokenizer does not apply), or, without ``spiece.model``, a
            ``tokenizer.json`` without SentencePiece's charsmap is read otherwise than its own
            pipeline says: the message names the file, the text, both tokenizations and the fix.
    """
    folder = Path(folder)
    model = folder / "spiece.model"
    if not model.is_file():
        return _check_json_only(folder, tokenizer)
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    data = model.read_bytes()
    processor = spm.SentencePieceProcessor(model_proto=data)
    diffs = disagreements(tokenizer, processor)
    if not diffs:
        return f"ids equal SentencePiece's ({model.name}) on {len(PROBES)} probe texts"
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    first = _show(tokenizer, processor, diffs[0])
    _rebuild_from_spec(tokenizer, proto)
    after = disagreements(tokenizer, processor)
    if not after:
        why = ("it has no precompiled_charsmap (normalization_rule_name identity?), so transformers left "
               "SentencePiece's normalization out" if not proto.normalizer_spec.precompiled_charsmap else
               "transformers' tokenizer did not follow its normalizer spec")
        return (f"ids equal SentencePiece's ({model.name}) on {len(PROBES)} probe texts after rebuilding the "
                f"normalizer from {model.name}: {why} (before: {len(diffs)} differed, e.g. {first})")
    cause = (" It uses byte_fallback, which transformers' T5 tokenizer does not apply (unknown characters "
             "become <unk> instead of byte pieces)." if proto.trainer_spec.byte_fallback else "")
    raise CheckpointError(
        f"checkpoint {str(folder)!r}: the tokenizer transformers builds from {str(model)!r} gives other token ids "
        f"than SentencePiece's own encoding of that file on {len(after)} of {len(PROBES)} probe texts, even with "
        f"SentencePiece's normalizer rebuilt, e.g. {_show(tokenizer, processor, after[0])}; the model was trained "
        f"on SentencePiece's ids, so its scores would be wrong.{cause} Fix: a spiece.model with SentencePiece's "
        "standard normalization and no byte_fallback (as T5's and mT5's own) loads exactly: stage the "
        "checkpoint's original tokenizer files again (unieval-local download), or regenerate a test checkpoint "
        "(python scripts/make_test_checkpoint.py OUT --layout mt5)")
