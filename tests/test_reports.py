"""Report formats (rating, summ, autoeval): the rule engine table, exact JSON on a fake
runner with known answers, key points against a plain reference computation, the
cut-point fitting script on synthetic data, and the CLI end to end on QMSum and SummEval."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest
import yaml

from unieval_local import Scorer
from unieval_local.engine import Job
from unieval_local.cli import main
from unieval_local.text.keypoints import default_n_key_points, extract_key_points, redundant_sentences, similarity_matrix
from unieval_local.reports import (
    AutoevalReport,
    RatingConfig,
    RatingReport,
    ReportFile,
    SummReport,
    apply_rules,
    load_rating_config,
    make_report,
    normalized_score,
    to_rating,
)
from unieval_local.analysis.cutpoints import fit_cut_points, human_to_rating
from unieval_local.schema import UniEvalData
from unieval_local.registry.tasks import get_aspect

from conftest import ROOT, FakeRunner, assert_same_shape, documented_shape, fake_factory

# ---------------------------------------------------------------- fake runner


def parse_prompt(prompt: str) -> tuple[str, dict[str, str]]:
    """``question: Q </s> label: value ...`` -> (Q, {label: value})."""
    head, *parts = prompt.split(" </s> ")
    fields = {}
    for part in parts:
        label, _, value = part.partition(": ")
        fields[label] = value
    return head[len("question: "):], fields


def fake_scorer(fake_ckpt, answer, **kw):
    """A scorer over the shared fake runner with ``answer(question, fields) -> P(Yes)``
    (long_input chunk, as the report command's default); returns (engine, runner)."""
    runner = FakeRunner(lambda prompt: answer(*parse_prompt(prompt)))
    kw.setdefault("long_input", "chunk")
    return Scorer(model=fake_ckpt, runner_factory=fake_factory(runner), **kw).engine, runner


def assert_json_close(actual, expected, path="$"):
    """Recursive equality; floats to 1e-12 relative."""
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        assert math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {actual} != {expected}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), \
            f"{path}: keys {sorted(actual) if isinstance(actual, dict) else actual} != {sorted(expected)}"
        for k in expected:
            assert_json_close(actual[k], expected[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual} != {expected}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_json_close(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


COH = "Is this a coherent summary to the document?"
CONS = "Is this claim consistent with the document?"
FLU = "Is this a fluent paragraph?"
REL = "Is this summary relevant to the reference?"

# ---------------------------------------------------------------- rule engine


@pytest.mark.parametrize("ratings, rating, score, binary, avg, n_failed", [
    # avg_score: mean of rating / 3 (the rating format's normalized_score), computed by hand
    ({"coherence": 3, "consistency": 3, "relevance": 3, "fluency": 3}, "good", 1.0, 1, 12 / 12, 0),
    ({"coherence": 2, "consistency": 3, "relevance": 3, "fluency": 2}, "good", 1.0, 1, 10 / 12, 0),
    ({"coherence": 2, "consistency": 2, "relevance": 3, "fluency": 2}, "incomplete", 0.5, 0, 9 / 12, 1),
    ({"coherence": 3, "consistency": 3, "relevance": 2, "fluency": 3}, "incomplete", 0.5, 0, 11 / 12, 1),
    ({"coherence": 2, "consistency": 2, "relevance": 2, "fluency": 2}, "incomplete", 0.5, 0, 8 / 12, 2),
    ({"coherence": 1, "consistency": 3, "relevance": 3, "fluency": 3}, "bad", 0.0, 0, 10 / 12, 1),
    ({"coherence": 3, "consistency": 3, "relevance": 3, "fluency": 1}, "bad", 0.0, 0, 10 / 12, 1),
    ({"coherence": 1, "consistency": 1, "relevance": 1, "fluency": 1}, "bad", 0.0, 0, 4 / 12, 4),
    # subsets: only the enabled metrics' rules apply
    ({"coherence": 2}, "good", 1.0, 1, 2 / 3, 0),
    ({"consistency": 2}, "incomplete", 0.5, 0, 2 / 3, 1),
    ({"fluency": 1}, "bad", 0.0, 0, 1 / 3, 1),
    ({"coherence": 2, "fluency": 2}, "good", 1.0, 1, 4 / 6, 0),
    ({"relevance": 2, "fluency": 3}, "incomplete", 0.5, 0, 5 / 6, 1),
    ({"consistency": 3, "relevance": 3}, "good", 1.0, 1, 6 / 6, 0),
    ({"consistency": 1, "relevance": 2}, "bad", 0.0, 0, 3 / 6, 2),
])
def test_rule_engine_table(ratings, rating, score, binary, avg, n_failed):
    out = apply_rules(ratings)
    assert (out.rating, out.score, out.binary_score, len(out.failed)) == (rating, score, binary, n_failed)
    assert out.avg_score == pytest.approx(avg, abs=1e-15)


@pytest.mark.smoke
def test_rating_formulas_of_the_documented_example():
    """The rating format's own example: 3 -> 1.0, 2 -> 0.67; ratings 3, 3, 3, 2 average 0.92."""
    assert [normalized_score(r) for r in (1, 2, 3)] == [1 / 3, 2 / 3, 1.0]
    assert round(normalized_score(2), 4) == 0.6667
    out = apply_rules({"coherence": 3, "consistency": 3, "relevance": 3, "fluency": 2})
    assert round(out.avg_score, 4) == 0.9167 and out.rating == "good"


def test_rule_engine_custom_rules_and_bad_input():
    assert apply_rules({"coherence": 2}, {"coherence": 3}).rating == "incomplete"
    assert apply_rules({"coherence": 2}, {"coherence": 2}, bad_at_most=2).rating == "bad"
    with pytest.raises(ValueError, match="1, 2 or 3"):
        apply_rules({"coherence": 4})
    with pytest.raises(ValueError, match="enable at least one"):
        apply_rules({})


def test_score_mapping_boundaries():
    cuts = (0.3, 0.8)
    assert [to_rating(p, cuts) for p in (0.0, 0.2999, 0.3, 0.7999, 0.8, 1.0)] == [1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="non-finite"):
        to_rating(float("nan"), cuts)


def test_rating_config_file_equals_defaults_and_validates(tmp_path):
    assert load_rating_config(ROOT / "configs" / "rating.yaml") == RatingConfig()
    fitted = load_rating_config(ROOT / "configs" / "rating.fact-qags.yaml")
    assert fitted.consistency_aspect == "fact/consistency"
    assert fitted.cut_points["consistency"] == pytest.approx((0.849505, 0.917664))
    # the file gives only what it fitted: the other metrics keep the built-in, calibrated cut points
    assert {m: fitted.cut_points[m] for m in ("coherence", "relevance", "fluency", "relevance_coverage")} == \
        {m: RatingConfig().cut_points[m] for m in ("coherence", "relevance", "fluency", "relevance_coverage")}
    assert set(yaml.safe_load((ROOT / "configs" / "rating.fact-qags.yaml").read_text())) == \
        {"cut_points", "consistency_aspect"}
    old = tmp_path / "old.yaml"  # options written before consistency_aspect still read, with a warning
    old.write_text("consistency_task: fact\n")
    with pytest.warns(DeprecationWarning, match="consistency_aspect"):
        assert load_rating_config(old).consistency_aspect == "fact/consistency"
    old.write_text("consistency_aspect: summarization/fluency\n")
    with pytest.raises(ValueError, match="consistency_aspect: must be one of summarization/consistency, .*"
                                         "fact/consistency, fact/support"):
        load_rating_config(old)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cut_points:\n  coherence: [0.8, 0.2]\n")
    with pytest.raises(ValueError, match=r"bad.yaml: cut_points: .*low <= high"):
        load_rating_config(bad)
    bad.write_text("language: de\n")
    with pytest.raises(ValueError, match="no templates"):
        load_rating_config(bad)
    bad.write_text("enabled_metrics: [coherence, novelty]\n")
    with pytest.raises(ValueError, match="enabled_metrics"):
        load_rating_config(bad)


# ---------------------------------------------------------------- rating: exact JSON

SOURCE = "Alpha rose sharply today. Beta fell. Gamma stayed flat."


def rating_answer(question, f):
    if question == COH:
        return 0.5
    if question == CONS:
        if f["document"] == SOURCE:  # a summary sentence against the source
            return {"Alpha rose.": 0.9, "Beta fell.": 0.5}[f["claim"]]
        return {"Alpha rose sharply today.": 0.8, "Gamma stayed flat.": 0.1}[f["claim"]]  # key point vs summary
    if question == FLU:
        return {"Alpha rose.": 0.6, "Beta fell.": 0.4}[f["paragraph"]]
    if question == REL:
        return 0.3
    raise AssertionError(question)


@pytest.mark.smoke
def test_rating_report_exact_json(fake_ckpt):
    scorer, runner = fake_scorer(fake_ckpt, rating_answer)
    records = [
        {"id": "a", "target": "Alpha rose. Beta fell.", "source": SOURCE, "references": ["Alpha rose, beta fell."]},
        {"id": "b", "target": "Alpha rose. Beta fell.", "source": SOURCE,
         "key_points": ["Alpha rose sharply today.", "Gamma stayed flat."]},
        {"id": "c", "target": "Alpha rose."},  # no source: coherence and consistency cannot be rated
        {"id": "d", "target": "   ", "source": SOURCE},
    ]
    thirds = {m: [0.3333, 0.6667] for m in ("coherence", "consistency", "relevance", "fluency")}  # pinned here:
    with pytest.warns(UserWarning, match="placeholders") as caught:  # the hand-computed numbers use the thirds
        out = make_report(records, "rating", engine=scorer, options={"cut_points": thirds})
    assert sum("placeholders" in str(w.message) for w in caught) == 1  # once per run, not per record
    assert out.notes and "fit_rating_cutpoints" in out.notes[0]
    a = out.reports[0].model_dump(mode="json")
    # coherence 2, consistency 3, relevance 1, fluency 2: avg (2 + 3 + 1 + 2) / 3 / 4
    assert_json_close(a, {"index": 0, "id": "a", "error": None, "notes": [], "language": "en",
                          "consistency_aspect": "summarization/consistency",
                          "reasons": {"source": "template", "generator": None, "failed": {}, "fields": {  # none staged
                              f"summary.{f}": "template" for f in ("global_explanation", "coherence.explanation",
                                                                   "consistency.explanation", "relevance.explanation",
                                                                   "fluency.explanation")}},
                          "report": {"summary": {
        "global_explanation": "Bad: 1 metric(s) at the lowest rating (mean normalized score 0.67).",
        "relevancy_rating": "bad", "score": 0.0,
        "possible_issues": ["Relevance is 1/3, at most 1: the summary is rated bad."],
        "binary_score": 0, "avg_score": 8 / 12,
        "coherence": {"score": 2, "explanation": "Coherence: 2/3 (probability 0.50). Scored on the whole summary "
                                                 "against the source.", "normalized_score": 2 / 3},
        "consistency": {"score": 3, "explanation": "Consistency: 3/3 (probability 0.70). All 2 sentences scored at "
                                                   "least 0.50; the lowest is \"Beta fell.\" (0.50).",
                        "normalized_score": 1.0},
        "relevance": {"score": 1, "explanation": "Relevance: 1/3 (probability 0.30). Scored on the whole summary "
                                                 "against 1 reference(s) (mean over references).",
                      "normalized_score": 1 / 3},
        "fluency": {"score": 2, "explanation": "Fluency: 2/3 (probability 0.50). 1 of 2 sentences scored below 0.50; "
                                               "the lowest is \"Beta fell.\" (0.40).", "normalized_score": 2 / 3},
    }}})
    assert_same_shape(a["report"], documented_shape("rating"))
    b = out.reports[1].report.summary
    assert b.relevance.model_dump(mode="json") == {
        "score": 2, "explanation": "Relevance: 2/3 (share of key points covered 0.50). No reference was given, so "
        "relevance is key-point coverage: 1 of 2 key points of the source are supported by the summary. Least "
        "supported: \"Gamma stayed flat.\" (0.10).", "normalized_score": 2 / 3}
    # coherence 2, consistency 3, relevance 2, fluency 2: relevance misses good (needs 3) -> incomplete
    assert (b.relevancy_rating, b.score, b.binary_score) == ("incomplete", 0.5, 0)
    assert b.avg_score == pytest.approx(9 / 12)
    assert b.possible_issues == ["Relevance is 2/3; a good summary needs at least 3."]
    assert out.reports[1].report.details is None and "details" not in out.reports[1].model_dump()["report"]
    assert out.reports[2].error.field == "source" and out.reports[2].report is None
    assert out.reports[3].error.field == "target"
    assert (out.n_records, out.n_reported, out.n_errors) == (4, 2, 2)
    assert out.aggregate["share_bad"] == 0.5 and out.aggregate["mean_relevance"] == 1.5
    assert out.aggregate["avg_score"] == pytest.approx((8 / 12 + 9 / 12) / 2)
    ReportFile[RatingReport].model_validate_json(out.model_dump_json())
    # all queries (4 aspects, key-point coverage) went to the model, each distinct one once
    assert len(runner.prompts) == len(set(runner.prompts)) == 8


def test_rating_details_option_and_fitted_cut_points(official_shape_ckpt, fake_ckpt):
    scorer, _ = fake_scorer(official_shape_ckpt, rating_answer)
    rec = {"id": "b", "target": "Alpha rose. Beta fell.", "source": SOURCE,
           "key_points": ["Alpha rose sharply today.", "Gamma stayed flat."]}
    fitted = {"coherence": [0.2, 0.4], "consistency": [0.2, 0.6], "relevance": [0.2, 0.6],
              "fluency": [0.2, 0.45], "relevance_coverage": [0.2, 0.5]}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fitted cut points: no placeholder warning
        out = make_report([rec], "rating", engine=scorer, options={"details": True, "cut_points": fitted})
    assert out.notes == []
    r = out.reports[0].report
    assert [m for m, v in r.summary.metrics.items()] == ["coherence", "consistency", "relevance", "fluency"]
    assert all(v.score == 3 for v in r.summary.metrics.values()) and r.summary.relevancy_rating == "good"
    assert_json_close(r.details.model_dump(mode="json"), {
        "metrics": {
            "coherence": {"probability": 0.5, "cut_points": [0.2, 0.4], "placeholder_cut_points": False, "calibrated": False,
                          "method": "unieval:summarization/coherence"},
            "consistency": {"probability": 0.7, "cut_points": [0.2, 0.6], "placeholder_cut_points": False, "calibrated": False,
                            "method": "unieval:summarization/consistency"},
            "relevance": {"probability": 0.5, "cut_points": [0.2, 0.5], "placeholder_cut_points": False, "calibrated": False,
                          "method": "key_point_coverage"},
            "fluency": {"probability": 0.5, "cut_points": [0.2, 0.45], "placeholder_cut_points": False, "calibrated": False,
                        "method": "unieval:summarization/fluency"}},
        "relevance_method": "key_point_coverage",
        "key_points": [
            {"key_point": "Alpha rose sharply today.", "score": 0.8, "covered": True, "start": None, "end": None},
            {"key_point": "Gamma stayed flat.", "score": 0.1, "covered": False, "start": None, "end": None}]})
    # the built-in (calibrated) cut points: the note names only what no calibration covers
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        make_report([rec], "rating", engine=scorer, options={"enabled_metrics": ["coherence", "fluency"]})
        make_report([{**rec, "references": ["Alpha rose."]}], "rating", engine=scorer)
    assert not any("cut points" in str(w.message) for w in got)
    with pytest.warns(UserWarning, match=r"cut points of consistency are calibrated for summarization/consistency "
                                         r"\(unieval-sum\), not for fact/consistency; relevance_coverage are "
                                         r"placeholders") as got:
        both = Scorer(model={"unieval-sum": official_shape_ckpt, "unieval-fact": fake_ckpt},
                      runner_factory=fake_factory(FakeRunner(lambda prompt: rating_answer(*parse_prompt(prompt)))),
                      long_input="chunk").engine
        make_report([rec], "rating", engine=both, options={"consistency_aspect": "fact/consistency"})
    note = next(str(w.message) for w in got if "cut points" in str(w.message))
    assert "coherence" not in note and "fluency" not in note


def test_rating_reads_the_rating_formats_input_names(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, rating_answer)
    ours = make_report([{"target": "Alpha rose. Beta fell.", "source": SOURCE}], "rating", engine=scorer,
                       options={"enabled_metrics": ["coherence", "consistency"]}, warn=False)
    theirs = make_report([{"summary": "Alpha rose. Beta fell.", "input": SOURCE}], "rating", engine=scorer,
                         options={"enabled_metrics": ["coherence", "consistency"]}, warn=False)
    assert theirs.reports[0].report == ours.reports[0].report and theirs.reports[0].report is not None
    bad = make_report([{"summary": "Alpha rose.", "target": "Beta fell.", "input": SOURCE}], "rating", engine=scorer,
                      options={"enabled_metrics": ["coherence"]}, warn=False)
    assert bad.reports[0].error.message.startswith("both 'target' and 'summary'")  # no "Value error, "


def test_report_errors_use_the_records_own_field_names_and_hint_renames(fake_ckpt):
    """A record that names its fields as another tool does gets errors in its own names,
    a did-you-mean for a misnamed field, and every problem of the record at once."""
    scorer, _ = fake_scorer(fake_ckpt, rating_answer)
    recs = [{"summary": 42, "input": SOURCE},                       # our 'target', under its own name
            {"summary": "Alpha rose.", "document": SOURCE},          # the source misnamed
            {"prediction": "Alpha rose.", "article": SOURCE},        # both misnamed
            {"target": "Alpha rose.", "source": SOURCE, "key_points": [""], "n_key_points": -1}]
    for fmt in ("rating", "summ"):
        out = make_report(recs, fmt, engine=scorer, warn=False,
                          options={"enabled_metrics": ["coherence", "consistency"]} if fmt == "rating" else None)
        e = [r.error for r in out.reports]
        assert e[0].field == "summary" and e[0].message == "Input should be a valid string, got int"
        assert e[1].field == "source" and "(the record has 'document': did you mean 'source'? rename it)" in e[1].message
        assert e[2].field == "target, source"
        assert "'prediction': did you mean 'target'" in e[2].message and "'article': did you mean 'source'" in e[2].message
        assert e[3].field == "key_points, n_key_points"
        assert e[3].message.startswith("key_points: ") and "; n_key_points: " in e[3].message
    # autoeval reads a record without any source (accuracy and completeness N/A), but a
    # misnamed source is an error, not a silent N/A
    plain, _ = fake_scorer(fake_ckpt, lambda q, f: 0.7)
    auto = make_report([{"summary": "Alpha rose.", "document": SOURCE}, {"summary": "Alpha rose."}], "autoeval",
                       engine=plain, warn=False, options={"instructions": ["Be short"]})
    assert auto.reports[0].error.field == "source" and "did you mean 'source'" in auto.reports[0].error.message
    assert auto.reports[1].error is None and auto.reports[1].report.accuracy_score == "N/A"


def test_rating_subset_language_and_fact_checkpoint(fake_ckpt):
    scorer, runner = fake_scorer(fake_ckpt, rating_answer)
    rec = {"target": "Alpha rose. Beta fell.", "source": SOURCE}
    out = make_report([rec], "rating", engine=scorer, warn=False,
                      options={"enabled_metrics": ["consistency", "fluency"], "language": "fr",
                               "consistency_aspect": "fact/consistency", "details": True,
                               "cut_points": {"consistency": [0.3333, 0.6667]}})
    r = out.reports[0].report
    assert list(r.summary.metrics) == ["consistency", "fluency"] and r.details.relevance_method is None
    assert list(out.reports[0].model_dump()["report"]["summary"]) == [
        "global_explanation", "relevancy_rating", "score", "possible_issues", "binary_score", "avg_score",
        "consistency", "fluency"]  # only the enabled metrics, no null entries
    assert r.details.metrics["consistency"].method == "unieval:fact/consistency"
    assert r.summary.relevancy_rating == "good" and r.summary.global_explanation == "Toutes les métriques atteignent les valeurs attendues."
    assert r.summary.fluency.explanation.startswith("Fluidité : 2/3 (probabilité 0.50). 1 phrase(s) sur 2")
    assert out.settings.consistency_aspect == "fact/consistency"
    assert set(out.settings.checkpoints) == {"unieval-fact", "unieval-sum"}
    assert not any(p.startswith(f"question: {COH}") for p in runner.prompts)


# ---------------------------------------------------------------- summ: exact JSON

SUMM_SOURCE = ("Alpha rose sharply today. Beta fell. Gamma stayed flat. Delta traders waited for news "
               "while markets closed early and analysts wrote long notes.")


def summ_answer(question, f):
    assert question == CONS
    if f["document"] == SUMM_SOURCE:
        return {"Alpha rose.": 0.9, "Beta fell.": 0.3}[f["claim"]]
    return {"Alpha rose sharply today.": 0.8, "Gamma stayed flat.": 0.1}[f["claim"]]


@pytest.mark.smoke
def test_summ_report_exact_json(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, summ_answer)
    rec = {"id": "s", "target": "Alpha rose. Beta fell. Alpha rose.", "source": SUMM_SOURCE,
           "key_points": ["Alpha rose sharply today.", "Gamma stayed flat."]}
    out = make_report([rec, {"target": "Alpha rose."}], "summ", engine=scorer)
    ratio = 6 / 23
    expected_score = 100 * (0.5 * (2 / 3) + 0.5 * 0.5) - 20 * (1 / 3)
    assert_json_close(out.reports[0].model_dump(mode="json")["report"], {
        "score": expected_score, "passed": False, "threshold": 80.0,
        "alignment_score": 2 / 3, "coverage_score": 0.5,
        "redundancy_penalty": 20 / 3, "compression_penalty": 0.0, "length_penalty": 0.0,
        "compression_ratio": ratio, "n_claims": 3, "n_sentences": 3, "key_point_source": "given",
        "claims": [{"claim": "Alpha rose.", "score": 0.9, "aligned": True},
                   {"claim": "Beta fell.", "score": 0.3, "aligned": False},
                   {"claim": "Alpha rose.", "score": 0.9, "aligned": True}],
        "key_points": [
            {"key_point": "Alpha rose sharply today.", "score": 0.8, "covered": True, "start": None, "end": None},
            {"key_point": "Gamma stayed flat.", "score": 0.1, "covered": False, "start": None, "end": None}],
        "redundant_sentences": [{"sentence": 2, "repeats": 0}],
        "eval_metadata": {
            "missing_details": ["The summary does not cover the key point \"Gamma stayed flat.\" "
                                "(coverage P(Yes) = 0.10 < 0.50)."],
            "misaligned_details": ["The claim \"Beta fell.\" is not supported by the source "
                                   "(P(Yes) = 0.30 < 0.50)."],
            "missing_key_points": [{"key_point": "Gamma stayed flat.", "score": 0.1, "start": None, "end": None}],
            "misaligned_claims": [{"claim": "Beta fell.", "score": 0.3, "best_source_window": None}]},
    })
    assert_same_shape(out.reports[0].model_dump(mode="json")["report"], documented_shape("summ"), allow_extra=True)
    assert out.reports[1].error.field == "source"
    ReportFile[SummReport].model_validate_json(out.model_dump_json())


def test_summ_reads_input_output_rows_and_per_record_settings(fake_ckpt):
    scorer, runner = fake_scorer(fake_ckpt, summ_answer)
    base = {"source": SUMM_SOURCE, "key_points": ["Alpha rose sharply today.", "Gamma stayed flat."]}
    ours = make_report([{**base, "target": "Alpha rose. Beta fell. Alpha rose."}], "summ", engine=scorer)
    theirs = make_report([{"input": SUMM_SOURCE, "output": "Alpha rose. Beta fell. Alpha rose.",
                           "key_points": base["key_points"]}], "summ", engine=scorer)
    assert theirs.reports[0].report == ours.reports[0].report
    # a record's own max_n_claims and threshold win over the options
    out = make_report([{**base, "target": "Alpha rose. Beta fell. Alpha rose.", "max_n_claims": 1, "threshold": 40},
                       {**base, "target": "Alpha rose. Beta fell. Alpha rose."}], "summ", engine=scorer,
                      options={"max_n_claims": 2, "threshold": 90})
    one, two = (r.report for r in out.reports)
    assert (one.n_claims, one.threshold, two.n_claims, two.threshold) == (1, 40, 2, 90)
    assert one.alignment_score == 1.0 and two.alignment_score == 0.5
    # 1 aligned claim of 1, 1 covered key point of 2, redundancy 1/3 of the 3 sentences: 75 - 20/3 >= 40
    assert one.score == pytest.approx(100 * (0.5 * 1 + 0.5 * 0.5) - 20 / 3) and one.passed


def test_summ_note_when_more_key_points_are_asked_than_the_source_has(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    source = "Alpha rose sharply today. Beta fell hard after lunch. Gamma stayed flat all week."
    out = make_report([{"target": "Alpha rose.", "source": source, "n_key_points": 7}], "summ", engine=scorer)
    row = out.reports[0]
    assert len(row.report.key_points) == 3
    assert row.notes == ["n_key_points is 7, but the source has only 3 candidate sentence(s) (sentences with at "
                         "least 3 content words, or 2 with a number or date), so 3 key point(s) are checked"]


CUSTOM_RUN = {
    "threshold": 50, "model_slug": "gpt-4o-mini",
    "evaluations": [
        {"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 2, "max_n_claims": 1}}], "threshold": 70,
         "data": [{"input": SUMM_SOURCE, "output": "Alpha rose. Beta fell."},
                  {"input": SUMM_SOURCE, "output": "Alpha rose.", "id": "mine"}]},
        {"metrics": [{"metric": "summ"}],
         "data": [{"input": SUMM_SOURCE, "output": "Alpha rose. Beta fell.", "max_n_claims": 2}]},
    ],
}


def test_summ_reads_a_custom_run_request_body(fake_ckpt, tmp_path, tiny_ckpt, capsys):
    from unieval_local.reports import read_custom_run

    records, notes = read_custom_run(CUSTOM_RUN)
    assert [r.get("id") for r in records] == ["evaluations[0].data[0]", "mine", "evaluations[1].data[0]"]
    assert [(r.get("n_key_points"), r.get("max_n_claims"), r.get("threshold")) for r in records] == [
        (2, 1, 70), (2, 1, 70), (None, 2, 50)]
    assert notes == ["model_slug 'gpt-4o-mini' is ignored: claims and key points are checked by the local "
                     "checkpoint of consistency_aspect (settings.checkpoints)"]

    def answer(q, f):
        if f["document"] == SUMM_SOURCE:
            return {"Alpha rose.": 0.9, "Beta fell.": 0.3}[f["claim"]]
        return 0.9 if f["claim"].startswith("Alpha") else 0.1

    scorer, _ = fake_scorer(fake_ckpt, answer)
    with pytest.warns(UserWarning, match="model_slug"):
        out = make_report(CUSTOM_RUN, "summ", engine=scorer)
    reps = [r.report for r in out.reports]
    assert [r.n_claims for r in reps] == [1, 1, 2] and [r.threshold for r in reps] == [70, 70, 50]
    assert [len(r.key_points) for r in reps[:2]] == [2, 2]
    assert [r.id for r in out.reports] == ["evaluations[0].data[0]", "mine", "evaluations[1].data[0]"]
    for bad, match in [({"evaluations": {}}, "'evaluations': a list"),
                       ({"evaluations": [{"data": [], "metrics": [{"metric": "faithfulness"}]}]},
                        r"evaluations\[0\]\.metrics\[0\]: metric 'faithfulness' is not summ"),
                       ({"evaluations": [{"data": [], "metrics": [{"metric": "summ", "metric_args": {"n": 2}}]}]},
                        "unknown key 'n'"),
                       ({"evaluations": [{"data": [], "threshold": 130}]}, "a number in"),
                       ({"evaluations": [{"rows": []}]}, r"evaluations\[0\]: an evaluation needs 'data'")]:
        with pytest.raises(ValueError, match=match):
            read_custom_run(bad)
    _, notes = read_custom_run({"evaluations": [{"data": [{"input": "a", "output": "b"}], "threshold": 0.8}],
                                "name": "x"})
    assert notes == ["request body keys ignored: name",
                     "evaluations[0]: threshold 0.8 is read on the 0-100 scale of the summ score (did you mean 80?)"]
    # the CLI reads the body as it is
    body = tmp_path / "run.json"
    body.write_text(json.dumps(CUSTOM_RUN))
    out_path = tmp_path / "summ.json"
    assert main(["report", "--format", "summ", str(body), "--model", str(tiny_ckpt), "--device", "cpu",
                 "-o", str(out_path), "--no-progress"]) == 0
    doc = ReportFile[SummReport].model_validate_json(out_path.read_text())
    assert doc.n_reported == 3 and [r.report.threshold for r in doc.reports] == [70, 70, 50]
    assert "note: model_slug 'gpt-4o-mini' is ignored" in capsys.readouterr().err
    assert main(["report", "--format", "rating", str(body), "--model", str(tiny_ckpt), "-o", str(out_path)]) == 2
    assert "read by --format summ, not rating" in capsys.readouterr().err


def test_summ_penalties_claim_cap_and_options(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    long_summary = " ".join(f"Point {i} holds." for i in range(8))
    rec = {"target": long_summary, "source": "Point one holds here. " * 3, "key_points": ["Point one holds here."]}
    r = make_report([rec], "summ", engine=scorer, options={"max_n_claims": 5, "max_words": 12}).reports[0].report
    assert (r.n_claims, r.n_sentences) == (5, 8)
    ratio = 24 / 12
    assert r.compression_ratio == ratio and r.compression_penalty == 20.0  # capped at its weight
    assert r.length_penalty == pytest.approx(10 * min(1, (24 - 12) / 12))
    assert r.score == pytest.approx(100 - 20 - 10 - r.redundancy_penalty)
    with pytest.raises(ValueError, match="must be 1"):
        make_report([rec], "summ", engine=scorer, options={"alignment_weight": 0.7})


def test_summ_long_source_best_window(fake_ckpt):
    """A claim found only at the end of a long source is aligned (max over windows) and
    its window holds it; an unsupported claim reports its best window."""
    filler = " ".join(f"Sentence number {i} says nothing new." for i in range(60))
    source = filler + " Delta closed the deal."

    def answer(q, f):
        return 0.95 if f["claim"].rstrip(".") in f["document"] else 0.05

    scorer, runner = fake_scorer(fake_ckpt, answer, max_length=60)
    out = make_report([{"target": "Delta closed the deal. Zeta vanished.", "source": source,
                        "key_points": ["Delta closed the deal."]}], "summ", engine=scorer)
    r = out.reports[0].report
    assert [c.aligned for c in r.claims] == [True, False]
    (mis,) = r.eval_metadata.misaligned_claims
    assert mis.claim == "Zeta vanished." and mis.best_source_window is not None
    assert mis.best_source_window.text == source[mis.best_source_window.start:mis.best_source_window.end]
    assert max(len(p.split()) + 1 for p in runner.prompts) <= 60


# ---------------------------------------------------------------- autoeval: exact JSON

CALL = ("Customer: I was charged twice on March 3.\nAgent: I can see both charges.\n"
        "Agent: The refund will arrive by March 10.\nCustomer: Okay.\nAgent: I will email you a receipt today.")
CALL_SUMMARY = ("Dates: The customer was charged twice on March 3. A refund is due by March 10.\n"
                "Call reason: billing\nNext steps: The agent will email a receipt.")
DATES_INSTRUCTION = "Identify any dates explicitly mentioned by the agent or the customer"
CALL_SECTIONS = [
    {"name": "Dates", "instruction": DATES_INSTRUCTION, "type": "free_text"},
    {"name": "Call reason", "instruction": "Classify the reason for the call", "type": "categorical",
     "allowed_values": ["Billing", "Technical", "Other"]},
    {"name": "Next steps", "instruction": "Summarize the agreed next steps", "prebuilt": True},
]
DATES_Q = "Is this sentence about dates explicitly mentioned by the agent or the customer?"
STEPS_Q = "Is this sentence about the agreed next steps?"
S1, S2, S3 = "I was charged twice on March 3.", "The refund will arrive by March 10.", "I will email you a receipt today."
P1, P2, P3 = "The customer was charged twice on March 3.", "A refund is due by March 10.", "The agent will email a receipt."


def call_answer(question, f):
    if question == CONS and f["document"] == CALL:  # accuracy: a summary sentence against the transcript
        return {P1: 0.9, P2: 0.4, P3: 0.8}[f["claim"]]
    if question == CONS:  # support: a transcript sentence against one summary sentence
        return {(S1, P1): 0.85, (S2, P2): 0.45, (S3, P3): 0.7}.get((f["claim"], f["document"]), 0.1)
    if question == DATES_Q:
        return {S1: 0.9, S2: 0.7, S3: 0.2}[f["sentence"]]
    if question == STEPS_Q:
        return {S1: 0.1, S2: 0.3, S3: 0.95}[f["sentence"]]
    if question == "Does this summary follow the instruction?":
        assert (f["summary"], f["instruction"]) == (f"{P1} {P2}", DATES_INSTRUCTION)  # the Dates section only
        return 0.8
    raise AssertionError((question, f))


@pytest.mark.smoke
def test_autoeval_report_exact_json(fake_ckpt):
    scorer, runner = fake_scorer(fake_ckpt, call_answer)
    out = make_report([{"id": "call", "transcript": CALL, "summary": CALL_SUMMARY,
                        "section_definitions": CALL_SECTIONS}], "autoeval", engine=scorer)
    report = out.reports[0].model_dump(mode="json")["report"]
    assert_json_close(report, {
        "accuracy": {"decomposition": [
            {"point": P1, "accuracy": "Supported by the source (P(Yes) = 0.90 >= 0.50).", "is_accurate": True},
            {"point": P2, "accuracy": "Not supported by the source (P(Yes) = 0.40 < 0.50).", "is_accurate": False},
            {"point": P3, "accuracy": "Supported by the source (P(Yes) = 0.80 >= 0.50).", "is_accurate": True}]},
        "accuracy_score": 200 / 3,
        "adherence": {"rubrics": [
            {"question": f"Does the summary follow the instruction '{DATES_INSTRUCTION}'?",
             "reasoning": "Rubric query \"Does this summary follow the instruction?\" on the 'Dates' section: "
                          "P(Yes) = 0.80 >= 0.50.", "is_addressed": "True"},
            {"question": "Does the summary follow the instruction and return only one of the allowed categorical "
                         "values?",
             "reasoning": "The 'Call reason' section is 'billing', one of the allowed values (Billing, Technical, "
                          "Other).", "is_addressed": "True"}]},  # the prebuilt Next steps has no rubric
        "adherence_score": 100.0,
        "completeness": [
            {"question": f"Does the summary follow '{DATES_INSTRUCTION}'?", "score": 50.0, "content_list": [
                {"transcript_content": S1, "related_content_from_summary": P1, "is_covered": "True"},
                {"transcript_content": S2, "related_content_from_summary": "", "is_covered": "False"}]},
            {"question": "Does the summary follow 'Summarize the agreed next steps'?", "score": 100.0,
             "content_list": [{"transcript_content": S3, "related_content_from_summary": P3, "is_covered": "True"}]}],
        "completeness_score": 200 / 3,
    })
    assert_same_shape(report, documented_shape("autoeval"))
    assert isinstance(report["accuracy"]["decomposition"][0]["is_accurate"], bool)
    # the relatedness query is derived from the instruction, not the instruction pasted in
    asked = {p.split(" </s> ")[0] for p in runner.prompts}
    assert f"question: {DATES_Q}" in asked and not any("about Identify" in q for q in asked)
    assert not any(p.endswith(("sentence: Okay.", "sentence: I can see both charges.")) for p in runner.prompts)
    assert out.aggregate == {"accuracy": 200 / 3, "n_accuracy": 1, "completeness": 200 / 3, "n_completeness": 1,
                             "adherence": 100.0, "n_adherence": 1}
    ReportFile[AutoevalReport].model_validate_json(out.model_dump_json())


def test_autoeval_details_and_plain_booleans(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, call_answer)
    out = make_report([{"source": CALL, "target": CALL_SUMMARY, "section_definitions": CALL_SECTIONS}], "autoeval",
                      engine=scorer, options={"details": True, "plain_booleans": True})
    r = out.reports[0].report
    assert [x.is_addressed for x in r.adherence.rubrics] == [True, True]
    assert [c.is_covered for e in r.completeness for c in e.content_list] == [True, False, True]
    d = r.details
    assert [(p.point, p.score) for p in d.accuracy] == [(P1, 0.9), (P2, 0.4), (P3, 0.8)]
    assert [(x.kind, x.section, x.score, x.value) for x in d.adherence] == [
        ("free_text", "Dates", 0.8, None), ("categorical", "Call reason", None, "billing")]
    assert [(c.relatedness_query, c.n_related) for c in d.completeness] == [(DATES_Q, 2), (STEPS_Q, 1)]
    item = d.completeness[0].items[1]
    assert (item.transcript_content, item.relatedness, item.support) == (S2, 0.7, 0.45)
    assert CALL[item.start:item.end] == S2


def test_autoeval_na_rules(fake_ckpt):
    scorer, runner = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    prebuilt = [{"name": "Summary", "instruction": "Summarize the call", "prebuilt": True}]
    cat = [{"name": "Call reason", "type": "categorical", "allowed_values": ["Billing", "Technical"]}]
    out = make_report([
        {"source": CALL, "target": "Summary: The customer was charged twice.", "section_definitions": prebuilt},
        # a categorical summary with section questions: completeness is N/A, not 0
        {"source": CALL, "target": "Call reason:  technical ", "section_definitions": cat,
         "section_questions": ["the dates mentioned"]},
        {"source": CALL, "target": "Call reason: Refund", "section_definitions": cat},
        {"target": "Just a summary."},
    ], "autoeval", engine=scorer)
    only_prebuilt, categorical, wrong_value, no_source = (row.report for row in out.reports)
    assert only_prebuilt.adherence_score == "N/A" and only_prebuilt.adherence.rubrics == []
    assert only_prebuilt.completeness_score == 100.0 and only_prebuilt.accuracy_score == 100.0
    assert categorical.completeness == [] and categorical.completeness_score == "N/A"
    assert categorical.accuracy_score == "N/A" and categorical.adherence_score == 100.0  # case and spaces ignored
    assert wrong_value.adherence_score == 0.0 and wrong_value.adherence.rubrics[0].reasoning == (
        "The 'Call reason' section is 'Refund', not one of the allowed values (Billing, Technical).")
    assert (no_source.accuracy_score, no_source.completeness_score, no_source.adherence_score) == ("N/A",) * 3
    # the aggregate leaves N/A out instead of counting it as 0
    assert out.aggregate["completeness"] == 100.0 and out.aggregate["n_completeness"] == 1
    assert not any("Call reason" in p for p in runner.prompts)  # categorical lines are not accuracy points


def test_autoeval_legacy_fields_and_caps(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    source = "\n".join(f"Speaker: Item {i} was shipped on day {i} to the client." for i in range(30))
    rec = {"target": "Items shipped.\nOutcome: Resolved", "source": source, "section_questions": ["the dates"],
           "instructions": ["Be brief."]}
    r = make_report([rec], "autoeval", engine=scorer, options={
        "categorical": {"outcome": ["resolved", "Open"]}, "max_items_per_question": 4, "details": True}
    ).reports[0].report
    assert [x.question for x in r.adherence.rubrics] == [
        "Does the summary follow the instruction and return only one of the allowed categorical values?",
        "Does the summary follow the instruction 'Be brief.'?"]
    assert r.adherence_score == 100.0
    (entry,) = r.completeness
    assert entry.question == "Does the summary cover the dates?" and len(entry.content_list) == 4
    assert r.details.completeness[0].n_related == 30
    starts = [i.start for i in r.details.completeness[0].items]
    assert starts == sorted(starts)


@pytest.mark.parametrize("instruction, query", [
    (DATES_INSTRUCTION, DATES_Q),
    ("List and describe all action items, if any.", "Is this sentence about action items?"),
    ("Summarize the customer's main complaint.", "Is this sentence about the customer's main complaint?"),
    ("Please note whether the customer agreed to the refund",
     "Is this sentence about whether the customer agreed to the refund?"),
    ("Extract all product names mentioned (if any)", "Is this sentence about product names mentioned?"),
    ("Identify any NPS scores given", "Is this sentence about NPS scores given?"),
    ("Next steps agreed on the call", "Is this sentence about next steps agreed on the call?"),
    ("What did the customer ask for?", "Does this sentence answer the question: what did the customer ask for?"),
])
def test_relatedness_query_from_an_instruction(instruction, query):
    from unieval_local.reports.autoeval import relatedness_question

    assert relatedness_question(instruction) == query


def test_section_definition_errors(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    for defs, match in [([{"name": "Tone", "type": "categorical"}], "needs non-empty allowed_values"),
                        ([{"name": "Dates", "allowed_values": ["x"]}], "give type: categorical"),
                        ([{"name": "Dates"}], "needs an instruction"),
                        ([{"name": "A", "topic": "x"}, {"name": "a", "topic": "y"}], "defined twice"),
                        ([{"name": "A", "topic": "x", "kind": "y"}], "not permitted")]:
        row = make_report([{"source": CALL, "target": "x y.", "section_definitions": defs}], "autoeval",
                          engine=scorer).reports[0]
        assert row.error is not None and row.error.field.startswith("section_definitions"), row
        assert re.search(match, row.error.message), row.error.message


# ---------------------------------------------------------------- engine, key points


def test_engine_run_one_pass_dedups_and_equals_separate_runs(fake_ckpt):
    def answer(q, f):
        return (len(f.get("claim", "")) % 7 + 1) / 10

    cons = get_aspect("summarization", "consistency")
    ex1 = [UniEvalData(target="One two. Three.", source="Doc one."), UniEvalData(target="Four.", source="Doc two.")]
    ex2 = [UniEvalData(target="Three.", source="Doc one."), UniEvalData(target="Five six.", source="Doc two.")]
    scorer, runner = fake_scorer(fake_ckpt, answer)
    results, stats = scorer.run({"one": Job((cons,), ex1), "two": Job((cons,), ex2)})
    r1, r2 = results["one"], results["two"]
    # one runner call; "Three." vs "Doc one." is asked in both jobs but counted and scored once
    # (the engine dedups prompts across jobs before the runner sees them)
    assert len(runner.calls) == 1 and stats.n_queries == 4 and len(runner.prompts) == 4
    single, _ = fake_scorer(fake_ckpt, answer)
    s1 = single.run({"one": Job((cons,), ex1)})[0]["one"]
    np.testing.assert_array_equal(r1.values["consistency"], s1.values["consistency"])
    assert r2.values["consistency"].tolist() == [answer(CONS, {"claim": "Three."}), answer(CONS, {"claim": "Five six."})]


@pytest.mark.parametrize("n, expected", [(0, 0), (1, 1), (2, 2), (5, 5), (9, 5), (25, 5), (49, 7), (100, 10),
                                         (400, 15), (5000, 15)])
def test_default_n_key_points(n, expected):
    assert default_n_key_points(n) == expected


def _pagerank_plain(sim, threshold=0.1, d=0.85, iters=500):
    """Weighted PageRank by power iteration (Brin & Page), written plainly."""
    w = np.where(sim >= threshold, sim, 0.0)
    np.fill_diagonal(w, 0.0)
    n = len(w)
    out = w.sum(1)
    r = np.full(n, 1 / n)
    for _ in range(iters):
        dangling = r[out == 0].sum()
        r = (1 - d) / n + d * (w.T @ np.divide(r, out, out=np.zeros(n), where=out > 0) + dangling / n)
    return r


def test_key_points_are_the_lexrank_top_sentences(shared_data):
    rows = [json.loads(line) for line in (shared_data / "qmsum" / "test.jsonl").read_text().splitlines()[:1]]
    source = "\n".join(f"{t['speaker']}: {t['content']}" for t in rows[0]["meeting_transcripts"][:120])
    points = extract_key_points(source, 5)
    assert len(points) == 5 and [p.start for p in points] == sorted(p.start for p in points)
    for p in points:
        assert source[p.start:p.end] == p.text and ":" not in p.text[:3]
    # the same choice from a plain PageRank over the same similarity matrix
    from unieval_local.text.keypoints import is_informative, source_sentence_spans

    spans = [s for s in source_sentence_spans(source, strip_speakers=True) if is_informative(source[s[0]:s[1]])]
    texts = [source[a:b] for a, b in spans]
    sim = similarity_matrix(texts)
    rank = _pagerank_plain(sim)
    np.testing.assert_allclose([p.centrality for p in points], [rank[texts.index(p.text)] for p in points], rtol=1e-6)
    chosen = []
    for i in sorted(range(len(texts)), key=lambda i: (-rank[i], i)):
        if len(chosen) < 5 and all(sim[i, j] < 0.5 for j in chosen):
            chosen.append(i)
    assert [p.text for p in points] == [texts[i] for i in sorted(chosen)]


SHORT_MEETING = """Project Manager: Okay, let's start.
Marketing: Yeah.
Project Manager: So the launch date was the main open point.
Industrial Designer: The launch date depends on the payment service.
Marketing: The payment bug blocked the launch last week.
Project Manager: Payment bug fixed.
Industrial Designer: Launch on the 15th.
Marketing: Okay, sounds good.
Project Manager: Right.
User Interface: Mm, yeah, I think so."""


@pytest.mark.parametrize("text, informative", [
    ("Payment bug fixed.", True), ("Launch on the 15th.", True), ("Ship it on Friday.", True),
    ("Budget is 12 euros.", True), ("The new remote buttons look fine.", True),
    ("Okay, sounds good.", False), ("Yeah, I think so.", False), ("Mm.", False), ("Right.", False),
    ("Let's start.", False)])
def test_informative_sentences(text, informative):
    from unieval_local.text.keypoints import is_informative

    assert is_informative(text) is informative


def test_short_meeting_decisions_are_key_points(fake_ckpt):
    """The two decisions of a short meeting ("Payment bug fixed.", "Launch on the 15th.") are
    key points: they were never candidates under a five-content-word rule."""
    points = [p.text for p in extract_key_points(SHORT_MEETING)]
    assert points == ["So the launch date was the main open point.",
                      "The launch date depends on the payment service.",
                      "The payment bug blocked the launch last week.", "Payment bug fixed.", "Launch on the 15th."]
    old_rule = [p.text for p in extract_key_points(SHORT_MEETING, min_words=5)]
    assert "Payment bug fixed." not in old_rule and len(old_rule) == 3
    scorer, runner = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    r = make_report([{"target": "The launch is on the 15th.", "source": SHORT_MEETING}], "summ",
                    engine=scorer).reports[0].report
    assert [k["key_point"] for k in r.key_points] == points
    assert any(p.endswith("claim: Launch on the 15th. </s> document: The launch is on the 15th.")
               for p in runner.prompts)


def test_redundant_sentences_and_empty_vocabulary():
    assert redundant_sentences(["The cat sat on the mat.", "A dog barked loudly.", "The cat sat on the mat!",
                                "Okay."]) == [None, None, 0, None]
    assert redundant_sentences(["Okay.", "Yes."]) == [None, None]  # only stop words: no similarity
    assert extract_key_points("") == []


# ---------------------------------------------------------------- cut-point fitting


def test_fit_cut_points_recovers_synthetic_cut_points():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=2000)
    y = np.where(p < 0.3, 1, np.where(p < 0.8, 2, 3))
    fit = fit_cut_points(p, y)
    assert fit.cut_points == pytest.approx((0.3, 0.8), abs=2e-3) and fit.accuracy == 1.0 and fit.kappa == 1.0
    noisy = y.copy()
    flip = rng.uniform(size=p.size) < 0.15
    noisy[flip] = rng.integers(1, 4, size=int(flip.sum()))
    fit = fit_cut_points(p, noisy)
    assert fit.cut_points == pytest.approx((0.3, 0.8), abs=0.03)
    with pytest.raises(ValueError, match="1, 2 or 3"):
        fit_cut_points([0.5], [4])
    assert human_to_rating([1, 2.49, 2.5, 3.99, 4, 5], (2.5, 4)).tolist() == [1, 1, 2, 2, 3, 3]


def test_fit_script_writes_a_usable_config(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "scripts"))
    from fit_rating_cutpoints import main as fit_main

    rng = np.random.default_rng(1)
    truth = {"coherence": (0.2, 0.6), "fluency": (0.45, 0.9)}
    records = tmp_path / "records.jsonl"
    scores = tmp_path / "scores.jsonl"
    with open(records, "w") as fr, open(scores, "w") as fs:
        for i in range(1500):
            probs = {m: float(rng.uniform()) for m in truth}
            human = {m: 1 + 2 * (probs[m] >= lo) + 2 * (probs[m] >= hi) for m, (lo, hi) in truth.items()}  # 1, 3, 5
            fr.write(json.dumps({"id": i, "target": "t", "human": human}) + "\n")
            fs.write(json.dumps({"index": i, "key": i, "scores": probs}) + "\n")
    out = tmp_path / "fitted.yaml"
    assert fit_main([str(records), "--scores", str(scores), "--human-field", "human", "--bins", "2,4",
                     "-o", str(out)]) == 0
    config = load_rating_config(out)
    for m, cuts in truth.items():
        assert config.cut_points[m] == pytest.approx(cuts, abs=3e-3)
    assert config.cut_points["consistency"] == RatingConfig().cut_points["consistency"]  # untouched
    assert "accuracy 1.000" in out.read_text()
    assert fit_main([str(records), "--human-field", "nothing", "-o", str(tmp_path / "x.yaml")]) == 2
    assert "no metric has both" in capsys.readouterr().err


# ---------------------------------------------------------------- CLI end to end


@pytest.fixture(scope="module")
def qmsum_input(tmp_path_factory, shared_data):
    from convert_qmsum import convert

    rows = [json.loads(line) for line in (shared_data / "qmsum" / "test.jsonl").read_text().splitlines()[:1]]
    (rec,) = convert(rows)
    path = tmp_path_factory.mktemp("qmsum") / "qmsum1.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path


@pytest.mark.parametrize("fmt, model", [("rating", RatingReport), ("summ", SummReport), ("autoeval", AutoevalReport)])
def test_cli_reports_on_qmsum_meeting(fmt, model, qmsum_input, tiny_ckpt, tmp_path, capsys):
    out = tmp_path / f"{fmt}.json"
    code = main(["report", "--format", fmt, str(qmsum_input), "--model", str(tiny_ckpt), "--device", "cpu",
                 "-o", str(out), "--no-progress"] + (["--details"] if fmt != "summ" else []))
    assert code == 0, capsys.readouterr().err
    doc = ReportFile[model].model_validate_json(out.read_text())
    assert doc.n_reported == 1 and doc.n_truncated == 0 and doc.settings.run["long_input"] == "chunk"
    # the report file carries the run configuration and the checkpoint's identity, as signatures do
    from unieval_local.models.checkpoints import fingerprint_checkpoint

    assert doc.settings.run["splitter"].startswith("nltk-punkt-english@nltk-")
    assert {"torch", "transformers", "tokenizers", "nltk"} <= set(doc.settings.run["versions"])
    assert doc.settings.checkpoints["unieval-sum"].fingerprint == fingerprint_checkpoint(tiny_ckpt)
    rep = doc.reports[0].report
    source = json.loads(qmsum_input.read_text())["source"]
    if fmt == "summ":
        assert rep.key_point_source == "extracted" and len(rep.key_points) == 15
        assert all(source[k["start"]:k["end"]] == k["key_point"] for k in rep.key_points)
        assert 0 <= rep.score <= 100
    if fmt == "autoeval":
        topics = [d["topic"] for d in json.loads(qmsum_input.read_text())["section_definitions"]]
        assert [e.question for e in rep.completeness] == [
            f"Does the summary follow 'Summarize the discussion of {t}'?" for t in topics] and len(topics) == 6
        assert [c.relatedness_query for c in rep.details.completeness] == [
            f"Is this sentence about {t}?" for t in topics]
        assert len(rep.adherence.rubrics) == 7 and rep.adherence.rubrics[-1].question.startswith(
            "Does the summary follow the instruction 'Summarize")
        assert rep.accuracy.decomposition and all(p.source_window is not None for p in rep.details.accuracy)
    if fmt == "rating":
        assert rep.details.relevance_method == "key_point_coverage" and set(rep.summary.metrics) == {
            "coherence", "consistency", "relevance", "fluency"}


def test_cli_reports_on_summeval_with_bad_rows(summeval_records, tiny_ckpt, tmp_path, capsys):
    path = tmp_path / "se.jsonl"
    rows = [json.dumps(r) for r in summeval_records[:3]] + ["{not json", json.dumps({"id": "x", "target": "A."})]
    path.write_text("\n".join(rows) + "\n")
    for fmt, model in (("rating", RatingReport), ("summ", SummReport), ("autoeval", AutoevalReport)):
        out = tmp_path / f"{fmt}.json"
        args = ["report", "--format", fmt, str(path), "--model", str(tiny_ckpt), "--device", "cpu", "-o", str(out),
                "--no-progress"]
        if fmt == "autoeval":
            args += ["--section-question", "the people involved", "--instruction", "Be brief.",
                     "--categorical", "tone=neutral|positive"]
        assert main(args) == 1
        doc = ReportFile[model].model_validate_json(out.read_text())
        assert doc.n_reported == 3 + (fmt == "autoeval") and doc.reports[3].error.field == "record"
        err = capsys.readouterr().err
        assert "record 3: record: line 4 of the file is not valid JSON" in err
    # relevance uses the reference: SummEval records have one
    doc = json.loads((tmp_path / "rating.json").read_text())
    rel = doc["reports"][0]["report"]["summary"]["relevance"]
    assert "against 1 reference(s)" in rel["explanation"] and "details" not in doc["reports"][0]["report"]
    assert doc["reports"][4]["error"]["field"] == "source"


@pytest.mark.smoke
def test_cli_report_usage_errors(tmp_path, summeval_records, tiny_ckpt, capsys):
    path = tmp_path / "se.jsonl"
    path.write_text(json.dumps(summeval_records[0]) + "\n")
    assert main(["report", "--format", "rating", str(path), "--threshold", "70", "--model", str(tiny_ckpt)]) == 2
    assert "--threshold applies to --format summ, not rating" in capsys.readouterr().err
    assert main(["report", "--format", "autoeval", str(path), "--categorical", "tone"]) == 2
    assert "NAME=V1|V2" in capsys.readouterr().err
    bad = tmp_path / "opts.yaml"
    bad.write_text("threshold: 120\n")
    assert main(["report", "--format", "summ", str(path), "--config", str(bad), "--model", str(tiny_ckpt)]) == 2
    assert "opts.yaml: threshold" in capsys.readouterr().err
    assert main(["report", "--format", "summ", str(tmp_path / "missing.jsonl")]) == 2
    assert not (tmp_path / "out.json").exists()


def test_report_rows_fail_alone_when_a_target_is_too_long_for_chunking(fake_ckpt):
    """In chunk mode a summary too long to sit beside its instruction is an error row naming
    the target; the other record is still reported."""
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9, max_length=24)
    long_summary = " ".join(["Alpha rose again and again today."] * 4)
    records = [{"id": "long", "target": long_summary, "instructions": ["Be brief."]},
               {"id": "ok", "target": "Alpha rose.", "instructions": ["Be brief."]}]
    out = make_report(records, "autoeval", engine=scorer)
    assert out.reports[0].error.field == "target" and "too long" in out.reports[0].error.message
    assert out.reports[1].report.adherence_score == 100.0 and out.n_errors == 1


# ---------------------------------------------------------------- findings of the fresh-user trial


def test_rating_config_merges_partial_settings_and_checks_templates(tmp_path):
    c = RatingConfig.model_validate({"cut_points": {"coherence": [0.1, 0.2]}, "good_rules": {"coherence": 3},
                                     "templates": {"en": {"metric": "{label} {score}"}}})
    assert c.cut_points["coherence"] == (0.1, 0.2) and c.cut_points["fluency"] == RatingConfig().cut_points["fluency"]
    assert c.good_rules == {"coherence": 3, "consistency": 3, "relevance": 3, "fluency": 2}
    assert c.templates["en"]["metric"] == "{label} {score}" and c.templates["fr"] == RatingConfig().templates["fr"]
    de = {k: v.replace("Coherence", "Kohärenz") for k, v in RatingConfig().templates["en"].items()}
    c = RatingConfig.model_validate({"templates": {"de": de}, "language": "de"})
    assert sorted(c.templates) == ["de", "en", "fr", "id", "zh"] and c.t("label_coherence") == "Kohärenz"
    bad = tmp_path / "typo.yaml"
    bad.write_text("templates:\n  en:\n    metric: '{label}: {scor}/3'\n")
    with pytest.raises(ValueError, match=r"typo.yaml: .*templates.en.metric: cannot fill .*'scor'"):
        load_rating_config(bad)
    with pytest.raises(ValueError, match="unknown template"):
        RatingConfig.model_validate({"templates": {"en": {"metrc": "x"}}})
    with pytest.raises(ValueError, match=r"unknown field\(s\) n_bad"):
        RatingConfig.model_validate({"templates": {"en": {"metric": "{label} {n_bad}"}}})


def test_summary_lines_and_bullets_are_separate_claims(fake_ckpt):
    seen = []

    def answer(q, f):
        seen.append(f.get("claim"))
        return 0.9

    scorer, _ = fake_scorer(fake_ckpt, answer)
    rec = {"target": "- Alpha rose\n- Beta fell\n2) Gamma stayed flat", "source": SUMM_SOURCE, "key_points": ["x y z."]}
    r = make_report([rec], "summ", engine=scorer).reports[0].report
    assert [c.claim for c in r.claims] == ["Alpha rose", "Beta fell", "Gamma stayed flat"] and r.n_sentences == 3
    auto = {"target": "Sentiment: positive\nThe council met.", "source": "The council met on Monday.",
            "categorical": {"sentiment": ["positive", "negative"]}}
    a = make_report([auto], "autoeval", engine=scorer).reports[0].report
    assert [p.point for p in a.accuracy.decomposition] == ["The council met."]
    assert a.adherence.rubrics[0].is_addressed == "True" and a.adherence_score == 100.0
    assert "Sentiment: positive" not in seen


def test_duplicate_ids_empty_options_and_truncation_warning(fake_ckpt):
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    recs = [{"id": "x", "target": "A b.", "source": "A b c."}, {"id": "x", "target": "C d.", "source": "C d e."}]
    out = make_report(recs, "summ", engine=scorer)
    assert out.reports[0].report is not None
    assert out.reports[1].error.field == "record" and "duplicate id 'x'" in out.reports[1].error.message
    for bad in ({"instructions": [""]}, {"section_questions": ["  "]}, {"categorical": {"tone": []}},
                {"threshold": float("nan")}):
        fmt = "summ" if "threshold" in bad else "autoeval"
        with pytest.raises(ValueError):
            make_report(recs[:1], fmt, engine=scorer, options=bad)
    truncating, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9, long_input="truncate", max_length=12)
    with pytest.warns(UserWarning, match=r"queries were longer than max_length \(unieval-sum 12 tokens\).*the "
                                         r"target alone is too long: no long-input mode helps"):
        make_report([{"target": "A b.", "source": " ".join(["word"] * 40), "key_points": ["A b."]}], "summ",
                    engine=truncating)


def test_fit_script_from_a_rating_report_fits_relevance_coverage(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from fit_rating_cutpoints import main as fit_main

    rng = np.random.default_rng(2)
    records, reports = [], []
    for i in range(800):
        p = float(rng.uniform())
        records.append({"id": i, "target": "t", "human": {"relevance": 1 + 2 * (p >= 0.25) + 2 * (p >= 0.7)}})
        reports.append({"index": i, "id": str(i), "report": {"metrics": {"relevance": {"probability": p,
                                                                          "method": "key_point_coverage"}}}})
    (tmp_path / "r.json").write_text(json.dumps(records))
    (tmp_path / "rep.json").write_text(json.dumps({"format": "rating", "reports": reports}))
    out = tmp_path / "fit.yaml"
    assert fit_main([str(tmp_path / "r.json"), "--report", str(tmp_path / "rep.json"), "--human-field", "human",
                     "--bins", "2,4", "-o", str(out)]) == 0
    fitted = load_rating_config(out)
    assert fitted.cut_points["relevance_coverage"] == pytest.approx((0.25, 0.7), abs=5e-3)
    assert fitted.cut_points["relevance"] == RatingConfig().cut_points["relevance"]


def test_cli_report_flag_names_and_output_checks(tmp_path, summeval_records, tiny_ckpt, capsys):
    path = tmp_path / "se.jsonl"
    path.write_text(json.dumps(summeval_records[0]) + "\n")
    assert main(["report", "--format", "summ", str(path), "--section-question", "q"]) == 2
    assert "--section-question applies to --format autoeval, not summ" in capsys.readouterr().err
    assert main(["report", "--format", "summ", str(path), "--model", str(tiny_ckpt), "-o", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["report", "--format", "summ", str(path), "--model", str(tiny_ckpt), "-o",
                 str(tmp_path / "nodir" / "o.json")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "nodir").exists()
    assert main(["report", "--format", "autoeval", str(path), "--model", str(tiny_ckpt), "--instruction", ""]) == 2
    assert "--instruction: every item must be a non-empty string" in capsys.readouterr().err
    assert main(["report", "--format", "autoeval", str(path), "--categorical", "S=a|b", "--categorical", "S=c"]) == 2
    assert "twice" in capsys.readouterr().err
    assert main(["report", "--format", "summ", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    # a misspelt choice is echoed, and the flag named without the item's position
    assert main(["report", "--format", "rating", str(path), "--enabled-metrics", "coherence,fluncy"]) == 2
    assert ("error: --enabled-metrics: Input should be 'coherence', 'consistency', 'relevance' or 'fluency', "
            "got 'fluncy'") in capsys.readouterr().err


def test_second_trial_findings(tmp_path, summeval_records, tiny_ckpt, fake_ckpt, capsys):
    with pytest.raises(ValueError, match=r"templates.en.metric: cannot fill .*TypeError"):
        RatingConfig.model_validate({"templates": {"en": {"metric": "{label}: {score[0]}/3"}}})
    path = tmp_path / "se.jsonl"
    path.write_text(json.dumps(summeval_records[0]) + "\n")
    for bad in ("unieval-sum=", "=dir", ""):
        with pytest.raises(SystemExit) as exc:
            main(["report", "--format", "summ", str(path), "--model", bad])
        assert exc.value.code == 2
    assert "--model" in capsys.readouterr().err
    cfg = tmp_path / "r.yaml"
    cfg.write_text("threshold: 70\n")
    assert main(["report", "--format", "rating", str(path), "--config", str(cfg)]) == 2
    assert "unknown option 'threshold'; valid options: enabled_metrics" in capsys.readouterr().err
    assert main(["report", "--format", "autoeval", str(path), "--instruction", " "]) == 2
    assert "error: --instruction: every item must be a non-empty string" in capsys.readouterr().err
    # -o through a link writes the file it points to and keeps the link
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert main(["report", "--format", "summ", str(path), "--model", str(tiny_ckpt), "--no-progress",
                 "-o", str(link)]) == 0
    assert link.is_symlink() and json.loads(real.read_text())["format"] == "summ"
    assert not list(tmp_path.glob("*.tmp"))
    # ids 1 and "1" are different ids (as in score)
    scorer, _ = fake_scorer(fake_ckpt, lambda q, f: 0.9)
    out = make_report([{"id": 1, "target": "A b.", "source": "A b c."}, {"id": "1", "target": "A b.",
                                                                          "source": "A b c."}], "summ", engine=scorer)
    assert out.n_errors == 0


def test_fit_script_refuses_a_report_of_other_records(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "scripts"))
    from fit_rating_cutpoints import main as fit_main

    records = [{"id": i, "human": {"relevance": 3}} for i in range(30)]
    rows = [{"index": i, "id": str(29 - i), "report": {"metrics": {}}} for i in range(30)]
    (tmp_path / "r.json").write_text(json.dumps(records))
    (tmp_path / "rep.json").write_text(json.dumps({"format": "rating", "reports": rows}))
    assert fit_main([str(tmp_path / "r.json"), "--report", str(tmp_path / "rep.json"), "-o", str(tmp_path / "o")]) == 2
    assert "has id '29' but record 0 has id '0'" in capsys.readouterr().err
    (tmp_path / "rep.json").write_text(json.dumps({"format": "summ", "reports": rows}))
    assert fit_main([str(tmp_path / "r.json"), "--report", str(tmp_path / "rep.json"), "-o", str(tmp_path / "o")]) == 2
    assert "is not a `unieval-local report --format rating` output" in capsys.readouterr().err


def test_autoeval_long_instruction_cutting_relatedness_queries_is_a_note_on_its_record(tiny_ckpt):
    """Issue 29: a 3,000-word section instruction makes every relatedness query of its
    completeness question longer than max_length; the record's notes say so (they were empty)."""
    import warnings

    from unieval_local.engine import Engine
    from unieval_local.reports import make_report

    engine = Engine(model=tiny_ckpt, long_input="chunk")
    long_instruction = " ".join(["Describe the budget decisions and the votes"] * 430)  # 3,010 words
    source = " ".join(f"The council member number {k} spoke about the annual budget of the city." for k in range(8))
    rec = {"target": "Budget: The council approved the budget. The vote was five to two.", "source": source,
           "section_definitions": [{"name": "Budget", "instruction": long_instruction}]}
    short_one = dict(rec, section_definitions=[{"name": "Budget", "instruction": "Describe the budget."}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = make_report([rec, short_one], "autoeval", engine=engine, warn=False)
    assert out.n_truncated == 8  # one relatedness query per informative source sentence
    notes = [n for n in out.reports[0].notes if "relatedness queries" in n]
    assert len(notes) == 1 and notes[0].startswith("8 of the 8 relatedness queries of the completeness question")
    assert not [n for n in out.reports[1].notes if "relatedness queries" in n]
