"""MiniCheck-Flan-T5 as a built-in evaluator equals its reference algorithm.

The reference here is MiniCheck's ``Inferencer`` (Liyan06/MiniCheck, ``minicheck/inference.py``,
the flan-t5-large path) written plainly in this file, chunking included: sentences by Punkt
per newline-separated block with the newline kept, chunks of at most 500 whitespace words,
``' '.join`` then ``.replace(' \\n ', '\\n').strip()``, empty chunks dropped; each chunk scored
alone with ``'predict: ' + chunk + eos + claim`` (max_length 2048, right truncation), decoder
start 0, softmax over the logits of the first tokens of "0" and "1", float64 weights; the
score is the max over chunks. Tolerance: 1e-5.
"""

import json
import shutil

import numpy as np
import pytest

from unieval_local import InvalidExampleError, Scorer
from unieval_local.cli import main
from unieval_local.errors import CheckpointError
from unieval_local.registry.evaluators import EVALUATORS, Evaluator, answer_ids
from unieval_local.text.prompts import MINICHECK
from unieval_local.text.sentences import DEFAULT_SPLITTER

from conftest import REAL_HOME, build_test_checkpoint

TOL = 1e-5


@pytest.fixture(scope="session")
def minicheck_ckpt(tmp_path_factory, shared_data):
    """A generated MiniCheck-style checkpoint: Flan-T5's layout (T5 v1.1) and a tokenizer whose
    "1" and "0" are distinct pieces."""
    folder = tmp_path_factory.mktemp("mc") / "minicheck-flan-t5-large"
    return build_test_checkpoint(folder, data_dir=shared_data, layout="v1.1", answers=("1", "0"))


@pytest.fixture(scope="session")
def qags(shared_data):
    return json.loads((shared_data / "unieval-reproduce" / "data" / "fact" / "qags_cnndm.json").read_text())


class MiniCheckReference:
    """MiniCheck's flan-t5-large inference, plainly: float64, one chunk at a time."""

    def __init__(self, folder):
        import torch
        from transformers import AutoTokenizer, T5ForConditionalGeneration

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.model = T5ForConditionalGeneration.from_pretrained(folder).double().eval()

    @staticmethod
    def chunks(doc: str, chunk_size: int = 500) -> list[str]:
        sents = []
        for block in doc.split("\n"):  # sent_tokenize_with_newlines
            sents.extend(DEFAULT_SPLITTER(block))  # = nltk.sent_tokenize (contract, "Sentence splitting")
            sents.append("\n")
        sents = sents[:-1] or [""]
        out, current, count = [], [], 0
        for sentence in sents:
            n = len(sentence.split())
            if count + n > chunk_size:
                out.append(" ".join(current))
                current, count = [sentence], n
            else:
                current.append(sentence)
                count += n
        if current:
            out.append(" ".join(current))
        out = [c.replace(" \n ", "\n").strip() for c in out]
        return [c for c in out if c != ""]

    def per_chunk(self, doc: str, claim: str, chunk_size: int = 500, max_len: int = 2048) -> list[float]:
        torch = self.torch
        pos, neg = self.tok("1").input_ids[0], self.tok("0").input_ids[0]
        probs = []
        for chunk in self.chunks(doc, chunk_size):
            enc = self.tok(["predict: " + self.tok.eos_token.join([chunk, claim])], max_length=max_len,
                           truncation=True, return_tensors="pt")
            with torch.no_grad():
                logits = self.model(input_ids=enc.input_ids, attention_mask=enc.attention_mask,
                                    decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[:, 0]
            probs.append(float(torch.softmax(logits[:, [neg, pos]], dim=-1)[0, 1]))
        return probs

    def support(self, doc: str, claim: str, **kw) -> float:
        return max(self.per_chunk(doc, claim, **kw))


@pytest.fixture(scope="session")
def mc_reference(minicheck_ckpt):
    return MiniCheckReference(minicheck_ckpt)


def long_document(qags, n=4):
    """Sources of ``n`` QAGS-CNNDM documents, one per paragraph: several chunks, > 2,048 tokens."""
    return "\n".join(r["source"] for r in qags[:n])


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "plain"])
def test_support_equals_the_reference_on_qags(minicheck_ckpt, mc_reference, qags, fast):
    records = [{"target": r["system_output"], "source": r["source"]} for r in qags[:8]]
    long_doc = long_document(qags)
    paragraphs = qags[5]["source"].split(" . ")
    with_newlines = " . ".join(paragraphs[:3]) + " .\n\n" + " . ".join(paragraphs[3:6]) + " .\n \n" + \
        " . ".join(paragraphs[6:]) + "\n\n"
    records += [{"target": qags[2]["system_output"], "source": long_doc},
                {"target": qags[5]["system_output"], "source": with_newlines}]
    s = Scorer(model=minicheck_ckpt, fast_forward=fast)
    got = np.array([e.value for e in s.score(records, task="fact", aspect="support").examples])
    want = np.array([mc_reference.support(r["source"], r["target"]) for r in records])
    assert np.abs(got - want).max() < TOL and got.std() > 1e-3
    runner = s.runner("minicheck-flan-t5-large")
    assert len(runner.t5.tokenizer(["predict: " + long_doc]).input_ids[0]) > 2048  # longer than max_length
    assert len(mc_reference.chunks(long_doc)) >= 3 and len(mc_reference.chunks(with_newlines)) == 1
    assert "\n\n" in mc_reference.chunks(with_newlines)[0]  # blank lines are kept inside a chunk


