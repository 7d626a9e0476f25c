"""The seed systems' requests over HTTP (issue 29), against a real ``unieval-local serve``: errors
name each field as the client wrote it (``summary``, ``input``, ``data[3]``, ``enabled_metrics[1]``,
``config.evaluation_aspect``), with a did-you-mean for a misspelt key; ``serve --rating-config FILE``
rates /v1/summarization-evaluator with that file's templates and cut points, as
``report --format rating --config FILE`` does."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

requests = pytest.importorskip("requests")
pytest.importorskip("fastapi")

from test_service import AUTH, SOURCE, Server  # noqa: E402

from unieval_local.engine import Engine  # noqa: E402
from unieval_local.reports import make_report  # noqa: E402
from unieval_local.service.work import RatingConfigFile  # noqa: E402
from unieval_local.wire.rating_evaluator import evaluator_result  # noqa: E402

SUMMARY = "The council approved a park. Construction starts in May."
#: cut points far below any probability (every enabled metric rated 3, so the summary is good) and
#: a template of our own: ratings and the explanation both differ from the defaults'.
RATING_YAML = """\
enabled_metrics: [coherence, consistency, fluency]
cut_points:
  coherence: [0.0001, 0.0002]
  consistency: [0.0001, 0.0002]
  fluency: [0.0001, 0.0002]
templates:
  en:
    global_good: "Every metric passed our own cut points."
"""


@pytest.fixture(scope="module")
def server(tiny_ckpt, tmp_path_factory):
    s = Server(tiny_ckpt, tmp_path_factory.mktemp("seed-http"), "--max-wait-ms", "5", "--max-step-ms", "0")
    yield s.wait_ready()
    assert s.stop() == 0, s.stderr()


# ----------------------------------------------------------------------------- item 1: fields as the client wrote them
def problems(r) -> list[tuple]:
    """``(index, field)`` of each problem of a 422 answer."""
    assert r.status_code == 422, r.text
    return [(e["index"], e["field"]) for e in r.json()["error"]["examples"]]


def test_a_missing_a_misspelt_and_an_empty_summary_are_all_named_summary(server):
    for body, hint in (({"input": SOURCE}, None), ({"input": SOURCE, "sumary": SUMMARY}, "sumary"),
                       ({"input": SOURCE, "summary": "   "}, None)):
        r = server.post("/v1/summarization-evaluator", body)
        assert [f for _, f in problems(r)] == ["summary"], body
        assert "target" not in r.text, r.text  # our name for it, never shown to this client
        message = r.json()["error"]["examples"][0]["message"]
        assert (f"the body has {hint!r}: did you mean 'summary'?" in message) == (hint is not None), message
    r = server.post("/v1/summarization-evaluator", {"inptu": SOURCE, "summary": SUMMARY})
    assert problems(r) == [(None, "input")] and "did you mean 'input'?" in r.text and "source" not in r.text


def test_an_unknown_metric_is_named_by_its_place_in_enabled_metrics(server):
    record = {"input": SOURCE, "summary": SUMMARY}
    r = server.post("/v1/summarization-evaluator", {**record, "enabled_metrics": ["coherence", "fluensy", "wit"]})
    assert problems(r) == [(None, "enabled_metrics[1]"), (None, "enabled_metrics[2]")]
    first, second = (e["message"] for e in r.json()["error"]["examples"])
    assert "'fluensy' (did you mean 'fluency'?)" in first and "'wit';" in second
    assert all("coherence, consistency, relevance, fluency" in m for m in (first, second))
    assert problems(server.post("/v1/summarization-evaluator", {**record, "enabled_metrics": "coherence,wit"})) == \
        [(None, "enabled_metrics")]
    assert problems(server.post("/v1/summarization-evaluator", {**record, "enabled_metrics": ["coherence", 3]})) == \
        [(None, "enabled_metrics[1]")]  # the list's item, not the union's other member (a string)
    assert problems(server.post("/v1/summarization-evaluator", {**record, "enabled_metrics": []})) == \
        [(None, "enabled_metrics")]


def test_examples_tasks_and_aspects_are_named_as_the_body_wrote_them(server):
    ok = {"target": SUMMARY, "source": SOURCE}
    data = [ok, {"taget": SUMMARY, "source": SOURCE}, {"system_output": " ", "source": SOURCE}]
    r = server.post("/v1/unieval", {"config": {"task": "summarization", "evaluation_aspect": "coherence"},
                                    "data": data})
    assert sorted(problems(r)) == [(1, "target"), (2, "system_output")]  # system_output, as sent
    assert "did you mean 'target'?" in r.json()["error"]["examples"][0]["message"]
    r = server.post("/v1/unieval", {"config": {"evaluation_aspect": "coherence"}, "data": [ok, ok, ok, "text"]})
    assert problems(r) == [(3, "data[3]")]
    for config, field in (({"aspect": "coherense"}, "config.aspect"),
                          ({"evaluation_aspect": "coherense"}, "config.evaluation_aspect"),
                          ({"task": "sumarization", "evaluation_aspect": "coherence"}, "config.task")):
        r = server.post("/v1/unieval", {"config": config, "data": [ok]})
        assert problems(r) == [(None, field)] and "did you mean" in r.text, config
    for body, field in (({"aspects": ["coherence", "fluensy"]}, "aspects[1]"), ({"aspects": "fluensy"}, "aspects"),
                        ({"task": "sumarization", "aspects": ["coherence"]}, "task")):
        r = server.post("/v1/score", {**body, "data": [ok]})
        assert problems(r) == [(None, field)] and "did you mean" in r.text, body
    r = server.post("/v1/autoeval", {"instruction": "Summarize.", "input": SOURCE, "output": "  "})
    assert problems(r) == [(0, "output")] and "target" not in r.text
    r = server.post("/runs/custom", {"evaluations": [{"metrics": [{"metric": "summ"}], "data": [5]}]})
    assert problems(r) == [(None, "evaluations[0].data[0]")]


# ----------------------------------------------------------------------------- item 3: serve --rating-config
def in_process(tiny_ckpt: Path, record: dict, config) -> dict:
    """The evaluator's answer for ``record`` computed in process (make_report with ``config``)."""
    with pytest.warns(UserWarning):  # the checkpoint's unverified identity, placeholder cut points ...
        out = make_report([record], "rating", engine=Engine(model=str(tiny_ckpt), device="cpu", long_input="chunk"),
                          options=config)
    return evaluator_result(out.reports[0].report.model_dump(mode="json")["summary"], config.enabled_metrics)


