"""Calibrated ratings from the official model's real SummEval scores, and the seed evaluators'
own code running unchanged: the converter reproduces UniEval's published summary-level table,
the built-in cut points are the card's (and the card comes from the script), the placeholder
warning names only what no calibration covers, the seed examples run with only the import
changed, the hosted output validates against its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, FakeRunner, assert_same_shape, documented_shape, fake_factory

sys.path.insert(0, str(ROOT / "scripts"))

SE_FILE = "summeval-unieval/summeval_unieval.jsonl"
#: UniEval's published summary-level Spearman on SummEval (its paper's table; SOURCES.md section 9)
PUBLISHED = {"coherence": 0.5752, "consistency": 0.4456, "fluency": 0.4492, "relevance": 0.4257}


@pytest.fixture(scope="module")
def converted(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("se")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_summeval_unieval.py"),
                          str(shared_data / SE_FILE), "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return out


def test_the_converted_official_scores_give_the_published_summary_level_table(converted):
    from unieval_local.analysis.meta import load_items, meta_evaluate

    records = [json.loads(x) for x in (converted / "records.jsonl").read_text().splitlines()]
    lines = [json.loads(x) for x in (converted / "scores.jsonl").read_text().splitlines()]
    assert len(records) == len(lines) == 1600 and [r["id"] for r in records] == [x["key"] for x in lines]
    assert set(records[0]) == {"id", "doc_id", "system_id", "target", "source", "references", "human"}
    assert set(records[0]["human"]) == {"coherence", "consistency", "fluency", "relevance", "overall"}
    assert len(records[0]["references"]) == 1
    meta = json.loads((converted / "scores.jsonl.meta.json").read_text())
    assert meta["origin"]["model_run"] is False and meta["run"]["signature"]["origin"] == "imported"
    result = meta_evaluate(load_items(converted / "scores.jsonl", converted / "records.jsonl"), n_boot=0)
    got = {a: round(result.table["summary"][a]["spearman"][0], 4) for a in PUBLISHED}
    assert got == PUBLISHED
    assert round(result.table["summary"]["overall"]["spearman"][0], 3) == 0.647  # UniEval: overall 0.647


def test_the_cli_meta_prints_the_published_values(converted, capsys):
    from unieval_local.cli import main

    assert main(["meta", str(converted / "scores.jsonl"), "--human", str(converted / "records.jsonl"),
                 "--bootstrap", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    summary = out[out.index("summary level"):out.index("system level")]
    rows = {line.split()[0]: line.split() for line in summary.splitlines()[2:] if line.strip()}
    assert {a: rows[a][2] for a in PUBLISHED} == {a: f"{v:.4f}" for a, v in PUBLISHED.items()}


def test_the_html_report_shows_real_scores_and_says_they_were_imported(converted):
    from unieval_local.analysis.html_report import build_report

    html = build_report(converted / "scores.jsonl", input=converted / "records.jsonl", n_boot=10)
    assert "<b>Imported scores:</b> the official MingZhong/unieval-sum model" in html and "origin:imported" in html
    assert html.count("no model was run") == 1
    assert "no sidecar signature found" not in html


# ----------------------------------------------------------------------------- the card and the defaults
def test_the_built_in_cut_points_are_the_card_and_the_script_makes_the_card(shared_data):
    from fit_calibration import card

    from unieval_local.reports.rating import DEFAULT_CUT_POINTS, PLACEHOLDER_CUT_POINTS, RatingConfig, \
        calibration_card

    built_in = calibration_card()
    for m, r in built_in["metrics"].items():
        assert tuple(DEFAULT_CUT_POINTS[m]) == tuple(r["cut_points"]) == tuple(RatingConfig().cut_points[m])
    assert DEFAULT_CUT_POINTS["relevance_coverage"] == PLACEHOLDER_CUT_POINTS  # not calibrated by it
    assert built_in["metrics"]["fluency"]["choice"] == "thirds"  # the fit did not beat the thirds
    assert {m for m, r in built_in["metrics"].items() if r["choice"] == "fitted"} == {"coherence", "consistency",
                                                                                        "relevance"}
    # the script gives the same cut points and point estimates (the intervals depend on n_boot)
    again = card(shared_data / SE_FILE, built_in["objective"], n_boot=20)
    for m in built_in["metrics"]:
        a, b = built_in["metrics"][m], again["metrics"][m]
        assert a["cut_points"] == b["cut_points"] and a["human_bins"] == b["human_bins"]
        for name in a["cv"]:
            assert a["cv"][name]["accuracy"] == pytest.approx(b["cv"][name]["accuracy"], abs=1e-12)
            assert a["cv"][name]["kappa"] == pytest.approx(b["cv"][name]["kappa"], abs=1e-12)
    assert built_in["data"]["sha256"] == again["data"]["sha256"]


def test_the_calibration_command_prints_the_card(capsys):
    from unieval_local.cli import main

    assert main(["calibration"]) == 0
    out = capsys.readouterr().out
    assert "coherence   [0.5837, 0.9483]" in out and "fitted_kappa" in out and "-> thirds" in out
    assert "holds for:" in out and "refit: python scripts/fit_calibration.py" in out
    assert main(["calibration", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == "kappa"


def test_the_kappa_objective_finds_the_best_pair():
    from unieval_local.analysis.cutpoints import fit_cut_points, quadratic_kappa, to_rating

    rng = np.random.default_rng(3)
    p = rng.random(300)
    y = np.where(p < 0.2, 1, np.where(p < 0.9, 2, 3))
    y[:60] = 3  # a skewed, noisy set: exact agreement and kappa disagree on the best cut points
    grid = np.unique(np.concatenate([[0.0, 1.0], (np.sort(p)[:-1] + np.sort(p)[1:]) / 2]))
    best = max((quadratic_kappa(y, [to_rating(x, (a, b)) for x in p]) or -2, a, b)
               for i, a in enumerate(grid[::3]) for b in grid[::3][i:])
    fit = fit_cut_points(p, y, objective="kappa")
    assert fit.kappa >= best[0] - 1e-12
    from sklearn.metrics import cohen_kappa_score

    mapped = [to_rating(x, fit.cut_points) for x in p]
    assert fit.kappa == pytest.approx(cohen_kappa_score(y, mapped, weights="quadratic"), abs=1e-12)
    assert quadratic_kappa(y, mapped) == pytest.approx(fit.kappa, abs=1e-12)


def test_document_folds_never_split_a_document():
    from unieval_local.analysis.cutpoints import document_folds

    docs = [f"d{i // 16}" for i in range(1600)]
    folds = document_folds(docs, 10, seed=0)
    for d in set(docs):
        assert len({f for g, f in zip(docs, folds) if g == d}) == 1
    assert sorted(np.bincount(folds).tolist()) == [160] * 10


def test_no_placeholder_warning_for_the_four_calibrated_metrics(official_shape_ckpt, tmp_path):
    import shutil
    import warnings

    from unieval_local import Scorer
    from unieval_local.models.manifest import manifest_entries, write_manifest
    from unieval_local.reports import make_report

    # staged as `download` stages the official weights (hub id, checksums): identity verified, so no
    # note at all (a folder only its config.json names gets one: tests/test_identity_words.py)
    staged = shutil.copytree(official_shape_ckpt, tmp_path / "unieval-sum")
    write_manifest(staged, manifest_entries(staged), checkpoint="unieval-sum", hub_id="MingZhong/unieval-sum",
                   revision="c" * 40)
    engine = Scorer(model=staged, runner_factory=fake_factory(FakeRunner(default=0.7))).engine
    rec = {"target": "Alpha rose.", "source": "Alpha rose sharply today.", "references": ["Alpha rose."]}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = make_report([rec], "rating", engine=engine, options={"details": True})
    assert not got and out.notes == []
    details = out.reports[0].report.details.metrics
    assert all(d.calibrated for d in details.values())
    # placeholder_cut_points says the cut points are the thirds: fluency's (the card kept them)
    assert {m: d.placeholder_cut_points for m, d in details.items()} == \
        {"coherence": False, "consistency": False, "relevance": False, "fluency": True}


def test_a_checkpoint_the_card_was_not_fitted_on_is_not_calibrated(tmp_path, fake_ckpt):
    """A unieval-sum folder of another shape (the generated ones) or of unverified identity gets
    the note, and calibrated false, for every metric that uses the card's cut points."""
    from unieval_local import Scorer
    from unieval_local.reports import make_report

    small = tmp_path / "unieval-sum"
    small.mkdir()
    (small / "config.json").write_text('{"model_type": "t5", "d_model": 64, "num_layers": 2, '
                                       '"unieval_local_evaluator": "unieval-sum"}')
    (small / "tokenizer.json").write_text("{}")
    rec = {"target": "Alpha rose.", "source": "Alpha rose sharply today.", "references": ["Alpha rose."]}
    for folder, why in ((small, "is not the shape of the official model the card was fitted on (d_model 64, not "
                                "1024; num_layers 2, not 24)"),
                        (fake_ckpt, "does not say it is unieval-sum (identity unverified)")):
        engine = Scorer(model=folder, runner_factory=fake_factory(FakeRunner(default=0.7))).engine
        out = make_report([rec], "rating", engine=engine, options={"details": True}, warn=False)
        card_notes = [n for n in out.notes if "cut points" in n]
        assert card_notes == [f"the rating cut points of coherence, consistency, relevance, fluency are calibrated for "
                              f"the official unieval-sum, but checkpoint unieval-sum ({folder}) {why}: those 1-3 "
                              "ratings are not calibrated. Fit them on your data with scripts/fit_rating_cutpoints.py "
                              "and pass the YAML as the rating config (--config FILE in the CLI, config= in Python; "
                              "README, rating; `unieval-local calibration` prints the card)"]
        assert not any(d.calibrated for d in out.reports[0].report.details.metrics.values())