def test_chunks_are_the_reference_chunks_with_offsets_and_evidence(minicheck_ckpt, mc_reference, qags):
    doc = long_document(qags, 5) + "\n\n" + qags[6]["source"]
    ours = MINICHECK.chunks(doc, DEFAULT_SPLITTER, 500)
    assert [t for _, _, t in ours] == mc_reference.chunks(doc)
    for a, b, text in ours:  # the offsets cover the chunk's sentences in the document
        assert " ".join(doc[a:b].split()) == " ".join(text.split())
    small = MINICHECK.chunks(doc, DEFAULT_SPLITTER, 50)
    assert [t for _, _, t in small] == mc_reference.chunks(doc, 50) and len(small) > len(ours)
    s = Scorer(model=minicheck_ckpt)
    claim = qags[3]["system_output"]
    r = s.score([{"target": claim, "source": doc}], task="fact", aspect="support", evidence=True)
    queries = r.examples[0].evidence.queries
    want = mc_reference.per_chunk(doc, claim)
    assert len(queries) == len(ours) == len(want)
    assert [(q.window.field, q.window.start, q.window.end) for q in queries] == [("source", a, b) for a, b, _ in ours]
    assert np.abs(np.array([q.value for q in queries]) - np.array(want)).max() < TOL
    assert r.examples[0].value == pytest.approx(max(q.value for q in queries), abs=1e-12)
    # a chunk size of 50 words, as MiniCheck's score(..., chunk_size=50)
    r50 = Scorer(model=minicheck_ckpt, chunk_words=50).score([{"target": claim, "source": doc}], task="fact",
                                                              aspect="support")
    assert abs(r50.examples[0].value - mc_reference.support(doc, claim, chunk_size=50)) < TOL
    assert "|chunk:50w|" in str(r50.signature) and "|maxlen:2048|" in str(r50.signature)


def test_an_overlong_chunk_is_cut_at_words_to_fit_the_window(minicheck_ckpt, mc_reference, qags):
    """A chunk over MiniCheck's 2,048 tokens (the reference would truncate its end) is cut at word
    boundaries until each prompt fits (issue 37): no query is truncated, every word is read once."""
    words = " ".join([w for w in qags[0]["source"].split() if w.isalpha()][:300])
    doc = " ".join([words] * 4)  # one 1,200-word "sentence" without a full stop: one chunk, over 2,048 tokens
    claim = qags[0]["system_output"]
    r = Scorer(model=minicheck_ckpt).score([{"target": claim, "source": doc}], task="fact", aspect="support",
                                           evidence=True)
    q = r.examples[0].evidence.queries
    assert len(q) >= 2 and not any(x.truncated for x in q) and max(x.n_tokens for x in q) <= 2048
    parts = [doc[x.window.start:x.window.end] for x in q]
    assert " ".join(parts).split() == doc.split()  # cut between words, nothing lost or read twice
    assert abs(r.examples[0].value - max(mc_reference.support(p, claim) for p in parts)) < TOL


def test_sentence_level_options_are_mean_and_min_of_sentence_claims(minicheck_ckpt, mc_reference, qags):
    rec = {"target": qags[0]["system_output"], "source": qags[0]["source"]}
    per_sentence = [mc_reference.support(rec["source"], sent) for sent in DEFAULT_SPLITTER(rec["target"])]
    assert len(per_sentence) >= 2
    s = Scorer(model=minicheck_ckpt)
    res = s.evaluate([rec], task="fact", aspects=["support", "sentence_support", "sentence_support_min"])
    assert abs(res.examples[0].scores["sentence_support"] - np.mean(per_sentence)) < TOL
    assert abs(res.examples[0].scores["sentence_support_min"] - np.min(per_sentence)) < TOL
    assert abs(res.examples[0].scores["support"] - mc_reference.support(rec["source"], rec["target"])) < TOL


