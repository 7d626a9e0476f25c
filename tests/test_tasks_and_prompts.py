"""Registry, golden prompt strings (UniEval's add_question) and the config schema."""

import pytest
from pydantic import ValidationError

from unieval_local import UniEvalConfig, UniEvalData, UnknownTaskError
from unieval_local.pipeline.planning import render_prompt
from unieval_local.registry.tasks import TASKS, get_aspect, get_task

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


DIALOG = UniEvalData(target="Hi there.", source="a \n b \n\n", context="fact here\n")
ALL_GOLDEN = {
    ("dialogue", "naturalness"): "question: Is this a natural response in the dialogue? </s> response: Hi there.",
    ("dialogue", "coherence"): "question: Is this a coherent response given the dialogue history? </s> response: Hi there. "
                               "</s> dialogue history: a \n b \n\n",
    ("dialogue", "engagingness"): "question: Is this an engaging and informative response according to the dialogue history "
                                  "and fact? </s> response: Hi there. </s> dialogue history: a \n b \n\n </s> fact: fact here\n",
    ("dialogue", "groundedness"): "question: Is this response consistent with knowledge in the fact? </s> response: Hi there. "
                                  "</s> fact: fact here\n",
    ("dialogue", "understandability"): "question: Is this an understandable response in the dialogue? </s> response: Hi there.",
}


@pytest.mark.parametrize("key", sorted(ALL_GOLDEN))
def test_golden_dialogue_prompts(key):
    assert render_prompt(get_aspect(*key), DIALOG, DIALOG.target) == ALL_GOLDEN[key]


def test_golden_data2text_and_fact_prompts():
    ex = UniEvalData(target="Out.", source="Doc.", references=["Ref."])
    assert render_prompt(get_aspect("data2text", "naturalness"), ex, "Out.") == \
        "question: Is this a fluent utterance? </s> utterance: Out."
    assert render_prompt(get_aspect("data2text", "informativeness"), ex, "Out.", "Ref.") == \
        "question: Is this sentence informative according to the reference? </s> sentence: Out. </s> reference: Ref."
    assert render_prompt(get_aspect("fact", "consistency"), ex, "Out.") == \
        "question: Is this claim consistent with the document? </s> claim: Out. </s> document: Doc."


def test_golden_minicheck_prompts():
    """MiniCheck's ``'predict: ' + document + eos_token + claim`` (minicheck/inference.py)."""
    ex = UniEvalData(target="The claim. Two.", source="The doc.\nLine two.")
    for name in ("support", "sentence_support", "sentence_support_min"):
        assert render_prompt(get_aspect("fact", name), ex, "The claim.") == "predict: The doc.\nLine two.</s>The claim."
    assert render_prompt(get_aspect("fact", "support"), ex, "C.", overrides={"source": "chunk"}) == "predict: chunk</s>C."


def test_golden_nli_pair_prompt():
    """A (premise, hypothesis) pair, rendered with the pair separator; a separator in a text is a space."""
    from unieval_local.text.prompts import PAIR_SEPARATOR, split_pair

    ex = UniEvalData(target="The claim.", source="The doc.\nLine two.")
    prompt = render_prompt(get_aspect("fact", "nli_support"), ex, "The claim.")
    assert prompt == "The doc.\nLine two." + PAIR_SEPARATOR + "The claim."
    assert split_pair(prompt) == ("The doc.\nLine two.", "The claim.")
    odd = UniEvalData(target="A" + PAIR_SEPARATOR + "B.", source="D.")
    assert split_pair(render_prompt(get_aspect("fact", "nli_support"), odd, odd.target)) == ("D.", "A B.")


def test_golden_hhem_prompt():
    """HHEM-2.1-Open's config prompt, formatted with text1=premise, text2=hypothesis."""
    ex = UniEvalData(target="The claim.", source="The doc.")
    assert render_prompt(get_aspect("fact", "hhem"), ex, "The claim.") == (
        "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: The doc.\n\nHypothesis: The claim.")


SEAHORSE_ASPECTS = ("comprehensible", "repetition", "grammar", "attribution", "main_ideas", "conciseness")


@pytest.mark.parametrize("aspect", SEAHORSE_ASPECTS)
def test_golden_seahorse_prompts(aspect):
    """SEAHORSE's model cards: "premise: ARTICLE hypothesis: SUMMARY", the same for all six."""
    ex = UniEvalData(target="市议会通过了预算。", source="Dewan kota  menyetujui\nanggaran. ")
    assert render_prompt(get_aspect("summarization", aspect), ex, ex.target) == \
        "premise: Dewan kota  menyetujui\nanggaran.  hypothesis: 市议会通过了预算。"


