"""The ``rating`` report's options: :class:`RatingConfig` (cut points, rules, metrics,
templates), the explanation templates (English, French, Chinese, Indonesian), the calibration card the default
cut points are read from, and :func:`load_rating_config`. The defaults are identical to
``configs/rating.yaml``."""

from __future__ import annotations

import os
import string
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..wire.rating_evaluator import METRICS, Metric
from .options import DEFAULT_CONSISTENCY_ASPECT, check_consistency_aspect, load_options, migrate_consistency_task

__all__ = ["CALIBRATED_FOR", "DEFAULT_CUT_POINTS", "DEFAULT_GOOD_RULES", "DEFAULT_TEMPLATES", "PLACEHOLDER_CUT_POINTS",
           "TEMPLATE_KEYS", "RatingConfig", "calibration_card", "load_rating_config"]

#: English, French, Chinese and Indonesian explanation templates (``str.format`` fields in braces);
#: a record is explained in its language when the config does not choose one (``language``).
DEFAULT_TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "label_coherence": "Coherence", "label_consistency": "Consistency",
        "label_relevance": "Relevance", "label_fluency": "Fluency",
        "metric": "{label}: {score}/3 (probability {probability:.2f}). {detail}",
        "metric_coverage": "{label}: {score}/3 (share of key points covered {probability:.2f}). {detail}",
        "sentences_low": "{n_low} of {n} sentences scored below {threshold:.2f}; the lowest is \"{text}\" ({value:.2f}).",
        "sentences_ok": "All {n} sentences scored at least {threshold:.2f}; the lowest is \"{text}\" ({value:.2f}).",
        "sentence_one": "Its one sentence scored {value:.2f} (threshold {threshold:.2f}).",
        "whole_document": "Scored on the whole summary against the source.",
        "whole_references": "Scored on the whole summary against {n} reference(s) (mean over references).",
        "coverage": "No reference was given, so relevance is key-point coverage: {covered} of {n} key points "
                    "of the source are supported by the summary.",
        "coverage_missing": " Least supported: \"{text}\" ({value:.2f}).",
        "issue_below": "{label} is {score}/3; a good summary needs at least {needed}.",
        "issue_bad": "{label} is {score}/3, at most {bad}: the summary is rated bad.",
        "global_good": "All metrics met the expected values.",
        "global_incomplete": "Incomplete: {n_issues} rule(s) not met, none at the lowest rating "
                             "(mean normalized score {avg_score:.2f}).",
        "global_bad": "Bad: {n_bad} metric(s) at the lowest rating (mean normalized score {avg_score:.2f}).",
        "metric_geval": "{label}: {score}/3 (G-Eval {rating:.1f}/{scale}, the expected rating of the whole summary).",
    },
    "fr": {
        "label_coherence": "Cohérence", "label_consistency": "Fidélité",
        "label_relevance": "Pertinence", "label_fluency": "Fluidité",
        "metric": "{label} : {score}/3 (probabilité {probability:.2f}). {detail}",
        "metric_coverage": "{label} : {score}/3 (part des points clés couverts {probability:.2f}). {detail}",
        "sentences_low": "{n_low} phrase(s) sur {n} sous {threshold:.2f} ; la plus basse : « {text} » ({value:.2f}).",
        "sentences_ok": "Les {n} phrases atteignent au moins {threshold:.2f} ; la plus basse : « {text} » ({value:.2f}).",
        "sentence_one": "Son unique phrase obtient {value:.2f} (seuil {threshold:.2f}).",
        "whole_document": "Évalué sur tout le résumé par rapport à la source.",
        "whole_references": "Évalué sur tout le résumé par rapport à {n} référence(s) (moyenne).",
        "coverage": "Sans référence, la pertinence est la couverture des points clés : {covered} sur {n} "
                    "points clés de la source sont confirmés par le résumé.",
        "coverage_missing": " Le moins confirmé : « {text} » ({value:.2f}).",
        "issue_below": "{label} vaut {score}/3 ; un bon résumé demande au moins {needed}.",
        "issue_bad": "{label} vaut {score}/3, au plus {bad} : le résumé est jugé mauvais.",
        "global_good": "Toutes les métriques atteignent les valeurs attendues.",
        "global_incomplete": "Incomplet : {n_issues} règle(s) non satisfaite(s), aucune au plus bas "
                             "(score normalisé moyen {avg_score:.2f}).",
        "global_bad": "Mauvais : {n_bad} métrique(s) au plus bas (score normalisé moyen {avg_score:.2f}).",
        "metric_geval": "{label} : {score}/3 (G-Eval {rating:.1f}/{scale}, note attendue du résumé entier).",
    },
    "zh": {
        "label_coherence": "连贯性", "label_consistency": "一致性",
        "label_relevance": "相关性", "label_fluency": "流畅性",
        "metric": "{label}：{score}/3（概率 {probability:.2f}）。{detail}",
        "metric_coverage": "{label}：{score}/3（关键点覆盖比例 {probability:.2f}）。{detail}",
        "sentences_low": "{n} 个句子中有 {n_low} 个得分低于 {threshold:.2f}；最低的是“{text}”（{value:.2f}）。",
        "sentences_ok": "全部 {n} 个句子得分均不低于 {threshold:.2f}；最低的是“{text}”（{value:.2f}）。",
        "sentence_one": "唯一的句子得分 {value:.2f}（阈值 {threshold:.2f}）。",
        "whole_document": "按整篇摘要对照原文评分。",
        "whole_references": "按整篇摘要对照 {n} 篇参考摘要评分（取平均）。",
        "coverage": "未提供参考摘要，因此相关性按关键点覆盖计算：原文 {n} 个关键点中有 {covered} 个得到摘要支持。",
        "coverage_missing": "支持度最低的是“{text}”（{value:.2f}）。",
        "issue_below": "{label}为 {score}/3；好的摘要至少需要 {needed}。",
        "issue_bad": "{label}为 {score}/3，不高于 {bad}：摘要被评为差。",
        "global_good": "所有指标均达到预期。",
        "global_incomplete": "不完整：{n_issues} 条规则未满足，但没有指标处于最低等级（平均归一化得分 {avg_score:.2f}）。",
        "global_bad": "差：{n_bad} 个指标处于最低等级（平均归一化得分 {avg_score:.2f}）。",
        "metric_geval": "{label}：{score}/3（G-Eval {rating:.1f}/{scale}，整篇摘要的期望评分）。",
    },
    "id": {
        "label_coherence": "Koherensi", "label_consistency": "Konsistensi",
        "label_relevance": "Relevansi", "label_fluency": "Kelancaran",
        "metric": "{label}: {score}/3 (probabilitas {probability:.2f}). {detail}",
        "metric_coverage": "{label}: {score}/3 (porsi poin kunci yang tercakup {probability:.2f}). {detail}",
        "sentences_low": "{n_low} dari {n} kalimat mendapat skor di bawah {threshold:.2f}; yang terendah \"{text}\" "
                         "({value:.2f}).",
        "sentences_ok": "Semua {n} kalimat mendapat skor minimal {threshold:.2f}; yang terendah \"{text}\" ({value:.2f}).",
        "sentence_one": "Satu-satunya kalimat mendapat skor {value:.2f} (ambang {threshold:.2f}).",
        "whole_document": "Dinilai pada seluruh ringkasan terhadap sumber.",
        "whole_references": "Dinilai pada seluruh ringkasan terhadap {n} referensi (rata-rata atas referensi).",
        "coverage": "Tidak ada referensi, jadi relevansi diukur dengan cakupan poin kunci: {covered} dari {n} poin "
                    "kunci sumber didukung oleh ringkasan.",
        "coverage_missing": " Paling sedikit didukung: \"{text}\" ({value:.2f}).",
        "issue_below": "{label} bernilai {score}/3; ringkasan yang baik memerlukan minimal {needed}.",
        "issue_bad": "{label} bernilai {score}/3, paling tinggi {bad}: ringkasan dinilai buruk.",
        "global_good": "Semua metrik memenuhi nilai yang diharapkan.",
        "global_incomplete": "Belum lengkap: {n_issues} aturan tidak terpenuhi, tidak ada yang di peringkat terendah "
                             "(rata-rata skor ternormalisasi {avg_score:.2f}).",
        "global_bad": "Buruk: {n_bad} metrik di peringkat terendah (rata-rata skor ternormalisasi {avg_score:.2f}).",
        "metric_geval": "{label}: {score}/3 (G-Eval {rating:.1f}/{scale}, nilai harapan seluruh ringkasan).",
    },
}
TEMPLATE_KEYS = tuple(DEFAULT_TEMPLATES["en"])
#: The fields each template may use.
_TEMPLATE_FIELDS: dict[str, set[str]] = {
    **{f"label_{m}": set() for m in ("coherence", "consistency", "relevance", "fluency")},
    "metric": {"label", "score", "probability", "detail"},
    "metric_coverage": {"label", "score", "probability", "detail"},
    "sentences_low": {"n_low", "n", "threshold", "text", "value"},
    "sentences_ok": {"n_low", "n", "threshold", "text", "value"},
    "sentence_one": {"threshold", "text", "value"},
    "whole_document": set(), "whole_references": {"n"},
    "coverage": {"covered", "n"}, "coverage_missing": {"text", "value"},
    "issue_below": {"label", "score", "needed", "bad"}, "issue_bad": {"label", "score", "needed", "bad"},
    "global_good": {"avg_score", "n_issues", "n_bad"}, "global_incomplete": {"avg_score", "n_issues", "n_bad"},
    "global_bad": {"avg_score", "n_issues", "n_bad"},
    "metric_geval": {"label", "score", "rating", "scale", "probability"},
}
#: Templates added after the first release: a language a config adds without them takes English's.
_LATER_TEMPLATES = ("metric_geval",)
_TEMPLATE_SAMPLE: dict[str, Any] = {"label": "Coherence", "score": 2, "probability": 0.5, "detail": "x", "n_low": 1,
                                    "n": 2, "threshold": 0.5, "text": "x", "value": 0.5, "covered": 1, "needed": 3,
                                    "bad": 1, "avg_score": 0.5, "n_issues": 1, "n_bad": 1, "rating": 3.5, "scale": 5}

