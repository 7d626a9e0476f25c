"""FactCG-DeBERTa on the seq-classifier backend (issue 30): a generated checkpoint in its layout
(``make_test_checkpoint.py --layout factcg``: DeBERTa-v3, two unnamed labels) loaded by the real
code; its prompt is one text (the document chunk, then an instruction quoting the claim), its
document chunks hold at most 550 NLTK word tokens, and fact/factcg equals a plain float64
reference of its published algorithm (Lei et al. 2025, github.com/derenlei/FactCG
``factcg/inference.py``) computed with ``transformers.AutoModelForSequenceClassification``
directly; batching changes nothing; strict loading refuses broken folders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from make_test_checkpoint import build_factcg_checkpoint, build_nli_checkpoint

from unieval_local import Scorer, UniEvalData
from unieval_local.errors import CheckpointError
from unieval_local.pipeline.planning import render_prompt
from unieval_local.registry.tasks import get_aspect
from unieval_local.text.factcg import FACTCG, treebank_word_count
from unieval_local.text.sentences import DEFAULT_SPLITTER

#: The instruction around the claim, written out by hand from FactCG's template.
HEAD = '\n\nChoose your answer: based on the paragraph above can we conclude that "'
TAIL = '"?\n\nOPTIONS:\n- Yes\n- No\nI think the answer is '


@pytest.fixture(scope="module")
def factcg_ckpt(tmp_path_factory, shared_data):
    return build_factcg_checkpoint(tmp_path_factory.mktemp("factcg") / "factcg-deberta-large", data_dir=shared_data)


@pytest.fixture(scope="module")
def qags(shared_data):
    rows = json.loads((shared_data / "unieval-reproduce" / "data" / "fact" / "qags_cnndm.json").read_text())
    return [{"target": r["system_output"], "source": r["source"]} for r in rows[:4]]


def reference_chunks(document: str, size: int = 550) -> list[str]:
    """FactCG's chunking as its inference code describes it, written plainly: Punkt sentences,
    each sized by NLTK's word tokens, packed greedily under ``size``; joined by newlines."""
    from nltk.tokenize import word_tokenize

    chunks, chunk, n = [], "", 0
    for sentence in DEFAULT_SPLITTER(document):
        k = sum(len(word_tokenize(piece, preserve_line=True)) for piece in DEFAULT_SPLITTER(sentence))
        if n + k <= size:
            chunk, n = "\n".join([chunk, sentence]).strip("\n"), n + k
        else:
            chunks.append(chunk)
            chunk, n = sentence, k
    if n:
        chunks.append(chunk.replace(" \n ", "\n").strip("\n").strip())
    return [c for c in chunks if c]


