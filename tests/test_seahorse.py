"""SEAHORSE (Clark et al., 2023) as six T5-family evaluators: a generated mT5 checkpoint in the
hub's layout (``make_test_checkpoint.py --layout mt5``: MT5ForConditionalGeneration, untied head,
spiece.model + tokenizer.json trained on English, Chinese and Indonesian) loads through the real
loading code and scores the six summarization aspects; each score equals a float64 reference
written here from the model card and TRUE's rule: ``"premise: " + article + " hypothesis: " +
summary`` tokenized by plain SentencePiece (+ EOS), one decoder step from id 0, softmax over the
WHOLE vocabulary, the probability of the first token of "1". Tolerance 1e-5. The head used by the
reference is the stored ``lm_head.weight`` (no tie, no rescale), read from the file itself.

Also: the vocab readout against the pair readout by hand; the tokenizer's ids against
SentencePiece's; and a SentencePiece model without a ``precompiled_charsmap`` (rule ``identity``),
which transformers 5 tokenizes differently (newline, tab, U+3000, U+00A0 read as spaces): the
project rebuilds its normalizer from ``spiece.model`` and gets SentencePiece's ids, with or without
``tokenizer.json``; a ``tokenizer.json`` alone that transformers would read otherwise is refused.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from make_test_checkpoint import build_mt5_checkpoint

from unieval_local import Scorer
from unieval_local.errors import CheckpointError
from unieval_local.registry.evaluators import EVALUATORS, Evaluator
from unieval_local.registry.tasks import get_aspect
from unieval_local.schema import UniEvalData
from unieval_local.text.prompts import SEAHORSE

TOL = 1e-5
ASPECTS = ("comprehensible", "repetition", "grammar", "attribution", "main_ideas", "conciseness")

#: (article, summary) in English, Chinese and Indonesian (text of the generator's corpus and new text).
PAIRS = [
    ("The city council approved a new budget on Tuesday after a long debate about public transport. "
     "Residents of the northern district complained that buses arrive late almost every morning.",
     "The council approved a budget for buses."),
    ("Heavy rain flooded several streets near the river, and two bridges were closed overnight.",
     "Two bridges closed after heavy rain."),
    ("市议会周二在经过长时间讨论后通过了新的公共交通预算。北部城区的居民抱怨公共汽车几乎每天早上都迟到。",
     "市议会通过了公共交通预算。"),
    ("大雨淹没了河边的几条街道，两座桥梁连夜关闭。救援人员救出了一家四口。", "大雨导致两座桥梁关闭。"),
    ("Dewan kota menyetujui anggaran baru pada hari Selasa setelah perdebatan panjang tentang transportasi umum.",
     "Dewan kota menyetujui anggaran transportasi."),
    ("Hujan deras membanjiri beberapa jalan di dekat sungai, dan dua jembatan ditutup semalaman.",
     "Dua jembatan ditutup karena banjir."),
]
RECORDS = [{"source": s, "target": t} for s, t in PAIRS]
#: the Chinese and Indonesian ones lie outside SEAHORSE's rating languages: one warning per run
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def seahorse(tmp_path_factory):
    """Two generated mT5 checkpoints (other seeds): ``a`` answers q1-q3, q5, q6, ``b`` answers q4
    (attribution), so that each aspect is seen to reach its own checkpoint."""
    home = tmp_path_factory.mktemp("seahorse")
    return {"a": build_mt5_checkpoint(home / "a" / "seahorse-large-q1"),
            "b": build_mt5_checkpoint(home / "b" / "seahorse-large-q4", seed=1)}


@pytest.fixture(scope="module")
def mapping(seahorse):
    return {f"seahorse-large-q{n}": str(seahorse["b" if n == 4 else "a"]) for n in range(1, 7)}


class SeahorseReference:
    """SEAHORSE's score written plainly (float64): SentencePiece ids of the hand-built prompt plus
    EOS, the mT5 body from the stored tensors, the stored head, softmax over every logit, P("1")."""

    def __init__(self, folder):
        import sentencepiece as spm
        import torch
        from safetensors.torch import load_file
        from transformers import MT5Config, MT5ForConditionalGeneration

        self.torch = torch
        config = {k: v for k, v in json.loads((folder / "config.json").read_text()).items()
                  if k not in ("architectures", "model_type", "unieval_local_evaluator")}
        state = load_file(str(folder / "model.safetensors"))
        self.head = state.pop("lm_head.weight").double()  # the checkpoint's own head, used as it is
        model = MT5ForConditionalGeneration(MT5Config(**config))
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected and set(missing) <= {"lm_head.weight", "encoder.embed_tokens.weight",
                                                    "decoder.embed_tokens.weight"}
        self.model = model.double().eval()
        self.sp = spm.SentencePieceProcessor(model_file=str(folder / "spiece.model"))
        self.one = self.sp.encode("1")[0]
        assert self.sp.id_to_piece(self.one) == "▁1"

    def logits(self, source: str, target: str):
        torch = self.torch
        ids = self.sp.encode(f"premise: {source} hypothesis: {target}") + [self.sp.eos_id()]
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.zeros((1, 1), dtype=torch.long),
                             output_hidden_states=True)
        return out.decoder_hidden_states[-1][0, 0] @ self.head.T  # after the final layer norm

    def __call__(self, source: str, target: str) -> float:
        return float(self.torch.softmax(self.logits(source, target), dim=-1)[self.one])

    def truncated(self, source: str, target: str, max_length: int) -> float:
        """As transformers' right truncation: the first ``max_length - 1`` ids and EOS."""
        torch = self.torch
        ids = self.sp.encode(f"premise: {source} hypothesis: {target}")[: max_length - 1] + [self.sp.eos_id()]
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.zeros((1, 1), dtype=torch.long),
                             output_hidden_states=True)
        return float(torch.softmax(out.decoder_hidden_states[-1][0, 0] @ self.head.T, dim=-1)[self.one])


