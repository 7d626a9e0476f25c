"""Chat messages that ask a local instruct model for the atomic claims of a summary or the key
points of a source, and the parser of its answer (pure text: no model here; the messages are
rendered by :meth:`CausalLMRunner.chat_prompt
<unieval_local.models.causal_lm.runner.CausalLMRunner.chat_prompt>` and continued by
``generate``).

Source of the prompt: FActScore (Min et al., 2023, "FActScore: Fine-grained Atomic Evaluation of
Factual Precision in Long Form Text Generation", Sec. 3.1 and Appendix A.1), whose atomic-fact
generator is asked "Please breakdown the following sentence into independent facts:" and answers
with one fact per line, each starting with "- ". Adapted here to a whole summary (the unit a
summary's checker verifies) with the output format stated in the instruction instead of
FActScore's few-shot demonstrations (a local instruct model follows the instruction; the
demonstrations would lengthen every prompt): one atomic fact per line, each line starting with
"- ", nothing else. Key points use the same format for the facts of a source a summary should
contain (seed 001's ``n_key_points``).

Output format read by :func:`parse_claims`: the lines that start with ``"- "`` (after leading
spaces), each one claim; other lines (a preamble such as "Here are the facts:") are ignored;
no such line: not a list (None).
"""

from __future__ import annotations

from .language import language_name

__all__ = ["BULLET", "CLAIMS_INSTRUCTION", "KEYPOINTS_INSTRUCTION", "claims_messages", "keypoints_messages", "non_empty_text", "parse_claims"]

#: what starts every line of a claim list
BULLET = "- "

#: FActScore's atomic-fact instruction (Sec. 3.1) adapted to a summary, with the output format
CLAIMS_INSTRUCTION = ("Please breakdown the following summary into independent facts. Write each atomic fact "
                      "on its own line, starting with \"- \", in {language}. Write nothing else.")

#: the same format for up to ``n`` key points of a source
KEYPOINTS_INSTRUCTION = ("Please list at most {n} key points of the following text: the most important independent "
                         "facts a summary of it should contain. Write each key point on its own line, starting with "
                         "\"- \", in {language}. Write nothing else.")


def non_empty_text(value, field: str) -> str:
    """``value`` stripped; ValueError naming ``field`` when it is not a non-empty string (the prompt
    builders' input check, here and in :mod:`unieval_local.text.reasons`)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field} must be a non-empty string, got {value!r:.60}")
    return value.strip()


def claims_messages(summary: str, language: str = "en") -> list[dict]:
    """The chat messages asking for the atomic claims of ``summary`` (module docstring: after
    FActScore, Min et al. 2023, Sec. 3.1).

    Args:
        summary: the text to decompose. language: ISO 639-1 code of the language to write the
            claims in (named in the instruction: ``"en"`` -> English).

    Returns:
        ``[{"role": "user", "content": instruction + "\\n\\nSummary: " + summary}]``.

    Raises:
        ValueError: an empty or non-string ``summary`` or ``language``.

    Example:
        >>> claims_messages("The cat sat.")[0]["content"].splitlines()[-1]
        'Summary: The cat sat.'
    """
    summary = non_empty_text(summary, "summary")
    language = non_empty_text(language, "language")
    instruction = CLAIMS_INSTRUCTION.format(language=language_name(language))
    return [{"role": "user", "content": f"{instruction}\n\nSummary: {summary}"}]


def keypoints_messages(source: str, n: int, language: str = "en") -> list[dict]:
    """The chat messages asking for at most ``n`` key points of ``source``, in the claim-list
    format (:func:`parse_claims` reads the answer).

    Args:
        source: the document. n: the most key points (>= 1; seed 001's ``n_key_points``).
        language: ISO 639-1 code of the language to write them in.

    Returns:
        ``[{"role": "user", "content": instruction + "\\n\\nText: " + source}]``.

    Raises:
        ValueError: an empty ``source`` or ``language``, or ``n`` not a positive integer.
    """
    source = non_empty_text(source, "source")
    language = non_empty_text(language, "language")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the most key points) must be a positive integer, got {n!r}")
    instruction = KEYPOINTS_INSTRUCTION.format(n=n, language=language_name(language))
    return [{"role": "user", "content": f"{instruction}\n\nText: {source}"}]


def parse_claims(text: str) -> list[str] | None:
    """The claims of a generated claim list: each line that starts with ``"- "`` (leading spaces
    allowed), without the bullet and surrounding spaces, in order; empty items skipped.

    Returns:
        The claims, or None when ``text`` holds no such line (not a list: the caller counts it
        as a parse failure).

    Raises:
        TypeError: ``text`` is not a string.

    Example:
        >>> parse_claims("Facts:\\n- A cat sat.\\n- It was on a mat.")
        ['A cat sat.', 'It was on a mat.']
        >>> parse_claims("A cat sat on a mat.") is None
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    claims = []
    bullets = 0
    for line in text.splitlines():
        line = line.lstrip()
        if line.startswith(BULLET):
            bullets += 1
            item = line[len(BULLET):].strip()
            if item:
                claims.append(item)
    return claims if bullets and claims else None
