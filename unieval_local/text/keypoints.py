"""Key points of a source and near-duplicate sentences, by sentence similarity.

Used by the reports (:mod:`unieval_local.reports`): key-point coverage needs the
source's most central sentences, and the redundancy penalty needs to know which
summary sentences repeat an earlier one. Neither is a model query: both come
from TF-IDF sentence similarity (scikit-learn ``TfidfVectorizer`` over :func:`content_words`:
words less English and Indonesian stop words, Chinese as character bigrams; sublinear tf, l2
rows, so cosine similarity is a dot product).

Key points are chosen by LexRank (Erkan & Radev, "LexRank: Graph-based Lexical
Centrality as Salience in Text Summarization", JAIR 2004, Sec. 3.3 "continuous
LexRank"): sentences are nodes, edges weigh their cosine similarity (edges
below ``similarity_threshold`` dropped), and a sentence's centrality is its
PageRank in that graph (``networkx.pagerank``, damping 0.85). The most central
sentences are taken greedily, skipping any too similar to one already taken
(the redundancy step of Sec. 3.4), and returned in source order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..extras import require
from .sentences import DEFAULT_SPLITTER, SentenceSplitter, field_spans

__all__ = ["CJK_FILLERS", "FILLERS", "INDONESIAN_STOP_WORDS", "KeyPoint", "MIN_KEY_POINT_WORDS", "content_words", "default_n_key_points",
           "extract_key_points", "is_informative", "redundant_sentences", "similarity_matrix",
           "source_sentence_spans"]

#: Default of :func:`extract_key_points`: a candidate key point has at least this many content
#: words, or one fewer when one of them is a number or a date ("launch on the 15th").
MIN_KEY_POINT_WORDS = 3

# "Project Manager: " / "Agen: " at the start of a turn; "客户：" (a full-width colon, up to 12
# characters without punctuation before it, no space needed after it)
_SPEAKER = re.compile(r"[^\s:\uff1a][^:\uff1a\n]{0,40}:\s+|[^\s:\uff1a\uff0c\u3002\uff01\uff1f\u3001]{1,12}\uff1a\s*")
_BULLET = re.compile(r"\s*(?:[-*\u2022\u2013]|\d{1,3}[.)])\s+")  # "- ", "* ", "• ", "1. ", "2) "
_MARKUP = re.compile(r"\{[a-z_]+\}")  # transcript annotations: {vocalsound}, {disfmarker}
_WORD = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
#: Chinese characters that carry no content alone (particles, fillers, "yes", "thanks").
CJK_FILLERS = frozenset("的了吗呢吧啊呀哦嗯噢哈好对是嘛么啦喔诶")
#: Indonesian function words and conversation fillers (not English words), removed beside
#: scikit-learn's English stop words, so Indonesian sentences are compared by their content.
INDONESIAN_STOP_WORDS = frozenset(
    "yang dan di ke dari ini itu untuk dengan adalah akan tidak sudah belum bisa saya anda kami kita mereka dia "
    "ia juga atau pada dalam karena jadi kalau jika tapi tetapi sangat lebih sekali saja hanya masih lagi ya iya "
    "oke baik nah sih dong kok deh kan lah pun bahwa oleh para tersebut sebagai telah harus mau ingin boleh nanti "
    "terima kasih tolong silakan bapak ibu pak bu mas mbak kak eh gitu begitu seperti apa siapa bagaimana kenapa "
    "mengapa kapan mana sini situ sana semua setiap nggak enggak gak aja udah sama buat".split())
#: Conversation fillers that scikit-learn's stop-word list lacks; they carry no content
#: ("Okay, yeah, sounds good." is not a key fact).
FILLERS = frozenset(
    "okay ok yeah yep yes yup nope um umm uh uhm hmm mm mhm mmm ah oh alright right sure like just really "
    "actually basically think know mean gonna wanna guess good great fine cool sounds thanks thank "
    "let lets maybe kind sort things thing stuff got get".split())
_DATE_WORD = re.compile(
    r"\d|^(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow"
    r"|tonight|yesterday|weekend|week|month|quarter|year|deadline|q[1-4])$")


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that are not English stop words (scikit-learn's list),
    Indonesian function words (:data:`INDONESIAN_STOP_WORDS`) nor transcript annotations such as
    ``{vocalsound}``; a run of Chinese characters gives its overlapping character bigrams instead
    (Chinese has no spaces between words: bigrams are the segmenter-free unit of Chinese
    retrieval, e.g. Lucene's CJKAnalyzer; a dictionary segmenter would add a dependency and
    its own errors on call-centre speech), its filler characters (:data:`CJK_FILLERS`) left out.

    >>> content_words("客户的订单延迟了")
    ['客户', '订单', '单延', '延迟']
    """
    require("reports")
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    text = _MARKUP.sub(" ", text).lower()
    out: list[str] = []
    if _HAN.search(text):
        for run in _HAN.findall(text):
            for piece in re.split("[" + "".join(CJK_FILLERS) + "]+", run):
                out += [piece[k:k + 2] for k in range(len(piece) - 1)] if len(piece) > 1 else [piece] * bool(piece)
        text = _HAN.sub(" ", text)
    words = [w for w in _WORD.findall(text) if w not in ENGLISH_STOP_WORDS and w not in INDONESIAN_STOP_WORDS]
    return words + out if out else words


