"""Chat messages that ask a local instruct model to write the reason of one verdict of a seed
format (a rating's ``explanation``, an accuracy point's ``accuracy``, a rubric's ``reasoning``),
and the reader of its answer (pure text: no model here; the messages are rendered by
:meth:`CausalLMRunner.chat_prompt <unieval_local.models.causal_lm.runner.CausalLMRunner.chat_prompt>`
and continued by ``generate``).

Basis: the verdict is never the model's: it comes from the local checkers (UniEval's P(Yes),
MiniCheck, the rule engine) and is handed to the model with the claim it is about and the
evidence it rests on, and the model only words it. This is the feedback step of Prometheus 2
(Kim et al., 2024, Sec. 3: "write a detailed feedback that assesses the quality ... strictly based
on the given score rubric", then the score) turned around: the score is given, the model writes
the feedback alone, in one or two sentences, in the record's language (named in the instruction,
as :mod:`unieval_local.text.claims` does). The hosted formats' reasons name what they judge and
why (seed 000's per-metric ``explanation``, seed 003's ``accuracy`` and ``reasoning``), so the
instruction asks for the claim and its evidence by name.

Output read by :func:`read_reason`: the answer's text on one line; an empty answer is not a
reason (None: the caller keeps the template and marks the field).
"""

from __future__ import annotations

from .claims import non_empty_text
from .language import language_name

__all__ = ["REASON_INSTRUCTION", "read_reason", "reason_messages"]

#: what the model is asked: word the given verdict, naming the claim and its evidence
REASON_INSTRUCTION = ("Explain the verdict below to a reader in one or two sentences, in {language}. Name the claim "
                      "and the evidence it rests on, and keep the verdict exactly as given. Write only the "
                      "explanation.")


def _text(value, field: str) -> str:
    """:func:`~unieval_local.text.claims.non_empty_text`, its whitespace runs made single spaces."""
    return " ".join(non_empty_text(value, field).split())


def reason_messages(claim: str, verdict: str, evidence: str, language: str = "en") -> list[dict]:
    """The chat messages asking for the reason of one verdict (module docstring: after the
    feedback step of Prometheus 2, Kim et al. 2024, Sec. 3, with the verdict given).

    Args:
        claim: what was judged (a summary sentence, a rubric question, "the summary's coherence").
        verdict: the checker's verdict ("supported by the source", "3 of 3", "not addressed").
        evidence: what the verdict rests on (the source passage, the checker's probability: the
            template reason, which quotes it).
        language: ISO 639-1 code of the language to write in (named: ``"zh"`` -> Chinese).

    Returns:
        ``[{"role": "user", "content": instruction + "\\n\\nClaim: ...\\nVerdict: ...\\nEvidence: ..."}]``
        (each field on one line: its whitespace collapsed).

    Raises:
        ValueError: an empty or non-string argument (named).

    Example:
        >>> reason_messages("The cat sat.", "supported", "'A cat sat on the mat.'")[0]["content"].splitlines()[-1]
        "Evidence: 'A cat sat on the mat.'"
    """
    claim, verdict, evidence = _text(claim, "claim"), _text(verdict, "verdict"), _text(evidence, "evidence")
    instruction = REASON_INSTRUCTION.format(language=language_name(_text(language, "language")))
    return [{"role": "user", "content": f"{instruction}\n\nClaim: {claim}\nVerdict: {verdict}\nEvidence: {evidence}"}]


def read_reason(text: str) -> str | None:
    """The reason in a generated answer: its text with whitespace collapsed to single spaces, or
    None when nothing is left (an empty answer).

    Raises:
        TypeError: ``text`` is not a string.

    Example:
        >>> read_reason("  The claim is supported:\\n the source says so. ")
        'The claim is supported: the source says so.'
        >>> read_reason(" \\n") is None
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    return " ".join(text.split()) or None
