"""Prompt formats: how one query's prompt is built from an aspect and an example.

A :class:`PromptFormat` renders the prompt text with the character span of each field
(for evidence and windows) and may chunk a long document itself (a checkpoint family
trained on fixed-size chunks). Each evaluator (:mod:`unieval_local.registry.evaluators`) names its
format:

- :class:`BooleanQA`, UniEval's format (``utils.add_question``; contract "Prompt
  templates")::

      question: <question> </s> <label 1>: <value 1> </s> <label 2>: <value 2> ...

  the parts joined with ``" </s> "`` exactly, nothing stripped; T5's tokenizer reads the
  literal ``</s>`` as EOS. It does not chunk (long fields follow ``long_input``).
- :class:`NLIPair`, a (premise, hypothesis) pair for NLI cross-encoders (SummaC-ZS style,
  Laban et al., TACL 2022): the premise a chunk of the source, the hypothesis the target or
  one of its sentences; rendered as one string with :data:`PAIR_SEPARATOR` between them
  (so that deduplication, evidence spans and cache keys cover both), split again by the
  classifier backend (:func:`split_pair`).
- :class:`HHEMPrompt`, HHEM-2.1-Open's template (Vectara, ``modeling_hhem_v2.py``)::
      <pad> Determine if the hypothesis is true given the premise?\n\nPremise: <source>\n\nHypothesis: <target>
- :class:`MiniCheckPrompt`, MiniCheck-Flan-T5's format (Tang, Laban and Durrett, EMNLP
  2024; ``Liyan06/MiniCheck``, ``minicheck/inference.py``, the flan-t5-large path)::

      predict: <document chunk></s><claim>

  It chunks the document itself: sentences by NLTK Punkt per newline-separated block
  (newlines kept), packed into chunks of at most ``chunk_words`` whitespace words (a Chinese
  or Japanese character counts as one word: :func:`chunk_word_count`).
- :class:`SeahorsePrompt`, SEAHORSE's template (Clark et al., 2023, the model cards of
  ``google/seahorse-large-q1`` .. ``q6``; TRUE's NLI format, Honovich et al., 2022)::

      premise: <source> hypothesis: <target>

  It does not chunk (a long source follows ``long_input``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the registry imports this module: types only
    from ..schema import UniEvalData
    from .sentences import SentenceSplitter
    from ..registry.tasks import Aspect

__all__ = ["BOOLEAN_QA", "BooleanQA", "Capabilities", "Chunk", "HHEM", "HHEMPrompt", "MINICHECK", "MiniCheckPrompt",
           "DEFAULT_CHUNK_WORDS", "NLI_PAIR", "NLIPair", "chunk_word_count", "chunk_words_for", "default_chunk_words",
           "PAIR_SEPARATOR", "SEAHORSE", "SeahorsePrompt", "PromptFormat", "SEPARATOR", "aspect_problems", "field_value", "split_pair"]

#: The literal separator between prompt parts. T5's tokenizer maps it to EOS (id 1).
SEPARATOR = " </s> "

#: One chunk of a document a format chunks itself: ``(start, end, text)``; ``start``/``end``
#: are character offsets of the chunk's first and last sentence in the document, ``text``
#: the exact text the format puts in the prompt (whitespace may differ from the document's).
Chunk = tuple[int, int, str]


#: Words per document chunk where neither the run nor the format says: MiniCheck's ``chunk_size``
#: (Tang et al., 2024, the ``minicheck`` package's default).
DEFAULT_CHUNK_WORDS = 500


def default_chunk_words(fmt: "PromptFormat") -> int:
    """The words per chunk of a format that chunks the document itself, when the run sets no
    ``chunk_words``: the format's ``default_words`` (FactCG: 550, as its code), else
    :data:`DEFAULT_CHUNK_WORDS`."""
    return fmt.default_words or DEFAULT_CHUNK_WORDS


def chunk_words_for(fmt: "PromptFormat", chunk_words: int | None) -> tuple[int, str | None]:
    """``(words, note)``: the words per chunk ``fmt`` reads under the run's ``chunk_words`` (None:
    :func:`default_chunk_words`), capped by its ``max_words``; the note says when a larger
    ``chunk_words`` was capped (None otherwise)."""
    words = chunk_words or default_chunk_words(fmt)
    if fmt.max_words and words > fmt.max_words:
        return fmt.max_words, (None if chunk_words is None else f"chunk_words {words} is more than it reads at "
                               f"once: chunks of at most {fmt.max_words} words are used")
    return words, None


_HAN_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff]")


def chunk_word_count(text: str) -> int:
    """The "words" of ``text`` a document chunk is sized by: whitespace words (MiniCheck's own
    count), and each Chinese or Japanese character one word, since those scripts put no spaces
    between words (a character is about one subword token in a multilingual vocabulary, as a
    short English word is). Text without such characters counts exactly as MiniCheck counts."""
    han = len(_HAN_CHAR.findall(text))
    return len(text.split()) if not han else han + len(_HAN_CHAR.sub(" ", text).split())


def field_value(aspect: "Aspect", example: "UniEvalData", name: str, target: str, reference: str | None,
                overrides: dict[str, str]) -> str:
    """The text that fills field ``name`` of one query: an override (a window or chunk of a
    long field), the target (or one of its sentences), the reference, or the example's field."""
    if name in overrides:
        return overrides[name]
    if name == "target":
        return target
    if name == "references":
        return reference
    return example.get_field(name)


