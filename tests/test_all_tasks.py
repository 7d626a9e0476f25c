"""Every task: parity with the plain reference, multi-aspect evaluate, real data through the CLI,
user-defined aspects from YAML, and (with official weights only) UniEval's published predictions."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.registry.user_aspects import AspectsConfigError
from unieval_local.cli import main
from unieval_local.text.sentences import DEFAULT_SPLITTER
from unieval_local.registry.tasks import TASKS

from conftest import FakeRunner, fake_factory


ROOT = Path(__file__).resolve().parents[1]
REPRO = "unieval-reproduce/data"
FILES = {"dialogue": "dialogue/topical_chat.json", "data2text": "data2text/sfres.json", "fact": "fact/qags_xsum.json"}


def load(shared_data, task, n):
    rows = json.loads((shared_data / REPRO / FILES[task]).read_text())
    return rows[:: max(1, len(rows) // n)][:n]


def reference_value(reference, aspect, rec, max_length=1024):
    """UniEval's evaluator for one record, written plainly from the contract's templates."""
    out, src, ctx = rec["system_output"], rec.get("source"), rec.get("context")
    q = {
        ("dialogue", "naturalness"): lambda o: f"question: Is this a natural response in the dialogue? </s> response: {o}",
        ("dialogue", "coherence"): lambda o: f"question: Is this a coherent response given the dialogue history? </s> response: {o} </s> dialogue history: {src}",
        ("dialogue", "engagingness"): lambda o: f"question: Is this an engaging and informative response according to the dialogue history and fact? </s> response: {o} </s> dialogue history: {src} </s> fact: {ctx}",
        ("dialogue", "groundedness"): lambda o: f"question: Is this response consistent with knowledge in the fact? </s> response: {o} </s> fact: {ctx}",
        ("dialogue", "understandability"): lambda o: f"question: Is this an understandable response in the dialogue? </s> response: {o}",
        ("data2text", "naturalness"): lambda o: f"question: Is this a fluent utterance? </s> utterance: {o}",
        ("data2text", "informativeness"): lambda o: f"question: Is this sentence informative according to the reference? </s> sentence: {o} </s> reference: {rec['reference']}",
        ("fact", "consistency"): lambda o: f"question: Is this claim consistent with the document? </s> claim: {o} </s> document: {src}",
    }[(aspect.task, aspect.name)]
    if aspect.granularity == "sentence":
        vals = [reference(q(s), max_length) for s in DEFAULT_SPLITTER(out)]
        return sum(vals) if aspect.reduction == "sum" else sum(vals) / len(vals)
    return reference(q(out), max_length)


@pytest.mark.parametrize("task", ["dialogue", "data2text", "fact"])
def test_every_aspect_equals_reference_on_real_data(tiny_ckpt, reference, shared_data, task):
    recs = load(shared_data, task, 6)
    scorer = Scorer(model=tiny_ckpt)
    unieval = {n: a for n, a in TASKS[task].aspects.items() if a.checkpoint.startswith("unieval-")}  # MiniCheck: its own test
    result = scorer.evaluate(recs, task=task, aspects=list(unieval))  # every UniEval aspect, one plan
    assert result.aspects == list(unieval)
    for name, aspect in unieval.items():
        want = np.array([reference_value(reference, aspect, r) for r in recs])
        got = np.array([e.value for e in result.per_aspect[name].examples])
        assert np.abs(got - want).max() < 1e-5, name
        one = np.array([e.value for e in scorer.score(recs, task=task, aspect=name).examples])
        assert np.abs(one - got).max() < 1e-5  # evaluate == one by one (other batches: float32 noise)
    for i, ex in enumerate(result.examples):
        assert ex.aspect_mean == pytest.approx(np.mean([ex.scores[a] for a in result.aspects]), abs=1e-12)
    for name, res in result.per_aspect.items():
        assert res.overall.value == pytest.approx(np.mean([e.value for e in res.examples]), abs=1e-12)


@pytest.mark.smoke
def test_engagingness_is_a_sum_over_sentences(fake_ckpt):
    runner = FakeRunner(table={"response: A one. </s>": 0.9, "response: B two. </s>": 0.8,
                               "response: C three. </s>": 0.7})
    s = Scorer(model=fake_ckpt, runner_factory=fake_factory(runner))
    rec = {"target": "A one. B two. C three.", "source": "hi \n\n", "context": "f\n"}
    r = s.evaluate([rec], task="dialogue", aspects=["engagingness", "naturalness"])
    assert r.examples[0].scores["engagingness"] == pytest.approx(2.4)
    assert r.examples[0].scores["naturalness"] == pytest.approx(0.5)
    assert r.examples[0].aspect_mean == pytest.approx((2.4 + 0.5) / 2)
    assert r.per_aspect["engagingness"].overall.value == pytest.approx(2.4)


def test_dialogue_inputs_without_the_trained_newlines_are_not_rewritten_and_not_warned_about(fake_ckpt):
    # the newlines UniEval's dialogue data ended fields with do not change T5's token ids
    # (test_schema_and_validation.py::test_dialogue_newline_endings_give_the_same_token_ids): no hint
    runner = FakeRunner(table={})
    s = Scorer(model=fake_ckpt, runner_factory=fake_factory(runner))
    recs = [{"target": "Hi.", "source": "a \n b", "context": "fact"}, {"target": "Yo.", "source": "a \n\n", "context": "f\n"}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.evaluate(recs, task="dialogue", aspects=["coherence", "groundedness"])
    assert not [w for w in caught if "not ending with" in str(w.message)]
    assert any(p.endswith("dialogue history: a \n b") for p in runner.calls[0])  # scored as given


@pytest.mark.parametrize("task", ["dialogue", "data2text", "fact"])
def test_cli_all_aspects_on_real_files(tmp_path, tiny_ckpt, shared_data, task):
    rows = load(shared_data, task, 8)
    src = tmp_path / "in.json"
    src.write_text(json.dumps(rows))
    out = tmp_path / "out.jsonl"
    model = ["--model", str(tiny_ckpt)]
    if task == "fact":  # fact's aspects include HHEM and the NLI checker: folders of their own families
        from make_test_checkpoint import build_hhem_checkpoint, build_nli_checkpoint

        nli = build_nli_checkpoint(tmp_path / "nli" / "mdeberta-nli", data_dir=shared_data)
        hhem = build_hhem_checkpoint(tmp_path / "hhem" / "hhem-2.1-open", data_dir=shared_data)
        model = [f"--model={name}={tiny_ckpt}" for name in ("unieval-fact", "minicheck-flan-t5-large")]
        model += [f"--model=mdeberta-nli={nli}", f"--model=hhem-2.1-open={hhem}"]
    # fact: --aspect all+ (all is fact's own set, consistency only; issue 37)
    assert main(["score", str(src), "--task", task, "--aspect", "all+" if task == "fact" else "all", *model,
                 "--max-length", "256", "-o", str(out), "--no-progress"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # --aspect all+: every aspect whose evaluator is given (FactCG's and Granite Guardian's are not: left out)
    want = [a for a in TASKS[task].aspects if task != "fact" or a not in ("factcg", "groundedness")]
    assert len(lines) == 8 and list(lines[0]["scores"]) == want
    if len(TASKS[task].aspects) > 1:
        assert lines[0]["aspect_mean"] == pytest.approx(np.mean(list(lines[0]["scores"].values())))


def test_custom_aspects_from_the_example_config(tiny_ckpt, reference, summeval_records):
    scorer = Scorer(model=tiny_ckpt, aspects_config=ROOT / "configs" / "aspects.example.yaml")
    recs = [{**r, "instruction": "Summarize in one sentence."} for r in summeval_records[:4]]
    r = scorer.evaluate(recs, task="summarization", aspects=["brevity", "instruction_following", "coherence"])
    for rec, ex in zip(recs, r.examples):
        want = reference(f"question: Does this summary follow the instruction? </s> summary: {rec['target']} </s> "
                         f"instruction: {rec['instruction']} </s> document: {rec['source']}")
        assert abs(ex.scores["instruction_following"] - want) < 1e-5
        want = reference(f"question: Is this a concise summary of the document? </s> summary: {rec['target']} </s> "
                         f"document: {rec['source']}")
        assert abs(ex.scores["brevity"] - want) < 1e-5
    with pytest.raises(ValueError, match="needs 'instruction'"):
        scorer.score(summeval_records[:1], task="summarization", aspect="instruction_following")
    with pytest.raises(ValueError, match="unknown aspect 'brevity'"):
        Scorer(model=tiny_ckpt).score(recs, aspect="brevity")


BAD_CONFIGS = [
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    fields:\n      - {label: s, field: target}\n"
     "    granularity: paragraph\n", r"bad.yaml:7: aspects\[0\].granularity: Input should be 'output' or 'sentence'"),
    ("aspects:\n  - task: summarization\n    name: x\n    fields:\n      - {label: s, field: target}\n",
     r"bad.yaml:2: aspects\[0\].question: the boolean-qa prompt format .* needs a question"),
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    feilds: []\n",
     r"bad.yaml:5: aspects\[0\].feilds: unknown key"),
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    fields:\n      - {label: s, fild: target}\n",
     r"bad.yaml:6: aspects\[0\].fields\[0\].fild: unknown key"),
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    fields:\n      - {label: s, field: source}\n",
     r"must include the text under evaluation"),
    ("aspects:\n  - task: poetry\n    name: x\n    question: Q?\n    fields:\n      - {label: s, field: target}\n",
     r"bad.yaml:2: aspects\[0\].task: unknown task 'poetry'"),
    ("aspects:\n  - task: summarization\n    name: coherence\n    question: Q?\n    fields:\n      - {label: s, field: target}\n",
     r"aspect 'coherence' already exists"),
    ("aspects: [unclosed\n", r"bad.yaml:2:1: not valid YAML"),
    ("", r"bad.yaml: the file is empty"),
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    fields:\n      - {label: s, field: target}\n"
     "    checkpoint: unieval-summ\n", r"bad.yaml:7: aspects\[0\].checkpoint: unknown evaluator 'unieval-summ'"),
    ("aspects:\n  - task: summarization\n    name: x\n    question: Q?\n    fields:\n      - {label: s, field: target}\n"
     "      - {label: d, field: source}\n    chunk_field: context\n", r"chunk_field: must be one of .*'source'"),
]


def test_signature_tells_custom_aspect_definitions_apart(tmp_path, fake_ckpt):
    sigs = []
    for q in ("Is this concise?", "Is this short?"):
        path = tmp_path / f"{len(sigs)}.yaml"
        path.write_text(f"aspects:\n  - task: summarization\n    name: concise\n    question: {q}\n"
                        "    fields: [{label: summary, field: target}]\n")
        sigs.append(str(Scorer(model=fake_ckpt, aspects_config=path).signature("summarization", "concise")))
    assert sigs[0] != sigs[1] and "aspect:concise#" in sigs[0]
    assert "#" not in str(Scorer(model=fake_ckpt).signature("summarization", "coherence")).split("|")[2]


@pytest.mark.parametrize("text,message", BAD_CONFIGS)
def test_bad_aspect_configs_name_the_key_and_line(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(AspectsConfigError, match=message):
        Scorer(aspects_config=path)
    assert main(["tasks", "--aspects-config", str(path)]) == 2


@pytest.mark.smoke
def test_tasks_command_lists_every_aspect(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + sum(len(t.aspects) for t in TASKS.values())
    eng = next(line for line in out if "engagingness" in line).split()
    assert eng[:2] == ["dialogue", "engagingness"] and "[0, n_sentences]" in " ".join(eng) and eng[-1] == "unieval-dialog"


PREDICT = {"dialogue": "dialogue/topical_chat_result.json", "data2text": "data2text/sfres_result.json",
           "fact": "fact/qags_cnndm_result.json"}


@pytest.mark.real_weights
@pytest.mark.parametrize("task", sorted(PREDICT))
def test_reproduces_unieval_predictions_with_official_weights(real_home, shared_data, task):
    """With the official checkpoints, our scores equal UniEval's published predictions."""
    ckpt = TASKS[task].checkpoint
    if not (real_home / ckpt / "config.json").is_file():
        pytest.skip(f"{ckpt} not staged in UNIEVAL_LOCAL_HOME")
    rows = json.loads((shared_data / "unieval-reproduce/predict" / PREDICT[task]).read_text())[:40]
    scorer = Scorer(model={ckpt: str(real_home / ckpt)}, device="cpu")
    result = scorer.evaluate(rows, task=task)
    for row, ex in zip(rows, result.examples):
        for aspect, value in ex.scores.items():
            assert abs(value - row["predict_scores"][aspect]) < 1e-5, (aspect, value, row["predict_scores"][aspect])
        if "overall" in row["predict_scores"]:
            assert abs(ex.aspect_mean - row["predict_scores"]["overall"]) < 1e-5
