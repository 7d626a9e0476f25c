"""Fan-out and fan-in with a fake runner keyed on prompt text: hand-computed values."""

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.engine import Job
from unieval_local.pipeline.fold import fold
from unieval_local.pipeline.planning import Block, build_plan
from unieval_local.pipeline.planning import render_prompt
from unieval_local.schema import UniEvalData
from unieval_local.text.sentences import DEFAULT_SPLITTER
from unieval_local.registry.tasks import get_aspect

from conftest import FakeRunner, fake_factory


@pytest.fixture
def make(fake_scorer):
    """A scorer whose P(Yes) comes from a dict of marker -> value (the first marker found in the prompt)."""
    return lambda table, **kw: fake_scorer(table=table, **kw)


@pytest.mark.smoke
def test_sentence_mean_consistency(make):
    s, runner = make({"claim: Alpha": 0.9, "claim: Beta": 0.3, "claim: Gamma": 0.6})
    r = s.score([{"target": "Alpha one. Beta two. Gamma three.", "source": "doc"},
                 {"target": "Beta only.", "source": "doc"}], aspect="consistency")
    assert r.examples[0].value == pytest.approx((0.9 + 0.3 + 0.6) / 3, abs=1e-12)
    assert r.examples[1].value == pytest.approx(0.3, abs=1e-12)
    assert r.overall.value == pytest.approx(((0.9 + 0.3 + 0.6) / 3 + 0.3) / 2, abs=1e-12)
    assert len(runner.calls[0]) == 4


def test_output_level_is_one_query(make):
    s, runner = make({"summary: A. B. C.": 0.8})
    r = s.score([{"target": "A. B. C.", "source": "doc"}], aspect="coherence")
    assert r.examples[0].value == pytest.approx(0.8) and len(runner.calls[0]) == 1


@pytest.mark.parametrize("reduction,expected", [("mean", (0.2 + 0.6 + 0.7) / 3), ("max", 0.7)])
def test_references_mean_or_max(make, reduction, expected):
    s, _ = make({"reference: r1": 0.2, "reference: r2": 0.6, "reference: r3": 0.7}, reference_reduction=reduction)
    r = s.score([{"target": "t", "references": ["r1", "r2", "r3"]}], aspect="relevance")
    assert r.examples[0].value == pytest.approx(expected, abs=1e-12)


def test_plan_layout_and_fold_grid():
    ex = UniEvalData(target="S one. S two.", references=["x", "y"])
    plan, problems = build_plan([ex, None], [get_aspect("summarization", "fluency"),
                                             get_aspect("summarization", "relevance")], DEFAULT_SPLITTER)
    assert problems == []
    assert plan.blocks["fluency"] == [Block([[[0], [1]]], [(0, 6), (7, 13)]), None]
    assert plan.blocks["relevance"] == [Block([[[2]], [[3]]], [(0, 13)]), None]
    assert [(q.example, q.aspect, q.reference, q.unit) for q in plan.queries] == [
        (0, "fluency", 0, 0), (0, "fluency", 0, 1), (0, "relevance", 0, 0), (0, "relevance", 1, 0)]
    assert plan.prompts[3] == render_prompt(get_aspect("summarization", "relevance"), ex, ex.target, "y")
    p = np.array([0.1, 0.5, 0.4, 0.8])
    out = fold(plan, p)
    assert out["fluency"][0] == pytest.approx(0.3) and np.isnan(out["fluency"][1])
    assert out["relevance"][0] == pytest.approx(0.6)
    p[1] = np.nan
    assert np.isnan(fold(plan, p)["fluency"][0])


@pytest.mark.smoke
def test_shuffled_input_gives_shuffled_output(make):
    table = {f"claim: Item {i}.": v for i, v in enumerate(np.linspace(0.05, 0.95, 12))}
    data = [{"target": f"Item {i}. Item {(i + 5) % 12}.", "source": "d"} for i in range(12)]
    s, _ = make(table)
    base = [e.value for e in s.score(data, aspect="consistency").examples]
    perm = np.random.default_rng(0).permutation(12)
    shuffled = [e.value for e in s.score([data[i] for i in perm], aspect="consistency").examples]
    assert shuffled == [base[i] for i in perm]


def test_target_without_sentences_is_an_error_before_the_model_runs(fake_ckpt):
    class NoSentences:
        name = "none"

        def __call__(self, text):
            return [] if "EMPTY" in text else [text]

    runner = FakeRunner(table={})
    s = Scorer(model=fake_ckpt, runner_factory=fake_factory(runner), splitter=NoSentences())
    with pytest.raises(Exception, match="example 1, aspect 'fluency', field 'target': the target has no sentences"):
        s.score([{"target": "fine"}, {"target": "EMPTY"}], aspect="fluency")
    assert runner.calls == []
    job = Job((get_aspect("summarization", "fluency"),), [UniEvalData(target="fine"), UniEvalData(target="EMPTY")])
    results, _ = s.engine.run({"fluency": job})
    values, problems = results["fluency"].values, results["fluency"].problems
    assert values["fluency"][0] == 0.5 and np.isnan(values["fluency"][1]) and problems[0].index == 1