def test_rating_config_gives_the_ratings_its_cut_points_and_templates_give(server, tiny_ckpt, tmp_path):
    path = tmp_path / "fitted-rating.yaml"
    path.write_text(RATING_YAML)
    config = RatingConfigFile.load(str(path)).config
    record = {"input": SOURCE, "summary": SUMMARY}
    want = in_process(tiny_ckpt, record, config)
    default = server.post("/v1/summarization-evaluator", record)
    assert default.status_code == 200, default.text
    assert want != default.json()  # the file changes the answer: the comparison below can fail
    assert [want["summary"][m]["score"] for m in ("coherence", "consistency", "fluency")] == [3, 3, 3]
    assert want["summary"]["global_explanation"] == "Every metric passed our own cut points."
    configured = Server(tiny_ckpt, tmp_path, "--rating-config", str(path)).wait_ready()
    try:
        r = configured.post("/v1/summarization-evaluator", record)
        assert r.status_code == 200, r.text
        assert r.json() == want
        # the body's enabled_metrics still overrides the file's
        r = configured.post("/v1/summarization-evaluator", {**record, "enabled_metrics": ["fluency"]})
        assert list(r.json()["summary"])[-1] == "fluency" and "coherence" not in r.json()["summary"]
        assert r.json()["summary"]["fluency"] == want["summary"]["fluency"]
        info = requests.get(f"{configured.url}/info", headers=AUTH, timeout=10)
        assert info.json()["rating_config"] == {"file": "fitted-rating.yaml",
                                                "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        assert str(tmp_path) not in info.text  # a server path: never shown
    finally:
        assert configured.stop() == 0, configured.stderr()
    assert requests.get(f"{server.url}/info", headers=AUTH, timeout=10).json()["rating_config"] is None


@pytest.mark.parametrize("text, says", [
    ("cut_points:\n  coherence: [0.9, 0.1]\n", "cut_points"),
    ("enabled_metrics: [coherence, wit]\n", "enabled_metrics"),
    ("cut_points: [oops\n", "invalid YAML"),
    (None, "cannot read"),
])
def test_a_bad_rating_config_is_refused_at_start_before_the_model_loads(monkeypatch, capsys, tmp_path, text, says):
    from unieval_local.cli import main

    def no_load(*args, **kwargs):
        raise AssertionError("the engine was built before the rating config was checked")

    monkeypatch.setattr(Engine, "__init__", no_load)
    path = tmp_path / "rating.yaml"
    if text is not None:
        path.write_text(text)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["serve", "--model", str(tmp_path / "no-checkpoint"), "--port", str(port),
                 "--rating-config", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("unieval-local: error: --rating-config ") and says in err and "rating.yaml" in err