def test_a_config_that_sets_the_thirds_is_named_and_the_default_cut_points_are_the_cards():
    from unieval_local.reports.rating import (DEFAULT_CUT_POINTS, RatingConfig, calibration_card,
                                              uncalibrated_metrics)

    card = calibration_card()
    assert {m: DEFAULT_CUT_POINTS[m] for m in card["metrics"]} == \
        {m: tuple(r["cut_points"]) for m, r in card["metrics"].items()}
    config = RatingConfig(cut_points={"coherence": [0.3333, 0.6667]})
    assert uncalibrated_metrics(config, coverage_used=False) == {
        "coherence": "the thirds of the range set by the rating config (placeholders, not fitted)"}


def test_the_example_dataset_rows_read_by_key_and_attribute():
    from unieval_local.compat import SummaryData, load_simple_summarization_dataset

    rows = load_simple_summarization_dataset().load()
    assert rows and all(isinstance(r, SummaryData) for r in rows)
    assert rows[0]["input"] == rows[0].input and rows[0]["summary"] == rows[0].summary
    assert "Action items" in rows[0].summary and len(rows[0].input.splitlines()) > 10
    with pytest.raises(KeyError):
        rows[0]["transcript"]


def test_compat_rounds_as_documented_and_keeps_full_precision_in_details(fake_ckpt):
    import asyncio

    from unieval_local import Scorer
    from unieval_local.compat import SummarizationEvaluator, SummaryData

    engine = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(default=0.7)), long_input="chunk").engine
    ev = SummarizationEvaluator(engine=engine, enabled_metrics=["coherence", "fluency"],
                                config={"details": True, "cut_points": {"coherence": [0.3, 0.8]}})
    out = asyncio.run(ev.evaluate(SummaryData(input="Alpha rose sharply today.", summary="Alpha rose.")))
    s = out["summary"]
    assert (s["coherence"]["score"], s["fluency"]["score"]) == (2, 3)  # 0.7 in [0.3, 0.8); 0.7 >= 0.6667
    assert s["coherence"]["normalized_score"] == 0.67 and s["avg_score"] == 0.83
    assert out["details"]["metrics"]["coherence"]["probability"] == 0.7  # full precision stays in details
    many = asyncio.run(ev.evaluate([SummaryData(input="A b c.", summary="A."), {"input": "A b c.", "summary": " "}]))
    assert "summary" in many[0] and many[1]["error"]["field"] == "summary"