def test_an_empty_document_is_a_clear_error(minicheck_ckpt, tmp_path, capsys):
    s = Scorer(model=minicheck_ckpt)
    with pytest.raises(InvalidExampleError, match=r"example 1, aspect 'support', field 'source'.*empty"):
        s.score([{"target": "A claim.", "source": "A document."}, {"target": "A claim.", "source": " \n\n "}],
                task="fact", aspect="support")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "A claim.", "source": "Doc."}) + "\n"
                   + json.dumps({"target": "A claim.", "source": "\n"}) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--model", str(minicheck_ckpt),
                 "-o", str(out), "--no-progress"]) == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert "scores" in lines[0] and "field 'source'" in lines[1]["error"]["message"]


def test_answer_ids_are_the_first_tokens_of_1_and_0_and_must_differ(minicheck_ckpt):
    s = Scorer(model=minicheck_ckpt)
    runner = s.runner("minicheck-flan-t5-large")
    tok = runner.t5.tokenizer
    assert runner.evaluator is EVALUATORS["minicheck-flan-t5-large"] and runner.evaluator.answers == ("1", "0")
    assert runner.answer_ids == (tok("1").input_ids[0], tok("0").input_ids[0]) and len(set(runner.answer_ids)) == 2
    assert EVALUATORS["minicheck-flan-t5-large"].max_length == 2048
    with pytest.raises(CheckpointError, match="no distinct first tokens"):
        answer_ids(tok, Evaluator("clash", None, answers=("Yes", "Yes.")))
    with pytest.raises(ValueError, match="two different words"):
        Evaluator("same", None, answers=("Yes", "Yes"))


