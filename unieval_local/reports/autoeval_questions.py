"""The autoeval format's question texts: the Boolean-QA queries of adherence rubrics and of
relatedness, and the completeness entries' questions, derived from section instructions and
topics (the autoeval evaluator's wording where it documents one)."""

from __future__ import annotations

import re

from .records import SectionDefinition

__all__ = ["ADHERENCE_QUESTION", "AUTOEVAL_TEMPLATES", "CATEGORICAL_RUBRIC", "IMPERATIVE_VERBS", "autoeval_text",
           "completeness_question", "free_text_rubric", "localized_topic", "relatedness_question", "relatedness_topic"]

#: The Boolean-QA query of a free-text rubric (fields summary, instruction).
ADHERENCE_QUESTION = "Does this summary follow the instruction?"
#: The rubric question shown for a categorical section.
CATEGORICAL_RUBRIC = "Does the summary follow the instruction and return only one of the allowed categorical values?"

#: Leading imperative verbs stripped from an instruction to get its topic.
IMPERATIVE_VERBS = frozenset(
    "identify list extract summarize summarise note capture describe mention include record provide state give "
    "write document outline highlight report specify explain detail find determine indicate name enumerate "
    "collect gather track log flag cite quote recap show present".split())
_LEADING = re.compile(r"^(?:please\s+)?", re.I)
_DETERMINERS = re.compile(r"^(?:any\s+and\s+all|any|all(?:\s+of)?|each(?:\s+of)?|every)\s+(?=\S)", re.I)
_TRAILING = re.compile(r"[\s,;]*(?:\(?\s*if\s+(?:any|applicable|mentioned|present|available|relevant|so)\s*\)?)\s*$",
                       re.I)


def relatedness_topic(instruction: str) -> str:
    """The topic of a section instruction: leading "please" and imperative verbs
    (:data:`IMPERATIVE_VERBS`, chained with "and"/"or"/commas) dropped, then a leading
    "any"/"all"/"each"/"every", then a trailing "if any"/"if applicable"..., then end
    punctuation; the first letter lower-cased unless the word is an acronym or a name.

    ``"Identify any dates explicitly mentioned by the agent or the customer"`` ->
    ``"dates explicitly mentioned by the agent or the customer"``; ``"List and
    describe all action items, if any."`` -> ``"action items"``; a noun phrase stays
    as it is (``"Next steps agreed on the call"`` -> ``"next steps agreed on the call"``).
    """
    text = _LEADING.sub("", " ".join(instruction.split())).strip().rstrip(".!;:").strip()
    text = _TRAILING.sub("", text).strip().rstrip(".!;:,").strip()
    words = text.split(" ")
    k = 0
    while k < len(words):
        w = words[k].lower().strip(",")
        if w in IMPERATIVE_VERBS or (k > 0 and w in ("and", "or", "&") and k + 1 < len(words)
                                     and words[k + 1].lower().strip(",") in IMPERATIVE_VERBS):
            k += 1
            continue
        break
    if 0 < k < len(words):
        text = " ".join(words[k:])
    text = _DETERMINERS.sub("", text)
    first = text.split(" ")[0] if text else ""
    if first and first[1:] == first[1:].lower() and first != "I":
        text = text[0].lower() + text[1:]
    return text


def relatedness_question(instruction_or_topic: str, *, topic: bool = False) -> str:
    """The Boolean-QA relatedness query of a section, asked of each transcript sentence.

    A question (ends with ``?``) becomes
    ``Does this sentence answer the question: <question>``; anything else ``Is this
    sentence about <topic>?`` with the topic from :func:`relatedness_topic` (used as
    given when ``topic`` is True: a section's explicit ``topic`` or a section question).

    >>> relatedness_question("Identify any dates explicitly mentioned by the agent or the customer")
    'Is this sentence about dates explicitly mentioned by the agent or the customer?'
    >>> relatedness_question("the dates mentioned", topic=True)
    'Is this sentence about the dates mentioned?'
    """
    text = " ".join(instruction_or_topic.split()).strip()
    if text.endswith("?") and not topic:
        q = text.rstrip("?").strip()
        return f"Does this sentence answer the question: {q[0].lower() + q[1:] if q[1:2].islower() else q}?"
    subject = text.rstrip("?.!").strip() if topic else relatedness_topic(text)
    return f"Is this sentence about {subject}?"


