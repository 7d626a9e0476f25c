"""Chinese and Indonesian (issue 23): language detection, text by language (sentences, section
headings, speaker labels, key points without spaces), evaluators by language (warnings once per
run, --strict-language, the NLI checker chosen for consistency-like checks), explanation
templates, on hand-written zh and id fixtures through every report format and the compat API."""

from __future__ import annotations

import asyncio
import time
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from make_test_checkpoint import build_nli_checkpoint

from unieval_local import Scorer
from unieval_local.engine import Engine
from unieval_local.errors import InvalidExampleError
from unieval_local.reports import make_report
from unieval_local.reports.sections import categorical_value, locate_sections
from unieval_local.text.keypoints import content_words, extract_key_points, is_informative, source_sentence_spans
from unieval_local.text.language import detect_language, record_language
from unieval_local.text.prompts import PAIR_SEPARATOR, chunk_word_count
from unieval_local.text.sentences import CJKSplitter, IndonesianSplitter, splitter_for_language

# ----------------------------------------------------------------------------- hand-written fixtures
#: A Chinese customer call and its sectioned summary, as the autoeval users write them.
ZH_TRANSCRIPT = (
    "客服：您好，请问有什么可以帮您？\n"
    "客户：我上周订的包裹到现在还没到，已经晚了五天。\n"
    "客服：非常抱歉，我查一下您的订单。\n"
    "客户：好的，谢谢。\n"
    "客服：您的包裹在物流中心滞留了。我们会在三天内给您退款。\n"
    "客户：那退款确认会发到我的邮箱吗？\n"
    "客服：会的，我们周五前会把退款确认邮件发给您。"
)
ZH_SUMMARY = (
    "情绪：消极\n"
    "【原因】\n"
    "客户的包裹延迟了五天。客服承诺三天内退款！\n"
    "下一步：客服将在周五前发送退款确认邮件。"
)
ZH_SECTIONS = [
    {"name": "情绪", "type": "categorical", "allowed_values": ["积极", "中性", "消极"],
     "instruction": "客户的情绪"},
    {"name": "原因", "instruction": "说明客户来电的原因"},
    {"name": "下一步", "instruction": "列出约定的下一步行动（如有）"},
]
ZH_RECORD = {"id": "zh-call", "transcript": ZH_TRANSCRIPT, "summary": ZH_SUMMARY, "section_definitions": ZH_SECTIONS}

#: An Indonesian meeting and its summary, as the summary-rating evaluator's example is.
ID_MEETING = (
    "Andi: Selamat pagi semua. Hari ini kita membahas anggaran pemasaran tahun depan.\n"
    "Budi: Saya usul anggaran pemasaran dinaikkan sepuluh persen karena penjualan online tumbuh.\n"
    "Citra: Setuju, tapi sebagian dana harus dipakai untuk iklan media sosial.\n"
    "Andi: Baik. Jadi kita sepakat menaikkan anggaran sepuluh persen.\n"
    "Budi: Saya akan mengirim laporan rinci kepada Bpk. Andi pada hari Jumat.\n"
    "Citra: Oke, terima kasih."
)
ID_SUMMARY = ("Rapat membahas anggaran pemasaran tahun depan. Tim sepakat menaikkan anggaran sepuluh persen "
              "untuk iklan media sosial. Budi akan mengirim laporan rinci kepada Bpk. Andi pada hari Jumat.")
ID_RECORD = {"id": "id-meeting", "input": ID_MEETING, "summary": ID_SUMMARY}


@pytest.fixture(scope="module")
def nli_ckpt(tmp_path_factory, shared_data):
    return build_nli_checkpoint(tmp_path_factory.mktemp("nli-lang") / "mdeberta-nli", data_dir=shared_data,
                                evaluator="mdeberta-nli", init_range=0.1)


@pytest.fixture(scope="module")
def models(tiny_ckpt, nli_ckpt):
    return {"unieval-sum": str(tiny_ckpt), "mdeberta-nli": str(nli_ckpt)}