@pytest.fixture(scope="module")
def refs(seahorse):
    return {k: SeahorseReference(v) for k, v in seahorse.items()}


@pytest.fixture(scope="module")
def scorers(mapping):
    return {fast: Scorer(model=mapping, fast_forward=fast) for fast in (True, False)}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "plain"])
def test_six_aspects_equal_the_reference_in_three_languages(scorers, refs, fast):
    scorer = scorers[fast]
    result = scorer.evaluate(RECORDS, task="summarization", aspects=list(ASPECTS))
    want_a = np.array([refs["a"](s, t) for s, t in PAIRS])
    want_b = np.array([refs["b"](s, t) for s, t in PAIRS])
    for aspect in ASPECTS:
        got = np.array([e.value for e in result.per_aspect[aspect].examples])
        want = want_b if aspect == "attribution" else want_a
        assert np.abs(got - want).max() < TOL, aspect
    assert want_a.std() > 0.05 and np.abs(want_a - want_b).max() > 0.05  # spread, and two models told apart
    runner = scorer.runner("seahorse-large-q4")
    assert runner.forward == ("fast" if fast else "plain") and runner.readout == "vocab"
    assert runner.t5.model.config.model_type == "mt5" and not runner.t5._scale_decoder_outputs
    sig = result.per_aspect["attribution"].signature
    assert "|maxlen:2048|" in str(sig) and sig.checkpoint.endswith("seahorse-large-q4")


def test_fast_and_plain_agree_and_batching_changes_nothing(scorers, mapping):
    records = RECORDS * 3 + [{"source": s, "target": t + " Extra."} for s, t in PAIRS]
    before = scorers[True].scheduler.batches
    fast = [e.value for e in scorers[True].score(records, task="summarization", aspect="main_ideas").examples]
    batches = scorers[True].scheduler.batches - before
    plain = [e.value for e in scorers[False].score(records, task="summarization", aspect="main_ideas").examples]
    assert np.abs(np.array(fast) - np.array(plain)).max() < TOL
    one_by_one = Scorer(model=mapping, batch_tokens=64)  # about one prompt per forward pass
    small = [e.value for e in one_by_one.score(records, task="summarization", aspect="main_ideas").examples]
    assert one_by_one.scheduler.batches > batches
    assert np.abs(np.array(small) - np.array(fast)).max() < TOL
    order = list(range(len(records)))
    random.Random(0).shuffle(order)
    shuffled = scorers[True].score([records[i] for i in order], task="summarization", aspect="main_ideas")
    assert [e.value for e in shuffled.examples] == [fast[i] for i in order]