#: The thirds of the probability range: the placeholder cut points of what no calibration covers.
PLACEHOLDER_CUT_POINTS: tuple[float, float] = (round(1 / 3, 4), round(2 / 3, 4))

def calibration_card() -> dict:
    """The calibration card of the built-in cut points (``unieval_local/data/
    calibration_unieval_sum.json``, written by ``scripts/fit_calibration.py``): data set, n,
    bins, cut points, cross-validated agreement with intervals, what it holds for (the
    checkpoint's evaluator and shape, ``checkpoint_config``).

    Raises:
        OSError: the card is missing from the installation.
    """
    import json
    from importlib import resources

    return json.loads(resources.files("unieval_local").joinpath("data/calibration_unieval_sum.json").read_text())


#: Default cut points (low, high) per metric: read from the calibration card (the one source:
#: ``unieval_local/data/calibration_unieval_sum.json``, :func:`calibration_card`), fitted by
#: ``scripts/fit_calibration.py`` on the official unieval-sum's SummEval scores against the
#: binned expert ratings (quadratic-kappa objective, 10-fold CV by document). Fluency keeps the
#: thirds: the fit did not beat them. ``relevance_coverage`` (relevance by key-point coverage,
#: without a reference) is not calibrated: the thirds, as placeholders.
DEFAULT_CUT_POINTS: dict[str, tuple[float, float]] = {
    **{m: tuple(calibration_card()["metrics"][m]["cut_points"]) for m in METRICS},
    "relevance_coverage": PLACEHOLDER_CUT_POINTS,
}

