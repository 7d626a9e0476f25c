"""``report --format rating --judge g-eval``: the four metrics rated from the G-Eval aspects of the
whole summary, on a generated causal-lm checkpoint (tiny widths, qwen2 layout). The ratings are
checked against the cut points applied here to the aspects scored directly through ``Scorer``;
the flag, a config file, the run's "not calibrated" note and the error without a g-eval model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.engine import Engine  # noqa: E402
from unieval_local.registry.tasks import get_aspect  # noqa: E402
from unieval_local.reports import make_report  # noqa: E402
from unieval_local.reports.options import load_options  # noqa: E402
from unieval_local.reports.rating import RatingConfig  # noqa: E402
from unieval_local.reports.rating_config import DEFAULT_CUT_POINTS, PLACEHOLDER_CUT_POINTS  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
METRICS = ("coherence", "consistency", "relevance", "fluency")
DATA = [{"source": "The council approved the new park on Tuesday after a long debate about its cost.",
         "target": "A park was approved.", "references": ["The council approved a park."]},
        {"source": "Shares of the firm rose five percent after it reported strong sales in Asia.",
         "target": "Shares fell sharply."},
        {"source": "Rain fell for three days and two towns were flooded.", "target": "It rained."}]
# cut points that split the tiny model's values (set from them in the test): a real spread of ratings
FITTED = {"coherence": (0.2, 0.5), "consistency": (0.3, 0.6), "relevance": (0.25, 0.45), "fluency": (0.1, 0.9)}


@pytest.fixture(scope="module")
def geval(tmp_path_factory, shared_data) -> Path:
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("llm") / "g-eval", layout="qwen2",
                                      data_dir=shared_data, seed=3)


@pytest.fixture(scope="module")
def direct(geval) -> dict[str, list[float]]:
    """Each metric's geval aspect scored through Scorer, its rating E on the 1-K scale placed on
    [0, 1] as (E - 1) / (K - 1) (where the report's cut points are read): metric -> per record."""
    scorer = Scorer(model={"g-eval": str(geval)}, device="cpu")
    with pytest.warns(UserWarning, match="scales differ"):  # fluency's 1-3 beside the others' 1-5
        result = scorer.evaluate(DATA, task="summarization", aspects=[f"geval_{m}" for m in METRICS])
    scales = {m: get_aspect("summarization", f"geval_{m}").scale for m in METRICS}
    return {m: [(e.scores[f"geval_{m}"] - 1) / (scales[m] - 1) for e in result.examples] for m in METRICS}


def rate(p: float, cuts: tuple[float, float]) -> int:
    """The documented mapping: 1 if p < low, 2 if low <= p < high, 3 if p >= high."""
    return 1 if p < cuts[0] else 2 if p < cuts[1] else 3


def test_config_judge_defaults_and_placeholder_cut_points():
    assert RatingConfig().judge == "unieval"
    c = RatingConfig.model_validate({"judge": "g-eval", "cut_points": {"coherence": [0.2, 0.5]}})
    assert c.cut_points["coherence"] == (0.2, 0.5)
    for m in ("consistency", "relevance", "fluency"):  # not the card's (fitted for unieval-sum): the thirds
        assert c.cut_points[m] == PLACEHOLDER_CUT_POINTS
    assert RatingConfig().cut_points["coherence"] == DEFAULT_CUT_POINTS["coherence"] != PLACEHOLDER_CUT_POINTS
    with pytest.raises(ValueError, match="judge"):
        RatingConfig.model_validate({"judge": "gpt"})
    # serve --rating-config: the file's settings, then the body's enabled_metrics (service/handlers.py's merge)
    served = load_options(RatingConfig, None, {**c.model_dump(exclude_unset=True), "enabled_metrics": ["fluency"]})
    assert served.judge == "g-eval" and served.cut_points == c.cut_points
    # a language added without the G-Eval template takes English's
    de = {k: v for k, v in RatingConfig().templates["en"].items() if k != "metric_geval"}
    assert RatingConfig.model_validate({"templates": {"de": de}}).templates["de"]["metric_geval"] == \
        RatingConfig().templates["en"]["metric_geval"]


def test_ratings_are_the_cut_points_of_the_geval_aspects(geval, direct):
    engine = Engine(model={"g-eval": str(geval)}, device="cpu")
    cfg = RatingConfig(judge="g-eval", cut_points=FITTED, details=True)
    with pytest.warns(UserWarning) as caught:
        result = make_report(DATA, "rating", engine=engine, options=cfg)
    assert result.n_errors == 0
    assert not any("not calibrated" in str(w.message) for w in caught)  # the config's own cut points
    assert result.settings.options["judge"] == "g-eval"
    assert result.n_queries == len(DATA) * len(METRICS)  # one query per metric per record: no claims, no key points
    for i, row in enumerate(result.reports):
        for m in METRICS:
            det = row.report.details.metrics[m]
            assert det.probability == pytest.approx(direct[m][i], abs=1e-6)
            assert det.method == f"g-eval:summarization/geval_{m}" and det.calibrated is False
            assert row.report.summary.metrics[m].score == rate(direct[m][i], FITTED[m])
            k = get_aspect("summarization", f"geval_{m}").scale
            assert f"G-Eval {1 + (k - 1) * direct[m][i]:.1f}/{k}" in row.report.summary.metrics[m].explanation
        assert row.report.details.relevance_method == "g-eval" and row.report.details.key_points is None


def test_placeholder_cut_points_give_the_not_calibrated_note(geval, direct):
    engine = Engine(model={"g-eval": str(geval)}, device="cpu")
    with pytest.warns(UserWarning, match="not calibrated"):
        result = make_report(DATA, "rating", engine=engine, options={"judge": "g-eval"})
    note = next(n for n in result.notes if "not calibrated" in n)
    assert "coherence, consistency, relevance, fluency are placeholders" in note and "G-Eval" in note
    assert "cut_points" in note and "fit_rating_cutpoints" not in note  # that script fits the unieval judge only
    for i, row in enumerate(result.reports):
        for m in METRICS:
            assert row.report.summary.metrics[m].score == rate(direct[m][i], PLACEHOLDER_CUT_POINTS)


def test_cli_flag_and_config_file(geval, direct, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DATA))
    cfg = tmp_path / "rating.yaml"
    cfg.write_text("judge: g-eval\nenabled_metrics: [coherence, fluency]\ncut_points:\n"
                   + "".join(f"  {m}: [{lo}, {hi}]\n" for m, (lo, hi) in FITTED.items()))
    base = ["report", str(src), "--format", "rating", "--model", f"g-eval={geval}", "--device", "cpu",
            "--no-progress"]
    flag = subprocess.run(CLI + base + ["--judge", "g-eval"], capture_output=True, text=True, timeout=300)
    assert flag.returncode == 0, flag.stderr
    doc = json.loads(flag.stdout)
    assert doc["settings"]["options"]["judge"] == "g-eval" and "not calibrated" in flag.stderr
    for i, row in enumerate(doc["reports"]):
        assert {m: row["report"]["summary"][m]["score"] for m in METRICS} == \
            {m: rate(direct[m][i], PLACEHOLDER_CUT_POINTS) for m in METRICS}
    conf = subprocess.run(CLI + base + ["--config", str(cfg)], capture_output=True, text=True, timeout=300)
    assert conf.returncode == 0, conf.stderr
    doc = json.loads(conf.stdout)
    assert doc["n_queries"] == len(DATA) * 2
    for i, row in enumerate(doc["reports"]):
        summary = row["report"]["summary"]
        assert "consistency" not in summary and "relevance" not in summary
        assert {m: summary[m]["score"] for m in ("coherence", "fluency")} == \
            {m: rate(direct[m][i], FITTED[m]) for m in ("coherence", "fluency")}