def test_the_prompt_is_exactly_the_template(mapping, monkeypatch):
    from unieval_local.models.t5.runner import T5Runner

    seen: list[str] = []
    real = T5Runner.score

    def spy(self, prompts, **kw):
        seen.extend(prompts)
        return real(self, prompts, **kw)

    monkeypatch.setattr(T5Runner, "score", spy)
    rec = {"source": "  Dewan kota\nmenyetujui  anggaran. ", "target": " 市议会通过了预算。 "}
    Scorer(model=mapping).score([rec], task="summarization", aspect="grammar")
    assert seen == ["premise:   Dewan kota\nmenyetujui  anggaran.  hypothesis:  市议会通过了预算。 "]
    assert seen == [f"premise: {rec['source']} hypothesis: {rec['target']}"]  # joined as given, nothing stripped
    prompt, spans = SEAHORSE.render(get_aspect("summarization", "grammar"), UniEvalData(**rec), rec["target"])
    assert prompt == seen[0] and [prompt[a:b] for _, a, b in spans] == [rec["source"], rec["target"]]
    assert [f for f, _, _ in spans] == ["source", "target"]


def test_tokenizer_ids_are_sentencepiece_ids(scorers, refs):
    tok = scorers[True].runner("seahorse-large-q1").t5.tokenizer
    sp = refs["a"].sp
    texts = [t for pair in PAIRS for t in pair] + ["premise: 中国的首都是北京。 hypothesis: Jakarta adalah ibu kota."]
    for text in texts:
        assert tok(text).input_ids == sp.encode(text) + [1], text
    runner = scorers[True].runner("seahorse-large-q1")
    assert runner.answer_ids == (sp.piece_to_id("▁1"), sp.piece_to_id("▁0"))


def test_long_sources_window_with_spans_and_attribution_takes_the_max(mapping, refs):
    source = " ".join(s for s, _ in PAIRS[:2]) * 6
    target = PAIRS[0][1]
    scorer = Scorer(model=mapping, long_input="chunk", max_length=64)
    r = scorer.score([{"source": source, "target": target}], task="summarization", aspect="attribution",
                     evidence=True)
    queries = r.examples[0].evidence.queries
    assert len(queries) > 2 and all(q.window.field == "source" and not q.truncated for q in queries)
    want = [refs["b"](source[q.window.start:q.window.end], target) for q in queries]
    assert np.abs(np.array([q.value for q in queries]) - np.array(want)).max() < TOL
    assert r.examples[0].value == pytest.approx(max(want), abs=TOL)  # window_reduction max
    mean = scorer.score([{"source": source, "target": target}], task="summarization", aspect="conciseness",
                        evidence=True).examples[0]
    values = [q.value for q in mean.evidence.queries]
    assert mean.value == pytest.approx(np.mean(values), abs=1e-12)  # the other five: mean over windows
    # truncate (the default) cuts the prompt's end: the summary is lost with the source's tail, and it says so
    cut = Scorer(model=mapping, max_length=64).score([{"source": source, "target": target}], task="summarization",
                                                     aspect="attribution", evidence=True).examples[0].evidence.queries
    assert len(cut) == 1 and cut[0].truncated and cut[0].truncated_field == "source"
    assert cut[0].value == pytest.approx(refs["b"].truncated(source, target, 64), abs=TOL)


