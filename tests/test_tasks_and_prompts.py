"""Registry, golden prompt strings (UniEval's add_question) and the config schema."""

import pytest
from pydantic import ValidationError

from unieval_local import UniEvalConfig, UniEvalData, UnknownTaskError
from unieval_local.plan import render_prompt
from unieval_local.tasks import get_aspect, get_task

EX = UniEvalData(target="The summary. Second one.", source="The document.", references=["Ref one.", "Ref two."])

GOLDEN = {
    "coherence": ("The summary. Second one.", None,
                  "question: Is this a coherent summary to the document? </s> summary: The summary. Second one. "
                  "</s> document: The document."),
    "consistency": ("The summary.", None,
                    "question: Is this claim consistent with the document? </s> claim: The summary. </s> "
                    "document: The document."),
    "fluency": ("Second one.", None, "question: Is this a fluent paragraph? </s> paragraph: Second one."),
    "relevance": ("The summary. Second one.", "Ref two.",
                  "question: Is this summary relevant to the reference? </s> summary: The summary. Second one. "
                  "</s> reference: Ref two."),
}


@pytest.mark.parametrize("aspect", sorted(GOLDEN))
def test_golden_prompt(aspect):
    target, ref, expected = GOLDEN[aspect]
    assert render_prompt(get_aspect("summarization", aspect), EX, target, ref) == expected


def test_prompt_keeps_text_verbatim():
    ex = UniEvalData(target="  spaced\nout  ", source="doc  ")
    got = render_prompt(get_aspect("summarization", "coherence"), ex, ex.target)
    assert got == "question: Is this a coherent summary to the document? </s> summary:   spaced\nout   </s> document: doc  "


def test_registry_fields_and_granularity():
    aspects = get_task("summarization").aspects
    assert list(aspects) == ["coherence", "consistency", "fluency", "relevance"]
    assert aspects["coherence"].required_fields == ("target", "source")
    assert aspects["consistency"].required_fields == ("target", "source")
    assert aspects["fluency"].required_fields == ("target",)
    assert aspects["relevance"].required_fields == ("target", "references")
    assert [a.granularity for a in aspects.values()] == ["output", "sentence", "sentence", "output"]
    assert {a.checkpoint for a in aspects.values()} == {"unieval-sum"}


def test_unknown_names_list_valid_ones():
    with pytest.raises(UnknownTaskError, match="valid tasks: summarization"):
        get_task("translation")
    with pytest.raises(UnknownTaskError, match="valid aspects: coherence, consistency, fluency, relevance"):
        get_aspect("summarization", "novelty")


def test_config_accepts_both_names_and_validates():
    assert UniEvalConfig(task="summarization", evaluation_aspect="fluency").aspect == "fluency"
    assert UniEvalConfig(task="summarization", aspect="relevance").evaluation_aspect == "relevance"
    with pytest.raises(ValidationError, match="valid aspects"):
        UniEvalConfig(task="summarization", aspect="novelty")
