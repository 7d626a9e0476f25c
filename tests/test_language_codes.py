"""Language codes (issue 29): one normalisation (unieval_local.settings.check_language, by
langcodes) for every entry point: the Python settings, the CLI's --language, a record's own
``language`` field; a Chinese variety (yue) recorded as itself and split as Chinese; an unknown
code refused with a did-you-mean everywhere; a language without a splitter warned once."""

from __future__ import annotations

import json
import warnings

import pytest

from unieval_local import Scorer
from unieval_local.settings import EngineSettings, check_language
from unieval_local.text.language import record_language

#: Three Chinese sentences, ended by 。！？ (no ASCII terminator: English Punkt sees one sentence).
ZH_SUMMARY = "客户的包裹延迟了五天。客服承诺三天内退款！客户满意吗？"
ZH_SENTENCES = ["客户的包裹延迟了五天。", "客服承诺三天内退款！", "客户满意吗？"]
SOURCE = "客户：我的包裹晚了五天。客服：我们会在三天内退款。"
CLAIM = "question: Is this claim consistent with the document?"


@pytest.mark.parametrize("given, want", [
    ("zh", "zh"), ("ZH", "zh"), ("zh-CN", "zh"), ("zh_CN", "zh"), ("zh_Hant", "zh"), ("Zh-Hans", "zh"),
    ("zh-Hant-TW", "zh"), (" zh-cn ", "zh"), ("zho", "zh"), ("chi", "zh"),
    ("cmn", "zh"), ("cmn-Hant-TW", "zh"),  # Mandarin: the dominant language of the macrolanguage zh
    ("yue", "yue"), ("zh-yue", "yue"), ("yue-Hant-HK", "yue"),  # Cantonese keeps its code
    ("en", "en"), ("EN_us", "en"), ("en-GB", "en"), ("en_UK", "en"),  # CLDR: UK is an alias of GB
    ("iw", "he"), ("in", "id"), ("id-ID", "id"), ("arb", "ar"), ("pes", "fa"), ("zsm", "ms"), ("und", "und"),
    ("hi-IN", "hi"), ("pt-BR", "pt"), ("sr-Latn", "sr"),
])
def test_spellings_of_a_language_give_its_one_code(given, want):
    assert check_language(given) == want
    assert EngineSettings(language=given).language == want
    assert record_language({"target": "x", "language": given}) == want


@pytest.mark.parametrize("given, hint", [
    ("chinese", "did you mean 'zh' (Chinese)?"), ("Chinese", "did you mean 'zh' (Chinese)?"),
    ("mandarin", "did you mean 'zh' (Chinese)?"), ("englsh", "did you mean 'en' (English)?"),
    ("deutsch", "did you mean 'de' (German)?"), ("en-EN", "did you mean 'en' (English)?"),
    ("zh-", "did you mean 'zh' (Chinese)?"), ("en--US", "did you mean 'en' (English)?"),
    ("xx", None), ("zzz", None), ("x-private", None), ("", None), ("12", None),
])
def test_unknown_or_malformed_codes_are_refused_naming_the_setting_with_a_did_you_mean(given, hint):
    with pytest.raises(ValueError, match="language must be a language code") as err:
        check_language(given)
    assert repr(given) in str(err.value)
    if hint:
        assert str(err.value).endswith(hint)
    else:
        assert "did you mean" not in str(err.value)
    for bad in (None, 3, ["zh"]):
        with pytest.raises(ValueError, match="the record's language must be a language code"):
            check_language(bad, "the record's language")


def _consistency_claims(runner) -> list[str]:
    return [p.split("claim: ", 1)[1].split(" </s>")[0] for p in runner.prompts if p.startswith(CLAIM)]


@pytest.mark.parametrize("spelling", ["zh-CN", "ZH", "zh_Hant", "cmn", "Zh-Hans"])
def test_scorer_language_spellings_read_as_chinese_and_split_into_three_claims(fake_scorer, spelling):
    scorer, runner = fake_scorer(default=0.7, language=spelling)
    assert scorer.settings.language == scorer.config.language == "zh"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unieval-sum is English-only: warned, and scored
        got = scorer.evaluate([{"target": ZH_SUMMARY, "source": SOURCE}], task="summarization",
                              aspects=["consistency"])
    assert sorted(_consistency_claims(runner)) == sorted(ZH_SENTENCES)  # three claims, not one
    assert got.examples[0].language == "zh"
    sig = got.per_aspect["consistency"].signature
    assert sig.language == "zh" and sig.splitter.startswith("cjk-terminators-1+") and "|lang:zh|" in str(sig)