# ----------------------------------------------------------------------------- language detection
@pytest.mark.parametrize("text, want", [
    ("客户：我的订单还没到。", "zh"),
    ("情绪：积极", "zh"),
    ("用户说 the app crashes on iOS 17", "zh"),  # a Chinese sentence with an English phrase
    ("好的，谢谢。", "zh"),
    ("Agen: Baik, saya akan cek pesanan Anda.", "id"),
    ("Terima kasih banyak.", "id"),
    ("Pesanan saya belum sampai, tolong dicek ya.", "id"),
    ("Meeting notes: budget approved, Andi akan kirim laporan besok.", "id"),
    ("The meeting discussed the budget for next year.", "en"),
    ("Customer: my order is late", "en"),
    ("OK", "und"),  # too short to tell
    ("12:30", "und"),
])
def test_language_detection_on_short_mixed_texts(text, want):
    assert detect_language(text) == want


@pytest.mark.parametrize("target, source", [
    ("Mangia tutti ristorante is in the moderate price range .",
     "inform(name='mangia tutti ristorante',price_range=moderate)"),
    ("Hotel fusion accepts credit cards .", "inform(name='hotel fusion',accepts_credit_cards='yes')"),
    ("Canto do brasil restaurant serves brazilian food .", "inform(name='canto do brasil restaurant',food=brazilian)"),
])
def test_english_records_with_foreign_names_stay_english(target, source):
    # SF-RES/SF-HOT records that equal priors read as Italian, Catalan, Portuguese
    from unieval_local.text.language import DETECTOR, ENGLISH_PRIOR

    probs = DETECTOR.probabilities(target + "\n" + source)
    best = max(probs, key=probs.get)
    assert best != "en" and probs["en"] < probs[best] <= probs["en"] * ENGLISH_PRIOR
    assert record_language({"target": target, "source": source}) == "en"


def test_english_evaluation_data_is_read_as_english(shared_data):
    # SF-RES and SF-HOT: short English lines about San Francisco places with Italian, Spanish and
    # Catalan names, the hardest English records in the shared data (measured: 36 of 2,056 read
    # as another language with equal priors, 6 with English's prior)
    records = []
    for name in ("sfres", "sfhot"):
        rows = json.loads((shared_data / "unieval-reproduce" / "data" / "data2text" / f"{name}.json").read_text())
        records += [{"target": r["system_output"], "source": r["source"]} for r in rows]
    langs = [record_language(r) for r in records]
    assert len(records) == 2056
    assert sum(lang not in ("en", "und") for lang in langs) <= 6


def test_record_language_precedence_and_bad_codes():
    rec = {"summary": "Rapat membahas anggaran.", "input": "Andi: Kita perlu menaikkan anggaran pemasaran."}
    assert record_language(rec) == "id"
    assert record_language(rec, default="en") == "en"  # the run's language=
    assert record_language({**rec, "language": "ZH"}, default="en") == "zh"  # the record's own wins
    with pytest.raises(ValueError, match="language code"):
        record_language({**rec, "language": "Chinese"})
    with pytest.raises(ValueError, match="language code"):
        Scorer(language="chinese")


# ----------------------------------------------------------------------------- text by language
def test_chinese_and_indonesian_sentence_splitting():
    zh = splitter_for_language("zh")
    assert isinstance(zh, CJKSplitter)
    assert zh("客户投诉订单延迟。客服承诺退款！客户满意吗？还有……其他问题；谢谢") == [
        "客户投诉订单延迟。", "客服承诺退款！", "客户满意吗？", "还有……", "其他问题；", "谢谢"]
    assert zh("他说：“好。”然后走了。") == ["他说：“好。”", "然后走了。"]  # the closing quote stays
    assert zh("用户说 the app crashes. 然后重启了。") == ["用户说 the app crashes.", "然后重启了。"]
    text = "Plain English. Two sentences."
    assert zh(text) == splitter_for_language("en")(text) == ["Plain English.", "Two sentences."]
    ind = splitter_for_language("id")
    assert isinstance(ind, IndonesianSplitter)
    assert ind("Laporan dikirim ke Bpk. Andi dan Drs. Budi. Rapat selesai.") == [
        "Laporan dikirim ke Bpk. Andi dan Drs. Budi.", "Rapat selesai."]
    assert splitter_for_language("en")("Laporan dikirim ke Bpk. Andi dan Drs. Budi. Rapat selesai.") == [
        "Laporan dikirim ke Bpk.", "Andi dan Drs.", "Budi.", "Rapat selesai."]  # what English Punkt does
    assert zh.name.startswith("cjk-terminators-1+nltk-punkt-english@nltk-")
    assert ind.name.startswith("nltk-punkt-english+id-abbrev-1@nltk-")