def test_vocab_readout_differs_from_the_pair_readout_by_hand():
    import torch

    from unieval_local.models.t5.runner import vocab_pair

    logits = torch.tensor([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    two = vocab_pair(logits, 0)
    assert two[0, 0] == 2.0 and two[0, 1] == pytest.approx(math.log(1 + math.e), abs=1e-15)
    vocab = 1 / (1 + np.exp(-(two[:, 0] - two[:, 1])))
    # softmax over the whole vocabulary: e^2 / (e^2 + e^0 + e^1) = 0.665241; uniform: 1/3
    assert vocab == pytest.approx([math.e**2 / (math.e**2 + 1 + math.e), 1 / 3], abs=1e-15)
    assert vocab[0] == pytest.approx(0.665241, abs=1e-6)
    pair = 1 / (1 + math.exp(-(2.0 - 0.0)))  # the pair rule over answers (0, 1): 0.880797
    assert pair == pytest.approx(0.880797, abs=1e-6) and abs(pair - vocab[0]) > 0.2
    bad = vocab_pair(torch.tensor([[1.0, float("nan"), 0.0], [1.0, float("inf"), 0.0], [30000.0, -30000.0, 0.0]]), 0)
    assert np.isnan(bad[:2, 0]).all() and np.isfinite(bad[2]).all()  # a non-finite row: NaN; big ones: no overflow
    big = vocab_pair(torch.tensor([[1000.0, 999.0]], dtype=torch.float32), 0)
    assert 1 / (1 + math.exp(-(big[0, 0] - big[0, 1]))) == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-12)
    with pytest.raises(IndexError):
        vocab_pair(logits, 3)


def test_the_runner_really_reads_the_vocab_readout(seahorse, refs):
    """The same checkpoint and prompt under readout pair and vocab: the pair one is sigmoid of the
    "1"/"0" logits, the vocab one P("1") over the vocabulary, both as the reference's logits say."""
    import torch

    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.models.t5.runner import T5Runner, load_t5_model

    model = load_t5_model(ResolvedCheckpoint("seahorse-large-q1", seahorse["a"], "explicit"), "cpu", "float32")
    vocab_spec = EVALUATORS["seahorse-large-q1"]
    pair_spec = Evaluator("pair-1-0", None, vocab_spec.prompt_format, answers=("1", "0"), readout="pair")
    source, target = PAIRS[2]
    prompt = f"premise: {source} hypothesis: {target}"
    logits = refs["a"].logits(source, target)
    one, zero = refs["a"].one, refs["a"].sp.piece_to_id("▁0")
    for fast in (True, False):
        got_vocab = T5Runner(model, evaluator=vocab_spec, fingerprint="x", fast_forward=fast).score(
            [prompt], max_length=2048)[0][0]
        got_pair = T5Runner(model, evaluator=pair_spec, fingerprint="x", fast_forward=fast).score(
            [prompt], max_length=2048)[0][0]
        assert got_vocab == pytest.approx(float(torch.softmax(logits, -1)[one]), abs=TOL)
        assert got_pair == pytest.approx(float(torch.sigmoid(logits[one] - logits[zero])), abs=TOL)
        assert abs(got_pair - got_vocab) > 1e-3


def test_readout_keys_and_registry():
    assert EVALUATORS["unieval-sum"].key() == {"evaluator": "unieval-sum", "format": "boolean-qa",
                                               "answers": ["Yes", "No"]}  # cache keys as before
    assert EVALUATORS["minicheck-flan-t5-large"].key() == {"evaluator": "minicheck-flan-t5-large",
                                                           "format": "minicheck", "answers": ["1", "0"]}
    assert EVALUATORS["seahorse-large-q4"].key() == {"evaluator": "seahorse-large-q4", "format": "seahorse",
                                                     "answers": ["1", "0"], "readout": "vocab"}
    for n in range(1, 7):
        e = EVALUATORS[f"seahorse-large-q{n}"]
        assert (e.hub_id, e.model_types, e.readout, e.max_length, e.languages) == (
            f"google/seahorse-large-q{n}", ("mt5",), "vocab", 2048, ("de", "en", "es", "ru", "tr", "vi"))
        assert f"Q{n}" in e.description
    with pytest.raises(ValueError, match="readout"):
        Evaluator("bad", None, readout="softmax")


# ------------------------------------------------------------------ the tokenizer without a charsmap
TRICKY = ["line one\nline two\n\nthree", "a\ttab", "ideographic\u3000space", "no-break\u00a0space",
          "市议会\n通过了预算。", "Dewan kota\nmenyetujui anggaran.", "The city council approved a new budget."]


@pytest.fixture(scope="module")
def identity_ckpts(tmp_path_factory):
    """mT5 checkpoints whose spiece.model was trained with normalization_rule_name=identity (no
    precompiled_charsmap): with tokenizer.json (the hub's files) and without."""
    home = tmp_path_factory.mktemp("identity")
    return {"json": build_mt5_checkpoint(home / "json" / "seahorse-large-q1", normalization="identity"),
            "spiece": build_mt5_checkpoint(home / "spiece" / "seahorse-large-q1", normalization="identity",
                                           tokenizer_json=False)}


@pytest.mark.parametrize("variant", ["json", "spiece"])
def test_no_charsmap_loads_with_sentencepiece_ids(identity_ckpts, variant):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    from transformers import AutoTokenizer

    from unieval_local.models.t5.loading import load_model
    from unieval_local.models.verify import verify_checkpoint

    folder = identity_ckpts[variant]
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((folder / "spiece.model").read_bytes())
    assert not proto.normalizer_spec.precompiled_charsmap
    sp = spm.SentencePieceProcessor(model_file=str(folder / "spiece.model"))
    plain = AutoTokenizer.from_pretrained(folder)  # what transformers alone gives: other ids, no error
    assert plain(TRICKY[0]).input_ids != sp.encode(TRICKY[0]) + [1]
    _, tok = load_model(folder)
    for text in TRICKY:
        assert tok(text).input_ids == sp.encode(text) + [1], text
    assert tok("1").input_ids == [sp.piece_to_id("▁1"), 1]
    assert tok.decode(tok(TRICKY[-1]).input_ids, skip_special_tokens=True) == TRICKY[-1]
    assert 0 < tok("a\ttab b", add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"][-1][1] <= 7
    (report,) = verify_checkpoint(folder, "seahorse-large-q1")
    assert report.ok and any("after rebuilding the normalizer" in m for m in report.messages), report.messages


def test_no_charsmap_scores_equal_the_sentencepiece_reference(identity_ckpts):
    folder = identity_ckpts["json"]
    ref = SeahorseReference(folder)
    records = [{"source": s, "target": t} for s, t in zip(TRICKY, reversed(TRICKY))]
    got = [e.value for e in Scorer(model=folder).score(records, task="summarization", aspect="comprehensible").examples]
    assert np.abs(np.array(got) - np.array([ref(r["source"], r["target"]) for r in records])).max() < TOL


def test_a_tokenizer_json_alone_that_transformers_reads_otherwise_is_refused(identity_ckpts, tmp_path):
    import shutil

    from unieval_local.models.t5.loading import load_model

    folder = tmp_path / "seahorse-large-q1"
    shutil.copytree(identity_ckpts["json"], folder)
    (folder / "spiece.model").unlink()
    with pytest.raises(CheckpointError, match=r"tokenizer\.json.*Fix: put the checkpoint's spiece\.model beside it"):
        load_model(folder)


def test_verify_and_identity_accept_mt5_and_refuse_a_t5_folder(seahorse, tmp_path):
    from unieval_local.models.checkpoints import check_identity
    from unieval_local.models.verify import verify_checkpoint

    (report,) = verify_checkpoint(seahorse["a"])  # checked as the evaluator its folder name names
    assert report.ok, report.messages
    assert any("ids equal SentencePiece's (spiece.model)" in m for m in report.messages)
    assert any("1/0 token ids" in m for m in report.messages)
    t5 = tmp_path / "t5"
    t5.mkdir()
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(CheckpointError, match="'t5' model.*seahorse-large-q2 is a mt5 model"):
        check_identity(t5, EVALUATORS["seahorse-large-q2"])


def test_a_byte_fallback_model_is_refused_naming_the_file(tmp_path):
    """SentencePiece's byte_fallback (unknown characters as byte pieces) is not applied by
    transformers' T5 tokenizer: no rebuild helps, so the folder is refused."""
    import sentencepiece as spm
    from transformers import AutoTokenizer

    from make_test_checkpoint import multilingual_sentences
    from unieval_local.models.t5.spm_check import check_tokenizer

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(multilingual_sentences()), model_prefix=str(tmp_path / "spiece"), vocab_size=1200,
        model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, byte_fallback=True, hard_vocab_limit=False,
        num_threads=1, minloglevel=2)
    folder = tmp_path / "bytes"
    folder.mkdir()
    (tmp_path / "spiece.model").rename(folder / "spiece.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "T5Tokenizer", "extra_ids": 0}))
    with pytest.raises(CheckpointError, match=r"spiece\.model.*byte_fallback.*Fix: "):
        check_tokenizer(folder, AutoTokenizer.from_pretrained(folder))


def test_cli_aspect_all_plus_includes_seahorse_where_its_checkpoints_are(tmp_path, tiny_ckpt, mapping, refs, capsys):
    from unieval_local.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS[:2]))
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "all", "-o", str(out), "--no-progress"]) == 0
    assert list(json.loads(out.read_text().splitlines()[0])["scores"]) == ["coherence", "consistency", "fluency"]
    err = capsys.readouterr().err
    assert "skipped aspect attribution" not in err  # one 'left out' line (a warning: this module ignores them)
    both = tmp_path / "both.jsonl"
    models = [f"--model=unieval-sum={tiny_ckpt}", *(f"--model={k}={v}" for k, v in mapping.items())]
    assert main(["score", str(src), *models, "--aspect", "all+", "-o", str(both), "--no-progress"]) == 0
    lines = [json.loads(x) for x in both.read_text().splitlines()]
    assert list(lines[0]["scores"]) == ["coherence", "consistency", "fluency", *ASPECTS]  # relevance: no references
    for line, (s, t) in zip(lines, PAIRS[:2]):
        assert line["scores"]["attribution"] == pytest.approx(refs["b"](s, t), abs=TOL)
        assert line["scores"]["grammar"] == pytest.approx(refs["a"](s, t), abs=TOL)
