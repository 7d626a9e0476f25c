"""Chat prompts for decoder LLM judges (the ``causal-lm`` backend, :mod:`unieval_local.models.causal_lm`).

The package never renders a chat template itself: a prompt of these formats is a plain string
that holds the chat's parts (each field's text verbatim, so that spans, deduplication, the score
cache and evidence work as for every other format) and a small JSON header saying how the
backend builds the chat (``tokenizer.apply_chat_template`` of the checkpoint's own template)
and which readout it takes. :class:`ChatQuery` is that structure; :meth:`ChatQuery.encode` and
:meth:`ChatQuery.decode` turn it into the prompt string and back::

    <MARK>{"roles": [...], "cut": 1, "prefix": "...", ...}<MARK>part 0<SEG>part 1<SEG>...

Two readouts, declared by the format in the header, each read at the position right after the
teacher-forced assistant ``prefix`` (the prefix ends where the answer token comes):

* ``labels``: ``P(words[0]) / (P(words[0]) + P(words[1]))``, each word's probability the sum of its
  single-token forms with and without a leading space (UniEval's Boolean-QA rule over a chat model).
* ``rating``: the expected rating ``sum_k k * p(k)`` over the score tokens ``1..K`` renormalised
  over them (G-Eval, Liu et al., 2023, Sec. 2.3: probability-weighted summation of the scores),
  each digit's single-token forms with and without a leading space summed. The query's value is
  that expectation mapped onto [0, 1]: ``(E - 1) / (K - 1)`` (so that means, caches and reports
  never mix a 1-5 scale with probabilities; the aspect's ``scale`` says how to read it back:
  ``rating = 1 + (K - 1) * value``).

Formats:

* :class:`GEvalPrompt` (``g-eval``): G-Eval's form (Liu et al., 2023, Sec. 2): the aspect's
  ``question`` holds the task introduction, the criteria and the evaluation steps (the automatic
  chain-of-thought, written once per aspect), then each field after its label, then the
  form-filling line; the assistant's answer is prefilled with ``<Aspect> (1-K):`` so that the
  next token is the score. Thinking is switched off where the template has the switch
  (``enable_thinking=False``).
* :class:`GraniteGroundednessPrompt` (``granite-guardian-groundedness``): Granite Guardian 3.3's
  RAG groundedness check as its model card documents it: the source as the template's
  ``documents``, the target as the assistant turn under judgement, ``guardian_config``
  ``{"criteria_id": "groundedness"}``, ``think=False``; after the generation prompt the answer is
  teacher-forced to ``<score>`` and the readout is ``P(no)`` over ``yes``/``no`` (``yes`` = the
  response is ungrounded: the risk), i.e. ``1 - P(yes)``. It chunks the source itself (500 words
  by default, :class:`~unieval_local.text.prompts.MiniCheckPrompt`'s chunks; max over chunks: a
  claim is grounded when some chunk grounds it). Parity with IBM's own scoring of the real weights
  is not verified here (no weights on the build machines). It is not ``dialogue/groundedness``:
  that is UniEval-dialog's Boolean question over a response and its knowledge ``context``; this
  one judges the ``target`` against the ``source`` with Granite Guardian's trained risk definition.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .prompts import MINICHECK, Capabilities, Chunk, field_value

if TYPE_CHECKING:
    from ..registry.tasks import Aspect
    from ..schema import UniEvalData
    from .sentences import SentenceSplitter

__all__ = ["CHAT_MARK", "CHAT_SEGMENT", "ChatQuery", "GEVAL", "GEvalPrompt", "GRANITE_GROUNDEDNESS",
           "GraniteGroundednessPrompt", "is_chat_prompt", "rating_title"]

#: Private-use characters: around the header, and between parts (a field holding them has them
#: read as spaces, so that the parts split unambiguously).
CHAT_MARK, CHAT_SEGMENT = "\ue001", "\ue002"

_ROLES = ("system", "user", "assistant", "document")

#: The readouts a :class:`ChatQuery` may declare (its docstring).
READOUTS = ("labels", "rating", "judge", "rating-mass")


def _clean(text: str) -> str:
    return str(text).replace(CHAT_MARK, " ").replace(CHAT_SEGMENT, " ")


def is_chat_prompt(prompt: str) -> bool:
    """True for a prompt string made by :meth:`ChatQuery.encode`."""
    return prompt.startswith(CHAT_MARK)


@dataclass(frozen=True)
class ChatQuery:
    """One judge query as a chat.

    Attributes:
        parts: ``(role, text)`` in order; role ``system``, ``user``, ``assistant`` (consecutive
            parts of one role form one message) or ``document`` (the template's ``documents``).
        cut: the index of the part shortened from its end when the prompt is over ``max_length``
            (the source), or None (then the prompt is refused as too long: its end holds the answer slot).
        prefix: the teacher-forced start of the judge's answer; the readout is the next token.
        continue_final: True: the prefix is a final assistant message continued
            (``continue_final_message=True``); False: the prefix follows the generation prompt
            (for a template whose assistant messages are the text under judgement: Granite Guardian).
        template: extra variables for the chat template (``guardian_config``, ``think``,
            ``enable_thinking``).
        readout: ``labels`` or ``rating`` (module docstring).
        words: for ``labels``: ``(read, other)``; the value is P(read) over the two.
        scale: for ``rating``: K, the ratings are 1..K (2 <= K <= 9).
        stop, forced, max_new_tokens: for ``judge`` (a judge that reasons,
            :mod:`unieval_local.text.judges`): the rating prefix the judge writes after its rationale
            (generation stops there), the text appended after the rationale before the rating is
            read, and the most tokens the rationale may take.
        plain: the parts are the whole prompt, after the tokenizer's BOS token, without the chat
            template (Themis's own usage: its ``eval.py`` sends the raw prompt).

    Readouts beside ``labels`` and ``rating``: ``judge`` (generate a rationale, stop at ``stop``,
    append ``forced``, read the rating: :mod:`unieval_local.models.judging`) and ``rating-mass``
    (that read: the expected rating as ``rating``, the distribution NOT renormalised, so that the
    mass on the rating tokens shows).
    """

    parts: tuple[tuple[str, str], ...]
    prefix: str
    readout: str
    cut: int | None = None
    continue_final: bool = True
    template: dict = field(default_factory=dict)
    words: tuple[str, str] = ("yes", "no")
    scale: int = 5
    stop: str = ""
    forced: str = ""
    max_new_tokens: int = 0
    plain: bool = False

    def __post_init__(self) -> None:
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {', '.join(READOUTS)}, got {self.readout!r}")
        if self.readout == "judge" and (not self.stop or self.max_new_tokens < 1):
            raise ValueError("a judge query needs its rating prefix (stop) and max_new_tokens >= 1")
        if self.readout != "labels" and not 2 <= self.scale <= 9:
            raise ValueError(f"a rating scale runs 1..K with 2 <= K <= 9 (one digit), got K={self.scale}")
        if any(role not in _ROLES for role, _ in self.parts):
            raise ValueError(f"chat part roles must be among {', '.join(_ROLES)}")

    def header(self) -> dict:
        """The JSON header of :meth:`encode` (everything but the parts' texts)."""
        head = {"roles": [r for r, _ in self.parts], "cut": self.cut, "prefix": self.prefix, "readout": self.readout,
                "continue": self.continue_final, "template": self.template, "words": list(self.words),
                "scale": self.scale}
        if self.readout in ("judge", "rating-mass") or self.plain:  # G-Eval's and Granite's headers unchanged
            head.update(stop=self.stop, forced=self.forced, max_new_tokens=self.max_new_tokens, plain=self.plain)
        return head

    def encode(self) -> tuple[str, list[int]]:
        """``(prompt, starts)``: the prompt string and the character offset of each part in it."""
        head = CHAT_MARK + json.dumps(self.header(), sort_keys=True, ensure_ascii=True) + CHAT_MARK
        starts, pos, texts = [], len(head), []
        for _, text in self.parts:
            starts.append(pos)
            texts.append(_clean(text))
            pos += len(texts[-1]) + len(CHAT_SEGMENT)
        return head + CHAT_SEGMENT.join(texts), starts

    @classmethod
    def decode(cls, prompt: str) -> "ChatQuery":
        """The query a prompt string holds.

        Raises:
            ValueError: not a chat prompt (a prompt of another format sent to the causal-lm backend).
        """
        if not is_chat_prompt(prompt) or prompt.count(CHAT_MARK) < 2:
            raise ValueError("not a chat prompt: a prompt of another evaluator's format sent to the causal-lm backend?")
        _, head, body = prompt.split(CHAT_MARK, 2)
        h = json.loads(head)
        texts = body.split(CHAT_SEGMENT)
        if len(texts) != len(h["roles"]):
            raise ValueError(f"a chat prompt with {len(texts)} parts where its header names {len(h['roles'])}")
        return cls(tuple(zip(h["roles"], texts)), h["prefix"], h["readout"], h["cut"], h["continue"], h["template"],
                   tuple(h["words"]), h["scale"], h.get("stop", ""), h.get("forced", ""), h.get("max_new_tokens", 0),
                   h.get("plain", False))

    def with_cut(self, text: str) -> "ChatQuery":
        """This query with the ``cut`` part's text replaced (a shortened source)."""
        parts = list(self.parts)
        parts[self.cut] = (parts[self.cut][0], text)
        return dataclasses.replace(self, parts=tuple(parts))

    def messages(self) -> tuple[list[dict], list[dict]]:
        """``(messages, documents)`` for ``apply_chat_template``: consecutive parts of one role
        joined into one message; the prefix as a final assistant message when ``continue_final``;
        documents as ``{"doc_id": "<n>", "text": ...}`` (Granite's shape)."""
        messages: list[dict] = []
        documents: list[dict] = []
        for role, text in self.parts:
            if role == "document":
                documents.append({"doc_id": str(len(documents)), "text": text})
            elif messages and messages[-1]["role"] == role:
                messages[-1]["content"] += text
            else:
                messages.append({"role": role, "content": text})
        if self.continue_final:
            messages.append({"role": "assistant", "content": self.prefix})
        return messages, documents


def rating_title(aspect: "Aspect") -> str:
    """The form's name of an aspect: ``geval_coherence`` -> ``Coherence``."""
    name = aspect.name.removeprefix("geval_").replace("_", " ")
    return name[:1].upper() + name[1:]


class GEvalPrompt:
    """G-Eval's prompt (module docstring): the ``question`` (criteria and evaluation steps),
    each field after its label, the form-filling line; the answer prefilled to ``<Aspect> (1-K):``,
    then the rating is read (``rating`` readout, K from the aspect's ``scale``, default 5).
    A long source loses its end (``cut_field``), never the form."""

    name = "g-eval"
    own_chunking = False
    cut_field = "source"
    max_words = None
    default_words = None
    capabilities = Capabilities(granularities=("output",),
                                shape="<criteria and steps>\\n\\n<label>:\\n<value>\\n\\n... Evaluation Form | "
                                      "assistant: <Aspect> (1-K):")

    def query(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
              overrides: dict[str, str] | None = None) -> tuple[ChatQuery, list[str]]:
        """The :class:`ChatQuery` of one example, and the field each part shows (``""``: none)."""
        overrides = overrides or {}
        k = aspect.scale or 5
        title = rating_title(aspect)
        parts: list[tuple[str, str]] = [("user", f"{aspect.question}\n\n")]
        fields, cut = [""], None
        for pf in aspect.fields:
            value = str(field_value(aspect, example, pf.field, target, reference, overrides))
            parts.append(("user", f"{pf.label}:\n"))
            fields.append("")
            if pf.field == self.cut_field:
                cut = len(parts)
            parts.append(("user", value))
            fields.append(pf.field)
            parts.append(("user", "\n\n"))
            fields.append("")
        parts.append(("user", f"Evaluation Form (answer with the score only, one number from 1 to {k}):\n\n"
                              f"- {title}"))
        fields.append("")
        query = ChatQuery(tuple(parts), f"{title} (1-{k}):", "rating", cut, True, {"enable_thinking": False},
                          scale=k)
        return query, fields

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)``: the encoded :class:`ChatQuery` and each field's characters in it."""
        query, fields = self.query(aspect, example, target, reference, overrides)
        prompt, starts = query.encode()
        spans = [(f, s, s + len(_clean(t))) for f, s, (_, t) in zip(fields, starts, query.parts) if f]
        return prompt, spans

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> None:
        """G-Eval does not chunk: None (a long source follows ``long_input``)."""
        return None


#: The one instance of :class:`GEvalPrompt`.
GEVAL = GEvalPrompt()


class GraniteGroundednessPrompt:
    """Granite Guardian 3.3's groundedness check (module docstring): documents = the source (a
    chunk of it), the assistant turn = the target, ``guardian_config={"criteria_id":
    "groundedness"}``, ``think=False``, ``<score>`` teacher-forced after the generation prompt,
    value ``P(no)`` over ``yes``/``no`` = 1 - P(yes) (``yes`` = ungrounded)."""

    name = "granite-guardian-groundedness"
    own_chunking = True
    cut_field = "source"
    max_words = None
    default_words = None
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"), chunk_settings=False,
                                document_field="source",
                                shape="documents=[<source chunk>], assistant: <target>, guardian_config="
                                      "groundedness | <score>")
    config = {"criteria_id": "groundedness"}

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)`` of ``source`` (the document) and ``target`` (the judged response)."""
        overrides = overrides or {}
        document = str(field_value(aspect, example, "source", target, reference, overrides))
        response = str(field_value(aspect, example, "target", target, reference, overrides))
        query = ChatQuery((("document", document), ("assistant", response)), "<score>", "labels", cut=0,
                          continue_final=False, template={"guardian_config": self.config, "think": False},
                          words=("no", "yes"))
        prompt, (a, b) = query.encode()
        return prompt, [("source", a, a + len(_clean(document))), ("target", b, b + len(_clean(response)))]

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> list[Chunk]:
        """The source's chunks of at most ``chunk_words`` words (:meth:`MiniCheckPrompt.chunks`)."""
        return MINICHECK.chunks(text, splitter, chunk_words)


#: The one instance of :class:`GraniteGroundednessPrompt`.
GRANITE_GROUNDEDNESS = GraniteGroundednessPrompt()