def test_cli_download_verify_tasks_and_model_mapping_know_minicheck(minicheck_ckpt, tiny_ckpt, qags, tmp_path,
                                                                     capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "support" in out and "minicheck-flan-t5-large" in out and "sentence_support_min" in out
    assert main(["verify", str(minicheck_ckpt)]) == 0
    assert "1/0 token ids" in capsys.readouterr().out
    home = tmp_path / "home"
    shutil.copytree(minicheck_ckpt, home / "minicheck-flan-t5-large")
    assert main(["verify", str(home)]) == 0  # a known checkpoint name
    src = tmp_path / "qags.json"
    src.write_text(json.dumps(qags[:6]))
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--aspect", "consistency",
                 "--model", f"minicheck-flan-t5-large={minicheck_ckpt}", "--model", f"unieval-fact={tiny_ckpt}",
                 "-o", str(out), "--no-progress"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 6 and all(set(x["scores"]) == {"support", "consistency"} for x in lines)
    from unieval_local.cli import _build_parser

    dl = _build_parser().parse_args(["download", "--checkpoint", "minicheck-flan-t5-large", "--to", "x"])
    assert dl.checkpoint == ["minicheck-flan-t5-large"]
    from unieval_local.registry.tasks import CHECKPOINTS

    assert CHECKPOINTS["minicheck-flan-t5-large"] == "lytang/MiniCheck-Flan-T5-Large"


@pytest.mark.real_weights
def test_official_minicheck_weights_reproduce_its_readme():
    """MiniCheck's README: raw_prob [0.9805923700332642, 0.007121330592781305] for flan-t5-large."""
    from pathlib import Path

    folder = Path(REAL_HOME or "") / "minicheck-flan-t5-large"
    if not REAL_HOME or not (folder / "config.json").is_file():
        pytest.skip("official MiniCheck-Flan-T5-Large not staged in UNIEVAL_LOCAL_HOME")
    doc = "A group of students gather in the school library to study for their upcoming final exams."
    claims = ["The students are preparing for an examination.", "The students are on vacation."]
    s = Scorer(model={"minicheck-flan-t5-large": str(folder)}, device="cpu")
    got = [e.value for e in s.score([{"target": c, "source": doc} for c in claims], task="fact",
                                    aspect="support").examples]
    assert np.abs(np.array(got) - np.array([0.9805923700332642, 0.007121330592781305])).max() < 1e-4
    assert s.runner("minicheck-flan-t5-large").answer_ids == (209, 3)


@pytest.mark.parametrize("fmt", ["summ", "rating", "autoeval"])
def test_reports_can_check_claims_with_minicheck(fmt, minicheck_ckpt, tiny_ckpt, shared_data, tmp_path, capsys):
    """``report --consistency-aspect fact/support``: claims, key points, accuracy points and support
    checks are MiniCheck queries (predict: ...), the rest UniEval's."""
    import sys

    sys.path.insert(0, str(shared_data.parents[1] / "main" / "scripts"))
    from convert_qmsum import convert

    rows = [json.loads(line) for line in (shared_data / "qmsum" / "test.jsonl").read_text().splitlines()[:1]]
    src = tmp_path / "meeting.jsonl"
    src.write_text(json.dumps(convert(rows)[0]) + "\n")
    out = tmp_path / "r.json"
    assert main(["report", "--format", fmt, str(src), "--consistency-aspect", "fact/support",
                 "--model", f"unieval-sum={tiny_ckpt}", "--model", f"minicheck-flan-t5-large={minicheck_ckpt}",
                 "-o", str(out), "--no-progress"] + (["--details"] if fmt == "rating" else [])) == 0, \
        capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["settings"]["consistency_aspect"] == "fact/support" and doc["n_reported"] == 1
    assert "minicheck-flan-t5-large" in doc["settings"]["checkpoints"]
    # the effective tokens per query of each checkpoint (run.max_length None: evaluator defaults)
    assert doc["settings"]["run"]["max_length"] is None
    assert doc["settings"]["checkpoints"]["minicheck-flan-t5-large"]["max_length"] == 2048
    assert all(c["max_length"] == 1024 for n, c in doc["settings"]["checkpoints"].items() if n.startswith("unieval"))
    rep = doc["reports"][0]["report"]
    if fmt == "rating":
        assert rep["details"]["metrics"]["consistency"]["method"] == "minicheck:fact/support"
    elif fmt == "summ":
        assert rep["n_claims"] > 0 and all(0 <= c["score"] <= 1 for c in rep["claims"])
    else:
        assert rep["accuracy"]["decomposition"]


def test_meta_compares_support_with_the_human_consistency_of_qags(minicheck_ckpt, qags, tmp_path, capsys):
    src = tmp_path / "qags.json"
    src.write_text(json.dumps(qags[:30]))
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--model", str(minicheck_ckpt),
                 "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["meta", str(out), "--human", str(src), "--human-field", "scores", "--bootstrap", "0"]) == 2
    assert "support" in capsys.readouterr().err  # no human 'support': the aspects are named apart
    assert main(["meta", str(out), "--human", str(src), "--human-field", "scores", "--human-aspect",
                 "support=consistency", "--bootstrap", "0", "--json", str(tmp_path / "m.json")]) == 0
    from scipy import stats

    pred = [json.loads(x)["scores"]["support"] for x in out.read_text().splitlines()]
    human = [r["scores"]["consistency"] for r in qags[:30]]
    table = json.loads((tmp_path / "m.json").read_text())["table"]
    assert table["sample"]["support"]["spearman"][0] == pytest.approx(stats.spearmanr(pred, human)[0], abs=1e-12)


def test_a_user_defined_aspect_may_name_the_minicheck_evaluator(minicheck_ckpt, mc_reference, qags, tmp_path):
    cfg = tmp_path / "aspects.yaml"
    # MiniCheck's format has no question and no labels: an aspect naming it gives neither
    cfg.write_text("aspects:\n  - task: summarization\n    name: summary_support\n"
                   "    fields: [{field: source}, {field: target}]\n"
                   "    evaluator: minicheck-flan-t5-large\n")
    s = Scorer(model={"minicheck-flan-t5-large": str(minicheck_ckpt)}, aspects_config=cfg)
    rec = {"target": qags[1]["system_output"], "source": qags[1]["source"]}
    got = s.score([rec], task="summarization", aspect="summary_support").examples[0].value
    assert abs(got - mc_reference.support(rec["source"], rec["target"])) < TOL


def test_the_cache_key_includes_the_evaluator_spec(tmp_path):
    from unieval_local.models.cache import CachedRunner, ScoreCache
    from unieval_local.config import RunConfig

    from conftest import FakeRunner

    cache, config = ScoreCache(tmp_path / "c"), RunConfig()
    a = CachedRunner(FakeRunner(), cache, config, EVALUATORS["unieval-sum"])
    b = CachedRunner(FakeRunner(), cache, config, EVALUATORS["minicheck-flan-t5-large"])
    c = CachedRunner(FakeRunner(), cache, config, Evaluator("unieval-sum", None, answers=("No", "Yes")))
    keys = {r.key("the same prompt", 1024) for r in (a, b, c)}
    assert len(keys) == 3
