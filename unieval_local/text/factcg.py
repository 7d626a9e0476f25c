"""FactCG's prompt format and document chunking (Lei et al., "FactCG: Enhancing Fact Checkers
with Graph-Based Multi-Hop Data", NAACL 2025, arXiv 2501.17144; code github.com/derenlei/FactCG,
MIT; weights yaxili96/FactCG-DeBERTa-v3-Large, MIT).

FactCG-DeBERTa is a DeBERTa-v3-large classifier with two outputs over ONE text (not a sentence
pair): the document chunk, then an instruction that quotes the claim and ends where an answer
would come. Its inference code (``factcg/utils.py`` ``INSTRUCTION_TEMPLATE``, read through
``factcg/inference.py`` ``Inferencer.tokenize``) fills::

    <document chunk>\\n\\nChoose your answer: based on the paragraph above can we conclude that
    "<claim>"?\\n\\nOPTIONS:\\n- Yes\\n- No\\nI think the answer is <one trailing space>

(one line in the template; wrapped here), tokenized as a single sequence with the tokenizer's
``[CLS]``/``[SEP]``, at most 2,048 tokens (the end is cut beyond that, as there), and
P(supported) = softmax(logits)[1]. Its training loader (``factcg/dataloader.py``) wrote the
last option as ``-No``; the released checkpoint is evaluated with ``- No``, which we follow.

Chunking (``Inferencer.chunking_src``): the document is split into sentences by NLTK's English
Punkt (``sent_tokenize``), each sentence's size is its number of NLTK word tokens
(``word_tokenize``: Treebank tokens, punctuation included, not whitespace words), and sentences
are packed greedily while a chunk holds at most 550 of them (a sentence that does not fit
starts the next chunk; one longer than 550 is a chunk of its own). A chunk's sentences are
joined by ``\\n``; the last chunk also has ``" \\n "`` replaced by ``"\\n"`` and is stripped.
A claim's score is the maximum over the chunks (``Inferencer.batch_inference``). One
difference: where the very first sentence is longer than 550 tokens the reference also scores
an empty chunk (its loop appends the empty chunk it started with); we leave empty chunks out,
so an empty document is a problem of that example, not a score.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .prompts import Capabilities, Chunk, field_value

if TYPE_CHECKING:
    from ..registry.tasks import Aspect
    from ..schema import UniEvalData
    from .sentences import SentenceSplitter

__all__ = ["FACTCG", "FACTCG_CHUNK_WORDS", "FactCGPrompt", "treebank_word_count"]

#: Words (NLTK word tokens) per document chunk in FactCG's inference code.
FACTCG_CHUNK_WORDS = 550

_TREEBANK = None
_TREEBANK_LOCK = threading.Lock()


def treebank_word_count(sentence: str, splitter: "SentenceSplitter") -> int:
    """NLTK ``word_tokenize(sentence)``'s token count, offline: ``word_tokenize`` re-splits its input
    with Punkt and runs NLTK's improved Treebank tokenizer (``NLTKWordTokenizer``, no data files)
    on each piece; ``splitter`` (the run's Punkt) does the re-split here, since NLTK's own
    ``sent_tokenize`` needs the ``punkt_tab`` download. Punctuation marks are tokens:
    ``"It rained, then (briefly) it stopped."`` counts 10."""
    global _TREEBANK
    if _TREEBANK is None:
        with _TREEBANK_LOCK:
            if _TREEBANK is None:
                from nltk.tokenize.destructive import NLTKWordTokenizer

                _TREEBANK = NLTKWordTokenizer()
    return sum(len(_TREEBANK.tokenize(piece)) for piece in splitter(sentence))


class FactCGPrompt:
    """FactCG-DeBERTa's prompt (one text: document chunk, then the claim in an instruction) and its
    550-word chunking (module docstring). Fields: ``source`` (the document) and ``target`` (the
    claim, whole: FactCG checks one claim per query); the classifier backend encodes the prompt
    as one sequence (no pair separator) and reads the label ``supported`` (output 1)."""

    name = "factcg"
    own_chunking = True
    cut_field = None  # one sequence, cut at its end past max_length, as the reference does
    max_words = FACTCG_CHUNK_WORDS
    default_words = FACTCG_CHUNK_WORDS  # without chunk_words: the reference's 550-word chunks
    capabilities = Capabilities(question=False, labels=False, fields=("source", "target"), chunk_settings=False,
                                document_field="source",
                                shape='<document chunk>\\n\\nChoose your answer: based on the paragraph above can '
                                      'we conclude that "<claim>"?\\n\\nOPTIONS:\\n- Yes\\n- No\\nI think the answer is ')
    middle = '\n\nChoose your answer: based on the paragraph above can we conclude that "'
    tail = '"?\n\nOPTIONS:\n- Yes\n- No\nI think the answer is '

    def render(self, aspect: "Aspect", example: "UniEvalData", target: str, reference: str | None = None,
               overrides: dict[str, str] | None = None) -> tuple[str, list[tuple[str, int, int]]]:
        """``(prompt, spans)``: ``document + middle + claim + tail`` (the template above, nothing
        stripped) and the character spans ``(field, start, end)`` of ``source`` and ``target``."""
        overrides = overrides or {}
        document = str(field_value(aspect, example, "source", target, reference, overrides))
        claim = str(field_value(aspect, example, "target", target, reference, overrides))
        b = len(document) + len(self.middle)
        return (document + self.middle + claim + self.tail,
                [("source", 0, len(document)), ("target", b, b + len(claim))])

    def chunks(self, text: str, splitter: "SentenceSplitter", chunk_words: int) -> list[Chunk]:
        """The document's chunks ``(start, end, chunk text)`` of at most ``min(chunk_words, 550)``
        NLTK word tokens each (``start``/``end``: offsets of the chunk's first and last sentence
        in ``text``); [] for a document without sentences.

        Args:
            text: the document (the aspect's ``source``).
            splitter: the sentence splitter (English Punkt for FactCG's parity).
            chunk_words: the run's words per chunk (550 when the run sets none:
                :func:`~unieval_local.text.prompts.default_chunk_words`); FactCG's 550 caps it.
        """
        size = min(chunk_words, FACTCG_CHUNK_WORDS)
        groups: list[list[tuple[int, int]]] = []
        current: list[tuple[int, int]] = []
        count = 0
        for a, b in splitter.spans(text):
            n = treebank_word_count(text[a:b], splitter)
            if current and count + n > size:
                groups.append(current)
                current, count = [], 0
            current.append((a, b))
            count += n
        if current:
            groups.append(current)
        out: list[Chunk] = []
        for k, group in enumerate(groups):
            shown = "\n".join(text[a:b] for a, b in group).strip("\n")
            if k == len(groups) - 1:
                shown = shown.replace(" \n ", "\n").strip("\n").strip()
            if shown:
                out.append((group[0][0], group[-1][1], shown))
        return out


#: The one instance of :class:`FactCGPrompt`.
FACTCG = FactCGPrompt()