def _han_content(text: str) -> int:
    """Chinese characters of ``text`` that are not :data:`CJK_FILLERS`."""
    return sum(1 for run in _HAN.findall(text) for c in run if c not in CJK_FILLERS)


def is_informative(text: str, min_words: int = MIN_KEY_POINT_WORDS) -> bool:
    """Whether ``text`` says enough to be a key point or a completeness item.

    True when it has at least ``min_words`` content words (:func:`content_words` less the
    conversation :data:`FILLERS`), or ``min_words - 1`` of them with one a number or a date
    word (a digit, a month or weekday name, ``today``, ``week``, ``q3`` ...). With the
    default 3: "Payment bug fixed." and "Launch on the 15th." are informative; "Okay, sounds
    good." and "Yeah, I think so." are not. ``min_words`` 0 accepts every text.
    """
    if min_words <= 0:
        return True
    han = _han_content(text)
    if han:  # Chinese: two content characters per word ("订单延迟" is two words)
        dated = bool(re.search(r"\d|[日月号年周点]", text))
        latin = [w for w in content_words(_HAN.sub(" ", text)) if w not in FILLERS]
        units = han / 2 + len(latin)
        return units >= min_words or (dated and units >= min_words - 1 > 0)
    words = [w for w in content_words(text) if w not in FILLERS]
    if len(words) >= min_words:
        return True
    return len(words) >= min_words - 1 > 0 and any(_DATE_WORD.search(w) for w in words)


@dataclass(frozen=True)
class KeyPoint:
    """One key point: a source sentence, its characters ``[start, end)`` in the source,
    and its LexRank centrality (PageRank mass, sums to 1 over the candidates; None
    when the key point was given by the user)."""

    text: str
    start: int | None = None
    end: int | None = None
    centrality: float | None = None


def source_sentence_spans(text: str, splitter: SentenceSplitter = DEFAULT_SPLITTER, *,
                          strip_speakers: bool = False, strip_bullets: bool = False) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``: each non-empty line (a
    transcript turn ``Speaker: text``) is split by ``splitter`` (Punkt), so a
    sentence never crosses a line break.

    With ``strip_speakers``, a leading ``Speaker: `` label (up to 40 characters
    before a colon at the start of a line) is left out of the line's first sentence;
    with ``strip_bullets``, a leading list marker (``- ``, ``* ``, ``• ``, ``1. ``, ``2) ``).

    Returns:
        ``[(start, end), ...]`` in text order; ``[]`` for an empty text.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        if strip_bullets and (m := _BULLET.match(line)):
            pos += m.end()
            line = line[m.end():]
        if strip_speakers and (m := _SPEAKER.match(line)):
            pos += m.end()
            line = line[m.end():]
        spans += [(pos + a, pos + b) for a, b in field_spans(line, "sentence", splitter)]
        pos += len(line) + 1
    return spans


def default_n_key_points(n_candidates: int) -> int:
    """Key points to extract from a source with ``n_candidates`` candidate sentences.

    ``clamp(round(sqrt(n_candidates)), 5, 15)``, and never more than there are: a
    short meeting with 7 candidate sentences gives 5, a 25-sentence news article 5, a
    1,500-sentence meeting 15. The square root grows with the source but keeps a short
    summary's task feasible; the floor of 5 keeps a short meeting's few decisions checked.
    """
    if n_candidates <= 0:
        return 0
    return min(n_candidates, max(5, min(15, round(math.sqrt(n_candidates)))))


