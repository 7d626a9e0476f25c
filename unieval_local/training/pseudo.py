"""Pseudo data: labelled rows for ``unieval-local train`` made from unlabelled (source, reference) pairs.

UniEval itself was trained without human labels (Zhong et al. 2022, "Towards a Unified
Multi-Dimensional Evaluator for Text Generation", §3 "Pseudo Data Construction"; its repository's
``pseudo_data_summ.py``): the reference summary is the positive (label 1), and each dimension has
rule-made negatives (label 0):

* fluency (:func:`disfluent`): one span of Poisson(5) units (at least 1) is inserted again (a copy
  placed at a random position), deleted, or shuffled;
* coherence (:func:`incoherent`): one sentence of the positive is replaced by a sentence of another
  row's summary, that summary retrieved by BM25 with the positive as the query;
* relevance (:func:`irrelevant`): another row's summary, drawn from the BM25 top 3 for the positive;
* consistency (:func:`inconsistent`): one rule-based transformation in the style of FactCC
  (Kryscinski et al. 2020, §3.1) and AdvFact: a number, a date word (month or weekday), a named
  entity (a capitalised word swapped with another of the source) or a negation (``not`` added
  after an auxiliary, or removed).

Units are words (whitespace) in most languages and characters in Chinese and Japanese; sentences
come from the package's splitter of the row's language
(:func:`~unieval_local.text.sentences.splitter_for_language`). BM25 is rank-bm25's ``BM25Okapi``
(Robertson & Zaragoza 2009). Every draw comes from one ``numpy.random.default_rng(seed)``, rows in
order, so the same input and seed give the same file. A row too short for its edit is skipped and
counted (:attr:`PseudoResult.skipped`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputFileError

__all__ = ["DIMENSIONS", "PseudoResult", "disfluent", "inconsistent", "make_pseudo", "pairs_from_rows", "units"]

#: dimension -> the recipe's one-line source (written into each row's ``pseudo.recipe``).
DIMENSIONS: dict[str, str] = {
    "coherence": "one sentence swapped for a sentence of a BM25-retrieved other summary (UniEval §3)",
    "consistency": "one entity/number/date/negation swap (FactCC §3.1, AdvFact; UniEval §3)",
    "fluency": "insert, delete or shuffle one span of Poisson(5) units (UniEval §3)",
    "relevance": "a BM25-retrieved summary of another document (UniEval §3)",
}

#: Mean span length of the fluency edits (UniEval §3: Poisson, lambda 5).
SPAN_MEAN = 5
#: Languages whose units are characters.
CHARACTER_LANGUAGES = ("zh", "ja", "yue", "wuu", "nan")
REFERENCE_FIELDS = ("references", "reference", "summary", "target")
SOURCE_FIELDS = ("source", "doc", "document")

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_AUX = {"is", "are", "was", "were", "has", "have", "had", "can", "will", "would", "could", "should", "did", "does",
        "do", "must", "may"}
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
_STRIP = ".,;:!?\"'()[]"


def _by_chars(language: str) -> bool:
    return language.split("-")[0] in CHARACTER_LANGUAGES


def units(text: str, language: str) -> list[str]:
    """The edit units of ``text``: its characters (whitespace dropped) for Chinese and Japanese, else
    its whitespace-separated words."""
    return [c for c in text if not c.isspace()] if _by_chars(language) else text.split()


def _join(parts: Sequence[str], language: str) -> str:
    return ("" if _by_chars(language) else " ").join(parts)


def disfluent(text: str, language: str, rng: np.random.Generator) -> tuple[str, str] | None:
    """A disfluent version of ``text`` and its edit (``insert``, ``delete`` or ``shuffle``), or None
    when ``text`` is too short (fewer than 2 units, or no span whose shuffle changes it).

    One span of ``k ~ Poisson(5)`` units (``k >= 1``, at most all units but one) is drawn; ``insert``
    puts a copy of it at a random position, ``delete`` removes it, ``shuffle`` permutes it (k >= 2,
    until the order changes). Source: UniEval §3 (fluency: repeat, delete, shuffle a span).
    """
    words = units(text, language)
    n = len(words)
    if n < 2:
        return None
    k = int(min(max(1, rng.poisson(SPAN_MEAN)), n - 1))
    start = int(rng.integers(0, n - k + 1))
    span = words[start:start + k]
    edits = ["insert", "delete"] + (["shuffle"] if k >= 2 and len(set(span)) > 1 else [])
    edit = edits[int(rng.integers(len(edits)))]
    if edit == "delete":
        out = words[:start] + words[start + k:]
    elif edit == "insert":
        at = int(rng.integers(0, n + 1))
        out = words[:at] + span + words[at:]
    else:
        shuffled = list(span)
        while shuffled == span:
            shuffled = [span[i] for i in rng.permutation(k)]
        out = words[:start] + shuffled + words[start + k:]
    return _join(out, language), edit


def _swap_number(words: list[str], source_words: list[str], rng) -> list[str] | None:
    at = [i for i, w in enumerate(words) if _NUMBER.match(w.strip(_STRIP))]
    if not at:
        return None
    i = at[int(rng.integers(len(at)))]
    old = words[i].strip(_STRIP)
    pool = sorted({w.strip(_STRIP) for w in source_words if _NUMBER.match(w.strip(_STRIP))} - {old})
    new = pool[int(rng.integers(len(pool)))] if pool else str(int(re.sub(r"\D", "", old) or 0) + int(rng.integers(1, 10)))
    return words[:i] + [words[i].replace(old, new, 1)] + words[i + 1:]


def _swap_date(words: list[str], rng) -> list[str] | None:
    at = [(i, group) for i, w in enumerate(words) for group in (_MONTHS, _DAYS) if w.strip(_STRIP) in group]
    if not at:
        return None
    i, group = at[int(rng.integers(len(at)))]
    old = words[i].strip(_STRIP)
    others = [g for g in group if g != old]
    return words[:i] + [words[i].replace(old, others[int(rng.integers(len(others)))], 1)] + words[i + 1:]


def _is_name(word: str) -> bool:
    w = word.strip(_STRIP)
    return len(w) > 1 and w[0].isupper() and w[1:].islower() and w not in _MONTHS and w not in _DAYS


def _swap_entity(words: list[str], source_words: list[str], rng) -> list[str] | None:
    at = [i for i, w in enumerate(words) if i > 0 and _is_name(w)]
    names = sorted({w.strip(_STRIP) for w in source_words if _is_name(w)})
    for i in [at[j] for j in rng.permutation(len(at))] if at else []:
        old = words[i].strip(_STRIP)
        pool = [x for x in names if x != old and x not in {w.strip(_STRIP) for w in words}]
        if pool:
            return words[:i] + [words[i].replace(old, pool[int(rng.integers(len(pool)))], 1)] + words[i + 1:]
    return None


def _negate(words: list[str], rng) -> list[str] | None:
    nots = [i for i, w in enumerate(words) if w.lower() == "not"]
    if nots:
        i = nots[int(rng.integers(len(nots)))]
        return words[:i] + words[i + 1:]
    aux = [i for i, w in enumerate(words) if w.lower() in _AUX]
    if not aux:
        return None
    i = aux[int(rng.integers(len(aux)))]
    return words[:i + 1] + ["not"] + words[i + 1:]


def inconsistent(text: str, source: str, language: str, rng: np.random.Generator) -> tuple[str, str] | None:
    """``text`` with exactly one factual transformation, and its kind (``number``, ``date``, ``entity``,
    ``negation``), or None when none applies.

    Numbers are replaced by another number of the source (else the number plus 1-9); a month or
    weekday by another; a capitalised word (not the first) by another capitalised word of the source;
    ``not`` is removed, or added after an auxiliary (is, was, has, can ...). Dates, entities and
    negation read English words; numbers work in every language (in Chinese and Japanese too, on the
    runs of digits among the characters). Sources: FactCC (Kryscinski et al. 2020, §3.1: entity, number,
    date swaps and negation), AdvFact; UniEval §3 (consistency).
    """
    chars = _by_chars(language)
    split = (lambda t: re.findall(r"\d+(?:[.,]\d+)*|\S", t)) if chars else str.split
    words, source_words = split(text), split(source)
    kinds = ["number", "date", "entity", "negation"]
    for kind in [kinds[i] for i in rng.permutation(len(kinds))]:
        if kind == "number":
            out = _swap_number(words, source_words, rng)
        elif kind == "date":
            out = _swap_date(words, rng)
        elif kind == "entity":
            out = _swap_entity(words, source_words, rng) if not _by_chars(language) else None
        else:
            out = _negate(words, rng) if language.split("-")[0] in ("en", "und") else None
        if out is not None:
            return _join(out, language), kind
    return None


@dataclass(frozen=True)
class PseudoResult:
    """The pseudo rows and what was skipped.

    Attributes:
        rows: ``{"target", "source", "references", "label", "pseudo": {"dimension", "recipe", "edit",
            "pair"}}`` per row (``pair``: the input row it was made from), positives then their negatives.
        skipped: reason -> how many negatives could not be made (a row too short for the edit).
    """

    rows: list[dict[str, Any]]
    skipped: dict[str, int] = field(default_factory=dict)


def pairs_from_rows(rows: Sequence[Any], where: str = "DATA") -> list[dict[str, Any]]:
    """``{"source", "positive", "references", "language"}`` per input row: the source from ``source``
    (else ``doc``, ``document``), the positive from the first of ``references`` (else ``reference``,
    ``summary``, ``target``); ``references`` keeps all of them.

    Raises:
        InputFileError: a row that is not an object, or lacks a source or a non-empty reference (the
            message names the row and the field).
    """
    out = []
    for i, row in enumerate(rows):
        at = f"{where}: row {i}"
        if not isinstance(row, Mapping):
            raise InputFileError(f"{at}: not an object of fields")
        s_name = next((k for k in SOURCE_FIELDS if k in row), None)
        r_name = next((k for k in REFERENCE_FIELDS if k in row), None)
        if s_name is None or not isinstance(row[s_name], str):
            raise InputFileError(f"{at}: no text field 'source' (or {', '.join(SOURCE_FIELDS[1:])})")
        if r_name is None:
            raise InputFileError(f"{at}: no field 'references' (or {', '.join(REFERENCE_FIELDS[1:])}) for the positive")
        refs = row[r_name] if isinstance(row[r_name], list) else [row[r_name]]
        if not refs or not all(isinstance(r, str) and r.strip() for r in refs):
            raise InputFileError(f"{at}: field {r_name!r} must hold non-empty texts, got {row[r_name]!r}")
        out.append({"source": row[s_name], "positive": refs[0], "references": list(refs),
                    "language": row.get("language")})
    return out


def _bm25(texts: list[str], languages: list[str]):
    from ..extras import require

    require("pseudo")
    from rank_bm25 import BM25Okapi

    return BM25Okapi([[u.lower() for u in units(t, lang)] or [""] for t, lang in zip(texts, languages)])


def _retrieve(index, texts, languages, i: int, pairs, top: int) -> list[int]:
    """The ``top`` other rows (another source) whose positive best matches row ``i``'s, best first."""
    scores = index.get_scores([u.lower() for u in units(texts[i], languages[i])])
    order = np.argsort(-scores, kind="stable")
    return [int(j) for j in order if pairs[j]["source"] != pairs[i]["source"]][:top]