def completeness_question(section: SectionDefinition | None, topic: str | None = None) -> str:
    """The completeness entry's ``question``: ``Does the summary follow '<instruction>'?``
    for a section with an instruction, else ``Does the summary cover <topic>?``."""
    if section is not None and section.instruction:
        return f"Does the summary follow '{section.instruction.strip()}'?"
    subject = (topic or (section.topic if section else "") or "").strip().rstrip("?.!")
    return f"Does the summary cover {subject}?"


def free_text_rubric(instruction: str) -> str:
    """The adherence rubric ``question`` of a free-text instruction."""
    return f"Does the summary follow the instruction '{instruction.strip()}'?"


#: The autoeval report's texts per language (``str.format`` fields in braces): rubric questions,
#: completeness questions, accuracy and rubric reasons, and the NLI relatedness hypothesis
#: (``related``, for records whose checks go to the multilingual NLI evaluator). English is the
#: wording above; a record is written in its language when these exist for it (en, zh, id).
AUTOEVAL_TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "rubric_free_text": "Does the summary follow the instruction '{instruction}'?",
        "rubric_categorical": CATEGORICAL_RUBRIC,
        "completeness_instruction": "Does the summary follow '{instruction}'?",
        "completeness_topic": "Does the summary cover {topic}?",
        "supported": "Supported by the source ({p} = {value:.2f} >= {threshold:.2f}).",
        "not_supported": "Not supported by the source ({p} = {value:.2f} < {threshold:.2f}).",
        "best_passage": " Best supporting passage: \"{text}\"",
        "closest_passage": " Closest passage: \"{text}\"",
        "rubric_reason": "Rubric query \"{query}\" on {where}: P(Yes) = {value:.2f} {op} {threshold:.2f}.",
        "where_section": "the '{section}' section", "where_summary": "the whole summary",
        "no_section": "The summary has no '{section}' section.",
        "allowed": "The '{section}' section is '{value}', one of the allowed values ({allowed}).",
        "not_allowed": "The '{section}' section is '{value}', not one of the allowed values ({allowed}).",
        "related": "This sentence is about {topic}.",
    },
    "zh": {
        "rubric_free_text": "摘要是否遵循指令“{instruction}”？",
        "rubric_categorical": "摘要是否遵循指令，并且只给出允许的类别值之一？",
        "completeness_instruction": "摘要是否遵循“{instruction}”？",
        "completeness_topic": "摘要是否涵盖{topic}？",
        "supported": "有原文支持（{p} = {value:.2f} >= {threshold:.2f}）。",
        "not_supported": "没有原文支持（{p} = {value:.2f} < {threshold:.2f}）。",
        "best_passage": "最能支持的段落：“{text}”",
        "closest_passage": "最接近的段落：“{text}”",
        "rubric_reason": "对{where}的评分查询“{query}”：P(Yes) = {value:.2f} {op} {threshold:.2f}。",
        "where_section": "“{section}”部分", "where_summary": "整篇摘要",
        "no_section": "摘要中没有“{section}”部分。",
        "allowed": "“{section}”部分为“{value}”，属于允许的取值（{allowed}）。",
        "not_allowed": "“{section}”部分为“{value}”，不属于允许的取值（{allowed}）。",
        "related": "这句话是关于{topic}的。",
    },
    "id": {
        "rubric_free_text": "Apakah ringkasan mengikuti instruksi '{instruction}'?",
        "rubric_categorical": "Apakah ringkasan mengikuti instruksi dan hanya memberikan salah satu nilai kategori yang "
                              "diizinkan?",
        "completeness_instruction": "Apakah ringkasan mengikuti '{instruction}'?",
        "completeness_topic": "Apakah ringkasan mencakup {topic}?",
        "supported": "Didukung oleh sumber ({p} = {value:.2f} >= {threshold:.2f}).",
        "not_supported": "Tidak didukung oleh sumber ({p} = {value:.2f} < {threshold:.2f}).",
        "best_passage": " Bagian sumber yang paling mendukung: \"{text}\"",
        "closest_passage": " Bagian sumber yang paling dekat: \"{text}\"",
        "rubric_reason": "Kueri rubrik \"{query}\" pada {where}: P(Yes) = {value:.2f} {op} {threshold:.2f}.",
        "where_section": "bagian '{section}'", "where_summary": "seluruh ringkasan",
        "no_section": "Ringkasan tidak memiliki bagian '{section}'.",
        "allowed": "Bagian '{section}' berisi '{value}', salah satu nilai yang diizinkan ({allowed}).",
        "not_allowed": "Bagian '{section}' berisi '{value}', bukan salah satu nilai yang diizinkan ({allowed}).",
        "related": "Kalimat ini tentang {topic}.",
    },
}