def test_sections_with_full_width_colons_and_brackets():
    spans = locate_sections(ZH_SUMMARY, ["情绪", "原因", "下一步"])
    assert set(spans) == {"情绪", "原因", "下一步"}
    assert categorical_value(ZH_SUMMARY, "情绪", None, spans) == "消极"
    assert ZH_SUMMARY[spans["原因"].start:spans["原因"].end].strip() == "客户的包裹延迟了五天。客服承诺三天内退款！"
    text = "[Reason] The parcel is late.\n「下一步」：退款。\n**Sentiment：** positive"
    spans = locate_sections(text, ["reason", "下一步", "sentiment"])
    assert [text[s.start:s.end] for s in spans.values()] == ["The parcel is late.", "退款。", "positive"]


def test_speaker_labels_and_key_points_without_spaces():
    spans = source_sentence_spans(ZH_TRANSCRIPT, splitter_for_language("zh"), strip_speakers=True)
    sentences = [ZH_TRANSCRIPT[a:b] for a, b in spans]
    assert "我上周订的包裹到现在还没到，已经晚了五天。" in sentences
    assert not any(s.startswith(("客服", "客户")) for s in sentences)
    assert "您的包裹在物流中心滞留了。" in sentences and "我们会在三天内给您退款。" in sentences  # split at 。
    ind = source_sentence_spans("Agen: Baik, saya cek dulu.\nPelanggan: Paket saya belum sampai.",
                                splitter_for_language("id"), strip_speakers=True)
    assert [s for s in ind] == [(6, 26), (38, 62)]
    # Chinese content as character bigrams, fillers out; informative by content characters
    assert content_words("客户的订单延迟了") == ["客户", "订单", "单延", "延迟"]
    assert content_words("Pelanggan mengeluh paket belum sampai") == ["pelanggan", "mengeluh", "paket", "sampai"]
    assert is_informative("我上周订的包裹到现在还没到。") and not is_informative("好的，谢谢。")
    assert not is_informative("Oke, terima kasih.") and is_informative("Paket dikirim tanggal 5.")
    points = extract_key_points(ZH_TRANSCRIPT, 3, splitter=splitter_for_language("zh"))
    assert len(points) == 3 and all(not p.text.startswith(("客服", "客户")) for p in points)
    assert all(ZH_TRANSCRIPT[p.start:p.end] == p.text for p in points)
    assert chunk_word_count("客户投诉 order late") == 6 and chunk_word_count("a b c") == 3


