"""Letterless pieces (issue 37, item 3): a Hebrew text with U+200F (RLM) after each full stop, or
Arabic wrapped in U+202B ... U+202C, gave a 4th "sentence" holding only the mark, scored as an NLI
hypothesis and averaged in. For every evaluator but UniEval's own aspects, format characters
(Unicode Cf) attach to the neighbouring sentence and pieces without a letter or digit merge into
their neighbour (``MergeLetterless``); UniEval's aspects keep NLTK's / the language splitter's pieces
(parity, docs/languages.md "Sentences")."""

from __future__ import annotations

import warnings

import pytest

from unieval_local import Scorer
from unieval_local.text.sentences import splitter_for_language

from conftest import FakeRunner, fake_factory

HEBREW = "השמש זורחת היום.\u200f הילדים הלכו לבית הספר.\u200f המורה חיכתה להם.\u200f"
ARABIC = "\u202bالشمس مشرقة اليوم. ذهب الأطفال إلى المدرسة. كانت المعلمة تنتظرهم.\u202c"
SOURCE = {"he": "השמש זורחת היום והילדים הלכו לבית הספר.", "ar": "الشمس مشرقة اليوم وذهب الأطفال إلى المدرسة."}
#: the evaluator of each aspect of task fact, but UniEval's
FACT_ASPECTS = {"nli_support": "mdeberta-nli", "sentence_support": "minicheck-flan-t5-large",
                "support": "minicheck-flan-t5-large", "hhem": "hhem-2.1-open", "factcg": "factcg-deberta-large",
                "groundedness": "granite-guardian-3.3-8b"}


def scorer(fake_ckpt, **kw) -> Scorer:
    return Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(default=0.7)), **kw)


def quietly(fn, *args, **kw):
    with warnings.catch_warnings():  # the English-only evaluators warn about Hebrew and Arabic
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.mark.parametrize("aspect", sorted(FACT_ASPECTS))
@pytest.mark.parametrize("language,text", [("he", HEBREW), ("ar", ARABIC)])
def test_bidi_marks_attach_to_their_sentence_for_every_other_evaluator(fake_ckpt, aspect, language, text):
    s = scorer(fake_ckpt)
    split = s.engine.splitter_for(language, FACT_ASPECTS[aspect])
    sentences = split(text)
    assert len(sentences) == 3 and all(any(c.isalpha() for c in x) for x in sentences)
    assert "".join(sentences).replace(" ", "") == text.replace(" ", "")  # every mark kept, in a sentence
    if language == "he":  # an RLM after a full stop belongs to the sentence it ends
        assert all(x.endswith(".\u200f") for x in sentences)
    else:  # the embedding opens the first sentence, the pop closes the last
        assert sentences[0].startswith("\u202b") and sentences[-1].endswith("\u202c")
    assert split.name.endswith("+merge-letterless")


@pytest.mark.parametrize("aspect", ["nli_support", "sentence_support"])
@pytest.mark.parametrize("language,text", [("he", HEBREW), ("ar", ARABIC)])
def test_three_claims_are_scored_not_four(fake_ckpt, aspect, language, text):
    s = scorer(fake_ckpt)
    r = quietly(s.score, [{"target": text, "source": SOURCE[language], "language": language}], task="fact",
                aspect=aspect, evidence=True)
    assert len(r.examples[0].evidence.sentences) == 3
    assert "+merge-letterless" in str(r.signature)


@pytest.mark.parametrize("target,want", [
    ("It rained all day. ... The river rose.", ["It rained all day. ...", "The river rose."]),
    ("The river rose. !!", ["The river rose. !!"]),
    ("He waited. . . . Then he left.", ["He waited. . . .", "Then he left."]),
])
def test_a_piece_of_punctuation_alone_merges_into_its_neighbour(fake_ckpt, target, want):
    s = scorer(fake_ckpt)
    assert s.engine.splitter_for("en", "mdeberta-nli")(target) == want
    r = s.score([{"target": target, "source": "It rained and the river rose.", "language": "en"}], task="fact",
                aspect="nli_support", evidence=True)
    assert [x.text for x in r.examples[0].evidence.sentences] == want


def test_a_dash_alone_merges_whatever_splitter_made_it(fake_ckpt):
    lines = lambda text: [x for x in text.split("\n") if x.strip()]  # noqa: E731
    lines.name = "lines"
    s = scorer(fake_ckpt, splitter=lines)
    text = "It rained all day.\n\u2014\nThe river rose."
    assert s.engine.splitter_for("en", "mdeberta-nli")(text) == ["It rained all day.\n\u2014", "The river rose."]
    assert s.engine.splitter_for("en", "unieval-sum")(text) == ["It rained all day.", "\u2014", "The river rose."]


def test_a_digit_is_kept_as_a_sentence_a_bare_mark_is_not():
    from unieval_local.text.sentences import MergeLetterless

    split = MergeLetterless(splitter_for_language("en"))
    assert split("Prices rose. 2024. \u200b") == ["Prices rose.", "2024. \u200b"]


@pytest.mark.parametrize("language,text", [("he", HEBREW), ("ar", ARABIC)])
def test_unieval_aspects_keep_the_splitters_pieces_the_others_do_not(fake_ckpt, language, text):
    """On the same record UniEval's summarization/consistency keeps the language splitter's (NLTK's
    for English) pieces, the mark alone included (parity, documented in docs/languages.md), while
    fact/nli_support scores three sentences."""
    pieces = splitter_for_language(language)(text)
    assert len(pieces) == 4 and not any(c.isalnum() for c in pieces[-1])
    s = scorer(fake_ckpt)
    record = [{"target": text, "source": SOURCE[language], "language": language}]
    r = quietly(s.score, record, task="summarization", aspect="consistency", evidence=True)
    assert [x.text for x in r.examples[0].evidence.sentences] == pieces
    assert "merge-letterless" not in str(r.signature)
    assert s.engine.splitter_for(language, "unieval-sum")(text) == pieces
    nli = quietly(s.score, record, task="fact", aspect="nli_support", evidence=True)
    assert len(nli.examples[0].evidence.sentences) == 3
    english = "It rained all day. ... The river rose."
    r = s.score([{"target": english, "source": "It rained.", "language": "en"}], task="summarization",
                aspect="consistency", evidence=True)
    assert [x.text for x in r.examples[0].evidence.sentences] == ["It rained all day.", "...", "The river rose."]