def test_without_a_geval_model_the_error_says_how_to_give_one(tmp_path, monkeypatch):
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path / "home"))
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(DATA[0]) + "\n")
    run = subprocess.run(CLI + ["report", str(src), "--format", "rating", "--judge", "g-eval", "--device", "cpu",
                                "--no-progress"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stderr  # a checkpoint error, before any model loads
    assert "G-Eval judge" in run.stderr and "--model g-eval=DIR" in run.stderr and run.stdout == ""


def test_a_missing_geval_folder_is_asked_for_by_name(tmp_path, monkeypatch):
    """g-eval has no hub id: the not-found error says how to name its folder (NAME=DIR), not a
    bare --model <folder> that would give that folder to every evaluator."""
    from unieval_local.errors import CheckpointNotFoundError
    from unieval_local.models.checkpoints import resolve_checkpoint

    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path / "home"))
    with pytest.raises(CheckpointNotFoundError, match=r"--model g-eval=DIR \(a local instruct model"):
        resolve_checkpoint("g-eval", None, offline=True)
    with pytest.raises(CheckpointNotFoundError, match=r"model=\{'g-eval': DIR\} \(a local instruct") as got:
        Scorer(model={"unieval-sum": str(tmp_path)}).score([{"target": "a.", "source": "b."}], task="summarization",
                                                         aspect="geval_coherence")
    assert "g-eval=DIR'" not in str(got.value)  # the Python form is a mapping


def test_a_geval_judged_record_outside_english_routes_no_consistency_checker():
    """The G-Eval judge asks no consistency queries: a Chinese record keeps the configured
    consistency aspect and gets no note about a multilingual checker (the unieval judge does)."""
    from unieval_local.registry.tasks import DEFAULT_REGISTRY
    from unieval_local.reports.language import language_options

    judged, notes = language_options(RatingConfig(judge="g-eval"), "zh", DEFAULT_REGISTRY)
    assert notes == [] and judged.consistency_aspect == RatingConfig().consistency_aspect
    routed, notes = language_options(RatingConfig(), "zh", DEFAULT_REGISTRY)
    assert routed.consistency_aspect != RatingConfig().consistency_aspect and notes


def test_a_geval_model_staged_in_the_home_folder_counts_as_here(geval, tmp_path, monkeypatch):
    """aspects "all+" takes the G-Eval aspects when g-eval is staged at $UNIEVAL_LOCAL_HOME/g-eval
    (named by its folder), but never from one folder given for every evaluator."""
    from unieval_local.requests.score import evaluator_unavailable

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(home))
    assert evaluator_unavailable("g-eval", None) == "no default weights: name a local folder for it"
    (home / "g-eval").symlink_to(geval, target_is_directory=True)
    assert evaluator_unavailable("g-eval", None) is None
    assert evaluator_unavailable("g-eval", {"unieval-sum": str(tmp_path)}) is None  # the home folder still names it
    assert evaluator_unavailable("g-eval", str(geval)) == "no default weights: name a local folder for it"
