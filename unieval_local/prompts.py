"""Prompt rendering: one Boolean-QA query as UniEval's ``add_question`` builds it.

``question: <question> </s> <label 1>: <value 1> </s> <label 2>: <value 2> ...``
(UniEval, ``utils.add_question``; contract "Prompt templates"): the parts are joined with
``" </s> "`` exactly, nothing stripped; T5's tokenizer reads the literal ``</s>`` as EOS.
"""

from __future__ import annotations

from .schema import UniEvalData
from .tasks import Aspect

#: The literal separator between prompt parts. T5's tokenizer maps it to EOS (id 1).
SEPARATOR = " </s> "


def render_prompt_spans(
    aspect: Aspect, example: UniEvalData, target: str, reference: str | None = None,
    overrides: dict[str, str] | None = None,
) -> tuple[str, list[tuple[str, int, int]]]:
    """Build one query prompt exactly as UniEval's ``add_question`` does, with field spans.

    Args:
        aspect: the aspect (question and labelled fields).
        example: the example, for the non-target fields.
        target: the text put in the ``target`` slot (the whole target, or one
            sentence at sentence granularity).
        reference: the reference put in the ``references`` slot, if the aspect has one.
        overrides: field -> text to use instead (a window of a long field).

    Returns:
        ``(prompt, spans)``: ``"question: <q> </s> <label>: <value> ..."`` joined
        with ``" </s> "``, no stripping; ``spans`` gives ``(field, start, end)``,
        the characters of each field's value in the prompt.
    """
    overrides = overrides or {}
    prompt = f"question: {aspect.question}"
    spans: list[tuple[str, int, int]] = []
    for pf in aspect.fields:
        if pf.field in overrides:
            value = overrides[pf.field]
        elif pf.field == "target":
            value = target
        elif pf.field == "references":
            value = reference
        else:
            value = example.get_field(pf.field)
        prompt += f"{SEPARATOR}{pf.label}: "
        spans.append((pf.field, len(prompt), len(prompt) + len(str(value))))
        prompt += str(value)
    return prompt, spans


def render_prompt(aspect: Aspect, example: UniEvalData, target: str, reference: str | None = None,
                  overrides: dict[str, str] | None = None) -> str:
    """The prompt of :func:`render_prompt_spans`, without the spans."""
    return render_prompt_spans(aspect, example, target, reference, overrides)[0]
