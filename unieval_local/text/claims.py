"""Claim lists a local instruct model writes: the chat messages that ask for them and the parser
of its answer. Pure text (no torch).

A MINIMAL version written by the claims helper of issue 44 against the shared interface, so that
``fact/claims`` (:mod:`unieval_local.claims`) can be built and tested before the generation
helper's module lands; the merge takes that module's version (same names and signatures).

The prompt follows FActScore's decomposition step (Min et al., EMNLP 2023, "FActScore:
Fine-grained Atomic Evaluation of Factual Precision in Long Form Text Generation", Sec. 3.1:
"break down the sentence into independent facts"; one atomic fact per line), asked of a chat
model; the answer format is one claim per line, each line starting with ``"- "``.
"""

from __future__ import annotations

from .language import language_name

__all__ = ["claims_messages", "keypoints_messages", "parse_claims"]

_SYSTEM = ("You break a text into atomic claims. An atomic claim is a short sentence that states exactly one "
           "fact, can be checked on its own, and names its subject instead of using a pronoun.")


def _in_language(language: str) -> str:
    name = language_name(language) if language not in (None, "und") else "English"
    return f" Write the claims in {name}."


def claims_messages(summary: str, language: str = "en") -> list[dict]:
    """The chat messages that ask for the atomic claims of ``summary`` (FActScore, Min et al. 2023,
    Sec. 3.1), in ``language`` (an ISO 639 code; ``und``: English).

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``; the answer asked for is one claim per
        line, each line starting ``"- "``, nothing else.
    """
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "List every atomic claim of the text below, one per line, each line "
                                        "starting with \"- \", and nothing else." + _in_language(language)
                                        + f"\n\nText:\n{summary}"}]


def keypoints_messages(source: str, n: int, language: str = "en") -> list[dict]:
    """The chat messages that ask for up to ``n`` key points of ``source`` (seed 001's
    ``n_key_points``), in the same one-per-line ``"- "`` format.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"List at most {n} key points of the text below: the most important facts, "
                                        "one per line, each line starting with \"- \", and nothing else."
                                        + _in_language(language) + f"\n\nText:\n{source}"}]


def parse_claims(text: str) -> list[str] | None:
    """The claims of a generated list: each non-blank line must start with ``"- "`` (leading
    spaces allowed); the claim is the rest of the line, stripped.

    Returns:
        the claims in order (at least one), or None when ``text`` is not such a list (no lines,
        a line without the dash, or an empty claim).
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines or not all(line.startswith("- ") and line[2:].strip() for line in lines):
        return None
    return [line[2:].strip() for line in lines]