@dataclass(frozen=True)
class Capabilities:
    """What a prompt format can express: an aspect asking for more is refused when it is
    defined (:func:`aspect_problems`), since the format would silently drop it.

    Attributes:
        question: the prompt has a place for the aspect's question.
        labels: each field is shown after its own label (``<label>: <value>``).
        fields: the fields the prompt shows, exactly (None: any fields, in the aspect's order).
        granularities: the target granularities it can score (``output``: the whole target
            as one query; ``sentence``: one query per target sentence).
        chunk_settings: the aspect's ``chunk_field`` / ``window_reduction`` / ``chunk_unit``
            apply (False for a format that chunks the document itself: then only
            ``document_field``, max over chunks, is possible).
        document_field: the field a self-chunking format chunks (None otherwise).
        shape: the prompt, for messages.
    """

    question: bool = True
    labels: bool = True
    fields: tuple[str, ...] | None = None
    granularities: tuple[str, ...] = ("output", "sentence")
    chunk_settings: bool = True
    document_field: str | None = None
    shape: str = ""


@runtime_checkable
class PromptFormat(Protocol):
    """How an evaluator's prompts are built.

    Attributes:
        name: the format's name (part of the evaluator's identity in cache keys).
        own_chunking: True when the format splits the document into chunks itself
            (:meth:`chunks`), whatever ``long_input`` says.
        capabilities: what the format can express (:class:`Capabilities`).
        cut_field: the field a prompt over ``max_length`` loses its end in, when the backend
            truncates inside one field (the premise); None: right truncation, found from the spans.
        max_words: the most words per chunk whatever ``chunk_words`` says (None: ``chunk_words``).
        default_words: the words per chunk when the run sets no ``chunk_words`` (None:
            :data:`DEFAULT_CHUNK_WORDS`).
    """

    name: str
    own_chunking: bool
    capabilities: Capabilities
    cut_field: str | None
    max_words: int | None
    default_words: int | None

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)``: the prompt text and ``(field, start, end)`` of each field's value in it."""
        ...

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> list[Chunk] | None:
        """The chunks this format splits a document into itself, or None when it does not
        (then ``long_input`` decides what happens to a long field)."""
        ...