def test_the_python_hosted_result_validates_against_the_schema(fake_ckpt):
    import jsonschema

    from unieval_local import Scorer

    schema = json.loads((ROOT / "tests" / "data" / "formats" / "hosted.schema.json").read_text())
    scorer = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(default=0.25)))
    result = scorer.score([{"target": "A.", "source": "B."}, {"target": "C.", "source": "D."}], aspect="coherence")
    jsonschema.validate(json.loads(result.model_dump_json(exclude={"signature", "run"}, exclude_none=True)), schema)


def test_an_evaluation_level_model_slug_gets_the_note():
    from unieval_local.wire.custom_run import read_custom_run

    _, notes = read_custom_run({"evaluations": [{"model_slug": "gpt-4o-mini", "metrics": [{"metric": "summ"}],
                                                 "data": [{"input": "a", "output": "b"}]}]})
    assert notes == ["evaluations[0].model_slug 'gpt-4o-mini' is ignored: claims and key points are checked by the "
                     "local checkpoint of consistency_aspect (settings.checkpoints)"]


@pytest.mark.real_weights
def test_official_unieval_sum_reproduces_the_files_scores(real_home, converted):
    """With the official weights staged, scoring the file's summaries gives its ``unieval_*``
    values. Tolerance: 1e-4 per score for the whole-summary aspects (coherence, relevance:
    the same text, UniEval's tokenized SummEval, the same prompts; float32 on another device
    and batch composition move the 6th-7th digit), and for the sentence-level ones
    (consistency, fluency) at least 98% of the summaries within 1e-4: the NLTK that split
    their sentences then may split a few summaries differently from today's Punkt."""
    from unieval_local import Scorer

    records = [json.loads(x) for x in (converted / "records.jsonl").read_text().splitlines()][:320]
    want = [json.loads(x)["scores"] for x in (converted / "scores.jsonl").read_text().splitlines()][:320]
    scorer = Scorer(model=real_home / "unieval-sum")
    got = scorer.evaluate(records, aspects=["coherence", "consistency", "fluency", "relevance"])
    for a in ("coherence", "relevance"):
        diff = np.abs(np.array([e.scores[a] for e in got.examples]) - np.array([w[a] for w in want]))
        assert diff.max() < 1e-4, (a, diff.max())
    for a in ("consistency", "fluency"):
        diff = np.abs(np.array([e.scores[a] for e in got.examples]) - np.array([w[a] for w in want]))
        assert np.mean(diff < 1e-4) >= 0.98, (a, np.mean(diff < 1e-4))