def _language(pair: Mapping[str, Any]) -> str:
    """The pair's ``language``, else detected (:func:`~unieval_local.text.language.record_language`);
    without the detector's library installed, by script: Han ``zh``, kana ``ja``, else ``und``."""
    from ..text.language import _script_counts, record_language

    record = {"target": pair["positive"], "source": pair["source"],
              **({"language": pair["language"]} if pair.get("language") else {})}
    try:
        return record_language(record)
    except ImportError:
        _, han, kana = _script_counts(pair["positive"])
        return "ja" if kana else "zh" if han else "und"


def make_pseudo(pairs: Sequence[Mapping[str, Any]], dimension: str, *, seed: int = 0, negatives_per_positive: int = 1,
                language: str | None = None) -> PseudoResult:
    """Pseudo rows for ``dimension`` (a key of :data:`DIMENSIONS`) from :func:`pairs_from_rows`' pairs.

    Args:
        pairs: the pairs. dimension: coherence, consistency, fluency or relevance.
        seed: the seed of every draw. negatives_per_positive: negatives made per positive (>= 1).
        language: every pair's language (default: the pair's ``language``, else detected on it).

    Returns:
        :class:`PseudoResult`: per pair its positive (label 1) and up to ``negatives_per_positive``
        negatives (label 0); a negative that cannot be made is counted in ``skipped``.

    Raises:
        ValueError: an unknown dimension, ``negatives_per_positive < 1``, or (coherence, relevance)
            fewer than two distinct sources to retrieve from.
    """
    from ..text.sentences import splitter_for_language

    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}: one of {', '.join(DIMENSIONS)}")
    if negatives_per_positive < 1:
        raise ValueError(f"--negatives-per-positive must be at least 1, got {negatives_per_positive}")
    rng = np.random.default_rng(seed)
    langs = [language or _language(p) for p in pairs]
    texts = [p["positive"] for p in pairs]
    index = None
    if dimension in ("coherence", "relevance"):
        if len({p["source"] for p in pairs}) < 2:
            raise ValueError(f"{dimension} negatives come from other documents: the data needs at least two sources")
        index = _bm25(texts, langs)
    rows: list[dict[str, Any]] = []
    skipped: Counter = Counter()
    for i, p in enumerate(pairs):
        base = {"source": p["source"], "references": p["references"]}
        rows.append({"target": p["positive"], **base, "label": 1,
                     "pseudo": {"dimension": dimension, "recipe": "positive: the reference", "edit": None, "pair": i}})
        for _ in range(negatives_per_positive):
            made = _negative(dimension, i, pairs, texts, langs, index, rng, splitter_for_language)
            if made is None:
                skipped[f"{dimension}: " + ("no number, date, name or negation to swap" if dimension == "consistency"
                                            else "row too short for the edit")] += 1
                continue
            rows.append({"target": made[0], **base, "label": 0,
                         "pseudo": {"dimension": dimension, "recipe": DIMENSIONS[dimension], "edit": made[1], "pair": i}})
    return PseudoResult(rows, dict(skipped))


def _negative(dimension, i, pairs, texts, langs, index, rng, splitter_for_language) -> tuple[str, str] | None:
    """One negative of row ``i`` and its edit (see :func:`make_pseudo`), or None."""
    text, lang = texts[i], langs[i]
    if dimension == "fluency":
        return disfluent(text, lang, rng)
    if dimension == "consistency":
        return inconsistent(text, pairs[i]["source"], lang, rng)
    hits = _retrieve(index, texts, langs, i, pairs, top=3)
    if not hits:
        return None
    j = hits[int(rng.integers(len(hits)))] if dimension == "relevance" else hits[0]
    if dimension == "relevance":
        return texts[j], f"summary of row {j}"
    split = splitter_for_language(lang)
    mine, theirs = split(text), split(texts[j])
    if len(mine) < 2 or not theirs:
        return None
    at = int(rng.integers(len(mine)))
    sep = "" if _by_chars(lang) else " "
    new = theirs[int(rng.integers(len(theirs)))]
    return sep.join(mine[:at] + [new] + mine[at + 1:]), f"sentence {at} from row {j}"