def _tfidf(texts: Sequence[str]):
    """l2-normalised TF-IDF rows (sparse), or None when no text has a content word."""
    require("reports")
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        return TfidfVectorizer(analyzer=content_words, sublinear_tf=True).fit_transform(list(texts))
    except ValueError:  # empty vocabulary: only stop words / punctuation
        return None


def similarity_matrix(texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity of TF-IDF vectors, shape ``(n, n)``, values in [0, 1]
    (all zeros when no text has a content word)."""
    x = _tfidf(texts)
    if x is None:
        return np.zeros((len(texts), len(texts)))
    return (x @ x.T).toarray()


def extract_key_points(
    text: str, n: int | None = None, *, splitter: SentenceSplitter = DEFAULT_SPLITTER,
    min_words: int = MIN_KEY_POINT_WORDS, similarity_threshold: float = 0.1, redundancy_threshold: float = 0.5,
) -> list[KeyPoint]:
    """The ``n`` most central sentences of ``text`` (LexRank, see the module docstring).

    Args:
        text: the source (a document, or a transcript with one turn per line).
        n: how many; ``None``: :func:`default_n_key_points` of the candidate count.
        splitter: sentence splitter (default NLTK English Punkt).
        min_words: candidates are :func:`is_informative` with this many words (default 3,
            or 2 with a number or date: "Payment bug fixed.", "Launch on the 15th." are
            candidates; "Okay." and "Yeah, I think so." turns are not); when no sentence
            is, every sentence is a candidate. Speaker labels (``Name: `` at the start of a
            line) are not part of a key point.
        similarity_threshold: graph edges below this cosine similarity are dropped
            (LexRank's threshold; 0.1 as in Erkan & Radev's experiments).
        redundancy_threshold: a candidate this similar to a chosen key point is skipped.

    Returns:
        Up to ``n`` :class:`KeyPoint` in source order; ``[]`` for an empty text.

    Raises:
        ValueError: ``n`` negative.
    """
    if n is not None and n < 0:
        raise ValueError(f"n_key_points must be >= 0, got {n}")
    spans = source_sentence_spans(text, splitter, strip_speakers=True)
    candidates = [s for s in spans if is_informative(text[s[0]:s[1]], min_words)] or spans
    if not candidates:
        return []
    n = default_n_key_points(len(candidates)) if n is None else min(n, len(candidates))
    texts = [text[a:b] for a, b in candidates]
    sim = similarity_matrix(texts)
    centrality = _pagerank(sim, similarity_threshold)
    order = sorted(range(len(candidates)), key=lambda i: (-centrality[i], i))
    chosen: list[int] = []
    for i in order:
        if len(chosen) == n:
            break
        if all(sim[i, j] < redundancy_threshold for j in chosen):
            chosen.append(i)
    for i in order:  # too few distinct sentences: fill with the next most central
        if len(chosen) == n:
            break
        if i not in chosen:
            chosen.append(i)
    return [KeyPoint(texts[i], candidates[i][0], candidates[i][1], float(centrality[i])) for i in sorted(chosen)]


def _pagerank(sim: np.ndarray, threshold: float) -> np.ndarray:
    """PageRank (networkx) of the thresholded similarity graph; uniform when it has no edge."""
    import networkx as nx
    from scipy import sparse

    n = sim.shape[0]
    weights = np.where(sim >= threshold, sim, 0.0)
    np.fill_diagonal(weights, 0.0)
    if not weights.any():
        return np.full(n, 1.0 / n)
    graph = nx.from_scipy_sparse_array(sparse.csr_array(weights))
    rank = nx.pagerank(graph, alpha=0.85, weight="weight", tol=1e-10, max_iter=1000)
    return np.array([rank[i] for i in range(n)])


def redundant_sentences(sentences: Sequence[str], threshold: float = 0.8) -> list[int | None]:
    """For each sentence, the index of an EARLIER sentence it nearly repeats, else None.

    Two sentences are near duplicates when the cosine similarity of their
    TF-IDF vectors is at least ``threshold`` (1.0 for the same content words).

    Returns:
        A list as long as ``sentences``; the first of a repeated pair is None.
    """
    if len(sentences) < 2:
        return [None] * len(sentences)
    sim = similarity_matrix(sentences)
    out: list[int | None] = []
    for i in range(len(sentences)):
        earlier = [j for j in range(i) if sim[i, j] >= threshold]
        out.append(earlier[0] if earlier else None)
    return out