class BooleanQA:
    """UniEval's Boolean-QA prompt (``question: <q> </s> <label>: <value> ...``), no own chunking."""

    name = "boolean-qa"
    own_chunking = False
    cut_field = None  # right truncation: the field at the cut is found from the spans
    max_words = None
    default_words = None
    capabilities = Capabilities(shape="question: <question> </s> <label>: <value> </s> ...")

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
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
            value = field_value(aspect, example, pf.field, target, reference, overrides)
            prompt += f"{SEPARATOR}{pf.label}: "
            spans.append((pf.field, len(prompt), len(prompt) + len(str(value))))
            prompt += str(value)
        return prompt, spans

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> None:
        """UniEval does not chunk: None."""
        return None


#: The one instance of :class:`BooleanQA`.
BOOLEAN_QA = BooleanQA()


class MiniCheckPrompt:
    """MiniCheck-Flan-T5's prompt and document chunking, exactly as ``minicheck/inference.py``.

    ``render``: ``'predict: ' + document + '</s>' + claim`` (the reference joins document and
    claim with ``tokenizer.eos_token`` and prefixes ``'predict: '``); the document is the
    aspect's ``source`` field (a chunk of it), the claim its ``target`` (never split here).

    ``chunks`` (``Inferencer.inference_per_example``): the document is split into sentences
    with Punkt per ``'\n'``-separated block, a ``'\n'`` item kept between blocks
    (``sent_tokenize_with_newlines``; an empty document gives ``['']``); sentences are packed
    into chunks while the running count of ``len(sentence.split())`` words stays at most
    ``chunk_words`` (a sentence that does not fit starts the next chunk); each chunk is
    ``' '.join(items).replace(' \n ', '\n').strip()``, and empty chunks are dropped.
    """

    name = "minicheck"
    own_chunking = True
    cut_field = None
    max_words = None
    default_words = None
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"), chunk_settings=False,
                                document_field="source", shape="predict: <document chunk></s><claim>")

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``('predict: <document></s><claim>', spans)``: spans of ``source`` and ``target``."""
        overrides = overrides or {}
        document = str(field_value(aspect, example, "source", target, reference, overrides))
        claim = str(field_value(aspect, example, "target", target, reference, overrides))
        head = "predict: "
        prompt = head + document + "</s>" + claim
        start = len(head) + len(document) + len("</s>")
        return prompt, [("source", len(head), len(head) + len(document)), ("target", start, start + len(claim))]

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> list[Chunk]:
        """The document's chunks: ``(start, end, chunk text)``, offsets of the chunk's first
        and last sentence in ``text`` (``(0, 0)`` for a chunk of newlines only, which the
        reference drops anyway). [] when every chunk is empty (an empty or blank document)."""
        from .sentences import field_spans

        items: list[tuple[str, int | None, int | None]] = []  # (sentence or '\n', start, end)
        pos = 0
        for block in text.split("\n"):
            items += [(block[a:b], pos + a, pos + b) for a, b in field_spans(block, "sentence", splitter)]
            items.append(("\n", None, None))
            pos += len(block) + 1
        items = items[:-1] or [("", None, None)]
        groups: list[list[tuple[str, int | None, int | None]]] = []
        current: list[tuple[str, int | None, int | None]] = []
        count = 0
        for item in items:
            n = chunk_word_count(item[0])
            if count + n > chunk_words:
                groups.append(current)
                current, count = [item], n
            else:
                current.append(item)
                count += n
        if current:
            groups.append(current)
        out: list[Chunk] = []
        for group in groups:
            shown = " ".join(t for t, _, _ in group).replace(" \n ", "\n").strip()
            if not shown:
                continue
            spans = [(a, b) for _, a, b in group if a is not None]
            start, end = (spans[0][0], spans[-1][1]) if spans else (0, 0)
            out.append((start, end, shown))
        return out


#: The one instance of :class:`MiniCheckPrompt`.
MINICHECK = MiniCheckPrompt()


def aspect_problems(fmt: PromptFormat, *, question: str | None, labels: dict[str, str | None],
                    granularity: str, chunk_field: str | None = None, window_reduction: str | None = None,
                    chunk_unit: str | None = None) -> list[tuple[str, str]]:
    """What an aspect definition asks of ``fmt`` beyond its :class:`Capabilities`.

    Args:
        fmt: the prompt format of the aspect's evaluator.
        question: the aspect's question (None or empty: none given).
        labels: field -> its label (None: no label given), in prompt order.
        granularity: ``output`` or ``sentence``.
        chunk_field, window_reduction, chunk_unit: the chunk settings the aspect gives
            (None: not given).

    Returns:
        ``(key, message)`` per problem (``key``: ``question``, ``fields``, ``granularity``,
        ``chunk_field`` ...), [] when the format can express the aspect.
    """
    cap = fmt.capabilities
    what = f"the {fmt.name} prompt format ({cap.shape})"
    problems: list[tuple[str, str]] = []
    if question and not cap.question:
        problems.append(("question", f"{what} has no place for a question: the aspect would score the same "
                         "whatever it asks; leave the question out"))
    if not question and cap.question:
        problems.append(("question", f"{what} needs a question"))
    if cap.fields is not None and set(labels) != set(cap.fields):
        problems.append(("fields", f"{what} shows exactly the fields {', '.join(cap.fields)}; got "
                         f"{', '.join(labels) or 'none'}"))
    if not cap.labels and any(v for v in labels.values()):
        problems.append(("fields", f"{what} shows no labels; leave 'label' out of the fields"))
    if cap.labels and any(not v for v in labels.values()):
        problems.append(("fields", f"{what} shows each field after its label: give every field a 'label'"))
    if granularity not in cap.granularities:
        problems.append(("granularity", f"{what} scores granularity {' or '.join(cap.granularities)}, "
                         f"not {granularity!r}"))
    if not cap.chunk_settings:
        fixed = {"chunk_field": (chunk_field, cap.document_field), "window_reduction": (window_reduction, "max"),
                 "chunk_unit": (chunk_unit, None)}
        for key, (given, own) in fixed.items():
            if given is not None and given != own:
                problems.append((key, f"{what} chunks the {cap.document_field} itself (max over its chunks): "
                                 f"{key} {given!r} would be ignored; leave it out"))
    return problems


#: Between the premise and the hypothesis of a rendered :class:`NLIPair` (a private-use
#: character: a text holding it has it read as a space, so the split is unambiguous).
PAIR_SEPARATOR = "\ue000"


def split_pair(prompt: str) -> tuple[str, str]:
    """``(premise, hypothesis)`` of a prompt rendered by :class:`NLIPair`.

    Raises:
        ValueError: ``prompt`` holds no :data:`PAIR_SEPARATOR` (not an NLI pair).
    """
    premise, sep, hypothesis = prompt.partition(PAIR_SEPARATOR)
    if not sep:
        raise ValueError("not an NLI pair prompt (no pair separator): a Boolean-QA prompt sent to a classifier?")
    return premise, hypothesis


class NLIPair:
    """A (premise, hypothesis) pair for an NLI cross-encoder: the premise is a chunk of the
    ``source`` (the format chunks the document itself, as :class:`MiniCheckPrompt` does, into
    chunks of at most ``min(chunk_words, max_words)`` words: 300 by default, which fits a
    512-token DeBERTa window), the hypothesis the ``target`` (or one of its sentences). The
    score of a pair is P(entailment) of the classifier; a target's score is the maximum over
    chunks (SummaC-ZS, Laban et al., TACL 2022, Sec. 3.1: max over the document's blocks,
    then mean over the summary's sentences).
    """

    name = "nli-pair"
    own_chunking = True
    cut_field = "source"  # the backend truncates the premise's end (only_first), never the claim
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"), chunk_settings=False,
                                document_field="source", shape="(premise: <document chunk>, hypothesis: <claim>)")
    max_words = 300
    default_words = None

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(premise + PAIR_SEPARATOR + hypothesis, spans)`` (a separator inside a text becomes a space)."""
        overrides = overrides or {}
        premise = str(field_value(aspect, example, "source", target, reference, overrides)).replace(PAIR_SEPARATOR, " ")
        claim = str(field_value(aspect, example, "target", target, reference, overrides)).replace(PAIR_SEPARATOR, " ")
        start = len(premise) + len(PAIR_SEPARATOR)
        return premise + PAIR_SEPARATOR + claim, [("source", 0, len(premise)), ("target", start, start + len(claim))]

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> list[Chunk]:
        """The document's chunks, as :meth:`MiniCheckPrompt.chunks` makes them, of at most
        ``min(chunk_words, max_words)`` words (the signature says which)."""
        return MINICHECK.chunks(text, splitter, min(chunk_words, self.max_words))


#: The one instance of :class:`NLIPair`.
NLI_PAIR = NLIPair()


class HHEMPrompt:
    """HHEM-2.1-Open's prompt, exactly as its config's ``prompt`` (``modeling_hhem_v2.py``:
    ``prompt.format(text1=premise, text2=hypothesis)``): premise the ``source``, hypothesis the
    ``target``. The literal ``<pad>`` is the first token, where the head is read. It does not
    chunk: a source longer than ``max_length`` follows ``long_input`` (``chunk``: windows of the
    source, max over them, as the ``hhem`` aspect's ``chunk_field``/``window_reduction`` say)."""

    name = "hhem"
    own_chunking = False
    cut_field = "source"  # the backend cuts the premise's end and keeps the hypothesis whole
    max_words = None
    default_words = None
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"),
                                shape="<pad> Determine if the hypothesis is true given the premise?\n\n"
                                      "Premise: <source>\n\nHypothesis: <target>")
    head = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: "
    middle = "\n\nHypothesis: "

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)`` of ``source`` and ``target`` in it."""
        overrides = overrides or {}
        premise = str(field_value(aspect, example, "source", target, reference, overrides))
        claim = str(field_value(aspect, example, "target", target, reference, overrides))
        a = len(self.head)
        b = a + len(premise) + len(self.middle)
        return self.head + premise + self.middle + claim, [("source", a, a + len(premise)), ("target", b, b + len(claim))]

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> None:
        """HHEM does not chunk: None."""
        return None


#: The one instance of :class:`HHEMPrompt`.
HHEM = HHEMPrompt()


class SeahorsePrompt:
    """SEAHORSE's prompt, as its model cards give it: ``"premise: ARTICLE hypothesis: SUMMARY"``
    (Clark et al., 2023, arXiv 2305.13194; trained as TRUE's T5 NLI metric, Honovich et al., 2022):
    the article is the aspect's ``source``, the summary its ``target``, joined exactly so, nothing
    stripped. No question and no labels (the six SEAHORSE questions are six checkpoints, not six
    prompts). It does not chunk: a source longer than ``max_length`` follows ``long_input``
    (``truncate`` cuts the prompt's end: the summary, with the source's tail when the source is
    long; ``fit`` shortens the source so that the summary is read whole; ``chunk``: windows of the source, reduced as the aspect's
    ``window_reduction`` says)."""

    name = "seahorse"
    own_chunking = False
    cut_field = None  # the T5 runner cuts the end (the summary's!): the field at the cut comes from the spans
    max_words = None
    default_words = None
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"),
                                shape="premise: <source> hypothesis: <target>")
    head = "premise: "
    middle = " hypothesis: "

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)``: ``"premise: " + source + " hypothesis: " + target`` and the
        character spans ``(field, start, end)`` of ``source`` and ``target`` in it (an override,
        e.g. a window of the source, replaces that field's text)."""
        overrides = overrides or {}
        article = str(field_value(aspect, example, "source", target, reference, overrides))
        summary = str(field_value(aspect, example, "target", target, reference, overrides))
        a = len(self.head)
        b = a + len(article) + len(self.middle)
        return (self.head + article + self.middle + summary,
                [("source", a, a + len(article)), ("target", b, b + len(summary))])

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> None:
        """SEAHORSE does not chunk: None."""
        return None


#: The one instance of :class:`SeahorsePrompt`.
SEAHORSE = SeahorsePrompt()