#: The metric -> the ``task/aspect`` the calibration card holds for (its checkpoint: unieval-sum).
CALIBRATED_FOR: dict[str, str] = {m: f"summarization/{m}" for m in METRICS}
DEFAULT_GOOD_RULES: dict[str, int] = {"coherence": 2, "consistency": 3, "relevance": 3, "fluency": 2}


def _template_language(code: str, templates: Any) -> str:
    """``code`` as a key of ``templates``: itself when it is one, else its language subtag
    (:func:`~unieval_local.settings.check_language`) when that is one and ``code`` is the same
    language with a region, script, other case or its three-letter code (``zh-CN``, ``ZH``,
    ``zh_Hant``, ``zho`` -> ``zh``); else ``code`` unchanged (refused, with :func:`_language_hint`).
    A deprecated code (``in``, the old ISO 639 code of Indonesian) is not read silently as
    another: it gets a did-you-mean."""
    from ..settings import check_language

    if code in templates:
        return code
    try:
        language = check_language(code)
    except ValueError:
        return code
    primary = code.strip().replace("_", "-").split("-")[0].lower()
    same = primary == language or len(primary) == 3  # zho, cmn: ISO 639-2/3 names of zh
    return language if same and language in templates else code


def _language_hint(code: str, templates: Any) -> str:
    """``; did you mean 'zh' (Chinese)?`` for a template language that is not a key of
    ``templates`` (``cn`` -> ``zh``; ``in`` -> ``id``, whose old ISO 639 code it is), or ``""``."""
    from ..settings import LANGUAGE_NAMES, _did_you_mean, check_language

    try:
        language = check_language(code)
    except ValueError:
        hint = _did_you_mean(code.strip()) if code.strip() else ""
        return hint if any(f"did you mean {t!r}" in hint for t in templates) else ""
    if language not in templates:
        return ""
    name = LANGUAGE_NAMES.get(language, language)
    return f"; did you mean {language!r} ({name}; {code!r} is its old ISO 639 code)?"