def test_fit_rating_cutpoints_writes_only_what_it_changes():
    sys_path = str(ROOT / "scripts")
    import sys

    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    from fit_rating_cutpoints import changed_settings

    from unieval_local.reports.rating import RatingConfig

    assert changed_settings(RatingConfig()) == {}
    config = RatingConfig(cut_points={"consistency": [0.1, 0.2]}, consistency_aspect="fact/consistency",
                          templates={"en": {"whole_document": "Whole."}})
    assert changed_settings(config) == {"cut_points": {"consistency": [0.1, 0.2]},
                                        "consistency_aspect": "fact/consistency",
                                        "templates": {"en": {"whole_document": "Whole."}}}


def test_fit_calibration_writes_nothing_without_o(tmp_path, monkeypatch, capsys):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import fit_calibration

    monkeypatch.setattr(fit_calibration, "card", lambda path, objective, n_boot: json.loads(
        (ROOT / "unieval_local" / "data" / "calibration_unieval_sum.json").read_text()))
    before = (ROOT / "unieval_local" / "data" / "calibration_unieval_sum.json").read_bytes()
    monkeypatch.chdir(tmp_path)
    assert fit_calibration.main([str(tmp_path / "any.jsonl")]) == 0
    assert "(not written: give -o FILE)" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    assert (ROOT / "unieval_local" / "data" / "calibration_unieval_sum.json").read_bytes() == before
    assert fit_calibration.main([str(tmp_path / "any.jsonl"), "-o", str(tmp_path / "card.json")]) == 0
    assert json.loads((tmp_path / "card.json").read_text()) == json.loads(before)


