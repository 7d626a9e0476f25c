#!/usr/bin/env python
"""Build a small random T5 checkpoint with a real SentencePiece tokenizer.

The official UniEval weights cannot be fetched on the build machines, so tests
and benchmarks run the real loading and scoring code on this stand-in (recipe
from ``shared/UNIEVAL_CONTRACT.md``, "Facts measured"): a SentencePiece unigram
model (pad=0, eos=1, unk=2, no bos) trained on a few hundred KB of real text
from ``shared/data``, loaded as ``T5Tokenizer`` with 100 extra ids, and a
seeded random ``T5ForConditionalGeneration`` saved beside it.

Two layouts (``--layout``):

- ``t5`` (default): original T5 as transformers 5 writes it: ReLU feed-forward,
  the LM head tied to the embedding (rescaled by d_model^-0.5), ``model.safetensors``.
- ``v1.1``: the layout of the official UniEval checkpoints, trained from
  ``google/t5-v1_1-large`` and saved by transformers 4.x: gated-GELU feed-forward,
  an untied ``lm_head.weight`` of its own and no rescale before it
  (``tie_word_embeddings: false``), ``pytorch_model.bin`` holding every key
  (``--weights safetensors`` writes a safetensors file instead, without the
  duplicate embedding keys, as 4.x's safetensors saving does). transformers 5
  always ties the head in memory, so these files are written from a state dict,
  not by ``save_pretrained``, and the config is a 4.x-style ``config.json``.
- ``mt5``: the layout of SEAHORSE's mT5 checkpoints (google/seahorse-large-q1..q6): an
  ``MT5ForConditionalGeneration`` (``model_type`` mt5, gated-GELU, untied head,
  ``tie_word_embeddings: false``), ``model.safetensors``, and the tokenizer files the hub repos
  hold: ``spiece.model`` (a unigram model trained here on ``scripts/data/multilingual_corpus.txt``:
  English, Chinese and Indonesian, character coverage 1.0, "1" and "0" single pieces),
  ``tokenizer.json`` (as transformers 4.x converted it), ``tokenizer_config.json``
  (``T5Tokenizer``, ``extra_ids`` 0) and ``special_tokens_map.json``. No SummEval data needed.
  ``build_mt5_checkpoint(..., normalization="identity")`` trains a SentencePiece model without a
  ``precompiled_charsmap`` (the variant transformers 5 tokenizes differently; tests use it).

Usage:
    python scripts/make_test_checkpoint.py OUT_DIR [--layout t5|v1.1|mt5] [--weights bin|safetensors]
        [--d-model 64 --layers 2 ...] [--no-manifest]
    python scripts/make_test_checkpoint.py OUT_DIR --layout llama|qwen2 --evaluator g-eval --fit claims
        (a decoder fitted briefly to write claim lists: ``scripts/fit_claims.py``)
    python scripts/make_test_checkpoint.py OUT_DIR --layout llama --evaluator themis|prometheus-7b-v2.0 --fit judge
        (a judge stand-in fitted briefly to write a rationale, its rating prefix and a rating:
        ``scripts/fit_judge.py``)

The folder gets a ``unieval_manifest.json`` in ``unieval-local download``'s format (the Python
builders write one with ``manifest=True``). The tokenizers are deterministic: SentencePiece is
trained with one thread and unshuffled input, and the files are written without paths or load
options, so the same arguments give the same bytes (and token ids) on every run and machine
(``tests/test_golden_ids.py`` holds their ids).

The folder then works as ``--model OUT_DIR``. Takes a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir(must_exist: bool = True) -> Path:
    """The shared data folder: ``$UNIEVAL_SHARED_DATA`` or ``<repo>/../shared/data``.

    Raises:
        SystemExit: (with ``must_exist``) the folder is not there: one line naming both ways to set it.
    """
    folder = Path(os.environ.get("UNIEVAL_SHARED_DATA", DEFAULT_DATA))
    if must_exist and not (folder / "summeval").is_dir():
        raise SystemExit(f"error: the shared evaluation data is not at {folder}; set UNIEVAL_SHARED_DATA to the "
                         "folder holding summeval/, qmsum/ ... (or pass --data-dir / --input)")
    return folder


#: English text of our own (this repository's README at the time the fallback was added, MIT),
#: used to train the tokenizer when the shared SummEval data is not there.
REPO_CORPUS = Path(__file__).resolve().parent / "data" / "tokenizer_corpus.txt"

#: English, Chinese and Indonesian text of our own (MIT), for the ``mt5`` layout's tokenizer.
MULTILINGUAL_CORPUS = Path(__file__).resolve().parent / "data" / "multilingual_corpus.txt"


def training_sentences(data_dir: Path | None, n_docs: int = 40, answers: tuple[str, str] = ("Yes", "No")) -> list[str]:
    """Real English text for the tokenizer: SummEval sources and references (``data_dir`` /
    summeval; the default, reproducible where the shared data is), else the repository's own
    corpus (:data:`REPO_CORPUS`: another tokenizer, so other fingerprints), plus Yes/No lines
    (and lines with other ``answers``, e.g. MiniCheck's "1"/"0", so that each is one piece)."""
    lines: list[str] = []
    if data_dir is not None and (data_dir / "summeval" / "summeval_raw.json").is_file():
        raw = json.loads((data_dir / "summeval" / "summeval_raw.json").read_text())
        for doc_id in sorted(raw)[:n_docs]:
            lines += raw[doc_id]["src"].split(" . ")[:20]
            lines += raw[doc_id]["refs"][:2]
    else:
        lines += [x for x in REPO_CORPUS.read_text(encoding="utf-8").splitlines() if x.strip()]
    # The Boolean-QA answers must be single pieces ("▁Yes", "▁No"), as in T5's vocabulary.
    lines += ["question: Is this a coherent summary to the document? answer: Yes",
              "question: Is this a fluent paragraph? answer: No", "Yes , it is .", "No , it is not ."] * 50
    extra = [w for w in answers if w not in ("Yes", "No")]
    lines += [f"predict: the claim is checked against the document . label {w}" for w in extra] * 100
    return lines


#: from_pretrained options that transformers writes back into tokenizer_config.json
#: (``local_files_only`` is true under HF_HUB_OFFLINE=1): they would make the files, and so
#: the checkpoint fingerprint, depend on the environment of the build.
_LOAD_OPTIONS = ("local_files_only", "cache_dir", "token", "revision", "force_download", "proxies", "_commit_hash")


#: keys transformers 5 writes into tokenizer_config.json that no 4.x reads (dropped: they hold no tokens)
_V5_ONLY_KEYS = ("is_local", "backend")


def _without_load_options(path: Path) -> None:
    """Make the tokenizer config at ``path`` independent of the build's environment and
    readable by every admitted transformers (4.46 ... newest): drop :data:`_LOAD_OPTIONS` and
    :data:`_V5_ONLY_KEYS`; write transformers 5's ``extra_special_tokens`` LIST as
    ``additional_special_tokens`` (transformers 4.51-4.57 read a mapping there and fail with
    "'list' object has no attribute 'keys'"); and its ``"TokenizersBackend"`` class as
    ``"PreTrainedTokenizerFast"`` (the name both read). The tokens, and so every token id,
    are unchanged (tests/test_version_matrix.py loads such folders on each leg). Rewritten
    as transformers writes it, only when something changed."""
    config = json.loads(path.read_text(encoding="utf-8"))
    kept = {k: v for k, v in config.items() if k not in _LOAD_OPTIONS and k not in _V5_ONLY_KEYS}
    extra = kept.get("extra_special_tokens")
    if isinstance(extra, list):
        del kept["extra_special_tokens"]
        named = list(kept.get("additional_special_tokens") or [])
        kept["additional_special_tokens"] = named + [t for t in extra if t not in named]
    if kept.get("tokenizer_class") == "TokenizersBackend":
        kept["tokenizer_class"] = "PreTrainedTokenizerFast"
    if kept != config:
        path.write_text(json.dumps(kept, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _without_paths(model: bytes) -> bytes:
    """The SentencePiece model with the training folder left out of its trainer spec: the
    trained pieces are deterministic, but ``model_prefix`` records the temporary path, which
    would give every build another content fingerprint."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    proto.trainer_spec.model_prefix = "spiece"
    return proto.SerializeToString()


def build_test_checkpoint(
    out_dir: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    vocab_size: int = 2000,
    d_model: int = 64,
    d_ff: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
    init_factor: float = 1.5,
    model_vocab_size: int | None = None,
    n_docs: int = 40,
    layout: str = "t5",
    weights: str | None = None,
    answers: tuple[str, str] = ("Yes", "No"),
    evaluator: str | None = None,
    manifest: bool = False,
) -> Path:
    """Write a random T5 checkpoint (config, safetensors weights, tokenizer) to ``out_dir``.

    ``init_factor`` scales T5's initialisation; 1.5 spreads P(Yes) over about
    [0.02, 0.95] on SummEval prompts (1.0 gives a near-constant 0.27, >= 4
    saturates at 0 and 1), so that tests can tell scores apart.
    ``model_vocab_size`` pads the embedding/LM head beyond the tokenizer
    (T5's real checkpoints have 32,128 rows); ``n_docs`` is how many SummEval
    documents train the tokenizer (more for bigger vocabularies).
    ``layout`` is ``t5`` or ``v1.1`` (module docstring); ``weights`` is
    ``safetensors`` or ``bin`` (default: safetensors for t5, bin for v1.1).
    ``evaluator``: the evaluator the folder stands in for, written into ``config.json`` as
    ``"unieval_local_evaluator"`` (its recorded identity: unieval-local then refuses to use it
    as another evaluator); None writes no identity (the folder is used as any evaluator, with
    an "identity unverified" warning), which lets one generated folder serve every task.
    ``answers``: the evaluator's answer words that must be single, distinct pieces besides
    Yes/No (``("1", "0")`` for a MiniCheck-style checkpoint; Flan-T5 itself has "▁1" = 209
    and "0" = "▁" + "0", first token 3).
    ``manifest``: write a download manifest (:func:`write_test_manifest`; the CLI does by default).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        AssertionError: the trained vocabulary lacks single, distinct Yes/No pieces.
        ValueError: unknown ``layout`` or ``weights``.
    """
    if layout not in ("t5", "v1.1"):
        raise ValueError(f"layout must be 't5' or 'v1.1', got {layout!r}")
    weights = weights or ("safetensors" if layout == "t5" else "bin")
    if weights not in ("safetensors", "bin"):
        raise ValueError(f"weights must be 'safetensors' or 'bin', got {weights!r}")
    import sentencepiece as spm
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data_dir is None:
        found = shared_data_dir(must_exist=False)
        data_dir = found if (found / "summeval").is_dir() else None
    sentences = training_sentences(Path(data_dir) if data_dir else None, n_docs, answers)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "spiece")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_prefix=prefix, vocab_size=vocab_size,
            model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0,
            num_threads=1, shuffle_input_sentence=False, minloglevel=2,
        )
        staging = Path(tmp) / "tok"
        staging.mkdir()
        (staging / "spiece.model").write_bytes(_without_paths(Path(prefix + ".model").read_bytes()))
        (staging / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "T5Tokenizer", "extra_ids": 100, "model_max_length": 1024}))
        tokenizer = T5Tokenizer.from_pretrained(staging)
        tokenizer.save_pretrained(out)
        _without_load_options(out / "tokenizer_config.json")
        (out / "spiece.model").write_bytes((staging / "spiece.model").read_bytes())
    yes = tokenizer("Yes").input_ids
    no = tokenizer("No").input_ids
    assert tokenizer.convert_ids_to_tokens(yes) == ["▁Yes", "</s>"], yes
    assert tokenizer.convert_ids_to_tokens(no) == ["▁No", "</s>"], no
    assert yes[0] != no[0]
    firsts = [tokenizer(w).input_ids[0] for w in answers]
    assert firsts[0] != firsts[1] and tokenizer.unk_token_id not in firsts, (answers, firsts)

    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=max(model_vocab_size or 0, len(tokenizer)), d_model=d_model, d_kv=d_model // num_heads, d_ff=d_ff,
        num_layers=num_layers, num_decoder_layers=num_layers, num_heads=num_heads,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, initializer_factor=init_factor,
        feed_forward_proj="gated-gelu" if layout == "v1.1" else "relu",
    )
    model = T5ForConditionalGeneration(config).eval()
    if layout == "t5":
        model.save_pretrained(out, safe_serialization=weights == "safetensors")
        if evaluator:
            _set_config_keys(out / "config.json", {"unieval_local_evaluator": evaluator})
        if manifest:
            write_test_manifest(out)
        return out
    # T5 v1.1 as transformers 4.x saved it: an untied head (its own random rows, scaled so
    # that without the d_model^-0.5 rescale the logits spread like the tied layout's).
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    generator = torch.Generator().manual_seed(seed + 1)
    head = torch.randn(state["shared.weight"].shape, generator=generator) * (init_factor * d_model**-0.5)
    state["lm_head.weight"] = head
    shared = state["shared.weight"]
    if weights == "bin":  # torch.save keeps every key; the embeddings share one storage, as in 4.x
        state["encoder.embed_tokens.weight"] = state["decoder.embed_tokens.weight"] = shared
        torch.save(state, out / "pytorch_model.bin")
    else:
        from safetensors.torch import save_file

        for k in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            state.pop(k)
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    written = v11_config(config)
    if evaluator:
        written["unieval_local_evaluator"] = evaluator
    (out / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    (out / "generation_config.json").unlink(missing_ok=True)
    if manifest:
        write_test_manifest(out)
    return out


def build_nli_checkpoint(out_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
                         vocab_size: int = 2000, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                         seed: int = 0, init_range: float = 0.3,
                         labels: tuple[str, ...] = ("entailment", "neutral", "contradiction"),
                         evaluator: str | None = None, head: bool = True, manifest: bool = False) -> Path:
    """Write a random DeBERTa-v2/v3 NLI cross-encoder (``--layout deberta-nli``) to ``out_dir``:
    ``config.json`` (``DebertaV2ForSequenceClassification``, mDeBERTa-v3's attention settings,
    ``id2label`` = ``labels``), ``model.safetensors`` and a trained SentencePiece ``spm.model``
    ([PAD]=0, [CLS]=1, [SEP]=2, [UNK]=3, as DeBERTa-v3's) with the tokenizer files
    transformers writes for it. ``init_range`` (std of the initialisation) spreads the
    probabilities so that tests can tell pairs apart; ``head=False`` leaves the classification
    head out of the weights (a broken checkpoint, for the strict-loading tests); ``manifest``: write
    a download manifest (:func:`write_test_manifest`).

    Returns:
        ``out_dir`` as a Path.
    """
    import sentencepiece as spm
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2Tokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data_dir is None:
        found = shared_data_dir(must_exist=False)
        data_dir = found if (found / "summeval").is_dir() else None
    sentences = training_sentences(Path(data_dir) if data_dir else None, 40, ("Yes", "No"))
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "spm")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]",
            unk_piece="[UNK]", character_coverage=1.0, num_threads=1, shuffle_input_sentence=False, minloglevel=2)
        staging = Path(tmp) / "tok"
        staging.mkdir()
        (staging / "spm.model").write_bytes(_without_paths(Path(prefix + ".model").read_bytes()))
        (staging / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "DebertaV2Tokenizer", "model_max_length": 512}))
        tokenizer = DebertaV2Tokenizer.from_pretrained(staging)
        tokenizer.save_pretrained(out)
        _without_load_options(out / "tokenizer_config.json")
        (out / "spm.model").write_bytes((staging / "spm.model").read_bytes())
    torch.manual_seed(seed)
    config = DebertaV2Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, num_hidden_layers=num_layers,
        num_attention_heads=num_heads, intermediate_size=2 * hidden_size, max_position_embeddings=512,
        relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, max_relative_positions=-1, type_vocab_size=0,
        initializer_range=init_range, pad_token_id=0,
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})
    model = DebertaV2ForSequenceClassification(config).eval()
    model.save_pretrained(out)
    if not head:
        from safetensors.torch import load_file, save_file

        state = {k: v for k, v in load_file(str(out / "model.safetensors")).items() if not k.startswith("classifier")}
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    if evaluator:
        _set_config_keys(out / "config.json", {"unieval_local_evaluator": evaluator})
    if manifest:
        write_test_manifest(out)
    return out


def build_factcg_checkpoint(out_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
                            vocab_size: int = 2000, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                            seed: int = 0, evaluator: str | None = "factcg-deberta-large", head: bool = True,
                            manifest: bool = False, init_range: float = 0.3) -> Path:
    """Write a random FactCG-DeBERTa checkpoint (``--layout factcg``) to ``out_dir``: the DeBERTa-v3
    layout of :func:`build_nli_checkpoint` (``DebertaV2ForSequenceClassification``, a trained
    ``spm.model``) with the label map of yaxili96/FactCG-DeBERTa-v3-Large: two outputs and no
    label names (``LABEL_0``/``LABEL_1``: its authors load it with ``num_labels=2``; output 1 is
    "supported"), ``finetuning_task`` text-classification and ``problem_type``
    single_label_classification. ``head=False`` leaves the classification head out;
    ``manifest``: write a download manifest (:func:`write_test_manifest`); ``init_range``: as
    :func:`build_nli_checkpoint`'s (0.02, DeBERTa's own, for a stand-in that is to be trained).

    Returns:
        ``out_dir`` as a Path.
    """
    out = build_nli_checkpoint(out_dir, data_dir=data_dir, vocab_size=vocab_size, hidden_size=hidden_size,
                               num_layers=num_layers, num_heads=num_heads, seed=seed, labels=("LABEL_0", "LABEL_1"),
                               head=head, init_range=init_range)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config.update(id2label={"0": "LABEL_0", "1": "LABEL_1"}, label2id={"LABEL_0": 0, "LABEL_1": 1},
                  finetuning_task="text-classification", problem_type="single_label_classification")
    if evaluator:
        config["unieval_local_evaluator"] = evaluator
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if manifest:
        write_test_manifest(out)
    return out


#: HHEM-2.1-Open's prompt template, as its config.json gives it.
HHEM_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"


def build_hhem_checkpoint(out_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
                          d_model: int = 64, d_ff: int = 128, num_layers: int = 2, num_heads: int = 4, seed: int = 0,
                          init_factor: float = 1.5, evaluator: str | None = "hhem-2.1-open", head: bool = True,
                          manifest: bool = False) -> Path:
    """Write a random HHEM-2.1-Open checkpoint in its real layout (``--layout hhem``): ``out_dir``
    holds ``config.json`` (``model_type`` HHEMv2, ``foundation`` google/flan-t5-base, its
    ``prompt``) and ``model.safetensors`` with a ``T5ForTokenClassification``'s tensors under
    ``t5.`` (2 labels; shared and encoder embeddings both stored), and NO tokenizer, as the hub
    repository; the foundation (a generated T5 v1.1 config and tokenizer, flan-t5's layout)
    goes beside it in ``flan-t5-base/``. ``head=False`` leaves the classifier out; ``manifest``:
    a download manifest in each folder (:func:`write_test_manifest`).

    Returns:
        ``out_dir`` as a Path.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import T5Config, T5ForTokenClassification

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = build_test_checkpoint(out.parent / "flan-t5-base", data_dir=data_dir, d_model=d_model, d_ff=d_ff,
                                 num_layers=num_layers, num_heads=num_heads, seed=seed, layout="v1.1",
                                 weights="safetensors", manifest=manifest)
    config = json.loads((base / "config.json").read_text())
    t5 = T5Config(**{k: v for k, v in config.items() if k not in ("architectures", "model_type")})
    t5.num_labels = 2
    t5.initializer_factor = init_factor
    torch.manual_seed(seed)
    model = T5ForTokenClassification(t5).eval()
    state = {f"t5.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if head or not k.startswith("classifier")}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    written = {"architectures": ["HHEMv2ForSequenceClassification"], "model_type": "HHEMv2",
               "foundation": "google/flan-t5-base", "prompt": HHEM_PROMPT, "torch_dtype": "float32"}
    if evaluator:
        written["unieval_local_evaluator"] = evaluator
    (out / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    if manifest:
        write_test_manifest(out)
    return out


def multilingual_sentences() -> list[str]:
    """The ``mt5`` layout's tokenizer text: :data:`MULTILINGUAL_CORPUS` (its ``#`` lines left out)
    plus lines in which "1" and "0" stand alone, so that each is one piece ("▁1", "▁0")."""
    lines = [x for x in MULTILINGUAL_CORPUS.read_text(encoding="utf-8").splitlines()
             if x.strip() and not x.startswith("#")]
    return lines + ["premise: the article . hypothesis: the summary . answer 1",
                    "premise: the article . hypothesis: the summary . answer 0", "1", "0"] * 50


def hub_tokenizer_json(model: bytes):
    """The ``tokenizers.Tokenizer`` that transformers 4.x's T5 converter made of a SentencePiece
    unigram model, as the mT5 / SEAHORSE hub repositories hold it in ``tokenizer.json``: the
    pieces and scores, ``<unk>`` = 2, the model's precompiled charsmap (if any) then runs of
    spaces made one, Metaspace with a prepended "▁", ``</s>`` appended, and ``<pad>``, ``</s>``,
    ``<unk>`` as special tokens."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    tok = Tokenizer(Unigram([(p.piece, p.score) for p in proto.pieces], unk_id=2, byte_fallback=False))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    tok.normalizer = normalizers.Sequence(([normalizers.Precompiled(charsmap)] if charsmap else [])
                                          + [normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single=["$A", "</s>"], pair=["$A", "</s>", "$B", "</s>"],
                                                       special_tokens=[("</s>", 1)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<pad>", "</s>", "<unk>")])
    return tok


def build_mt5_checkpoint(out_dir: str | os.PathLike, *, vocab_size: int = 2000, d_model: int = 64, d_ff: int = 128,
                         num_layers: int = 2, num_heads: int = 4, seed: int = 0, init_factor: float = 1.5,
                         answer_gain: float = 3.0, normalization: str = "nmt_nfkc", tokenizer_json: bool = True,
                         evaluator: str | None = None, manifest: bool = False) -> Path:
    """Write a random mT5 checkpoint in SEAHORSE's layout (``--layout mt5``; module docstring).

    Args:
        out_dir: the folder to write.
        vocab_size: the SentencePiece vocabulary asked for (fewer pieces when the corpus has too
            few: ``hard_vocab_limit`` off); the model's rows are the tokenizer's size rounded up to
            a multiple of 128 (mT5: 250,100 pieces, 250,112 rows), so some rows are no piece.
        d_model, d_ff, num_layers, num_heads, seed, init_factor: the random model, as
            :func:`build_test_checkpoint`'s.
        answer_gain: the LM-head rows of "▁1" and "▁0" are multiplied by it, so that, as in a
            trained SEAHORSE model, much of the probability falls on "1" or "0" and P("1") over
            the whole vocabulary spreads over (0, 1) instead of sitting near 1 / vocabulary size.
        normalization: the SentencePiece ``normalization_rule_name``: ``nmt_nfkc`` (mT5's; the
            model then holds a precompiled charsmap) or ``identity`` (none: the variant
            transformers 5 tokenizes differently, for the tests of the project's check).
        tokenizer_json: write ``tokenizer.json`` too (the hub repos have it).
        evaluator: the evaluator recorded in ``config.json`` (None: none, usable as every
            SEAHORSE evaluator, with an "identity unverified" warning).
        manifest: write a download manifest (:func:`write_test_manifest`).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        AssertionError: "1" and "0" are not single, distinct pieces of the trained vocabulary.
    """
    import sentencepiece as spm
    import torch
    from safetensors.torch import save_file
    from transformers import MT5Config, MT5ForConditionalGeneration

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "spiece")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(multilingual_sentences()), model_prefix=prefix, vocab_size=vocab_size,
            model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0,
            normalization_rule_name=normalization, hard_vocab_limit=False, num_threads=1,
            shuffle_input_sentence=False, minloglevel=2)
        model_bytes = _without_paths(Path(prefix + ".model").read_bytes())
    (out / "spiece.model").write_bytes(model_bytes)
    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    assert [processor.encode(w, out_type=str) for w in ("1", "0")] == [["▁1"], ["▁0"]], "1/0 are not single pieces"
    # the hub's tokenizer files (google/seahorse-large-q*: T5Tokenizer, no sentinel ids)
    (out / "tokenizer_config.json").write_text(json.dumps({
        "additional_special_tokens": None, "clean_up_tokenization_spaces": True, "eos_token": "</s>", "extra_ids": 0,
        "model_max_length": 1000000000000000019884624838656, "pad_token": "<pad>", "sp_model_kwargs": {},
        "tokenizer_class": "T5Tokenizer", "unk_token": "<unk>"}, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}, indent=2) + "\n")
    if tokenizer_json:
        hub_tokenizer_json(model_bytes).save(str(out / "tokenizer.json"))
    rows = -(-processor.get_piece_size() // 128) * 128
    torch.manual_seed(seed)
    config = MT5Config(vocab_size=rows, d_model=d_model, d_kv=d_model // num_heads, d_ff=d_ff, num_layers=num_layers,
                       num_decoder_layers=num_layers, num_heads=num_heads, feed_forward_proj="gated-gelu",
                       pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, initializer_factor=init_factor,
                       tie_word_embeddings=False)
    model = MT5ForConditionalGeneration(config).eval()
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if k not in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")}
    generator = torch.Generator().manual_seed(seed + 1)  # an untied head of its own, as mT5's
    head = torch.randn(state["shared.weight"].shape, generator=generator) * (init_factor * d_model**-0.5)
    head[[processor.piece_to_id("▁1"), processor.piece_to_id("▁0")]] *= answer_gain
    state["lm_head.weight"] = head
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    written = {**v11_config(config), "architectures": ["MT5ForConditionalGeneration"], "model_type": "mt5",
               "tokenizer_class": "T5Tokenizer"}
    if evaluator:
        written["unieval_local_evaluator"] = evaluator
    (out / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    if manifest:
        write_test_manifest(out)
    return out


def write_test_manifest(out: Path) -> Path:
    """Write ``out``'s ``unieval_manifest.json`` in ``unieval-local download``'s format (every file's
    SHA-256 and size, the tokenizer fingerprint; no hub id nor revision: the folder's identity
    stays what its ``config.json`` says, ``named`` at most, never ``verified``), so that the folder
    is checked against it as a downloaded one is (a changed or added tokenizer, config or weight
    file is refused)."""
    from unieval_local.models.manifest import manifest_entries, write_manifest

    return write_manifest(out, manifest_entries(out), checkpoint=out.name, hub_id=None, revision=None)


#: Stand-in chat templates of the causal-lm layouts (``--layout llama|qwen2|granite``): the real
#: ones' token structure, written here. The granite one takes the variables Granite Guardian 3.3's
#: own template takes (``guardian_config``, ``documents``, ``think``) and ends, like it, with the
#: judge's generation prompt; qwen2's has Qwen's ``enable_thinking`` switch.
CHAT_TEMPLATES = {
    "llama": ("{{- '<|begin_of_text|>' }}{%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + "
              "'<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
              "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"),
    "qwen2": ("{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' }}{%- if m['role'] == 'assistant' and "
              "enable_thinking is defined and not enable_thinking %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
              "{{- m['content'] + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
              "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and not enable_thinking %}"
              "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"),
    "granite": ("{{- '<|start_of_role|>user<|end_of_role|>You judge whether the last assistant text meets the risk '"
                " + (guardian_config['criteria_id'] if guardian_config is defined else 'harm') + '.\\n' }}"
                "{%- if documents %}{%- for d in documents %}{{- '<document id=' + d['doc_id'] + '>' + d['text'] + "
                "'</document>\\n' }}{%- endfor %}{%- endif %}{%- for m in messages %}{{- '<' + m['role'] + '>' + "
                "m['content'] + '</' + m['role'] + '>\\n' }}{%- endfor %}{%- if think is defined and think %}"
                "{{- 'Reason in <think> first.' }}{%- else %}{{- 'Answer in <score> yes </score> or <score> no </score>.' }}"
                "{%- endif %}{{- '<|end_of_text|>\\n' }}{%- if add_generation_prompt %}"
                "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}"),
}
_CAUSAL_SPECIAL = {"llama": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
                   "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                   "granite": ["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"]}


def build_causal_lm_checkpoint(out_dir: str | os.PathLike, *, layout: str = "qwen2",
                               data_dir: str | os.PathLike | None = None, vocab_size: int = 1000,
                               hidden_size: int = 32, num_layers: int = 2, num_heads: int = 4, kv_heads: int = 2,
                               intermediate_size: int = 64, seed: int = 0, init_range: float = 0.2,
                               evaluator: str | None = None, chat_template: bool = True, manifest: bool = True,
                               fit: str | None = None) -> Path:
    """Write a random decoder in a causal-lm layout (``--layout llama|qwen2|granite``) to ``out_dir``:
    ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` / ``GraniteForCausalLM`` (``model.safetensors``,
    head untied for llama and granite, tied for qwen2 as Qwen2-0.5B), a byte-level BPE tokenizer
    trained here on :func:`training_sentences` (``yes``/``no`` with and without a leading space
    and the digits are single tokens), the layout's special tokens and its stand-in chat template
    (:data:`CHAT_TEMPLATES`) in ``tokenizer_config.json`` (``chat_template=False``: none).
    ``init_range`` (0.2) spreads the random logits so that readouts differ between prompts.
    ``fit="claims"`` then fits it briefly to write claim lists (``scripts/fit_claims.py``: seeded,
    a few seconds; needs the shared SummEval data) before the manifest is written; ``fit="judge"``
    (with ``evaluator`` ``themis`` or ``prometheus-7b-v2.0``) fits it to write a short rationale,
    the judge's rating prefix and a rating (``scripts/fit_judge.py``); None (default): the random
    stand-in, unchanged."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    if layout not in CHAT_TEMPLATES:
        raise ValueError(f"layout must be one of {', '.join(CHAT_TEMPLATES)}, got {layout!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    special = _CAUSAL_SPECIAL[layout]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    lines = training_sentences(Path(data_dir) if data_dir else shared_data_dir(must_exist=False))
    lines += ["yes no yes no Yes No: yes, no. Coherence (1-5): 3 Score: 4 <score> yes </score> <score> no </score>"] * 200
    bpe.train_from_iterator(lines, trainer)
    end = special[-1] if layout != "granite" else special[0]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=end, pad_token=end,
                                        additional_special_tokens=special)
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").unlink(missing_ok=True)
    config_path = out / "tokenizer_config.json"
    tok_config = json.loads(config_path.read_text(encoding="utf-8"))
    tok_config.pop("chat_template", None)
    if chat_template:
        tok_config["chat_template"] = CHAT_TEMPLATES[layout]
    config_path.write_text(json.dumps(tok_config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _without_load_options(config_path)
    torch.manual_seed(seed)
    config = AutoConfig.for_model(layout, vocab_size=len(tokenizer), hidden_size=hidden_size,
                                  num_hidden_layers=num_layers, num_attention_heads=num_heads,
                                  num_key_value_heads=kv_heads, intermediate_size=intermediate_size,
                                  max_position_embeddings=4096, initializer_range=init_range,
                                  tie_word_embeddings=layout == "qwen2", eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(out)
    if evaluator:
        _set_config_keys(out / "config.json", {"unieval_local_evaluator": evaluator})
    if fit is not None:
        if fit not in ("claims", "judge"):
            raise ValueError(f"fit must be 'claims', 'judge' or None, got {fit!r}")
        if str(Path(__file__).resolve().parent) not in sys.path:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fit_claims import fit_claims
        from fit_judge import fit_judge

        data = Path(data_dir) if data_dir else shared_data_dir()
        if fit == "claims":
            fit_claims(out, data_dir=data, seed=seed)
        else:
            fit_judge(out, evaluator=evaluator or "", data_dir=data, seed=seed)
    if manifest:
        write_test_manifest(out)
    return out


def _set_config_keys(path: Path, keys: dict) -> None:
    """Add ``keys`` to the ``config.json`` at ``path`` (rewritten sorted, as transformers writes it)."""
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(keys)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def v11_config(config) -> dict:
    """A ``config.json`` as transformers 4.x wrote it for a T5 v1.1 checkpoint (the keys
    of ``google/t5-v1_1-large``'s fine-tunes), with ``tie_word_embeddings: false``."""
    return {
        "architectures": ["T5ForConditionalGeneration"], "d_ff": config.d_ff, "d_kv": config.d_kv,
        "d_model": config.d_model, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "dropout_rate": 0.1,
        "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": config.initializer_factor,
        "is_encoder_decoder": True, "is_gated_act": True, "layer_norm_epsilon": 1e-06, "model_type": "t5",
        "num_decoder_layers": config.num_decoder_layers, "num_heads": config.num_heads,
        "num_layers": config.num_layers, "output_past": True, "pad_token_id": 0,
        "relative_attention_max_distance": 128, "relative_attention_num_buckets": 32,
        "tie_word_embeddings": False, "torch_dtype": "float32", "transformers_version": "4.21.2",
        "use_cache": True, "vocab_size": config.vocab_size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build a small random checkpoint in an evaluator's real layout "
                                     "with a real tokenizer (T5 by default; --layout picks another), so that the "
                                     "real loading and scoring code runs offline.")
    parser.add_argument("out_dir", help="folder to write the checkpoint into")
    parser.add_argument("--data-dir", default=None, help="shared data folder (default $UNIEVAL_SHARED_DATA, else "
                        "../shared/data beside the clone; without it, the tokenizer is trained on "
                        "scripts/data/tokenizer_corpus.txt: another tokenizer, another fingerprint and other numbers "
                        "than the README's)")
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--d-ff", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-factor", type=float, default=1.5)
    parser.add_argument("--model-vocab-size", type=int, default=None, help="embedding rows (default: tokenizer size)")
    parser.add_argument("--docs", type=int, default=40, help="SummEval documents that train the tokenizer")
    parser.add_argument("--layout", default="t5", choices=["t5", "v1.1", "mt5", "deberta-nli", "hhem", "factcg",
                                                           "llama", "qwen2", "granite"],
                        help="t5 (tied head, ReLU), v1.1 (the official UniEval layout: gated-GELU, untied head) or "
                             "deberta-nli (a DeBERTa-v3 NLI cross-encoder, spm.model tokenizer: for mdeberta-nli; "
                             "--d-model, --layers, --heads, --vocab-size, --seed, --evaluator apply) or factcg (the "
                             "same with FactCG-DeBERTa's two unnamed labels) or hhem "
                             "(HHEM-2.1-Open's layout, no tokenizer; its foundation flan-t5-base/ beside it) or "
                             "mt5 (SEAHORSE's layout: MT5ForConditionalGeneration, multilingual spiece.model and "
                             "tokenizer.json; answers 1/0; --d-model, --d-ff, --layers, --heads, --vocab-size, --seed, "
                             "--init-factor, --evaluator apply) or llama / qwen2 / granite (a decoder with a locally "
                             "trained tokenizer and a chat template: a stand-in for a local instruct model, "
                             "--evaluator g-eval, or with granite Granite Guardian's template variables, --evaluator "
                             "granite-guardian-3.3-8b; --d-model, --d-ff, --layers, --heads, --vocab-size (at most 1000), --seed apply)")
    parser.add_argument("--answers", default="Yes,No", help="answer words POS,NEG that must be distinct pieces "
                        "(e.g. 1,0 for a MiniCheck-style checkpoint)")
    parser.add_argument("--evaluator", default=None,
                        help="the evaluator this folder stands in for (e.g. unieval-sum), recorded in config.json "
                        "so it is refused as another evaluator (its scores sign identity:named: only its own label "
                        "names it); default: none (usable as any, with an 'identity unverified' warning)")
    parser.add_argument("--no-manifest", dest="manifest", action="store_false",
                        help="write no unieval_manifest.json (default: one in download's format, so the folder's "
                        "files are checked against it as a downloaded folder's are)")
    parser.add_argument("--weights", default=None, choices=["safetensors", "bin"],
                        help="weight file format (default: safetensors for t5, pytorch_model.bin for v1.1)")
    parser.add_argument("--fit", default=None, choices=["claims", "judge"],
                        help="with --layout llama|qwen2|granite: fit the stand-in briefly (seeded, a minute or two on a CPU) "
                        "so that greedy generation writes a claim list ending in EOS for a few SummEval summaries "
                        "(claims, memorised: scripts/fit_claims.py) or, with --evaluator themis|prometheus-7b-v2.0, "
                        "a short rationale, the judge's rating prefix and a rating (judge: scripts/fit_judge.py); "
                        "default: the random stand-in")
    args = parser.parse_args(argv)
    if args.fit and args.layout not in CHAT_TEMPLATES:
        parser.error(f"--fit applies to --layout {'|'.join(CHAT_TEMPLATES)}, not {args.layout}")
    if args.fit == "judge" and args.evaluator not in ("themis", "prometheus-7b-v2.0"):
        parser.error(f"--fit judge needs --evaluator themis or prometheus-7b-v2.0, not {args.evaluator}")
    if args.layout == "deberta-nli":
        path = build_nli_checkpoint(args.out_dir, data_dir=args.data_dir, vocab_size=args.vocab_size,
                                    hidden_size=args.d_model, num_layers=args.layers, num_heads=args.heads,
                                    seed=args.seed, evaluator=args.evaluator or "mdeberta-nli", manifest=args.manifest)
        print(f"wrote {path} (a DeBERTa NLI cross-encoder)", file=sys.stderr)
        return 0
    if args.layout == "factcg":
        path = build_factcg_checkpoint(args.out_dir, data_dir=args.data_dir, vocab_size=args.vocab_size,
                                       hidden_size=args.d_model, num_layers=args.layers, num_heads=args.heads,
                                       seed=args.seed, evaluator=args.evaluator or "factcg-deberta-large",
                                       manifest=args.manifest)
        print(f"wrote {path} (FactCG-DeBERTa's layout)", file=sys.stderr)
        return 0
    if args.layout in CHAT_TEMPLATES:
        path = build_causal_lm_checkpoint(args.out_dir, layout=args.layout, data_dir=args.data_dir,
                                          vocab_size=min(args.vocab_size, 1000), hidden_size=args.d_model,
                                          intermediate_size=args.d_ff, num_layers=args.layers, num_heads=args.heads,
                                          seed=args.seed, evaluator=args.evaluator, manifest=args.manifest,
                                          fit=args.fit)
        fitted = {"claims": ", fitted to write claim lists", "judge": ", fitted to write a judge's rating prefix",
                  None: ""}[args.fit]
        print(f"wrote {path} (a {args.layout} causal LM with a stand-in chat template{fitted})", file=sys.stderr)
        return 0
    if args.layout == "mt5":
        path = build_mt5_checkpoint(args.out_dir, vocab_size=args.vocab_size, d_model=args.d_model, d_ff=args.d_ff,
                                    num_layers=args.layers, num_heads=args.heads, seed=args.seed,
                                    init_factor=args.init_factor, evaluator=args.evaluator, manifest=args.manifest)
        print(f"wrote {path} (SEAHORSE's mT5 layout; tokenizer trained on "
              f"{MULTILINGUAL_CORPUS.relative_to(MULTILINGUAL_CORPUS.parents[2])})", file=sys.stderr)
        return 0
    if args.layout == "hhem":
        path = build_hhem_checkpoint(args.out_dir, data_dir=args.data_dir, d_model=args.d_model, d_ff=args.d_ff,
                                     num_layers=args.layers, num_heads=args.heads, seed=args.seed,
                                     evaluator=args.evaluator or "hhem-2.1-open", manifest=args.manifest)
        print(f"wrote {path} (HHEM-2.1-Open's layout) and {path.parent / 'flan-t5-base'} (its foundation)",
              file=sys.stderr)
        return 0
    path = build_test_checkpoint(
        args.out_dir, data_dir=args.data_dir, vocab_size=args.vocab_size, d_model=args.d_model,
        d_ff=args.d_ff, num_layers=args.layers, num_heads=args.heads, seed=args.seed,
        init_factor=args.init_factor, model_vocab_size=args.model_vocab_size, n_docs=args.docs,
        layout=args.layout, weights=args.weights, answers=tuple(args.answers.split(",")), evaluator=args.evaluator,
        manifest=args.manifest,
    )
    found = Path(args.data_dir) if args.data_dir else shared_data_dir(must_exist=False)
    corpus = (f"SummEval text of {found}" if (found / "summeval" / "summeval_raw.json").is_file() else
              f"{REPO_CORPUS.relative_to(REPO_CORPUS.parents[2])} (no SummEval data at {found}: set "
              "UNIEVAL_SHARED_DATA for the README's fingerprints)")
    print(f"wrote {path} (tokenizer trained on the {corpus})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