# ----------------------------------------------------------------------------- scoring by language
def test_score_records_language_and_splitter_in_results_and_signature(fake_scorer):
    scorer, runner = fake_scorer(default=0.8)
    data = [{"target": "客户投诉订单延迟。客服承诺三天内退款。"},
            {"target": "The parcel is late. A refund follows."},
            {"target": "Paket terlambat. Bpk. Andi akan mengembalikan uang."}]
    with pytest.warns(UserWarning) as caught:
        got = scorer.evaluate(data, task="summarization", aspects=["fluency"])
    assert [e.language for e in got.examples] == ["zh", "en", "id"]
    assert "language" not in got.per_aspect["fluency"].examples[0].model_dump(exclude_none=True)  # hosted schema
    fluency = [p for p in runner.prompts if p.startswith("question: Is this a fluent paragraph?")]
    assert len(fluency) == 6  # two sentences each: 。 splits the Chinese one, Bpk. does not end the Indonesian one
    assert any("paragraph: 客服承诺三天内退款。" in p for p in fluency)
    assert any(p.endswith("paragraph: Bpk. Andi akan mengembalikan uang.") for p in fluency)
    assert not any(p.endswith("paragraph: Andi akan mengembalikan uang.") for p in fluency)
    sig = got.per_aspect["fluency"].signature
    assert sig.language in ("en,id,zh", "id,en,zh", "zh,en,id") and set(sig.language.split(",")) == {"en", "id", "zh"}
    assert "zh=cjk-terminators-1+" in sig.splitter and "id=nltk-punkt-english+id-abbrev-1@" in sig.splitter
    assert sig.language_detector.startswith("py3langid-")
    assert f"|lang:{sig.language}|detect:py3langid-" in str(sig)
    # one warning per (aspect, language), naming both; none for English
    texts = [str(w.message) for w in caught if "trained on" in str(w.message)]
    assert len(texts) == 2 and any("Chinese (zh)" in t for t in texts) and any("Indonesian (id)" in t for t in texts)
    assert all("summarization/fluency" in t and "unieval-sum" in t for t in texts)
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        scorer.evaluate(data, task="summarization", aspects=["fluency"])
    assert not [w for w in again if "trained on" in str(w.message)]  # once per run (per engine)
    forced = fake_scorer(default=0.8, language="en")[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sig = forced.score(data[:1], task="summarization", aspect="fluency").signature
    assert not [w for w in caught if "trained on" in str(w.message)]  # a forced English run: no language warning
    assert sig.language == "en" and sig.language_detector is None and "|lang:en|split:" in str(sig)


def test_strict_language_refuses_with_the_example_and_field(fake_scorer):
    scorer, runner = fake_scorer(default=0.8, strict_language=True)
    data = [{"target": "The parcel is late.", "source": "A parcel."},
            {"target": "客户投诉订单延迟。", "source": "客户：我的订单还没到。"}]
    with pytest.raises(InvalidExampleError) as err:
        scorer.score(data, task="summarization", aspect="coherence")
    (problem,) = err.value.problems
    assert (problem.index, problem.field, problem.aspect) == (1, "language", "coherence")
    assert "unieval-sum was trained on en, not Chinese (zh)" in problem.message
    assert runner.prompts == []  # nothing scored
    # the multilingual NLI evaluator takes the Chinese record
    got = scorer.score(data, task="fact", aspect="nli_support")
    assert len(got.examples) == 2


def test_batch_cli_strict_language_makes_an_error_line_and_scores_the_rest(tmp_path, tiny_ckpt):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"target": "The parcel is late.", "source": "A parcel was sent."},
        {"target": "客户投诉订单延迟。", "source": "客户：我的订单还没到。"}]), encoding="utf-8")
    run = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())", "score", str(src),
           "--aspect", "coherence", "--no-progress", "--model", str(tiny_ckpt)]
    from unieval_local.cli import main  # --strict-language in this process, the default in a subprocess

    out = tmp_path / "strict.jsonl"
    assert main(run[3:] + ["--strict-language", "-o", str(out)]) == 1  # some records failed
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert "scores" in lines[0] and lines[0]["language"] == "en"
    assert lines[1]["error"]["type"] == "InvalidExample" and "language" in lines[1]["error"]["message"]
    loose = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert loose.returncode == 0, loose.stderr
    assert [json.loads(x)["language"] for x in loose.stdout.splitlines()] == ["en", "zh"]
    assert loose.stderr.count("trained on en") == 1 and "Chinese (zh)" in loose.stderr
    # the printed signature has the languages the records were read in, and each one's splitter
    (signature,) = [line for line in loose.stderr.splitlines() if line.startswith("signature: ")]
    assert "|lang:en,zh|" in signature and ";zh=cjk-terminators-1+" in signature and "split:en=nltk-punkt" in signature
    assert "non-Latin" not in loose.stderr  # the per-aspect warning replaced the old script count


