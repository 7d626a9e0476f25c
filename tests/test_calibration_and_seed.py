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
    from unieval_local.meta import load_items, meta_evaluate

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
    from unieval_local.html_report import build_report

    html = build_report(converted / "scores.jsonl", input=converted / "records.jsonl", n_boot=10)
    assert "Imported scores, no model was run" in html and "origin:imported" in html
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
    from unieval_local.cutpoints import fit_cut_points, quadratic_kappa, to_rating

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
    from unieval_local.cutpoints import document_folds

    docs = [f"d{i // 16}" for i in range(1600)]
    folds = document_folds(docs, 10, seed=0)
    for d in set(docs):
        assert len({f for g, f in zip(docs, folds) if g == d}) == 1
    assert sorted(np.bincount(folds).tolist()) == [160] * 10


def test_no_placeholder_warning_for_the_four_calibrated_metrics(fake_ckpt):
    import warnings

    from unieval_local import Scorer
    from unieval_local.reports import make_report

    engine = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(default=0.7))).engine
    rec = {"target": "Alpha rose.", "source": "Alpha rose sharply today.", "references": ["Alpha rose."]}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = make_report([rec], "rating", engine=engine, options={"details": True})
    assert not any("cut points" in str(w.message) for w in got)
    assert [n for n in out.notes if "used unchecked" not in n] == []  # the fake folder: an identity note only
    details = out.reports[0].report.details.metrics
    assert all(d.calibrated and not d.placeholder_cut_points for d in details.values())
    # MiniCheck answering consistency, and relevance by key-point coverage: named
    with pytest.warns(UserWarning, match=r"consistency are calibrated for summarization/consistency \(unieval-sum\), "
                                         r"not for fact/support; relevance_coverage are placeholders"):
        out = make_report([{**rec, "references": None}], "rating", engine=engine,
                          options={"consistency_aspect": "fact/support", "details": True})
    d = out.reports[0].report.details.metrics
    assert not d["consistency"].calibrated and d["consistency"].placeholder_cut_points
    assert d["coherence"].calibrated and not d["relevance"].calibrated


# ----------------------------------------------------------------------------- the seed evaluator's code
@pytest.mark.parametrize("script", ["summarization_evaluator_dataset.py", "summarization_evaluator_direct.py"])
def test_the_seed_examples_run_with_only_the_import_changed(script, tiny_ckpt, tmp_path):
    secret = "AIza-not-a-real-key-0123456789"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "UNIEVAL_LOCAL_HOME": str(tiny_ckpt.parent),
           "GOOGLE_API_KEY": secret, "PYTHONWARNINGS": "default"}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "data" / "seed" / script)], capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert_same_shape(result, documented_shape("rating"))
    s = result["summary"]
    assert set(s) >= {"coherence", "consistency", "relevance", "fluency"}
    for m in ("coherence", "consistency", "relevance", "fluency"):
        assert s[m]["normalized_score"] == round(s[m]["score"] / 3, 2)  # 0.33, 0.67, 1.0
    assert s["avg_score"] == round(np.mean([s[m]["score"] / 3 for m in ("coherence", "consistency", "relevance",
                                                                         "fluency")]), 2)
    assert secret not in run.stdout + run.stderr  # the credentials are never shown
    assert run.stderr.count("model_credentials is not used") == 1


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
    jsonschema.validate(json.loads(result.model_dump_json(exclude={"signature"}, exclude_none=True)), schema)


def test_an_evaluation_level_model_slug_gets_the_note():
    from unieval_local.reports.summ import read_custom_run

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
