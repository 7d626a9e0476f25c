"""Chunks that fit the window: a self-chunking format's document chunks (MiniCheck, NLI, FactCG,
Granite Guardian), checked in the evaluator's own tokens.

The formats size their chunks in words, as their reference code does (MiniCheck's 500
whitespace words, FactCG's 550 NLTK word tokens, :mod:`unieval_local.text.prompts`), while every
model's limit is in tokens: 500 words of Indonesian, or of digits, can be well over mDeBERTa's
512 tokens, and the model would read the chunk without its end. :func:`fit_chunks` renders each
chunk's prompt (the format's fixed part and the claim included), counts it with the runner's
tokenizer, and cuts a chunk that does not fit ``max_length`` at sentence boundaries (a single
sentence longer than the window at word boundaries; text without spaces at token boundaries),
so no chunk is truncated by the model. A chunk that fits is left exactly as the format made it
(the reference's chunks where its word count already fits).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..text.prompts import Chunk
from ..text.sentences import SentenceSplitter, field_spans

__all__ = ["fit_chunks"]

#: tokens kept free: sub-word merges at the chunk's edges are not additive
MARGIN = 2
#: characters per token looked at when a long sentence is cut at words (no tokenizer makes longer tokens)
_CHARS_PER_TOKEN = 32
_SPACE = re.compile(r"\s")


def fit_chunks(chunks: Sequence[Chunk], document: str, render: Callable[[str], str], counter,
               max_length: int, splitter: SentenceSplitter) -> list[Chunk]:
    """``chunks`` with every chunk whose prompt is over ``max_length`` tokens cut into chunks that fit.

    Args:
        chunks: ``(start, end, text)`` as the format made them (offsets into ``document``).
        document: the chunked field's text.
        render: chunk text -> the whole prompt that reads it (the longest claim of the query).
        counter: the evaluator's token arithmetic
            (:class:`~unieval_local.pipeline.planning.TokenCounter`: ``count``, ``count_plain``, ``cut``).
        max_length: the model's tokens per query.
        splitter: the sentence splitter of the document.

    Returns:
        The chunks, in order: one that fits as it was; one that does not as consecutive parts of
        whole sentences (of words, for a sentence longer than the window), each with the offsets of
        its text in ``document``. Unchanged when the prompt without any chunk leaves fewer than 4
        tokens (the claim alone nearly fills the window: a backend that cuts the premise keeps the
        claim whole; planning refuses such an example where the backend would cut the claim,
        :func:`~unieval_local.pipeline.planning.build_plan`).
    """
    if not chunks:
        return list(chunks)
    counts = counter.count([render(text) for _, _, text in chunks])
    if all(n <= max_length for n in counts):
        return list(chunks)
    budget = max_length - counter.count([render("")])[0] - MARGIN
    if budget < 4:
        return list(chunks)
    out: list[Chunk] = []
    for (a, b, text), n in zip(chunks, counts):
        if n <= max_length:
            out.append((a, b, text))
            continue
        for s, e in _fitting_parts(text, render, counter, max_length, budget, splitter):
            start, end = _document_span(document, a, b, text, s, e)
            out.append((start, end, text[s:e]))
    return out


def _fitting_parts(text: str, render, counter, max_length: int, budget: int,
                   splitter: SentenceSplitter) -> list[tuple[int, int]]:
    """``(start, end)`` spans of ``text`` whose prompts fit: sentences packed under ``budget``
    plain tokens, then any part still over ``max_length`` (tokenization is not additive) packed
    again under a smaller budget."""
    parts = _pack(text, _pieces(text, counter, budget, splitter), counter, budget)
    for _ in range(8):  # each round lowers the budget of the parts still over by their excess
        counts = counter.count([render(text[s:e]) for s, e in parts])
        excess = {k: n - max_length for k, n in enumerate(counts) if n > max_length}
        if not excess:
            break
        fixed: list[tuple[int, int]] = []
        for k, (s, e) in enumerate(parts):
            if k not in excess:
                fixed.append((s, e))
                continue
            inner = text[s:e]
            smaller = max(1, counter.count_plain([inner])[0] - excess[k] - MARGIN)
            fixed += [(s + x, s + y) for x, y in _pack(inner, _pieces(inner, counter, smaller, splitter),
                                                         counter, smaller)]
        parts = fixed
    return parts


def _pieces(text: str, counter, budget: int, splitter: SentenceSplitter) -> list[tuple[int, int]]:
    """The sentences of ``text`` (per line: a chunk keeps the document's line breaks), a sentence
    over ``budget`` tokens cut at words."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        spans += [(pos + s, pos + e) for s, e in field_spans(line, "sentence", splitter)]
        pos += len(line) + 1
    if not spans:
        spans = [(0, len(text))]
    out: list[tuple[int, int]] = []
    for (s, e), n in zip(spans, counter.count_plain([text[s:e] for s, e in spans])):
        out += [(s, e)] if n <= budget else _word_parts(text, s, e, counter, budget)
    return out


def _word_parts(text: str, s: int, e: int, counter, budget: int) -> list[tuple[int, int]]:
    """``text[s:e]`` cut into parts of at most ``budget`` tokens, each cut at the last space
    before the token limit (at the limit itself when there is none: text without spaces)."""
    parts: list[tuple[int, int]] = []
    start = s
    while start < e:
        window = text[start:min(e, start + _CHARS_PER_TOKEN * budget)]
        k = counter.cut(window, budget)
        if start + k >= e:
            parts.append((start, e))
            break
        spaces = [m.start() for m in _SPACE.finditer(window, 1, k + 1)]
        cut = spaces[-1] if spaces else max(1, k)
        end = start + cut
        while end > start and text[end - 1].isspace():
            end -= 1
        parts.append((start, end if end > start else start + cut))
        start += cut
        while start < e and text[start].isspace():
            start += 1
    return parts


def _pack(text: str, pieces: list[tuple[int, int]], counter, budget: int) -> list[tuple[int, int]]:
    """Consecutive pieces packed greedily while their plain tokens stay within ``budget``."""
    counts = counter.count_plain([text[s:e] for s, e in pieces])
    out: list[tuple[int, int]] = []
    first, total = None, 0
    for (s, e), n in zip(pieces, counts):
        if first is not None and total + n > budget:
            out.append((first, last))
            first, total = None, 0
        if first is None:
            first = s
        last, total = e, total + n
    if first is not None:
        out.append((first, last))
    return out


def _document_span(document: str, a: int, b: int, shown: str, s: int, e: int) -> tuple[int, int]:
    """The offsets in ``document`` of ``shown[s:e]``, where ``shown`` is the chunk text of
    ``document[a:b]`` (the same characters, whitespace aside: a format joins sentences with its own
    spaces or newlines): matched by the rank of the first and last non-space characters."""
    doc = [i for i in range(a, b) if not document[i].isspace()]
    if not doc:
        return a, b
    before = sum(1 for c in shown[:s] if not c.isspace())
    inside = sum(1 for c in shown[s:e] if not c.isspace())
    first = doc[min(before, len(doc) - 1)]
    last = doc[min(before + max(inside, 1), len(doc)) - 1]
    return first, max(first + 1, last + 1)