_ZH_LEADING = re.compile(r"^(?:请)?(?:列出|列举|识别|提取|总结|概括|记录|说明|描述|指出|写出|给出|注明|标注|找出|确定)+"
                         r"(?:所有|全部|任何|每个|每一个|一切)?(?:的)?")
_ZH_TRAILING = re.compile(r"[（(]?(?:如有|如果有|若有)[）)]?[。！.]*$")
_ID_LEADING = re.compile(r"^(?:tolong|mohon|harap)?\s*(?:sebutkan|identifikasi|catat|jelaskan|tuliskan|rangkum|ringkas|"
                         r"daftarkan|daftar|berikan|temukan|tentukan|uraikan|cantumkan)\s+(?:semua|seluruh|setiap|"
                         r"apa\s+pun)?\s*", re.I)
_ID_TRAILING = re.compile(r"[\s,;]*\(?\s*(?:jika|bila|kalau)\s+ada\s*\)?[.!]*$", re.I)


def localized_topic(instruction: str, language: str) -> str:
    """The topic of a section instruction in ``language``: Chinese (``请列出客户提到的所有日期（如有）``
    -> ``客户提到的所有日期`` less the leading verb: ``客户提到的所有日期``; a leading 所有/全部 dropped),
    Indonesian (``Sebutkan semua tanggal yang disebut pelanggan, jika ada`` -> ``tanggal yang
    disebut pelanggan``), else :func:`relatedness_topic` (English). The rules follow the
    instruction's own language: an English instruction in a Chinese or Indonesian record
    (``Identify the reason for the call``) loses its English verb (``the reason for the call``)."""
    text = " ".join(instruction.split()).strip()
    if language in ("zh", "id"):
        from ..text.language import detect_language

        own = detect_language(text)
        if own == "en" or (language == "zh" and own != "zh"):
            language = "en"
    if language == "zh":
        text = _ZH_TRAILING.sub("", text).rstrip("。！!.；;：:，, ")
        return _ZH_LEADING.sub("", text) or text
    if language == "id":
        text = _ID_TRAILING.sub("", text).strip().rstrip(".!;:,").strip()
        stripped = _ID_LEADING.sub("", text).strip()
        return stripped or text
    return relatedness_topic(text)


def autoeval_text(language: str, key: str, **values) -> str:
    """Template ``key`` of :data:`AUTOEVAL_TEMPLATES` in ``language`` (English when it has none),
    filled with ``values``."""
    table = AUTOEVAL_TEMPLATES.get(language, AUTOEVAL_TEMPLATES["en"])
    return table[key].format(**values)
