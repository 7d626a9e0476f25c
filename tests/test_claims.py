"""The claim-list prompts and parser (:mod:`unieval_local.text.claims`) on hand-made texts: the
exact messages (FActScore's instruction adapted, the language named), the parser's table of
lists, preambles, spacing and non-lists, and the errors."""

from __future__ import annotations

import pytest

from unieval_local.text.claims import claims_messages, keypoints_messages, parse_claims


def test_claims_messages_are_factscores_instruction_with_the_format():
    assert claims_messages("  The cat sat. It was red.  ") == [{"role": "user", "content": (
        "Please breakdown the following summary into independent facts. Write each atomic fact on its own line, "
        "starting with \"- \", in English. Write nothing else.\n\nSummary: The cat sat. It was red.")}]
    assert "in Chinese. Write nothing else." in claims_messages("猫坐着。", language="zh")[0]["content"]


def test_keypoints_messages_name_n_and_the_language():
    assert keypoints_messages("A long article.", 3, language="id") == [{"role": "user", "content": (
        "Please list at most 3 key points of the following text: the most important independent facts a summary "
        "of it should contain. Write each key point on its own line, starting with \"- \", in Indonesian. "
        "Write nothing else.\n\nText: A long article.")}]


@pytest.mark.parametrize("text, claims", [
    ("- A cat sat.\n- It was red.", ["A cat sat.", "It was red."]),
    ("Here are the facts:\n\n- A cat sat.\n  - It was red.  \n", ["A cat sat.", "It was red."]),
    ("- A cat sat.\r\n- \n-   \n- It was red.", ["A cat sat.", "It was red."]),  # empty items skipped
    ("- A - B.\nnot a bullet\n-C", ["A - B."]),                                     # "-C" has no space
    ("- 猫坐着。", ["猫坐着。"]),
    ("A cat sat. It was red.", None), ("", None), ("-\n- \n-no", None), ("* A cat sat.", None),
])
def test_parse_claims(text, claims):
    assert parse_claims(text) == claims


@pytest.mark.parametrize("call, match", [
    (lambda: claims_messages(""), "summary must be a non-empty string"),
    (lambda: claims_messages(None), "summary must be a non-empty string"),
    (lambda: claims_messages("A.", language=""), "language must be"),
    (lambda: keypoints_messages("A.", 0), r"n \(the most key points\) must be a positive integer, got 0"),
    (lambda: keypoints_messages("A.", True), "must be a positive integer"),
    (lambda: keypoints_messages("  ", 2), "source must be"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
    with pytest.raises(TypeError, match="text must be a string"):
        parse_claims(None)


def test_a_generator_writes_in_the_records_language_english_where_it_is_unknown():
    from unieval_local.text.language import writing_language

    assert [writing_language(c) for c in (None, "und", "en", "zh", "id")] == ["en", "en", "en", "zh", "id"]
