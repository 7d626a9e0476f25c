"""The drop-in rating API (unieval_local.compat): the documented result shape exactly, the
formulas (normalized = score / 3, avg of 3, 3, 3, 2 = 0.9167), dict and SummaryData input,
one warning per evaluator, and bad items that do not lose the others."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from unieval_local import Scorer
from unieval_local.compat import SummarizationEvaluator, SummaryData
from unieval_local.errors import CheckpointNotFoundError, InvalidExampleError

from conftest import ROOT, FakeRunner, assert_same_shape, documented_shape, fake_factory

SOURCE = "Alpha rose sharply today. Beta fell after lunch. Gamma stayed flat all week."
SUMMARY = "Alpha rose. Beta fell."
KEY_POINTS = {"Alpha rose sharply today.": 0.9, "Beta fell after lunch.": 0.8, "Gamma stayed flat all week.": 0.7}


def answer(prompt: str) -> float:
    """Fixed answers: coherence 0.9, consistency 0.95, key-point coverage as above, fluency by sentence."""
    q = prompt.split(" </s> ")[0].removeprefix("question: ")
    if q.startswith("Is this a coherent summary"):
        return 0.9
    if q.startswith("Is this claim consistent"):
        claim = prompt.split(" </s> claim: ")[1].split(" </s> ")[0]
        return KEY_POINTS.get(claim, 0.95)
    if q.startswith("Is this a fluent paragraph"):
        return {"Alpha rose.": 0.9, "Beta fell.": 0.5}[prompt.split("paragraph: ")[1]]
    raise AssertionError(prompt)


@pytest.fixture()
def engine(official_shape_ckpt):
    """A fake-runner engine on a folder of the card's shape (so the calibrated cut points apply)."""
    runner = FakeRunner(answer)
    return Scorer(model=official_shape_ckpt, runner_factory=fake_factory(runner), long_input="chunk").engine


def run(coro):
    return asyncio.run(coro)


@pytest.mark.smoke
def test_evaluate_returns_exactly_the_documented_summary(engine):
    thirds = [0.3333, 0.6667]
    ev = SummarizationEvaluator(enabled_metrics=["coherence", "consistency", "relevance", "fluency"], engine=engine,
                                config={"cut_points": {"coherence": thirds, "consistency": thirds, "relevance": thirds,
                                                       "fluency": [0.3, 0.8]}})
    with pytest.warns(UserWarning, match="placeholders"):  # relevance_coverage (no reference)
        out = run(ev.evaluate(SummaryData(input=SOURCE, summary=SUMMARY)))
    # coherence 0.9 -> 3, consistency 0.95 -> 3, relevance = 3 of 3 key points covered -> 3,
    # fluency mean(0.9, 0.5) = 0.7 -> 2 (cut points 0.3, 0.8): the documented example 3, 3, 3, 2
    assert_same_shape(out, documented_shape("rating"))
    s = out["summary"]
    assert [s[m]["score"] for m in ("coherence", "consistency", "relevance", "fluency")] == [3, 3, 3, 2]
    # rounded as the evaluator's documented example shows them: 2/3 -> 0.67, mean 0.9167 -> 0.92
    assert [s[m]["normalized_score"] for m in ("coherence", "consistency", "relevance", "fluency")] == \
        [1.0, 1.0, 1.0, 0.67]
    assert s["avg_score"] == 0.92
    assert (s["relevancy_rating"], s["score"], s["binary_score"], s["possible_issues"]) == ("good", 1.0, 1, [])
    assert s["global_explanation"] == "All metrics met the expected values."


