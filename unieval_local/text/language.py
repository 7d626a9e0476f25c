"""The language of a record: detected offline, or given.

Detection uses py3langid (Lui & Baldwin, "langid.py: An Off-the-shelf Language
Identification Tool", ACL 2012 demos; the py3langid fork ships its naive-Bayes model in its
wheel: no download, no network, deterministic), restricted to :data:`CANDIDATES` (the
languages of the evaluators' training data and the world's most written ones): its full
model's 142 classes include varieties (Nigerian Pidgin, Central Bikol) that short English
lines are mistaken for. Rules sit on top of it, for the short texts records hold:

* script first: a text whose letters are at least 30% Han characters, with no kana and
  no hangul, is Chinese (``zh``) whatever else it holds: "用户说 the app crashes" is a
  Chinese sentence with an English phrase, which langid.py alone calls Wu (``wuu``);
* a text with fewer than :data:`MIN_LETTERS` letters, or whose most probable language has
  a normalised probability under :data:`MIN_CONFIDENCE`, is undetermined (``und``): "OK"
  says nothing about its language. Undetermined text is read as English (UniEval's);
* English has a prior of :data:`ENGLISH_PRIOR` to 1 over each other language (langid.py's
  naive Bayes assumes equal priors; the records this package scores are mostly English):
  English wins when its probability times the prior reaches the best one's (in text with
  no Han characters: a Chinese clause in English words is langid.py's to judge). Short English
  lines full of foreign names ("Mangia tutti ristorante is a nice restaurant .") are
  otherwise read as Italian or Catalan: measured on the English SF-RES and SF-HOT records
  (2,056, target and source), 36 were given another language with equal priors, 6 with the
  prior of 5; none of 5,234 SummEval, DialSummEval, QAGS and Topical-Chat records either
  way; of 27 short hand-written non-English lines (15 Indonesian, many with English words)
  one is read as English with it ("Deadline project diundur ke Jumat.", undetermined
  without).

A record's language (:func:`record_language`) is detected on its target and the start of
its source together (a one-line summary says little alone; up to :data:`PROBE_CHARS`
characters of each). A ``language`` field of the record, then the run's ``language=`` /
``--language``, take precedence over detection.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..settings import LANGUAGE_NAMES, check_language

__all__ = ["CANDIDATES", "DETECTOR", "ENGLISH_PRIOR", "LanguageDetector", "MIN_CONFIDENCE", "MIN_LETTERS", "PROBE_CHARS", "UNDETERMINED",
           "check_language", "detect_language", "language_name", "record_language", "languages_outside",
           "writing_language"]

#: The code of a text whose language cannot be told (too short, or no language is likely).
UNDETERMINED = "und"
#: Fewer letters than this: undetermined.
MIN_LETTERS = 4
#: langid.py's normalised probability of its best language below this: undetermined.
MIN_CONFIDENCE = 0.2
#: English's prior odds over any other language (see the module docstring).
ENGLISH_PRIOR = 5.0
#: Characters of the target and of the source a record's language is detected on.
PROBE_CHARS = 1000
#: The languages detection chooses among (ISO 639-1): the 27 of the multilingual NLI evaluator,
#: SEAHORSE's six, and other widely written languages, so that a text in one of them is not
#: given to its neighbour. Not Malay: langid.py cannot tell it from Indonesian on a sentence or
#: two (it calls "Rapat membahas anggaran." Malay), so Malay text is read as Indonesian.
CANDIDATES = tuple("ar bn de en es fa fr he hi id it ja ko mr nl pl ps pt ru sv sw ta tr uk ur vi zh th el bg cs "
                   "da fi hu no ro sk sl hr sr ca et lt lv tl af".split())


def language_name(code: str) -> str:
    """``"zh"`` -> ``"Chinese"`` for the languages of :data:`~unieval_local.settings.LANGUAGE_NAMES`;
    else the code."""
    return LANGUAGE_NAMES.get(code, code)


def writing_language(code: str | None) -> str:
    """The language a local generator is asked to write in (claims, key points, reasons): the
    record's, English where it is unknown (None) or undetermined (``und``), as undetermined text
    is read (module docstring)."""
    return "en" if code in (None, UNDETERMINED) else code


#: Han characters (CJK unified ideographs, extension A, compatibility ideographs, extensions
#: B-G), and kana or hangul (syllables and jamo), counted among the letters by the regex engine
#: (not a Python loop per character: detection runs on every record).
_HAN = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0003134f]")
_KANA_HANGUL = re.compile("[\u3040-\u30ff\uac00-\ud7af\u1100-\u11ff]")


def _script_counts(text: str) -> tuple[int, int, int]:
    """(letters, Han characters, kana or hangul characters) of ``text``: of its letters only
    (the katakana middle dot is in the kana block but is no letter)."""
    letters = "".join(filter(str.isalpha, text))
    return len(letters), len(_HAN.findall(letters)), len(_KANA_HANGUL.findall(letters))


def _load_identifier():
    """py3langid's identifier, its model read in memory (py3langid's own loader unpacks it to a
    temporary file, which fails under a file-size limit or on a full disk mid-run)."""
    import io
    import lzma

    import numpy as np
    from py3langid import modelio
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    with lzma.open(MODEL_DIR / MODEL_FILE) as src, np.load(io.BytesIO(src.read()), allow_pickle=False) as data:
        return LanguageIdentifier(data["ptc"], data["pc"], data["classes"].tolist(),
                                  modelio._to_array(data["nextmove"]), data["out_feat"].tolist(), norm_probs=True,
                                  tk_row=modelio._to_array(data["nextmove_row"]))


class LanguageDetector:
    """py3langid with the rules of the module docstring; built on first use, shared by
    threads (the model is read-only once loaded).

    ``detector(text) -> code`` (ISO 639-1 where langid.py has one, else ``und``);
    ``detector.name`` (``py3langid-<version>``) goes into signatures.
    """

    def __init__(self) -> None:
        self._identifier = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``py3langid-<version>``: the detector and its model, for signatures."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"py3langid-{version('py3langid')}"
        except PackageNotFoundError:  # pragma: no cover - a declared dependency
            return "py3langid-absent"

    def _get(self):
        if self._identifier is None:
            with self._lock:
                if self._identifier is None:
                    identifier = _load_identifier()
                    identifier.set_languages([c for c in CANDIDATES if c in identifier.nb_classes])
                    self._identifier = identifier
        return self._identifier

    def probabilities(self, text: str) -> dict[str, float]:
        """langid.py's normalised probability of each of :data:`CANDIDATES` (equal priors,
        summing to 1)."""
        return {code: float(p) for code, p in self._get().rank(text)}

    def __call__(self, text: str) -> str:
        letters, han, other_cjk = _script_counts(text)
        if letters < MIN_LETTERS and not han:
            return UNDETERMINED
        if han and not other_cjk and han >= 0.3 * letters:
            return "zh"
        probs = self.probabilities(text)
        code = max(probs, key=probs.__getitem__)
        if not han and probs.get("en", 0.0) * ENGLISH_PRIOR >= probs[code]:
            return "en"
        return code if probs[code] >= MIN_CONFIDENCE else UNDETERMINED

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


#: The shared detector.
DETECTOR = LanguageDetector()


def detect_language(text: str) -> str:
    """The language of ``text`` (:class:`LanguageDetector`): ``zh``, ``id``, ``en`` ... or ``und``.

    >>> detect_language("客户：我的订单还没到。")
    'zh'
    """
    return DETECTOR(text if isinstance(text, str) else "")


def languages_outside(trained: Sequence[str], languages: Sequence[str | None]) -> dict[str, list[int]]:
    """Language -> indices of the examples in ``languages`` outside ``trained`` (an evaluator's
    training languages; undetermined text counts as English; None entries skipped)."""
    outside: dict[str, list[int]] = {}
    for i, lang in enumerate(languages):
        if lang is not None and (lang if lang != UNDETERMINED else "en") not in trained:
            outside.setdefault(lang, []).append(i)
    return outside


def record_language(record: Any, default: str | None = None) -> str:
    """The language of one record (a :class:`~unieval_local.schema.UniEvalData` or a mapping):
    its own ``language`` field when it has one, else ``default`` (the run's ``language=``), else
    detected on the first :data:`PROBE_CHARS` characters of its target and of its source
    (``summary``/``output`` and ``input``/``transcript`` read as the reports read them).

    Raises:
        ValueError: the record's ``language`` is not a language code.
    """
    get = record.get if isinstance(record, Mapping) else (lambda k, d=None: getattr(record, k, None)
                                                         if k in type(record).model_fields
                                                         else (record.model_extra or {}).get(k, d))
    own = get("language", None)
    if own is not None:
        return check_language(own, "the record's language")
    if default is not None:
        return default
    texts = []
    for names in (("target", "summary", "output", "system_output"), ("source", "input", "transcript")):
        value = next((get(n, None) for n in names if isinstance(get(n, None), str)), None)
        if value:
            texts.append(value[:PROBE_CHARS])
    return detect_language("\n".join(texts))