def test_bcp47_tags_read_as_their_language_and_a_file_of_bad_codes_says_so(tmp_path, tiny_ckpt, capsys):
    from unieval_local.cli import main

    assert record_language({"target": "x", "language": "zh-CN"}) == "zh"
    assert record_language({"target": "x", "language": "id_ID"}) == "id"
    assert record_language({"target": "x", "language": "zh-Hant-TW"}) == "zh"
    with pytest.raises(ValueError, match="language code"):
        record_language({"target": "x", "language": "zh--"})
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps({"target": "A b.", "source": "A b c.", "language": "Chinese"}) + "\n")
    assert main(["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "1 of the 1 records are not valid records (first: record 0: field 'language': " in err and "'Chinese'" in err


def test_an_english_instruction_in_a_chinese_record_loses_its_verb():
    from unieval_local.reports.autoeval_questions import localized_topic
    from unieval_local.reports.summ import MisalignedDetail, misaligned_sentence

    assert localized_topic("Identify the reason for the call", "zh") == "the reason for the call"
    assert localized_topic("List any action items, if any", "id") == "action items"
    assert localized_topic("请列出客户提到的所有日期（如有）", "zh") == "客户提到的所有日期"
    assert localized_topic("Sebutkan semua tanggal yang disebut pelanggan, jika ada", "id") == "tanggal yang disebut pelanggan"
    text = misaligned_sentence(MisalignedDetail(claim="A.", score=0.25, best_source_window=None), 0.5, "P(entailment)")
    assert text == 'The claim "A." is not supported by the source (P(entailment) = 0.25 < 0.50).'


# ----------------------------------------------------------------------------- reports
def _routing_answer(prompt: str) -> float:
    """The fake model: NLI pairs (premise U+E000 hypothesis) answer 0.9, Boolean-QA queries 0.3."""
    return 0.9 if PAIR_SEPARATOR in prompt else 0.3


def test_zh_autoeval_report_sections_sentences_speakers_checker_and_texts(fake_scorer):
    scorer, runner = fake_scorer(answer=_routing_answer)
    with pytest.warns(UserWarning, match="trained on en"):  # the adherence rubric asks unieval-sum
        out = make_report([ZH_RECORD], "autoeval", engine=scorer.engine)
    (row,) = out.reports
    assert row.error is None and row.language == "zh" and row.consistency_aspect == "fact/nli_support"
    assert any("fact/nli_support" in n and "Chinese" in n for n in row.notes)
    rep = row.report
    points = [p.point for p in rep.accuracy.decomposition]
    assert points == ["客户的包裹延迟了五天。", "客服承诺三天内退款！", "客服将在周五前发送退款确认邮件。"]
    assert all(p.is_accurate for p in rep.accuracy.decomposition)  # NLI (0.9), not Boolean QA (0.3)
    assert rep.accuracy.decomposition[0].accuracy.startswith("有原文支持（P(entailment) = 0.90 >= 0.50）")
    rubrics = {r.question: r for r in rep.adherence.rubrics}
    cat = rubrics["摘要是否遵循指令，并且只给出允许的类别值之一？"]
    assert cat.is_addressed == "True" and cat.reasoning == "“情绪”部分为“消极”，属于允许的取值（积极, 中性, 消极）。"
    free = rubrics["摘要是否遵循指令“说明客户来电的原因”？"]
    assert free.is_addressed == "False" and free.reasoning.startswith("对“原因”部分的评分查询")
    questions = [c.question for c in rep.completeness]
    assert questions == ["摘要是否遵循“说明客户来电的原因”？", "摘要是否遵循“列出约定的下一步行动（如有）”？"]
    items = [i.transcript_content for c in rep.completeness for i in c.content_list]
    assert items and not any(t.startswith(("客服", "客户")) for t in items)
    assert "您的包裹在物流中心滞留了。" in items and "好的，谢谢。" not in items  # split at 。, fillers out
    # relatedness and support went to the NLI evaluator, in Chinese
    nli = [p for p in runner.prompts if PAIR_SEPARATOR in p]
    assert any(p.endswith(PAIR_SEPARATOR + "这句话是关于约定的下一步行动的。") for p in nli)
    assert not any("Is this sentence about" in p for p in runner.prompts)
    # the same record forced to English: English texts and the UniEval checker, as before
    en = make_report([ZH_RECORD], "autoeval", engine=fake_scorer(answer=_routing_answer, language="en")[0].engine)
    assert en.reports[0].language == "en" and en.reports[0].consistency_aspect == "summarization/consistency"
    assert en.reports[0].report.adherence.rubrics[0].question.startswith("Does the summary follow")


def test_zh_autoeval_on_generated_checkpoints_and_strict_language(models):
    engine = Engine(model=models, long_input="chunk")
    with pytest.warns(UserWarning):
        out = make_report([ZH_RECORD, {"id": "en", "transcript": "Agent: The parcel is late. We refund it.",
                                       "summary": "Reason: The parcel is late."}], "autoeval", engine=engine,
                          options={"details": True})
    zh, en = out.reports
    assert zh.language == "zh" and zh.consistency_aspect == "fact/nli_support" and en.language == "en"
    assert en.consistency_aspect == "summarization/consistency"
    assert set(out.settings.checkpoints) == {"unieval-sum", "mdeberta-nli"}
    assert len(zh.report.accuracy.decomposition) == 3
    values = [d.score for d in zh.report.details.accuracy]
    assert all(0 < v < 1 for v in values) and np.isfinite(values).all()
    strict = Engine(model=models, long_input="chunk", strict_language=True)
    out = make_report([ZH_RECORD], "autoeval", engine=strict)
    assert out.reports[0].error is not None and out.reports[0].error.field == "language"


def test_id_rating_report_in_indonesian_with_nli_consistency_marked_uncalibrated(fake_scorer):
    scorer, runner = fake_scorer(answer=_routing_answer)
    with pytest.warns(UserWarning, match="Indonesian"):
        out = make_report([ID_RECORD], "rating", engine=scorer.engine, options={"details": True})
    (row,) = out.reports
    assert row.language == "id" and row.consistency_aspect == "fact/nli_support"
    s = row.report.summary
    assert s.metrics["consistency"].explanation.startswith("Konsistensi: 3/3 (probabilitas 0.90).")
    assert s.metrics["coherence"].explanation.startswith("Koherensi: ")
    assert s.metrics["relevance"].explanation.startswith("Relevansi: ")
    assert "poin kunci" in s.metrics["relevance"].explanation
    assert s.global_explanation.startswith(("Buruk", "Belum lengkap", "Semua metrik"))
    d = row.report.details.metrics
    assert d["consistency"].method == "mdeberta:fact/nli_support" and d["consistency"].calibrated is False
    assert any("not calibrated" in n for n in row.notes)
    # the NLI claims are the summary's sentences, split with the Indonesian abbreviations
    hyps = {p.split(PAIR_SEPARATOR)[1] for p in runner.prompts if PAIR_SEPARATOR in p}
    assert "Budi akan mengirim laporan rinci kepada Bpk. Andi pada hari Jumat." in hyps


def test_compat_evaluator_rates_the_indonesian_example_like_the_report(fake_scorer):
    from unieval_local.compat import SummarizationEvaluator, SummaryData

    scorer, _ = fake_scorer(answer=_routing_answer)
    evaluator = SummarizationEvaluator(engine=scorer.engine)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = asyncio.run(evaluator.evaluate(SummaryData(input=ID_MEETING, summary=ID_SUMMARY)))
        report = make_report([ID_RECORD], "rating", engine=scorer.engine, warn=False).reports[0].report
    assert result["summary"]["consistency"]["explanation"] == report.summary.metrics["consistency"].explanation
    assert result["summary"]["consistency"]["explanation"].startswith("Konsistensi")
    assert result["summary"]["global_explanation"] == report.summary.global_explanation


def test_summ_report_zh_claims_and_key_points_go_to_nli(fake_scorer):
    scorer, runner = fake_scorer(answer=_routing_answer)
    with pytest.warns(UserWarning):
        out = make_report([{"target": ZH_SUMMARY.split("\n", 2)[2], "source": ZH_TRANSCRIPT}], "summ",
                          engine=scorer.engine)
    (row,) = out.reports
    assert row.language == "zh" and row.consistency_aspect == "fact/nli_support"
    assert row.report.score == 100.0  # every claim and key point entailed (0.9)
    assert not [p for p in runner.prompts if PAIR_SEPARATOR not in p]  # no UniEval query at all


def test_rating_maps_fluency_to_seahorse_grammar_and_marks_it_uncalibrated(fake_scorer):
    scorer, runner = fake_scorer(answer=lambda p: 0.9 if p.startswith("premise: ") else 0.3)
    rec = {"input": "The council met on Monday. It approved the park.", "summary": "The council approved a park."}
    out = make_report([rec], "rating", engine=scorer.engine, warn=False,
                      options={"metric_aspects": {"fluency": "summarization/grammar"}, "details": True})
    d = out.reports[0].report.details.metrics["fluency"]
    assert d.method == "seahorse:summarization/grammar" and d.probability == pytest.approx(0.9)
    assert d.calibrated is False
    assert any("fluency" in n and "summarization/grammar" in n for n in out.notes)
    with pytest.raises(ValueError, match="metric_aspects.fluency"):
        make_report([rec], "rating", engine=scorer.engine, options={"metric_aspects": {"fluency": "dialogue/nope"}})


def test_service_reads_languages_and_warns_once_in_its_log(models, tmp_path):
    from test_service import Server

    server = Server(f"unieval-sum={models['unieval-sum']}", tmp_path, "--model", f"mdeberta-nli={models['mdeberta-nli']}",
                    "--max-wait-ms", "0").wait_ready()
    try:
        data = [{"target": "客户投诉订单延迟。客服承诺退款。", "source": ZH_TRANSCRIPT}]
        for _ in range(2):
            r = server.post("/v1/score", {"task": "summarization", "aspects": ["consistency"], "data": data})
            assert r.status_code == 200, r.text
        got = r.json()
        assert got["examples"][0]["language"] == "zh"
        assert got["per_aspect"]["consistency"]["signature"]["language"] == "zh"
        r = server.post("/v1/autoeval", ZH_RECORD)
        assert r.status_code == 200, r.text
        assert r.json()["adherence"]["rubrics"][0]["question"] == "摘要是否遵循指令，并且只给出允许的类别值之一？"
        time.sleep(0.3)
        log = server.stderr()
        assert log.count("summarization/consistency: examples in Chinese (zh)") == 1  # once per run
        assert "the report's 'adherence' query" in log
    finally:
        assert server.stop() == 0, server.stderr()


def test_script_counts_equal_a_plain_loop_over_the_letters():
    import random

    from unieval_local.text.language import _script_counts

    def plain(text):
        letters = han = other = 0
        for c in text:
            if not c.isalpha():
                continue
            letters += 1
            if "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" or "\uf900" <= c <= "\ufaff" \
                    or 0x20000 <= ord(c) <= 0x3134F:
                han += 1
            elif "\u3040" <= c <= "\u30ff" or "\uac00" <= c <= "\ud7af" or "\u1100" <= c <= "\u11ff":
                other += 1
        return letters, han, other

    rng = random.Random(0)
    pool = [chr(c) for c in [*range(32, 0x2FF), *range(0x3040, 0x3100), *range(0x4E00, 0x4E40), *range(0xAC00, 0xAC20),
                             *range(0x1100, 0x1110), *range(0xF900, 0xF910), 0x20000, 0x3134A, 0x0660, 0x0966, 0x00B2,
                             0x2160, 0x30FB, 0x3005, 0x0E01, 0x0E31]]
    for _ in range(2000):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 120)))
        assert _script_counts(text) == plain(text), text


def test_a_batch_run_warns_once_about_a_language_without_the_first_records_count(tmp_path, tiny_ckpt):
    import json
    import warnings

    from unieval_local.batch import run_batch

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "target": f"Der Hund {i} schlief.", "language": "de"}) + "\n"
                           for i in range(4)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_batch(src, tmp_path / "o.jsonl", aspects=["fluency"], settings={"model": str(tiny_ckpt)}, progress=False)
    said = [str(w.message) for w in caught if "German (de)" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("summarization/fluency: examples in German (de), but its evaluator")