def test_only_enabled_metrics_dict_input_and_one_warning(engine):
    ev = SummarizationEvaluator(model=None, enabled_metrics=["coherence", "fluency"], engine=engine)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = run(ev.evaluate(SummaryData(input=SOURCE, summary=SUMMARY)))
        b = run(ev.evaluate({"input": SOURCE, "summary": SUMMARY}))
    assert a == b and list(a) == ["summary"]
    assert list(a["summary"]) == ["global_explanation", "relevancy_rating", "score", "possible_issues",
                                  "binary_score", "avg_score", "coherence", "fluency"]
    # the calibrated defaults: coherence 0.9 -> 2 (0.5837 <= p < 0.9483), fluency 0.7 -> 3 (thirds): avg 0.83
    assert a["summary"]["coherence"]["score"] == 2 and a["summary"]["fluency"]["score"] == 3
    assert a["summary"]["avg_score"] == 0.83 and a["summary"]["relevancy_rating"] == "good"
    assert not any("cut points" in str(w.message) for w in caught)  # both metrics calibrated: no note


def test_bad_items_name_the_field_and_do_not_lose_the_others(engine):
    ev = SummarizationEvaluator(enabled_metrics=["coherence"], engine=engine, config=ROOT / "configs" / "rating.yaml")
    with pytest.raises(InvalidExampleError, match="'summary'"):
        run(ev.evaluate({"input": SOURCE, "summary": "   "}))
    with pytest.raises(InvalidExampleError, match="'input'"):
        run(ev.evaluate({"summary": SUMMARY}))
    out = run(ev.evaluate_batch([{"input": SOURCE, "summary": SUMMARY}, {"input": SOURCE, "summary": ""}, 42,
                                 SummaryData(input=SOURCE, summary=SUMMARY)]))
    assert out[0] == out[3] and out[0]["summary"]["coherence"]["score"] == 2  # 0.9 < 0.9483 (configs/rating.yaml)
    assert out[1]["error"]["field"] == "summary" and out[2]["error"]["field"] == "record"
    # a misnamed input: the error and its hint in this API's names
    (miss,) = run(ev.evaluate_batch([{"document": SOURCE, "summary": SUMMARY}]))
    assert miss["error"]["field"] == "input" and "'source'" not in miss["error"]["message"]
    assert "(the record has 'document': did you mean 'input'? rename it)" in miss["error"]["message"]
    with pytest.raises(ValueError, match="enabled_metrics"):
        SummarizationEvaluator(enabled_metrics=["coherence", "novelty"])


def test_an_llm_name_is_not_a_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path))
    ev = SummarizationEvaluator(model="gpt-4o", enabled_metrics=["coherence"], offline=True)
    with pytest.raises(CheckpointNotFoundError, match="looks like an LLM name"):
        run(ev.evaluate({"input": SOURCE, "summary": SUMMARY}))


def test_any_object_with_the_summary_data_fields_is_rated_as_the_dict(engine):
    """Seed 000's client code imports SummaryData from the evaluator's own package (only the
    evaluator's import changes): a class of the same name that is not ours, rated as the dict."""
    import dataclasses
    import types

    import pydantic

    class SummaryData(pydantic.BaseModel):  # the evaluator's own class: same name, another model
        input: str
        summary: str

    @dataclasses.dataclass
    class Row:
        input: str
        summary: str
        references: list[str] | None = None

    class Slotted:
        __slots__ = ("input", "summary")

        def __init__(self, input, summary):
            self.input, self.summary = input, summary

    ev = SummarizationEvaluator(enabled_metrics=["coherence", "fluency"], engine=engine)
    want = run(ev.evaluate({"input": SOURCE, "summary": SUMMARY}))
    items = [SummaryData(input=SOURCE, summary=SUMMARY), Row(SOURCE, SUMMARY), Slotted(SOURCE, SUMMARY),
             types.SimpleNamespace(input=SOURCE, summary=SUMMARY, references=None)]
    for item in items:
        assert run(ev.evaluate(item)) == want, type(item).__name__
    assert run(ev.evaluate_batch(items)) == [want] * 4
    # a look-alike with an empty summary is named as a dict's would be; an object without the fields says so
    with pytest.raises(InvalidExampleError, match="'summary'"):
        run(ev.evaluate(Row(SOURCE, " ")))
    (bad,) = run(ev.evaluate_batch([types.SimpleNamespace(text=SUMMARY)]))
    assert bad["error"]["field"] == "record"
    assert "SimpleNamespace" in bad["error"]["message"] and "'input' and 'summary'" in bad["error"]["message"]