def test_summ_threshold_option_overridden_by_a_records_own_is_noted(official_shape_ckpt):
    from unieval_local import Scorer
    from unieval_local.reports import make_report

    engine = Scorer(model=official_shape_ckpt, runner_factory=fake_factory(FakeRunner(default=0.9))).engine
    recs = [{"target": "A b.", "source": "A b c.", "key_points": ["A b."], "threshold": 70},
            {"target": "A b.", "source": "A b c.", "key_points": ["A b."]}]
    out = make_report(recs, "summ", engine=engine, options={"threshold": 90}, warn=False)
    assert [r.report.threshold for r in out.reports] == [70, 90]
    assert out.notes == ["the threshold option 90 is not used for 1 record(s) that give their own threshold (a "
                         "record's own, or its custom-run evaluation's or body's, takes precedence over the option)"]
    assert make_report(recs, "summ", engine=engine, warn=False).notes == []  # the option not given: no note


def test_a_misspelt_field_gets_a_did_you_mean_and_one_sentence_reads_as_one():
    from unieval_local.reports.rating import RatingConfig
    from unieval_local.pipeline.validate import parse_example

    _, problems = parse_example(0, {"sumary": "x", "input": "y"})
    assert problems[0].field == "target" and "the record has 'sumary': did you mean 'target'?" in problems[0].message
    assert RatingConfig().t("sentence_one", threshold=0.5, text="x", value=0.61) == \
        "Its one sentence scored 0.61 (threshold 0.50)."


def test_compat_notes_point_at_the_callers_line(official_shape_ckpt):
    import asyncio
    import warnings

    from unieval_local import Scorer
    from unieval_local.compat import SummarizationEvaluator

    engine = Scorer(model=official_shape_ckpt, runner_factory=fake_factory(FakeRunner(default=0.9))).engine
    ev = SummarizationEvaluator(engine=engine, model_credentials="SECRET")

    async def user_code():
        return await ev.evaluate({"input": "Alpha rose today.", "summary": "Alpha rose."})

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        asyncio.run(user_code())
    assert got and all(w.filename == __file__ for w in got)
    assert not any("SECRET" in str(w.message) for w in got)


def test_cli_rating_report_rounds_as_compat_and_http(tmp_path, tiny_ckpt):
    """Issue 29: the CLI's rating summary is rounded by the same function as the compat layer and
    /v1/summarization-evaluator (2 decimals: 0.67, not 0.6666666666666666); details keep full precision."""
    import json
    import warnings

    from unieval_local.cli import main
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report
    from unieval_local.wire.rating_evaluator import METRICS, evaluator_result

    recs = [{"id": i, "target": t, "source": "Alpha rose sharply today. Beta fell. Gamma stayed flat all week."}
            for i, t in enumerate(["Alpha rose.", "Beta fell and Gamma stayed flat.", "Nothing happened at all."])]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "out.json"
    assert main(["report", "--format", "rating", str(src), "--model", str(tiny_ckpt), "--device", "cpu",
                 "--details", "-o", str(out), "--no-progress"]) in (0, 1)
    rows = json.loads(out.read_text())["reports"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = make_report(recs, "rating", engine=Engine(model=tiny_ckpt, device="cpu", long_input="chunk"),
                            options={"details": True}, warn=False)
    full = [r.model_dump(mode="json")["report"] for r in plain.reports]
    values = [s["avg_score"] for s in (f["summary"] for f in full)]
    assert any(v != round(v, 2) for v in values)  # a test that can fail: some value has more digits
    for row, ref in zip(rows, full):
        assert row["report"]["summary"] == evaluator_result(ref["summary"], METRICS)["summary"]
        assert row["report"]["details"] == ref["details"]  # full precision
