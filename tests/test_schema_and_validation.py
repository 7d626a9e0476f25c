"""The hosted-metric schema, input parsing, and validation errors (before any scoring)."""

import pytest

from unieval_local import (
    InvalidExampleError,
    RequestTooLargeError,
    Scorer,
    UniEvalData,
    UniEvalResult,
    UniEvalStats,
    UnknownTaskError,
)

from conftest import FakeRunner, fake_factory


def never(prompt):
    """Fails the test if validation lets anything through to the model."""
    raise AssertionError("the model was called")


@pytest.fixture
def scorer(fake_ckpt):
    return lambda: Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(never)))


def test_json_schema_names_and_required_lists():
    schema = UniEvalResult.model_json_schema()
    assert set(schema["properties"]) >= {"overall", "examples"}
    assert schema["required"] == ["overall", "examples"]
    stats = schema["$defs"]["UniEvalStats"]
    assert stats["properties"]["value"]["type"] == "number"
    assert stats["required"] == ["value"]
    assert schema["properties"]["examples"]["items"] == {"$ref": "#/$defs/UniEvalStats"}
    data = UniEvalData.model_json_schema()
    assert data["required"] == ["target"]
    assert set(data["properties"]) == {"target", "source", "references", "context", "language"}


def test_result_is_frozen():
    r = UniEvalResult(overall=UniEvalStats(value=0.5), examples=[UniEvalStats(value=0.5)])
    with pytest.raises(Exception):
        r.overall = UniEvalStats(value=1.0)


def test_unieval_record_names_and_extras():
    d = UniEvalData.model_validate({"system_output": "out", "reference": "ref", "source": "src",
                                    "doc_id": "7", "instruction": "be brief", "scores": {"a": 1}})
    assert d.target == "out" and d.references == ["ref"] and d.source == "src"
    assert d.get_field("instruction") == "be brief" and d.get_field("doc_id") == "7"
    assert UniEvalData(target="t", references="one").references == ["one"]
    with pytest.raises(ValueError, match="different values"):
        UniEvalData.model_validate({"target": "a", "system_output": "b"})


def test_every_bad_example_is_listed_with_index_aspect_field(scorer):
    data = [
        {"target": "fine", "source": "doc"},      # 0 ok
        {"target": "   ", "source": "doc"},       # 1 blank target
        {"target": "fine"},                       # 2 no source
        {"source": "doc"},                        # 3 no target at all
        "not a dict",                             # 4
        {"target": "fine", "source": ""},         # 5 empty source
        {"target": 3, "source": "doc"},           # 6 wrong type
    ]
    with pytest.raises(InvalidExampleError) as info:
        scorer().score(data, task="summarization", aspect="consistency")
    got = {(p.index, p.field) for p in info.value.problems}
    assert got == {(1, "target"), (2, "source"), (3, "target"), (4, "record"), (5, "source"), (6, "target")}
    by_index = {p.index: p for p in info.value.problems}
    assert by_index[2].aspect == "consistency"
    assert "summarization/consistency needs 'source'" in by_index[2].message
    assert "it is missing" in by_index[2].message
    assert "example 5, aspect 'consistency', field 'source'" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_relevance_needs_references(scorer):
    bad = [{"target": "t"}, {"target": "t", "references": []}, {"target": "t", "references": ["ok", " "]}]
    with pytest.raises(InvalidExampleError) as info:
        scorer().score(bad, task="summarization", aspect="relevance")
    assert [(p.index, p.field) for p in info.value.problems] == [(0, "references"), (1, "references"), (2, "references")]
    assert "empty list" in info.value.problems[1].message


def test_fluency_needs_only_target(fake_ckpt):
    r = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(default=0.5))).score(
        [{"target": "Fine. Yes."}], aspect="fluency")
    assert r.overall.value == 0.5


def test_request_cap_is_250_on_the_hosted_form_only(scorer, fake_ckpt):
    from unieval_local import score

    with pytest.raises(RequestTooLargeError, match="at most 250 .* got 251.*Scorer"):
        score([{"target": "t", "source": "s"}] * 251, model=fake_ckpt)  # refused before any model loads
    with pytest.raises(AssertionError, match="the model was called"):  # a Scorer takes any number
        scorer().score([{"target": "t", "source": "s"}] * 251)


def test_empty_request_and_unknown_aspect(scorer):
    with pytest.raises(InvalidExampleError, match="no examples"):
        scorer().score([])
    with pytest.raises(UnknownTaskError):
        scorer().score([{"target": "t"}], aspect="novelty")


def test_float16_is_refused():
    with pytest.raises(ValueError, match="float16 is refused"):
        Scorer(dtype="float16")


def test_dialogue_newline_endings_give_the_same_token_ids(tiny_ckpt):
    # Why unieval-dialog declares no input hint (issue 29): UniEval's dialogue data ended the
    # history with "\n\n" and the fact with "\n", but T5's SentencePiece normalisation (nmt_nfkc,
    # remove_extra_whitespaces) reads a newline as a space, makes runs one and drops trailing ones,
    # so every spelling below gives the token ids of the trained one, through the tokenizer the
    # runner loads (AutoTokenizer of the generated checkpoint: a real SentencePiece model).
    from transformers import AutoTokenizer

    from unieval_local.pipeline.validate import input_hint_counts
    from unieval_local.registry.user_aspects import registry_with
    from unieval_local.schema import UniEvalData
    from unieval_local.text.prompts import BOOLEAN_QA

    tok = AutoTokenizer.from_pretrained(tiny_ckpt)
    turns = ["Hi, how are you?", "Fine, thanks."]
    histories = ["\n".join(turns) + "\n\n", "\n".join(turns) + "\n", "\n".join(turns), " ".join(turns),
                 "\n\n".join(turns) + "\n\n", "\r\n".join(turns) + "\r\n\r\n", "\n" + "\n".join(turns) + "\n\n\n"]
    facts = ["Tea is a drink.\n", "Tea is a drink.", "Tea is a drink.\n\n"]
    registry = registry_with(None)
    aspects = [registry.get_aspect("dialogue", a) for a in registry.get_task("dialogue").aspects]
    for aspect in aspects:
        ids = {tuple(tok(BOOLEAN_QA.render(aspect, UniEvalData(target="I am well.", source=h, context=f),
                                           "I am well.")[0])["input_ids"])
               for h in histories for f in facts}
        assert len(ids) == 1, (aspect.name, len(ids))
    # the words do count (the test can fail): another turn gives other ids
    coherence = registry.get_aspect("dialogue", "coherence")
    other = BOOLEAN_QA.render(coherence, UniEvalData(target="I am well.", source="Hi, how are you?\n\n"), "I am well.")[0]
    trained = BOOLEAN_QA.render(coherence, UniEvalData(target="I am well.", source=histories[0]), "I am well.")[0]
    assert tok(other)["input_ids"] != tok(trained)["input_ids"]
    # so no dialogue field is counted as lacking an ending
    examples = [UniEvalData(target="I am well.", source=h, context=f) for h in histories for f in facts]
    assert input_hint_counts(examples, aspects) == {}