class RatingConfig(BaseModel):
    """Settings of the ``rating`` report (``configs/rating.yaml`` holds the defaults).

    Attributes:
        enabled_metrics: the metrics to rate (a subset of coherence,
            consistency, relevance, fluency); only their rules apply.
        cut_points: metric -> ``[low, high]`` in [0, 1], low <= high; key
            ``relevance_coverage`` for relevance without a reference.
        good_rules: metric -> the least rating (1-3) a good summary needs.
        bad_at_most: a metric rated at most this makes the summary bad.
        sentence_threshold: sentences below this probability are "low" in explanations.
        coverage_threshold: a key point counts as covered at this probability.
        n_key_points: key points to extract (None: from the source length,
            :func:`~unieval_local.text.keypoints.default_n_key_points`).
        metric_aspects: metric -> the ``task/aspect`` that answers it instead of summarization's
            aspect of that name, for ``coherence`` and ``fluency`` (e.g. ``fluency:
            summarization/grammar``, SEAHORSE's grammar question): the aspect needs at most the
            target and the source. Its ratings use the metric's cut points, calibrated for
            unieval-sum, so they are marked uncalibrated (``details...calibrated: false`` and
            the run's note).
        consistency_aspect: ``task/aspect`` that answers the consistency queries (a
            claim-vs-document aspect: ``summarization/consistency`` (default),
            ``fact/consistency`` (unieval-fact), ``fact/support`` (MiniCheck) ...).
        language: the template set for explanations (a key of ``templates``); when the
            config does not set it, each record's language where templates exist for it
            (en, fr, zh, id built in), else en.
        templates: language -> template name -> ``str.format`` text.
        details: also write each report's ``details`` (probabilities, cut points, method,
            key points); off by default, so a report is exactly ``{"summary": {...}}``.
        judge: ``unieval`` (default: the UniEval aspects above, claims and key points) or
            ``g-eval``: each metric from summarization's ``geval_<metric>`` aspect of the whole
            summary (the expected 1-5 or 1-3 rating E; Liu et al. 2023, G-Eval, section 2.3),
            one query per metric and record; the cut points are read on ``(E - 1) / (K - 1)`` in
            [0, 1] (one set for fluency's 1-3 and the others' 1-5); needs a local instruct model (``--model g-eval=DIR``). Its cut points
            default to the thirds of the range (placeholders, not calibrated) where the config
            gives none; ``metric_aspects``, ``consistency_aspect`` and the coverage settings are
            not used.

    Raises:
        pydantic.ValidationError: an unknown metric, bad cut points, a missing
            template or an unknown language.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled_metrics: list[Metric] = Field(default_factory=lambda: list(METRICS), min_length=1)
    cut_points: dict[str, tuple[float, float]] = Field(default_factory=lambda: dict(DEFAULT_CUT_POINTS))
    good_rules: dict[Metric, int] = Field(default_factory=lambda: dict(DEFAULT_GOOD_RULES))
    bad_at_most: int = Field(default=1, ge=1, le=3)
    sentence_threshold: float = Field(default=0.5, ge=0, le=1)
    coverage_threshold: float = Field(default=0.5, ge=0, le=1)
    n_key_points: int | None = Field(default=None, ge=1)
    metric_aspects: dict[Literal["coherence", "fluency"], str] = Field(default_factory=dict)
    consistency_aspect: str = DEFAULT_CONSISTENCY_ASPECT
    language: str = "en"
    templates: dict[str, dict[str, str]] = Field(default_factory=lambda: {k: dict(v) for k, v in DEFAULT_TEMPLATES.items()})
    details: bool = False
    judge: Literal["unieval", "g-eval"] = "unieval"

    @model_validator(mode="before")
    @classmethod
    def _merge_defaults(cls, data: Any) -> Any:
        """A config gives only what it changes: ``cut_points`` and ``good_rules`` entries
        override the defaults one metric at a time, and ``templates`` override them one
        language (and within a language, one template) at a time. With ``judge: g-eval`` the
        cut points a config does not give are the thirds (the card's are fitted for unieval-sum)."""
        if not isinstance(data, dict):
            return data
        data = dict(migrate_consistency_task(data))
        if data.get("judge") == "g-eval" and isinstance(data.get("cut_points", {}), dict):
            given = data.get("cut_points", {})
            data["cut_points"] = {**{m: PLACEHOLDER_CUT_POINTS for m in DEFAULT_CUT_POINTS}, **given}
        elif isinstance(data.get("cut_points"), dict):
            data["cut_points"] = {**DEFAULT_CUT_POINTS, **data["cut_points"]}
        if isinstance(data.get("good_rules"), dict):
            data["good_rules"] = {**DEFAULT_GOOD_RULES, **data["good_rules"]}
        if isinstance(data.get("templates"), dict):
            merged = {k: dict(v) for k, v in DEFAULT_TEMPLATES.items()}
            for lang, table in data["templates"].items():
                base = merged.get(lang, {k: DEFAULT_TEMPLATES["en"][k] for k in _LATER_TEMPLATES})
                merged[lang] = {**base, **table} if isinstance(table, dict) else table
            data["templates"] = merged
        if isinstance(data.get("language"), str):  # zh-CN, ZH, zh_Hant: the template set of zh
            data["language"] = _template_language(data["language"], data.get("templates") or DEFAULT_TEMPLATES)
        return data

    @field_validator("enabled_metrics", mode="before")
    @classmethod
    def _one_string(cls, v: Any) -> Any:
        """``"coherence"`` or ``"coherence,fluency"`` (one string) reads as a list of metrics."""
        return [m.strip() for m in v.split(",") if m.strip()] if isinstance(v, str) else v

    @field_validator("enabled_metrics")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))

    @field_validator("consistency_aspect")
    @classmethod
    def _checker(cls, v: str) -> str:
        return check_consistency_aspect(v)

    @field_validator("metric_aspects")
    @classmethod
    def _mapped(cls, v: dict[str, str]) -> dict[str, str]:
        from ..registry.tasks import DEFAULT_REGISTRY

        for metric, name in v.items():
            task, sep, aspect = name.partition("/") if isinstance(name, str) else ("", "", "")
            try:
                a = DEFAULT_REGISTRY.get_aspect(task, aspect) if sep else None
            except Exception as exc:
                raise ValueError(f"metric_aspects.{metric}: {exc}") from None
            if a is None:
                raise ValueError(f"metric_aspects.{metric}: want TASK/ASPECT, got {name!r}")
            if not set(a.required_fields) <= {"target", "source"}:
                raise ValueError(f"metric_aspects.{metric}: {name} needs {', '.join(a.required_fields)}; a rating "
                                 "metric can be answered by an aspect of the target and the source only")
        return v

    @field_validator("cut_points")
    @classmethod
    def _cuts(cls, v: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (low, high) in v.items():
            if name not in (*METRICS, "relevance_coverage"):
                raise ValueError(f"cut_points: unknown metric {name!r}")
            if not 0 <= low <= high <= 1:
                raise ValueError(f"cut_points.{name}: need 0 <= low <= high <= 1, got [{low}, {high}]")
        return v

    @field_validator("good_rules")
    @classmethod
    def _rules(cls, v: dict[str, int]) -> dict[str, int]:
        for name, needed in v.items():
            if needed not in (1, 2, 3):
                raise ValueError(f"good_rules.{name}: a rating 1, 2 or 3, got {needed!r}")
        return v

    @model_validator(mode="after")
    def _complete(self) -> "RatingConfig":
        missing = [m for m in (*METRICS, "relevance_coverage") if m not in self.cut_points]
        if missing:
            raise ValueError(f"cut_points lacks {', '.join(missing)}")
        if self.language not in self.templates:
            raise ValueError(f"language {self.language!r} has no templates; have {', '.join(self.templates)}"
                             f"{_language_hint(self.language, self.templates)}")
        for lang, table in self.templates.items():
            absent = [k for k in TEMPLATE_KEYS if k not in table]
            if absent:
                raise ValueError(f"templates.{lang} lacks {', '.join(absent)}")
            for key, text in table.items():
                if key not in _TEMPLATE_FIELDS:
                    raise ValueError(f"templates.{lang}.{key}: unknown template; the templates are "
                                     f"{', '.join(TEMPLATE_KEYS)}")
                try:
                    text.format(**_TEMPLATE_SAMPLE)
                except Exception as exc:  # KeyError, IndexError, ValueError, TypeError, AttributeError ...
                    fields = ", ".join("{" + f + "}" for f in sorted(_TEMPLATE_FIELDS.get(key, _TEMPLATE_SAMPLE)))
                    raise ValueError(f"templates.{lang}.{key}: cannot fill {text!r} ({type(exc).__name__}: {exc}); "
                                     f"fields: {fields}") from None
                used = {f for _, f, _, _ in string.Formatter().parse(text) if f}
                unknown = used - _TEMPLATE_FIELDS.get(key, set())
                if unknown:
                    raise ValueError(f"templates.{lang}.{key}: unknown field(s) {', '.join(sorted(unknown))}; "
                                     f"this template may use "
                                     f"{', '.join(sorted(_TEMPLATE_FIELDS.get(key, ()))) or 'no field'}")
        return self

    def t(self, key: str, **values: Any) -> str:
        """Template ``key`` of the chosen language, filled with ``values``."""
        return self.templates[self.language][key].format(**values)


def load_rating_config(path: str | os.PathLike, **overrides: Any) -> RatingConfig:
    """Read a rating YAML (keys of :class:`RatingConfig`), then apply ``overrides``
    (None values ignored); see :func:`~unieval_local.reports.options.load_options`.

    Raises:
        ValueError: unreadable file, YAML syntax, or an invalid setting (the
            message names the file and key).
    """
    return load_options(RatingConfig, path, overrides)
