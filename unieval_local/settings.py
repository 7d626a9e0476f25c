"""One declaration of the engine settings: the keyword arguments of :class:`~unieval_local.Scorer`
and :class:`~unieval_local.engine.Engine`, the CLI flags of ``score`` and ``report``, the Ray
actors' engines, and (for those that change a score) the run configuration
(:class:`~unieval_local.config.RunConfig`, whose defaults are these), the signature, the
score-cache key and the resume identity all come from :data:`SETTINGS`.

Each :class:`Setting` says once: its name, default, help text, CLI flag (or none: a
Python-only setting such as a runner factory), whether it can change a score, and which
values it takes. :class:`EngineSettings` is the frozen value an engine is made from.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, make_dataclass, replace
from typing import Any

__all__ = ["BATCH_TOKENS", "DTYPES", "DTYPE_SETTINGS", "LANGUAGE_NAMES", "LONG_INPUT_MODES", "REFERENCE_REDUCTIONS",
           "SETTINGS", "EngineSettings", "Setting", "batch_tokens_for", "check_dtype", "check_language", "cli_settings",
           "default", "number_type", "parse_model_spec", "setting"]

LONG_INPUT_MODES: tuple[str, ...] = ("truncate", "fit", "chunk")
REFERENCE_REDUCTIONS: tuple[str, ...] = ("mean", "max")
DTYPES: tuple[str, ...] = ("float32", "bfloat16")
#: what the ``dtype`` setting accepts: a dtype, or ``auto`` (float32, and bfloat16 for a decoder
#: model above 3B parameters: :meth:`Engine.dtype_for <unieval_local.engine.Engine.dtype_for>`)
DTYPE_SETTINGS: tuple[str, ...] = ("auto", *DTYPES)


def check_dtype(dtype: str) -> str:
    """Validate a dtype name; it is returned unchanged.

    Raises:
        ValueError: ``float16`` (T5 activations overflow to NaN in float16) or an unknown name.
    """
    if dtype in ("float16", "fp16", "half"):
        raise ValueError("float16 is refused: T5 activations overflow to NaN in float16; "
                         "use bfloat16 (GPUs, CPUs with AMX) or float32")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def parse_model_spec(values: list[str] | None) -> str | dict[str, str] | None:
    """The CLI's ``--model`` values as a model spec: none -> None; one ``DIR`` (or hub id) for
    every evaluator; ``NAME=DIR`` (repeatable) -> ``{name: dir}``.

    Raises:
        ValueError: an empty value, ``NAME=DIR`` without a name or a folder, or several values
            not all ``NAME=DIR``.
    """
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        if not values[0].strip():
            raise ValueError("--model needs a folder or hub id, got an empty string")
        return values[0]
    mapping = {}
    for v in values:
        if "=" not in v:
            raise ValueError(f"--model given several times must be NAME=DIR each, got {v!r}")
        name, _, path = v.partition("=")
        if not name.strip() or not path.strip():
            raise ValueError(f"--model NAME=DIR needs both a name and a folder, got {v!r}")
        mapping[name.strip()] = path.strip()
    return mapping


def number_type(kind: type, low: float, *, strict: bool = False, high: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type`` for a number of ``kind`` (``int`` or ``float``) >= ``low`` (> ``low``
    when ``strict``, <= ``high`` when given): argparse names the flag in its error, e.g.
    ``argument --batch-tokens: must be an integer >= 1, got '0'``.

    Raises (from the returned function):
        argparse.ArgumentTypeError: text that is not such a number (NaN included).
    """
    import argparse

    what = "an integer" if kind is int else "a number"
    bound = f"{'>' if strict else '>='} {low:g}" + (f" and <= {high:g}" if high is not None else "")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}") from None
        if value != value or (value <= low if strict else value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _integer(low: int, *, optional: bool = False, none: str = "") -> Callable[[Any], str | None]:
    def problem(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            return f"must be an integer >= {low}{none}, got {v!r}"
        return None
    return problem


def _positive_number(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        return f"must be a number > 0, got {v!r}"
    return None


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    def problem(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(choices)}, got {v!r}"
    return problem


def _dtype_setting(dtype: str) -> str:
    """A ``dtype`` setting: ``auto`` or a dtype :func:`check_dtype` accepts."""
    return dtype if dtype == "auto" else check_dtype(dtype)


def _dtype_text(text: str) -> str:
    import argparse

    try:
        return _dtype_setting(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dtype_problem(v: Any) -> str | None:
    try:
        _dtype_setting(v)
    except ValueError as exc:
        return str(exc).removeprefix("dtype ")
    return None


#: English names of the languages the package has rules, evaluators or detection for (messages,
#: the README's table, and the did-you-mean of a name given as a code: "chinese" -> zh).
LANGUAGE_NAMES: dict[str, str] = {
    "af": "Afrikaans", "am": "Amharic", "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan",
    "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "et": "Estonian", "fa": "Persian", "fi": "Finnish", "fil": "Filipino", "fr": "French", "gu": "Gujarati",
    "he": "Hebrew", "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "kk": "Kazakh", "kn": "Kannada", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "ml": "Malayalam", "mr": "Marathi", "ms": "Malay", "my": "Burmese", "nb": "Norwegian Bokmal",
    "nl": "Dutch", "no": "Norwegian", "pa": "Punjabi", "pl": "Polish", "ps": "Pashto", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sr": "Serbian", "sv": "Swedish",
    "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "th": "Thai", "tl": "Tagalog", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "yue": "Cantonese", "zh": "Chinese", "und": "undetermined"}
#: Other names people write for a language (did-you-mean only).
_NAME_ALIASES = {"mandarin": "zh", "putonghua": "zh", "farsi": "fa", "bahasa": "id", "bahasa indonesia": "id",
                 "castilian": "es", "flemish": "nl", "bangla": "bn", "deutsch": "de", "espanol": "es",
                 "español": "es", "francais": "fr", "français": "fr", "italiano": "it", "nederlands": "nl",
                 "português": "pt", "русский": "ru", "中文": "zh", "汉语": "zh", "日本語": "ja", "한국어": "ko"}
#: Country codes written for a language's code (did-you-mean only; none of them is a language
#: subtag: ``jp`` is Japan, the language is ``ja``).
_COUNTRY_CODES = {"jp": "ja", "cn": "zh", "kr": "ko", "gr": "el", "dk": "da", "cz": "cs", "ua": "uk", "vn": "vi",
                  "us": "en", "gb": "en", "il": "he", "ir": "fa", "rs": "sr", "at": "de"}


def _did_you_mean(text: str) -> str:
    """``; did you mean 'zh' (Chinese)?`` for a refused language code, or ``""``: a language name
    (``chinese``, ``Mandarin``) or a near miss of one or of a code, else the language subtag of a
    tag whose other subtags are wrong (``en-EN`` -> ``en``)."""
    import difflib

    import langcodes

    key = " ".join(text.lower().replace("_", " ").replace("-", " ").split())
    by_name = {name.lower(): code for code, name in LANGUAGE_NAMES.items() if code != "und"} | _NAME_ALIASES
    code = by_name.get(key) or _COUNTRY_CODES.get(key.split(" ")[0] if len(key.split(" ")[0]) == 2 else key)
    if code is None:
        close = difflib.get_close_matches(key, list(by_name), n=1, cutoff=0.85)
        code = by_name[close[0]] if close else None
    if code is None:
        try:
            primary = langcodes.Language.get(langcodes.standardize_tag(text.split("-")[0].split("_")[0],
                                                                        macro=True)).language
        except (langcodes.LanguageTagError, ValueError):
            primary = None
        if primary and primary != text and langcodes.tag_is_valid(primary):
            code = primary
    if code is None:  # a name we know nothing close to (klingon): say so, rather than nothing
        return (f"; no language named {text!r} is known here: give its ISO 639 code (en, ja, zh ...)"
                if len(key) > 3 and text.replace(" ", "").isalpha() else "")
    return f"; did you mean {code!r}" + (f" ({LANGUAGE_NAMES[code]})?" if code in LANGUAGE_NAMES else "?")


@functools.lru_cache(maxsize=4096)
def _standard_language(text: str) -> str | None:
    """The language subtag of BCP 47 tag ``text`` (already stripped, ``_`` read as ``-``), or None."""
    import langcodes

    try:
        tag = langcodes.standardize_tag(text, macro=True)
    except (langcodes.LanguageTagError, ValueError):
        return None
    if not langcodes.tag_is_valid(tag):
        return None
    language = langcodes.Language.get(tag).language or "und"  # "und-Hant": a script, no language
    return language if language.isascii() and language.isalpha() and 2 <= len(language) <= 3 else None


def check_language(code: Any, where: str = "language") -> str:
    """The language of BCP 47 tag or ISO 639 code ``code``: its primary language subtag, in one
    spelling per language, so that sentence splitting, templates and the evaluators' languages
    (all per language, not per region or script) see one code. Read by langcodes (Speer; the
    IANA language subtag registry and CLDR's aliases, offline: no names needed): case and ``_``
    do not matter, scripts, regions, variants and extensions are dropped, deprecated and
    three-letter codes give their two-letter code, and a macrolanguage's dominant language
    gives the macrolanguage (BCP 47 / CLDR). For example ``zh-CN``, ``ZH``, ``zh_Hant``,
    ``Zh-Hans``, ``zho`` and ``cmn`` (Mandarin) -> ``zh``; ``en-US``, ``EN_us``, ``en_UK`` (CLDR's
    alias of en-GB) -> ``en``; ``iw`` -> ``he``; ``in`` -> ``id``; ``arb`` -> ``ar``; ``und`` ->
    ``und``. Other members of a macrolanguage keep their code: ``yue`` and ``zh-yue`` ->
    ``yue`` (Cantonese; split as Chinese: :func:`~unieval_local.text.sentences.splitter_for_language`).

    Returns:
        the language subtag: two letters (ISO 639-1) where the language has them, else three.

    Raises:
        ValueError: not a string, a malformed tag, or one the registry does not know (``xx``,
            ``chinese``, ``en-EN``), naming ``where`` and, where one is close, the code meant
            (``chinese`` -> did you mean 'zh' (Chinese)?).

    >>> check_language("zh_Hant-TW"), check_language("yue"), check_language("cmn")
    ('zh', 'yue', 'zh')
    """
    if isinstance(code, str):
        language = _standard_language(code.strip().replace("_", "-"))
        if language is not None:
            return language
    hint = _did_you_mean(code.strip()) if isinstance(code, str) and code.strip() else ""
    raise ValueError(f"{where} must be a language code (BCP 47 / ISO 639) such as en, zh, zh-CN or id, "
                     f"got {code!r}{hint}")


def _claim_checker_problem(v: Any) -> str | None:
    """The form of ``claim_checker``: ``TASK/ASPECT`` (which aspects qualify is checked against the
    registry when an engine is made: :func:`~unieval_local.claims.checker_aspect`)."""
    if not isinstance(v, str) or v.count("/") != 1 or not all(v.split("/")):
        return f"must be TASK/ASPECT of a fact checker aspect (fact/support, fact/factcg ...), got {v!r}"
    return None


def _generator_problem(v: Any) -> str | None:
    """The form of ``generator``: None (the staged ``g-eval`` folder, if any), ``none``, or ``NAME=DIR``."""
    if v is None or v == "none":
        return None
    if not isinstance(v, str) or "=" not in v or not all(x.strip() for x in v.split("=", 1)):
        return f"must be NAME=DIR (a local instruct model's folder) or none, got {v!r}"
    return None


def _language_problem(v: Any) -> str | None:
    if v is None:
        return None
    try:
        check_language(v)
    except ValueError as exc:
        return str(exc).removeprefix("language ")
    return None


def _language_text(text: str) -> str:
    import argparse

    try:
        return check_language(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("language ")) from None


@dataclass(frozen=True)
class Setting:
    """One engine setting, declared once.

    Attributes:
        name: the keyword (``batch_tokens``).
        default: its default (the one place it is written).
        help: what it does, for ``--help`` and the docs (``{default}`` is filled in).
        flag: its CLI flag (``--batch-tokens``), or None for a Python-only setting.
        changes_score: whether a different value can change a score (then it is part of the
            :class:`~unieval_local.config.RunConfig`, the signature and the cache key).
        problem: ``value -> None`` when the value is good, else what is wrong (``must be an
            integer >= 1, got 0``); None: any value.
        kind: the type a flag's text is read as (``int``, ``float``, ``str``; ``bool`` for a
            switch); None for Python-only settings.
        metavar, choices: argparse details.
        negative_flag: for a boolean whose default is True, the flag that turns it off
            (``--no-fast-forward``), instead of ``flag``.
        repeatable: the flag may be given several times (``--model NAME=DIR``);
            ``from_cli`` turns its list of values into the setting's value.
        from_cli: ``values -> value`` for a repeatable flag (raises ``ValueError``).
        cli_type: the argparse ``type`` of the flag's text (raises ``argparse.ArgumentTypeError``
            naming what is wrong, so argparse names the flag); default ``kind``.
    """

    name: str
    default: Any
    help: str
    flag: str | None = None
    changes_score: bool = False
    problem: Callable[[Any], str | None] | None = None
    kind: type | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    negative_flag: str | None = None
    repeatable: bool = False
    from_cli: Callable[[Any], Any] | None = None
    cli_type: Callable[[str], Any] | None = None

    def validate(self, value: Any) -> None:
        """Check ``value``.

        Raises:
            ValueError: ``<name> <what is wrong>``, e.g. ``batch_tokens must be an integer >= 1, got 0``.
        """
        why = self.problem(value) if self.problem is not None else None
        if why:
            raise ValueError(f"{self.name} {why}")

    def help_text(self, default: Any = None) -> str:
        """The help text with ``{default}`` filled in (``default``: a command's own default)."""
        return self.help.format(default=self.default if default is None else default)


#: Every engine setting, in the documented keyword order of ``Scorer``.
SETTINGS: tuple[Setting, ...] = (
    Setting("model", None, "checkpoint folder or hub id for every evaluator, or NAME=DIR per evaluator "
            "(repeatable; a mapping in Python); default: $UNIEVAL_LOCAL_HOME, the HF cache, the hub", flag="--model",
            metavar="DIR|HUB_ID|NAME=DIR", kind=str, repeatable=True, from_cli=parse_model_spec),
    Setting("device", None, "cpu, cuda or cuda:N (default: cuda when available)", flag="--device", kind=str),
    Setting("dtype", "auto", "auto (default: float32, UniEval parity; bfloat16 for a decoder model above 3B "
            "parameters), float32 or bfloat16 (fast on GPUs and on CPUs with bfloat16 matrix units, AMX; slower than "
            "float32 on other CPUs); float16 is refused (T5 overflows to NaN)", flag="--dtype",
            changes_score=True, problem=_dtype_problem, kind=str,
            metavar="{" + ",".join(DTYPE_SETTINGS) + "}", cli_type=_dtype_text),
    Setting("max_length", None, "tokens per query (default: the evaluator's own, 1024 for UniEval, 2048 for "
            "MiniCheck)", flag="--max-length", changes_score=True,
            problem=_integer(8, optional=True, none=" (or None: each evaluator's default)"), kind=int,
            cli_type=number_type(int, 8)),
    Setting("batch_tokens", None, "most padded tokens (rows x longest prompt) per forward pass (default: 2048 on "
            "a CPU, where smaller batches stay in the caches, 8192 on a GPU)",
            flag="--batch-tokens", problem=_integer(1, optional=True), kind=int, cli_type=number_type(int, 1)),
    Setting("attention_mib", 1024, "most MiB of encoder attention per forward pass, counting the mask and the "
            "scores (2 x rows x heads x longest^2 x bytes; default {default}): bounds memory for long prompts, "
            "which --batch-tokens alone does not", flag="--attention-mib", problem=_positive_number, kind=float,
            cli_type=number_type(float, 0, strict=True)),
    Setting("reference_reduction", "mean", "combine scores over several references: mean (default) or max",
            flag="--reference-reduction", changes_score=True, problem=_one_of(REFERENCE_REDUCTIONS), kind=str,
            choices=REFERENCE_REDUCTIONS),
    Setting("offline", None, "never use the network (as HF_HUB_OFFLINE=1)", flag="--offline", kind=bool),
    Setting("splitter", None, "sentence splitter (default NLTK English Punkt, UniEval's); Python only"),
    Setting("progress", False, "a progress bar over queries (None: on a terminal); the CLI's --no-progress"),
    Setting("fast_forward", True, "our exact single-step forward (default) or the model's own (slower; for "
            "checking)", changes_score=True, negative_flag="--no-fast-forward", kind=bool),
    Setting("cache_dir", None, "persistent score cache folder (SQLite): queries scored before with the same "
            "checkpoint content and settings are not run again; a cache that fails (damaged, read-only, disk full, "
            "folder not creatable) is skipped after one warning, with the same scores", flag="--cache-dir",
            metavar="DIR", kind=str),
    Setting("aspects_config", None, "YAML file of user-defined aspects (see configs/aspects.example.yaml)",
            flag="--aspects-config", metavar="FILE", kind=str),
    Setting("long_input", "truncate", "prompts over --max-length: truncate (UniEval: the end is cut), fit "
            "(shorten the document/reference/history, never the target) or chunk (score against windows of the "
            "long field and combine); default {default}", flag="--long-input", changes_score=True,
            problem=_one_of(LONG_INPUT_MODES), kind=str, choices=LONG_INPUT_MODES),
    Setting("window_overlap", 1, "sentences (dialogue turns) shared by consecutive windows in chunk mode "
            "(default {default}; keep it below a window's sentence count, or windows only advance one sentence at "
            "a time)", flag="--window-overlap", changes_score=True, problem=_integer(0), kind=int,
            cli_type=number_type(int, 0)),
    Setting("chunk_words", None, "words per document chunk for evaluators that chunk the document themselves "
            "(default: each one's own: MiniCheck's chunk_size 500, FactCG's 550; NLI pairs at most 300)",
            flag="--chunk-words", changes_score=True,
            problem=_integer(1, optional=True, none=" (or None: each evaluator's own)"), kind=int,
            cli_type=number_type(int, 1)),
    Setting("language", None, "the records' language (ISO 639-1 code: en, zh, id ...) instead of detecting each "
            "record's with py3langid; a record's own 'language' field still wins. It picks the sentence splitter, "
            "the reports' consistency checker and explanation language", flag="--language", changes_score=True,
            problem=_language_problem, kind=str, metavar="CODE", cli_type=_language_text),
    Setting("strict_language", False, "refuse (an error naming the example, field 'language' and the aspect) a "
            "record in a language the aspect's evaluator was not trained on, instead of scoring it with one warning "
            "per run", flag="--strict-language", kind=bool),
    Setting("merge_punctuation", False, "sentence-level aspects: a piece without letters ('?', '1.', '!!') joins a "
            "neighbouring sentence instead of being scored as one (default: scored, as UniEval does)",
            flag="--merge-punctuation", changes_score=True, kind=bool),
    Setting("claim_checker", "fact/support", "fact/claims: the fact checker aspect (TASK/ASPECT) that checks each "
            "claim against the source: fact/support (MiniCheck; default), fact/factcg, fact/nli_support, "
            "fact/groundedness (Granite Guardian) ...", flag="--claim-checker", changes_score=True,
            problem=_claim_checker_problem, kind=str, metavar="TASK/ASPECT"),
    Setting("generator", None, "fact/claims: the local instruct model that writes each summary's atomic claims, "
            "NAME=DIR (default: the staged g-eval model, if any); none, or no instruct model staged: the "
            "summary's sentences are the claims", flag="--generator", changes_score=True,
            problem=_generator_problem, kind=str, metavar="NAME=DIR|none"),
    Setting("threads", None, "CPU threads for the model (torch.set_num_threads; default: torch's, one per core); "
            "on a machine shared with other jobs, give your share of the cores", flag="--threads",
            problem=_integer(1, optional=True, none=" (or None: torch's default)"), kind=int,
            cli_type=number_type(int, 1)),
    Setting("runner_factory", None, "advanced/testing: f(ResolvedCheckpoint, fingerprint, Evaluator) -> Runner; "
            "Python only"),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The :class:`Setting` named ``name``.

    Raises:
        KeyError: no such setting.
    """
    return _BY_NAME[name]


def default(name: str) -> Any:
    """The declared default of setting ``name`` (``default("attention_mib")`` is 1024)."""
    return _BY_NAME[name].default


#: The padded tokens per forward pass when ``batch_tokens`` is not set, by device type. Measured
#: on a 2-core CPU (T5-large widths, 24 SummEval records, consistency, two interleaved runs):
#: 8192 took 89 s and 90 s, 2048 took 59 s and 53 s, 1024 took 54 s and 53 s: large batches' attention
#: tensors (rows x heads x S x S) leave the CPU's caches. A GPU wants large batches.
BATCH_TOKENS = {"cpu": 2048, "gpu": 8192}


def batch_tokens_for(device: str) -> int:
    """The default ``batch_tokens`` of ``device`` (``cpu``, ``cuda``, ``cuda:1`` ...): :data:`BATCH_TOKENS`."""
    return BATCH_TOKENS["cpu" if str(device).split(":")[0] == "cpu" else "gpu"]


def cli_settings() -> list[Setting]:
    """The settings that have a CLI flag, in declaration order."""
    return [s for s in SETTINGS if s.flag or s.negative_flag]


class _EngineSettingsMethods:
    """The methods of :class:`EngineSettings` (its fields come from :data:`SETTINGS`)."""

    def __post_init__(self) -> None:
        for s in SETTINGS:
            value = getattr(self, s.name)
            if isinstance(value, os.PathLike) and s.name in ("cache_dir", "aspects_config"):
                value = os.fspath(value)
            s.validate(value)
        if self.language is not None:  # one code per language: zh-CN, ZH, zh_Hant, cmn -> zh
            object.__setattr__(self, "language", check_language(self.language))

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None, **more: Any) -> "EngineSettings":
        """Settings from a mapping and/or keywords (the others keep their defaults).

        Raises:
            TypeError: an unknown setting name (the message lists the known ones).
            ValueError: a bad value, naming the setting.
        """
        given = {**dict(values or {}), **more}
        unknown = sorted(set(given) - set(_BY_NAME))
        if unknown:
            raise TypeError(f"unknown engine setting(s) {', '.join(unknown)}; the settings are "
                            f"{', '.join(_BY_NAME)}")
        return cls(**given)

    def replace(self, **changes: Any) -> "EngineSettings":
        """A copy with ``changes`` (checked)."""
        return replace(self, **changes)

    def as_kwargs(self) -> dict[str, Any]:
        """``{name: value}`` of every setting, in declaration order (a Ray actor rebuilds its
        engine from them)."""
        return {s.name: getattr(self, s.name) for s in SETTINGS}

    def score_settings(self) -> dict[str, Any]:
        """The settings that can change a score (``changes_score``), by name."""
        return {s.name: getattr(self, s.name) for s in SETTINGS if s.changes_score}


#: The settings an engine is made from: a frozen dataclass with one field per :data:`SETTINGS`
#: entry, in order, with its declared default (generated from the declaration, so defaults are
#: written once). ``EngineSettings.of(mapping, **kw)`` refuses unknown names; ``.replace(**kw)``
#: gives a checked copy; ``.as_kwargs()`` the keyword arguments. Construction checks every value
#: (``ValueError`` naming the setting).
EngineSettings = make_dataclass(
    "EngineSettings",
    [(s.name, Any, field(default=s.default, compare=s.name not in ("runner_factory", "splitter")))
     for s in SETTINGS],
    bases=(_EngineSettingsMethods,), frozen=True)
EngineSettings.__module__ = __name__
EngineSettings.__doc__ = ("The settings of one engine (frozen): one field per :data:`SETTINGS` entry, with its "
                          "declared default.\n\n    Fields: "
                          + ", ".join(f"``{s.name}`` (default ``{s.default!r}``)" for s in SETTINGS) + ".")