def test_every_builtin_aspect_has_a_golden_prompt():
    covered = {("summarization", a) for a in GOLDEN} | {("summarization", a) for a in SEAHORSE_ASPECTS} | \
        set(ALL_GOLDEN) | {
        ("data2text", "naturalness"), ("data2text", "informativeness"), ("fact", "consistency"),
        ("fact", "support"), ("fact", "sentence_support"), ("fact", "sentence_support_min"), ("fact", "nli_support"),
        ("fact", "hhem"),
        # their prompts are checked elsewhere: FactCG's by its golden ids (test_golden_ids.py, test_factcg.py), the
        # chat-template evaluators' against apply_chat_template (test_causal_lm.py)
        ("fact", "factcg"), ("fact", "groundedness"),
        # fact/claims asks its checker aspect's prompts (test_claims_aspect.py)
        ("fact", "claims"),
        *(("summarization", f"geval_{m}") for m in ("coherence", "consistency", "relevance", "fluency")),
        # the judges that reason: against their sources' templates (test_judges.py)
        *(("summarization", f"{j}_{m}") for j in ("themis", "prometheus")
          for m in ("coherence", "consistency", "relevance", "fluency"))}
    assert covered == {(t.name, a) for t in TASKS.values() for a in t.aspects}


def test_registry_fields_and_granularity():
    aspects = dict(get_task("summarization").aspects)  # a copy: the SEAHORSE ones are popped below
    geval = [f"geval_{m}" for m in ("coherence", "consistency", "relevance", "fluency")]
    themis = [f"themis_{m}" for m in ("coherence", "consistency", "fluency", "relevance")]
    prometheus = [f"prometheus_{m}" for m in ("coherence", "consistency", "fluency", "relevance")]
    assert list(aspects) == ["coherence", "consistency", "fluency", "relevance", *SEAHORSE_ASPECTS, *geval, *themis,
                             *prometheus]
    assert {aspects.pop(a).checkpoint for a in geval} == {"g-eval"}
    assert {aspects.pop(a).checkpoint for a in themis} == {"themis"}
    assert {aspects.pop(a).checkpoint for a in prometheus} == {"prometheus-7b-v2.0"}
    seahorse = [aspects.pop(a) for a in SEAHORSE_ASPECTS]
    assert [a.checkpoint for a in seahorse] == [f"seahorse-large-q{n}" for n in range(1, 7)]
    assert {(a.required_fields, a.granularity, a.chunk_field) for a in seahorse} == {(("target", "source"), "output",
                                                                                     "source")}
    assert [a.window_reduction for a in seahorse] == ["mean", "mean", "mean", "max", "mean", "mean"]
    assert aspects["coherence"].required_fields == ("target", "source")
    assert aspects["consistency"].required_fields == ("target", "source")
    assert aspects["fluency"].required_fields == ("target",)
    assert aspects["relevance"].required_fields == ("target", "references")
    assert [a.granularity for a in aspects.values()] == ["output", "sentence", "sentence", "output"]
    assert {a.checkpoint for a in aspects.values()} == {"unieval-sum"}


def test_other_tasks_checkpoints_and_reductions():
    assert get_aspect("dialogue", "engagingness").reduction == "sum"
    assert get_aspect("dialogue", "engagingness").value_range == "[0, n_sentences]"
    assert get_aspect("dialogue", "engagingness").required_fields == ("target", "source", "context")
    assert {a.checkpoint for a in get_task("dialogue").aspects.values()} == {"unieval-dialog"}
    assert get_aspect("fact", "consistency").checkpoint == "unieval-fact"
    assert get_aspect("fact", "consistency").granularity == "sentence"
    assert {a.checkpoint for a in get_task("data2text").aspects.values()} == {"unieval-sum"}


def test_unknown_names_list_valid_ones():
    with pytest.raises(UnknownTaskError, match="valid tasks: summarization, dialogue, data2text, fact"):
        get_task("translation")
    with pytest.raises(UnknownTaskError, match="valid aspects: coherence, consistency, fluency, relevance"):
        get_aspect("summarization", "novelty")


def test_config_accepts_both_names_and_validates():
    assert UniEvalConfig(task="summarization", evaluation_aspect="fluency").aspect == "fluency"
    assert UniEvalConfig(task="summarization", aspect="relevance").evaluation_aspect == "relevance"
    with pytest.raises(ValidationError, match="valid aspects"):
        UniEvalConfig(task="summarization", aspect="novelty")