def factcg_reference(folder, document: str, claim: str, size: int = 550, max_length: int = 2048) -> tuple[float, int]:
    """P(supported) in float64: max over the document's chunks of softmax(logits)[1] of the one-text
    prompt ``chunk + HEAD + claim + TAIL``; and the number of chunks."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).double().eval()
    best = 0.0
    chunks = reference_chunks(document, size)
    for chunk in chunks:
        enc = tok(chunk + HEAD + claim + TAIL, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            best = max(best, torch.softmax(model(**enc).logits[0].double(), -1)[1].item())
    return best, len(chunks)


def test_the_prompt_is_one_text_and_its_ids_are_the_tokenizers_with_cls_and_sep(factcg_ckpt):
    from transformers import AutoTokenizer

    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.models.classifier.runner import TextClassifierModel, model_class_of
    from unieval_local.registry.evaluators import EVALUATORS

    ex = UniEvalData(target="A cat sat.", source="The cat sat on the mat.\nIt purred.")
    prompt = render_prompt(get_aspect("fact", "factcg"), ex, ex.target)
    assert prompt == ('The cat sat on the mat.\nIt purred.\n\nChoose your answer: based on the paragraph above can we '
                      'conclude that "A cat sat."?\n\nOPTIONS:\n- Yes\n- No\nI think the answer is ')
    spec = EVALUATORS["factcg-deberta-large"]
    assert model_class_of(spec) is TextClassifierModel and model_class_of(EVALUATORS["mdeberta-nli"]) is not \
        TextClassifierModel
    model = TextClassifierModel(ResolvedCheckpoint(spec.name, factcg_ckpt, "local"), spec, "cpu", "float32")
    tok = AutoTokenizer.from_pretrained(factcg_ckpt)
    plain = tok(prompt, add_special_tokens=False)["input_ids"]
    ids = model.encode([prompt])[0]
    assert ids == [1] + plain + [2]  # [CLS] text [SEP]: one segment, no separator inside
    assert ids.count(2) == 1
    cut = model.encode([prompt], max_length=8)[0]
    assert cut == [1] + plain[:6] + [2]  # past max_length the end is cut, [SEP] kept (the reference's single text)
    assert model.label_of(spec) == 1  # unnamed labels: output 1 = supported


def test_words_are_nltk_word_tokens_and_chunks_close_at_550():
    """Hand-counted: punctuation marks are words; 5 sentences of 100 tokens and one of 50 fill a
    chunk exactly (550 <= 550), the next 100-token sentence starts a new one."""
    assert treebank_word_count("It rained, then (briefly) it stopped.", DEFAULT_SPLITTER) == 10
    assert treebank_word_count("Don't go.", DEFAULT_SPLITTER) == 4  # Do, n't, go, .

    def sentence(tag: str, n_tokens: int) -> str:  # n_tokens - 1 words and the full stop
        return " ".join([tag.capitalize()] + [tag] * (n_tokens - 2)) + "."

    parts = [sentence(t, 100) for t in ("alpha", "bravo", "charlie", "delta", "echo")]
    parts += [sentence("foxtrot", 50), sentence("golf", 100)]
    doc = " ".join(parts)
    assert [treebank_word_count(p, DEFAULT_SPLITTER) for p in parts] == [100] * 5 + [50, 100]
    chunks = FACTCG.chunks(doc, DEFAULT_SPLITTER, 550)
    assert [text for _, _, text in chunks] == ["\n".join(parts[:6]), parts[6]]
    assert [(a, b) for a, b, _ in chunks] == [(0, doc.index(parts[6]) - 1), (doc.index(parts[6]), len(doc))]
    # chunk_words below 550 is obeyed (500: the sixth sentence moves on); above it, 550 caps it
    assert [t.count("\n") + 1 for _, _, t in FACTCG.chunks(doc, DEFAULT_SPLITTER, 500)] == [5, 2]
    assert FACTCG.chunks(doc, DEFAULT_SPLITTER, 5000) == chunks
    # a sentence longer than the cap is a chunk of its own; no empty chunk before it
    long_first = " ".join([sentence("hotel", 600), parts[0]])
    assert [t for _, _, t in FACTCG.chunks(long_first, DEFAULT_SPLITTER, 550)] == [sentence("hotel", 600), parts[0]]
    assert FACTCG.chunks("", DEFAULT_SPLITTER, 550) == []


def test_chunks_equal_the_plain_reference_on_real_documents(qags):
    for doc in [ex["source"] for ex in qags] + [" ".join(ex["source"] for ex in qags * 2)]:
        got = [text for _, _, text in FACTCG.chunks(doc, DEFAULT_SPLITTER, 550)]
        assert got == reference_chunks(doc)
    assert len(got) >= 3


def test_factcg_equals_a_float64_reference_max_over_chunks(factcg_ckpt, qags):
    scorer = Scorer(model={"factcg-deberta-large": str(factcg_ckpt)}, device="cpu")  # 550-word chunks by default
    long_doc = {"target": qags[0]["target"], "source": " ".join(qags[0]["source"] for _ in range(3))}
    examples = qags + [long_doc]
    got = scorer.score(examples, task="fact", aspect="factcg", evidence=True)
    n_chunks = []
    for ex, e in zip(examples, got.examples):
        want, n = factcg_reference(factcg_ckpt, ex["source"], ex["target"])
        n_chunks.append(n)
        assert e.value == pytest.approx(want, abs=1e-5)
        assert len(e.evidence.queries) == n  # one query per chunk
    assert n_chunks[-1] >= 2
    assert len({round(e.value, 4) for e in got.examples}) > 2  # the generated weights tell examples apart
    assert "|chunk:550w|" in str(scorer.signature("fact", "factcg"))
    from unieval_local.text.prompts import MINICHECK, default_chunk_words

    assert default_chunk_words(MINICHECK) == 500  # MiniCheck's own default
    lower = Scorer(model={"factcg-deberta-large": str(factcg_ckpt)}, device="cpu", chunk_words=200)
    assert "|chunk:200w|" in str(lower.signature("fact", "factcg"))
    assert len(lower.score([long_doc], task="fact", aspect="factcg", evidence=True).examples[0].evidence.queries) \
        > n_chunks[-1]


def test_batching_changes_nothing(factcg_ckpt, qags):
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.models.classifier.runner import classifier_runner_factory
    from unieval_local.registry.evaluators import EVALUATORS

    spec = EVALUATORS["factcg-deberta-large"]
    prompts = [render_prompt(get_aspect("fact", "factcg"), UniEvalData(**ex), ex["target"],
                             overrides={"source": ex["source"][:n]}) for ex in qags for n in (40, 400, 4000)]
    runner = classifier_runner_factory(ResolvedCheckpoint(spec.name, factcg_ckpt, "local"), "f" * 64, spec,
                                       device="cpu", dtype="float32", batch_tokens=1_000_000)
    together, n_tokens = runner.score(prompts, max_length=2048)
    assert len(set(n_tokens.tolist())) > 6  # mixed lengths: padding inside the batch
    one = np.array([runner.score([p], max_length=2048)[0][0] for p in prompts])
    np.testing.assert_allclose(together, one, atol=1e-6, rtol=0)
    shuffled = list(reversed(prompts))
    np.testing.assert_allclose(runner.score(shuffled, max_length=2048)[0][::-1], together, atol=1e-6, rtol=0)


@pytest.mark.parametrize("broken, needle", [
    ("no-head", "classification head is missing"),
    ("supported-at-0", r"name 'supported' as output 0, but factcg-deberta-large reads output 1"),
    ("nli-labels", "do not include 'supported'"),
])
def test_strict_loading_refuses_a_broken_factcg_checkpoint(tmp_path, shared_data, broken, needle):
    folder = tmp_path / "factcg-deberta-large"
    if broken == "no-head":
        build_factcg_checkpoint(folder, data_dir=shared_data, head=False)
    elif broken == "supported-at-0":
        build_nli_checkpoint(folder, data_dir=shared_data, labels=("supported", "unsupported"))
    else:  # an NLI cross-encoder's labels
        build_nli_checkpoint(folder, data_dir=shared_data)
    scorer = Scorer(model={"factcg-deberta-large": str(folder)}, device="cpu")
    with pytest.raises(CheckpointError, match=needle):
        scorer.score([{"target": "A claim.", "source": "A document."}], task="fact", aspect="factcg")


@pytest.mark.real_weights
def test_real_factcg_equals_the_reference(qags):
    """Ready for a user who stages the real weights (`unieval-local download --checkpoint
    factcg-deberta-large` into $UNIEVAL_LOCAL_HOME); skipped here."""
    from pathlib import Path

    from conftest import REAL_HOME

    folder = Path(REAL_HOME or "/nonexistent") / "factcg-deberta-large"
    if not (folder / "config.json").is_file():
        pytest.skip("factcg-deberta-large not staged in UNIEVAL_LOCAL_HOME")
    scorer = Scorer(model={"factcg-deberta-large": str(folder)}, device="cpu", chunk_words=550)
    got = scorer.score(qags, task="fact", aspect="factcg")
    for ex, e in zip(qags, got.examples):
        assert e.value == pytest.approx(factcg_reference(folder, ex["source"], ex["target"])[0], abs=1e-4)
    obvious = scorer.score([{"target": "The sun rises in the west.", "source": "The sun rises in the east."},
                            {"target": "The sun rises in the east.", "source": "The sun rises in the east."}],
                           task="fact", aspect="factcg")
    assert obvious.examples[0].value < 0.5 < obvious.examples[1].value


def test_chunk_words_above_what_factcg_reads_is_capped_with_a_note(factcg_ckpt):
    scorer = Scorer(model={"factcg-deberta-large": str(factcg_ckpt)}, device="cpu", chunk_words=800)
    with pytest.warns(UserWarning, match=r"factcg-deberta-large: chunk_words 800 is more than it reads at once: "
                                         r"chunks of at most 550 words"):
        signature = str(scorer.signature("fact", "factcg"))
    assert "|chunk:550w|" in signature
