"""The autoeval format's question texts: the Boolean-QA queries of adherence rubrics and of
relatedness, and the completeness entries' questions, derived from section instructions and
topics (the autoeval evaluator's wording where it documents one)."""

from __future__ import annotations

import re

from .records import SectionDefinition

__all__ = ["ADHERENCE_QUESTION", "CATEGORICAL_RUBRIC", "IMPERATIVE_VERBS", "completeness_question",
           "free_text_rubric", "relatedness_question", "relatedness_topic"]

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