def test_a_cantonese_record_is_recorded_as_yue_and_split_as_chinese(fake_scorer):
    scorer, runner = fake_scorer(default=0.7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = scorer.evaluate([{"target": ZH_SUMMARY, "source": SOURCE, "language": "zh-yue"}],
                              task="summarization", aspects=["consistency"])
    assert got.examples[0].language == "yue"
    assert sorted(_consistency_claims(runner)) == sorted(ZH_SENTENCES)
    sig = got.per_aspect["consistency"].signature
    assert sig.language == "yue" and sig.splitter.startswith("cjk-terminators-1+")
    assert not [w for w in caught if "no sentence splitter" in str(w.message)]  # yue has one: Chinese's


def test_a_language_without_a_splitter_is_warned_once_and_signed(fake_scorer):
    scorer, runner = fake_scorer(default=0.7)
    thai = {"target": "สมชายไปตลาด. เขาซื้อขนมปัง.", "source": "สมชายไปตลาดเมื่อวันจันทร์", "language": "th"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = scorer.evaluate([thai, thai], task="summarization", aspects=["consistency"])
        scorer.evaluate([thai], task="summarization", aspects=["consistency"])
    missing = [str(w.message) for w in caught if "no sentence splitter" in str(w.message)]
    assert len(missing) == 1, missing  # once per run (engine), not per example or call
    assert "Thai (th)" in missing[0] and "sentencex-generic@sentencex-" in missing[0]
    sig = got.per_aspect["consistency"].signature
    assert sig.language == "th" and sig.splitter.startswith("sentencex-generic@sentencex-")
    assert sorted(set(_consistency_claims(runner))) == ["สมชายไปตลาด.", "เขาซื้อขนมปัง."]  # its ASCII ends
    # English and the declared languages are never warned about
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scorer.evaluate([{"target": "राम बाज़ार गया। उसने रोटी खरीदी।", "source": "राम", "language": "hi"},
                         {"target": "A parcel. It was late.", "source": "A parcel was late."}],
                        task="summarization", aspects=["consistency"])
    assert not [w for w in caught if "no sentence splitter" in str(w.message)]


def test_an_unknown_code_is_refused_in_python_with_a_did_you_mean(fake_scorer):
    with pytest.raises(ValueError, match=r"language must be a language code .*did you mean 'zh' \(Chinese\)\?"):
        Scorer(language="chinese")
    with pytest.raises(ValueError, match=r"did you mean 'en' \(English\)\?"):
        EngineSettings().replace(language="english")
    scorer, runner = fake_scorer(default=0.7)
    from unieval_local.errors import InvalidExampleError

    with pytest.raises((InvalidExampleError, ValueError), match=r"did you mean 'zh' \(Chinese\)\?"):
        scorer.score([{"target": "a.", "source": "b.", "language": "chinese"}], aspect="coherence")
    assert runner.prompts == []


def test_an_unknown_code_is_refused_by_the_cli_and_in_a_record_field(tmp_path, tiny_ckpt, capsys):
    from unieval_local.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"target": "The parcel is late.", "source": "A parcel was sent."},
        {"target": "客户投诉订单延迟。", "source": "客户：我的订单还没到。", "language": "chinese"},
        {"target": "The refund follows.", "source": "A refund.", "language": "en_US"}]), encoding="utf-8")
    base = ["score", str(src), "--aspect", "coherence", "--no-progress", "--model", str(tiny_ckpt)]
    with pytest.raises(SystemExit) as refused:
        main(base + ["--language", "Chinese"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "--language" in err and "did you mean 'zh' (Chinese)?" in err
    out = tmp_path / "out.jsonl"
    assert main(base + ["-o", str(out)]) == 1  # one record failed, the others scored
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert "scores" in lines[0] and "scores" in lines[2] and lines[2]["language"] == "en"
    error = lines[1]["error"]
    assert "language" in json.dumps(error) and "did you mean 'zh' (Chinese)?" in error["message"]


@pytest.mark.parametrize("code", ["zh-CN", "ZH", "zh_Hant", "cmn"])
def test_the_autoeval_report_reads_its_language_option_like_every_entry_point(code):
    from unieval_local.reports.autoeval import AutoevalOptions

    assert AutoevalOptions(language=code).language == "zh"
    with pytest.raises(ValueError, match="did you mean 'zh'"):
        AutoevalOptions(language="chinese")
