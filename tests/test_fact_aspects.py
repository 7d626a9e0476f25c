"""Fact aspects as the reports' consistency checker (issue 30): ``--consistency-aspect fact/factcg``
(a classifier of another task than the reports' summarization aspects, with its own label and
prompt) in every report format through the CLI, and over HTTP (``serve --consistency-aspect``:
the report endpoints /v1/summarization-evaluator, /v1/autoeval and /runs/custom). The numbers
are checked against fact/factcg scored directly (Scorer.score) and against make_report with the
same option; a server without the flag answers with the default checker."""

from __future__ import annotations

import json
import warnings

import pytest
import requests

from make_test_checkpoint import build_factcg_checkpoint
from test_service import AUTH, Server

from unieval_local import Scorer
from unieval_local.cli import main
from unieval_local.engine import Engine
from unieval_local.reports import make_report
from unieval_local.reports.options import consistency_aspects
from unieval_local.text.sentences import DEFAULT_SPLITTER
from unieval_local.wire.rating_evaluator import evaluator_result

SOURCE = ("The city council met on Tuesday. It approved a new park by the river. The park will have a lake and two "
          "playgrounds. Construction starts in May and ends next year.")
SUMMARY = "The council approved a park. It will have a lake."


@pytest.fixture(scope="module")
def factcg_ckpt(tmp_path_factory, shared_data):
    return build_factcg_checkpoint(tmp_path_factory.mktemp("factcg") / "factcg-deberta-large", data_dir=shared_data)


@pytest.fixture(scope="module")
def models(tiny_ckpt, factcg_ckpt):
    return {"unieval-sum": str(tiny_ckpt), "factcg-deberta-large": str(factcg_ckpt)}


@pytest.fixture(scope="module")
def factcg(models):
    """fact/factcg scored directly: P(supported) of ``claim`` given ``document``."""
    scorer = Scorer(model=models, device="cpu")
    return lambda document, claim: scorer.score([{"source": document, "target": claim}], task="fact",
                                                aspect="factcg").examples[0].value


def test_every_fact_aspect_of_a_claim_and_a_document_is_a_consistency_checker():
    assert "fact/factcg" in consistency_aspects()
    assert {"fact/support", "fact/nli_support", "fact/hhem"} <= set(consistency_aspects())


@pytest.mark.parametrize("fmt", ["summ", "rating", "autoeval"])
def test_reports_check_claims_with_factcg(fmt, models, factcg, tmp_path, capsys):
    src = tmp_path / "records.jsonl"
    src.write_text(json.dumps({"id": "a", "source": SOURCE, "target": SUMMARY}) + "\n")
    out = tmp_path / "r.json"
    args = ["report", "--format", fmt, str(src), "--consistency-aspect", "fact/factcg", "-o", str(out), "--no-progress"]
    for name, path in models.items():
        args += ["--model", f"{name}={path}"]
    assert main(args + (["--details"] if fmt == "rating" else [])) == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["settings"]["consistency_aspect"] == "fact/factcg" and doc["n_reported"] == 1
    assert doc["settings"]["checkpoints"]["factcg-deberta-large"]["max_length"] == 2048
    row = doc["reports"][0]
    assert row["consistency_aspect"] == "fact/factcg"
    rep = row["report"]
    sentences = [s for s in DEFAULT_SPLITTER(SUMMARY)]
    if fmt == "summ":  # each summary sentence is a claim scored by FactCG against the source
        assert [c["claim"] for c in rep["claims"]] == sentences
        for c in rep["claims"]:
            assert c["score"] == pytest.approx(factcg(SOURCE, c["claim"]), abs=1e-6)  # float32, batched
    elif fmt == "rating":  # consistency: FactCG on the whole summary, named as such, not calibrated for it
        cons = rep["details"]["metrics"]["consistency"]
        assert cons["method"] == "factcg:fact/factcg" and cons["calibrated"] is False
        assert cons["probability"] == pytest.approx(factcg(SOURCE, SUMMARY), abs=1e-6)
    else:  # accuracy points: each summary sentence's P(supported), as FactCG gives it
        points = rep["accuracy"]["decomposition"]
        assert [p["point"] for p in points] == sentences
        for p in points:
            value = factcg(SOURCE, p["point"])
            assert f"P(supported) = {value:.2f}" in p["accuracy"]
            assert p["is_accurate"] == (value >= 0.5)


def quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with its warnings (the notes the service answers as notes) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def servers(tiny_ckpt, factcg_ckpt, tmp_path_factory):
    """A server whose report endpoints check with fact/factcg, and one with the defaults."""
    tmp = tmp_path_factory.mktemp("serve-fact")
    flags = ("--model", f"factcg-deberta-large={factcg_ckpt}", "--max-wait-ms", "50", "--max-step-ms", "0")
    fact = Server(f"unieval-sum={tiny_ckpt}", tmp, *flags, "--consistency-aspect", "fact/factcg")
    plain = Server(f"unieval-sum={tiny_ckpt}", tmp, *flags)
    yield fact.wait_ready(), plain.wait_ready()
    assert fact.stop() == 0, fact.stderr()
    assert plain.stop() == 0, plain.stderr()


def test_report_endpoints_check_with_the_served_consistency_aspect(servers, models):
    fact, plain = servers
    assert requests.get(f"{fact.url}/info", headers=AUTH, timeout=10).json()["consistency_aspect"] == "fact/factcg"
    assert requests.get(f"{plain.url}/info", headers=AUTH, timeout=10).json()["consistency_aspect"] is None
    engine = Engine(model=models, device="cpu")
    options = {"consistency_aspect": "fact/factcg"}
    record = {"source": SOURCE, "target": SUMMARY}

    got = fact.post("/v1/autoeval", record)
    assert got.status_code == 200, got.text
    want = quiet(make_report, [record], "autoeval", engine=engine, options=options)
    body = got.json()
    body.pop("notes", None)
    assert body == want.reports[0].report.model_dump(mode="json", exclude_none=True)
    assert "P(supported)" in json.dumps(body)
    default = plain.post("/v1/autoeval", record).json()
    assert "P(supported)" not in json.dumps(default) and "P(Yes)" in json.dumps(default)

    item = {"input": SOURCE, "summary": SUMMARY, "enabled_metrics": ["consistency"]}
    got = fact.post("/v1/summarization-evaluator", item)
    assert got.status_code == 200, got.text
    want = quiet(make_report, [{"input": SOURCE, "summary": SUMMARY}], "rating", engine=engine,
                 options={**options, "enabled_metrics": ["consistency"]})
    shaped = evaluator_result(want.reports[0].report.model_dump(mode="json")["summary"], ["consistency"])
    assert got.json()["summary"] == shaped["summary"]
    assert plain.post("/v1/summarization-evaluator", item).json()["summary"]["consistency"] != \
        got.json()["summary"]["consistency"]

    payload = {"is_blocking": True, "evaluations": [{"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 2}}],
                                                     "data": [{"input": SOURCE, "output": SUMMARY}]}]}
    run = fact.post("/runs/custom", payload).json()
    assert run["status"] == "completed", run
    got = run["evaluations"][0]["metrics"][0]["results"][0]
    want = quiet(make_report, [{"input": SOURCE, "output": SUMMARY, "n_key_points": 2}], "summ", engine=engine,
                 options=options).reports[0].report.model_dump(mode="json")
    assert [c["score"] for c in got["claims"]] == pytest.approx([c["score"] for c in want["claims"]], abs=1e-9)
    assert got["score"] == pytest.approx(want["score"], abs=1e-9)


def test_the_served_checker_fills_only_options_that_name_none():
    from types import SimpleNamespace

    from unieval_local.reports.autoeval import AutoevalOptions
    from unieval_local.reports.rating import RatingConfig
    from unieval_local.service.handlers import Service

    served = SimpleNamespace(consistency_aspect="fact/factcg")
    fill = Service._with_checker
    assert fill(served, None) == {"consistency_aspect": "fact/factcg"}
    own = RatingConfig(consistency_aspect="fact/consistency", enabled_metrics=["consistency"])
    assert fill(served, own) is own  # a --rating-config that names its checker keeps it
    filled = fill(served, RatingConfig(enabled_metrics=["consistency"]))
    assert filled.consistency_aspect == "fact/factcg" and filled.enabled_metrics == ["consistency"]
    assert "consistency_aspect" in filled.model_fields_set  # chosen: no language switch to the NLI checker
    assert fill(served, AutoevalOptions()).consistency_aspect == "fact/factcg"
    assert fill(SimpleNamespace(consistency_aspect=None), None) is None
