"""Judges that reason: a published judge prompt, a generated rationale, a forced rating prefix,
then the distribution over the rating tokens read at that position (issue 44, item 2).

A judge format builds one :class:`~unieval_local.text.chat.ChatQuery` per example with the
``judge`` readout: the judge's own prompt (its model card's), the rating prefix the judge writes
after its rationale (``stop``: generation stops there), the text appended after the rationale
(``forced``: the prefix as the judge's training data wrote it, ending where the rating digit
comes) and the scale K. :mod:`unieval_local.models.judging` generates the rationale, appends
``forced`` and reads the rating as G-Eval's readout does (Liu et al., 2023, Sec. 2.3: the
expected rating ``sum_k k p(k)`` over 1..K renormalised), and says per example whether it could
(``status``). Pure text: no model here.

Built in:

* :data:`THEMIS` (``themis``, Themis-8B, Hu et al., 2024, arXiv 2406.18365; Apache-2.0): the
  prompt of its repository's ``eval.py`` (https://github.com/PKU-ONELab/Themis/blob/main/eval.py,
  ``PROMPT``; model https://huggingface.co/PKU-ONELab/Themis) verbatim, sent as plain text (its
  ``eval.py`` gives vLLM the raw prompt: no chat template), filled with ``task`` "Summarization",
  ``source_des`` "Article", ``target_des`` "Summary" and the aspect's criterion ``"<Name>:
  <definition>"`` (the shape of its README's example, "Fluency: Measure the quality of individual
  sentences of the summary..."). The four criteria below follow SummEval's dimension definitions
  (Fabbri et al., 2021, Sec. 3.2) in this package's words: Themis's own SummEval criteria texts
  were not available to copy. Its answer: the analysis, then a line ``Rating: <1-5>`` (``eval.py``'s
  ``parse`` reads the last line after ``"Rating: "``): stop ``Rating:``, forced ``Rating: ``.
* :data:`PROMETHEUS` (``prometheus-7b-v2.0``, Prometheus 2, Kim et al., 2024, arXiv 2405.01535;
  Apache-2.0): absolute grading as its model card gives it
  (https://huggingface.co/prometheus-eval/prometheus-7b-v2.0, "Absolute Grading"): the system
  prompt ``ABS_SYSTEM_PROMPT`` and, as there is no reference answer for a summary, the no-reference
  template ``ABSOLUTE_PROMPT_WO_REF`` of its library
  (https://github.com/prometheus-eval/prometheus-eval,
  ``libs/prometheus-eval/prometheus_eval/prompts.py``) verbatim, through the checkpoint's chat
  template; the rubric in ``SCORE_RUBRIC_TEMPLATE``'s shape (``[criterion]`` then ``Score 1: ...``
  to ``Score 5: ...``), the four rubrics written for this package after SummEval's definitions; the
  instruction to evaluate is "Summarize the following article." and the article. Its answer:
  ``<feedback> [RESULT] <1-5>``: stop ``[RESULT]``, forced ``[RESULT] ``.

Both forced prefixes end with the space before the digit: Llama 3's pre-tokenizer and Mistral's
SentencePiece write a number's space as its own token, so the digit is the next token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .prompts import Capabilities, field_value

if TYPE_CHECKING:
    from ..registry.tasks import Aspect
    from ..schema import UniEvalData
    from .chat import ChatQuery
    from .sentences import SentenceSplitter

__all__ = ["JUDGE_STATUSES", "JudgeFormat", "PROMETHEUS", "PROMETHEUS_RUBRICS", "PROMETHEUS_SYSTEM", "THEMIS",
           "THEMIS_CRITERIA", "THEMIS_PROMPT", "PROMETHEUS_INSTRUCTION", "PROMETHEUS_PROMPT", "prometheus_rubric"]

#: Each example's parse status (:mod:`unieval_local.models.judging`): ``ok`` (the judge wrote its
#: rating prefix; the rating was read after the forced prefix), ``truncated`` (the rationale hit
#: ``max_new_tokens`` before the rating prefix), ``no_rating_prefix`` (the judge ended its answer, EOS,
#: without writing the rating prefix: e.g. "Score: 4" or no rating), ``too_long`` (the prompt is over
#: the window: nothing generated), ``no_rating_mass`` (the rating tokens got no probability at the
#: read position). Every status but ``ok`` counts in ``num_failed`` and has no rating.
JUDGE_STATUSES = ("ok", "truncated", "no_rating_prefix", "too_long", "no_rating_mass")

#: Themis's prompt: ``PROMPT`` of https://github.com/PKU-ONELab/Themis/blob/main/eval.py, verbatim.
THEMIS_PROMPT = (
    "###Instruction###\n"
    "Please act as an impartial and helpful evaluator for natural language generation (NLG), and the audience is "
    "an expert in the field.\n"
    "Your task is to evaluate the quality of {task} strictly based on the given evaluation criterion.\n"
    "Begin the evaluation by providing your analysis concisely and accurately, and then on the next line, start "
    "with \"Rating:\" followed by your rating on a Likert scale from 1 to 5 (higher means better).\n"
    "You MUST keep to the strict boundaries of the evaluation criterion and focus solely on the issues and errors "
    "involved; otherwise, you will be penalized.\n"
    "Make sure you read and understand these instructions, as well as the following evaluation criterion and "
    "example content, carefully.\n"
    "\n"
    "###Evaluation Criterion###\n"
    "{aspect}\n"
    "\n"
    "###Example###\n"
    "{source_des}:\n"
    "{source}\n"
    "\n"
    "{target_des}:\n"
    "{target}\n"
    "\n"
    "###Your Evaluation###\n")

#: The criteria of the Themis aspects (SummEval's definitions, Fabbri et al., 2021, in this package's words).
THEMIS_CRITERIA = {
    "coherence": "Coherence: Measure the collective quality of all sentences of the summary: it should be well "
                 "structured and well organized, building from sentence to sentence a coherent body of "
                 "information about the topic, not a heap of related facts.",
    "consistency": "Consistency: Measure the factual alignment between the summary and the article: the summary "
                   "should contain only statements entailed by the article, with no hallucinated facts.",
    "fluency": "Fluency: Measure the quality of individual sentences of the summary: they should be free of "
               "formatting problems, capitalization errors and ungrammatical constructions that make them hard "
               "to read.",
    "relevance": "Relevance: Measure the selection of important content from the article: the summary should "
                 "include only the important information of the article, without redundancies or excess "
                 "information.",
}

#: Prometheus 2's system prompt for absolute grading (``ABS_SYSTEM_PROMPT``, its library's prompts.py).
PROMETHEUS_SYSTEM = ("You are a fair judge assistant tasked with providing clear, objective feedback based on "
                     "specific criteria, ensuring each assessment reflects the absolute standards set for "
                     "performance.")

#: Prometheus 2's absolute-grading template without a reference answer (``ABSOLUTE_PROMPT_WO_REF``), verbatim.
PROMETHEUS_PROMPT = (
    "###Task Description:\n"
    "An instruction (might include an Input inside it), a response to evaluate, and a score rubric representing "
    "a evaluation criteria are given.\n"
    "1. Write a detailed feedback that assess the quality of the response strictly based on the given score "
    "rubric, not evaluating in general.\n"
    "2. After writing a feedback, write a score that is an integer between 1 and 5. You should refer to the "
    "score rubric.\n"
    "3. The output format should look as follows: \"(write a feedback for criteria) [RESULT] (an integer "
    "number between 1 and 5)\"\n"
    "4. Please do not generate any other opening, closing, and explanations.\n"
    "\n"
    "###The instruction to evaluate:\n"
    "{instruction}\n"
    "\n"
    "###Response to evaluate:\n"
    "{response}\n"
    "\n"
    "###Score Rubrics:\n"
    "{rubric}\n"
    "\n"
    "###Feedback: ")

#: Prometheus's "instruction to evaluate" for a summary (this package's words), the article after it.
PROMETHEUS_INSTRUCTION = "Summarize the following article.\n\n"

#: The rubrics of the Prometheus aspects: criterion, then the descriptions of scores 1..5 (written
#: for this package after SummEval's definitions, in ``SCORE_RUBRIC_TEMPLATE``'s shape).
PROMETHEUS_RUBRICS = {
    "coherence": ("Is the summary well structured and well organized, building a coherent body of information "
                  "about the article's topic?",
                  ("The summary is a heap of unrelated statements with no discernible structure.",
                   "The summary has some related statements, but their order and links are mostly unclear.",
                   "The summary is partly organized; some sentences are out of place or poorly connected.",
                   "The summary is well organized with only minor lapses in flow.",
                   "The summary builds from sentence to sentence into a clear, coherent whole.")),
    "consistency": ("Does the summary state only facts that the article supports?",
                    ("Most statements of the summary are contradicted by or absent from the article.",
                     "Several statements of the summary are unsupported or contradicted.",
                     "The summary is mostly supported, with one clear unsupported or contradicted statement.",
                     "The summary is supported by the article apart from a minor imprecision.",
                     "Every statement of the summary is supported by the article.")),
    "fluency": ("Are the sentences of the summary grammatical and easy to read?",
                ("The summary is hard to read: errors in most sentences.",
                 "The summary has frequent errors that disturb reading.",
                 "The summary is readable but has several grammatical or formatting errors.",
                 "The summary reads well with only rare minor errors.",
                 "The summary is fluent, with no grammatical or formatting errors.")),
    "relevance": ("Does the summary select the important content of the article, without redundancy or excess "
                  "detail?",
                  ("The summary misses the article's main points or is mostly unimportant detail.",
                   "The summary holds few of the main points and much unimportant or repeated content.",
                   "The summary holds some main points but also unimportant or repeated content.",
                   "The summary holds most main points with little unimportant content.",
                   "The summary holds the article's important content and nothing superfluous.")),
}


def prometheus_rubric(aspect_key: str) -> str:
    """The rubric block of a Prometheus aspect: ``[criterion]`` then ``Score k: description``
    lines (its library's ``SCORE_RUBRIC_TEMPLATE`` shape)."""
    criterion, scores = PROMETHEUS_RUBRICS[aspect_key]
    return "\n".join([f"[{criterion}]", *(f"Score {k}: {d}" for k, d in enumerate(scores, 1))])


@dataclass(frozen=True)
class JudgeFormat:
    """A judge that reasons (module docstring), as a prompt format of the registry.

    Attributes:
        name: the format's name (part of cache keys). source: where its prompt comes from (a URL).
        template: the user message (or the whole plain prompt) with ``{placeholders}``.
        system: the system message, or None. plain: no chat template (the parts after BOS).
        stop: the rating prefix the judge writes. forced: what is appended after the rationale.
        max_new_tokens: the most tokens of a rationale (the judge's own code's default).
        scale: K, ratings 1..K.
    """

    name: str
    source: str
    template: str
    stop: str
    forced: str
    max_new_tokens: int
    system: str | None = None
    plain: bool = False
    scale: int = 5

    own_chunking = False
    cut_field = "source"
    max_words = None
    default_words = None

    @property
    def capabilities(self) -> Capabilities:
        """Whole-summary judgements over ``source`` and ``target``; the prompt is the judge's own."""
        return Capabilities(question=False, labels=False, granularities=("output",), fields=("source", "target"),
                            chunk_settings=False, shape=f"{self.name}: prompt -> rationale -> {self.forced!r}<1-K>")

    def fill(self, aspect_name: str) -> dict[str, str]:
        """The template's values other than the two texts, for the aspect ``<judge>_<key>``."""
        key = aspect_name.split("_", 1)[1]
        if self.name == "themis":
            return {"task": "Summarization", "aspect": THEMIS_CRITERIA[key], "source_des": "Article",
                    "target_des": "Summary"}
        return {"rubric": prometheus_rubric(key)}

    def query(self, aspect: "Aspect", source: str, target: str) -> tuple["ChatQuery", list[str]]:
        """The ``judge`` :class:`~unieval_local.text.chat.ChatQuery` of one (source, target) pair,
        and the field each part shows (``""``: none). The source part is the one cut when the
        prompt is over the window.

        Raises:
            KeyError: the aspect is not one of this judge's (its key after ``<judge>_``).
        """
        from .chat import ChatQuery

        values = self.fill(aspect.name)
        src, tgt = "\ue003", "\ue004"  # private-use sentinels for the two texts' slots
        text = self.template.format(**values, source=src, target=tgt, response=tgt,
                                    instruction=f"{PROMETHEUS_INSTRUCTION}{src}")
        a, rest = text.split(src, 1)
        b, c = rest.split(tgt, 1)
        parts: list[tuple[str, str]] = [("system", self.system)] if self.system else []
        fields = [""] * len(parts)
        for role_text, f in ((a, ""), (source, "source"), (b, ""), (target, "target"), (c, "")):
            parts.append(("user", role_text))
            fields.append(f)
        query = ChatQuery(tuple(parts), "", "judge", cut=fields.index("source"), continue_final=False,
                          scale=self.scale, stop=self.stop, forced=self.forced, max_new_tokens=self.max_new_tokens,
                          plain=self.plain)
        return query, fields

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)``: the encoded judge query and each field's characters in it (the
        :class:`~unieval_local.text.prompts.PromptFormat` protocol)."""
        from .chat import _clean

        overrides = overrides or {}
        source = str(field_value(aspect, example, "source", target, reference, overrides))
        query, fields = self.query(aspect, source, target)
        prompt, starts = query.encode()
        return prompt, [(f, s, s + len(_clean(t))) for f, s, (_, t) in zip(fields, starts, query.parts) if f]

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> None:
        """A judge does not chunk: None (a long source follows ``long_input``)."""
        return None


#: Themis-8B (module docstring).
THEMIS = JudgeFormat("themis", "https://github.com/PKU-ONELab/Themis/blob/main/eval.py", THEMIS_PROMPT,
                     stop="Rating:", forced="Rating: ", max_new_tokens=2048, plain=True)
#: Prometheus 2, absolute grading (module docstring).
PROMETHEUS = JudgeFormat("prometheus-absolute", "https://huggingface.co/prometheus-eval/prometheus-7b-v2.0",
                         PROMETHEUS_PROMPT, stop="[RESULT]", forced="[RESULT] ", max_new_tokens=1024,
                         system=PROMETHEUS_SYSTEM)
