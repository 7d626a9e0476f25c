"""Issue 37, items 4-6: what each surface says. ``serve`` refuses at start (exit 3, one line, no
port bound) an option naming a model, judge or checker it cannot use; notes and errors over HTTP
speak in the service's words (serve flags, JSON fields, one field-path style, right plurals); a
429's Retry-After follows the queue and the measured throughput; language codes get a
did-you-mean; the seed formats' missing fields and empty requests are named as the client wrote
them. The HTTP tests run the app in process (FastAPI's TestClient) over a fake model runner."""

from __future__ import annotations

import math
import socket
import threading
import time
import warnings

import pytest

pytest.importorskip("fastapi")

from conftest import FakeRunner, fake_factory  # noqa: E402

from unieval_local.engine import Engine  # noqa: E402

SOURCE = ("The city council approved the new park on Monday. Construction starts in May. "
          "The park will have a lake and two playgrounds. Residents welcomed the plan.")
SUMMARY = "The council approved a park."


def client(fake_ckpt, runner=None, limits=None, **engine):
    """A TestClient over a loaded Service with a fake runner, and the service."""
    from fastapi.testclient import TestClient

    from unieval_local.service.app import create_app
    from unieval_local.service.handlers import Service

    eng = Engine(model=str(fake_ckpt), runner_factory=fake_factory(runner or FakeRunner(default=0.7)), device="cpu",
                 **engine)
    service = Service(eng, limits, preload=["unieval-sum"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fake checkpoint's unverified identity
        service.load()
    return TestClient(create_app(service)), service


@pytest.fixture
def http(fake_ckpt):
    c, service = client(fake_ckpt)
    yield c
    service.drain(10)


# ----------------------------------------------------------------------------- item 4: refused at start
@pytest.mark.parametrize("flags, says", [
    (["--rating-config", "{rating}"], "judge: g-eval"),
    (["--consistency-aspect", "fact/factcg"], "--consistency-aspect fact/factcg"),
])
def test_an_option_naming_an_unusable_model_stops_serve_at_start_with_exit_3(monkeypatch, capsys, tmp_path,
                                                                              fake_ckpt, flags, says):
    from unieval_local.cli import main

    def never(*args, **kwargs):
        raise AssertionError("a port was bound or a model loaded before the option was checked")

    monkeypatch.setattr(socket.socket, "bind", never)
    monkeypatch.setattr(Engine, "runner", never)
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rating = tmp_path / "geval.yaml"
    rating.write_text("judge: g-eval\n")
    code = main(["serve", "--model", f"unieval-sum={fake_ckpt}", "--port", "8999",
                 *[f.format(rating=rating) for f in flags]])
    err = capsys.readouterr().err
    assert code == 3, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("unieval-local: error: ") and says in err, err


# ----------------------------------------------------------------------------- item 6: seed formats
def test_a_summ_row_without_output_is_an_error_row_naming_output_in_words(http):
    r = http.post("/runs/custom", json={"evaluations": [{"metrics": [{"metric": "summ"}],
                                                          "data": [{"input": SOURCE}]}]})
    assert r.status_code == 200, r.text
    row = r.json()["evaluations"][0]["metrics"][0]["results"][0]
    assert row["error"] == {"field": "output", "message": "the summary is missing"}, row


def test_autoeval_names_a_missing_summary_summary(http):
    r = http.post("/v1/autoeval", json={"instructions": ["Summarize."], "transcript": SOURCE})
    assert r.status_code == 422, r.text
    assert [(e["field"], e["message"]) for e in r.json()["error"]["examples"]] == \
        [("summary", "the summary is missing")]
    assert "target" not in r.text


@pytest.mark.parametrize("path, body", [
    ("/v1/unieval", {"config": {}, "data": []}),
    ("/v1/score", {"task": "summarization", "aspects": ["coherence"], "data": []}),
])
def test_an_empty_request_is_said_to_be_empty_not_example_0(http, path, body):
    r = http.post(path, json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert "the request is empty" in error["message"]
    assert error["examples"] == [{"index": None, "field": "data", "message": "the request is empty: no examples"}]


def test_data_collection_id_is_noted_as_ignored_over_http_as_in_python(http):
    from unieval_local.wire.custom_run import read_custom_run

    body = {"data_collection_id": "dc-7", "evaluations": [{"metrics": [{"metric": "summ"}],
                                                           "data": [{"input": SOURCE, "output": SUMMARY}]}]}
    python_note = read_custom_run(body)[1]
    r = http.post("/runs/custom", json=body)
    assert r.status_code == 200, r.text
    assert python_note == ["request body keys ignored: data_collection_id"]
    assert python_note[0] in r.json()["notes"]
    r = http.post("/runs/custom", json={**body, "data_collection_id": None})  # null: nothing to ignore
    assert not any("data_collection_id" in n for n in r.json()["notes"])


# ----------------------------------------------------------------------------- item 5: messages per surface
def test_one_problem_is_one_problem_and_two_are_problems(http):
    one = http.post("/v1/score", json={"task": "summarization", "aspects": ["coherence"], "data": [{"target": "x"}]})
    assert one.json()["error"]["message"] == "1 problem in the request's examples", one.text
    two = http.post("/v1/score", json={"task": "summarization", "aspects": ["coherence"],
                                       "data": [{"target": "x"}, {"target": "y"}]})
    assert two.json()["error"]["message"] == "2 problems in the request's examples", two.text
    from unieval_local.errors import ExampleProblem, InvalidExampleError

    assert str(InvalidExampleError([ExampleProblem(0, "target", "missing")])).startswith("1 problem in the input:")


def test_field_paths_over_http_are_dotted_names_with_bracketed_indices(http):
    r = http.post("/v1/autoeval", json={"transcript": SOURCE, "summary": "Dates: none",
                                        "section_definitions": [{"name": "Dates", "type": "bogus",
                                                                 "instruction": "List the dates."}]})
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["error"]["examples"]] == ["section_definitions[0].type"]
    r = http.post("/v1/score", json={"task": "summarization", "aspects": ["coherence"],
                                     "data": [{"target": SUMMARY, "source": SOURCE, "references": ["a", 3]}]})
    assert [e["field"] for e in r.json()["error"]["examples"]] == ["references[1]"], r.text


def test_truncation_notes_over_http_name_serve_flags_and_json_fields_not_python(fake_ckpt):
    from unieval_local.pipeline.jobs import RunStats, shortened_message, truncation_message

    stats = RunStats(n_queries=4, n_truncated=2, n_shortened=1, truncated_fields={"source": 2},
                     truncated_by={"minicheck-flan-t5-large": 1, "unieval-sum": 1})
    limits = {"unieval-sum": 1024, "minicheck-flan-t5-large": 512}
    http = truncation_message(stats, limits, "truncate", surface="http")
    assert "serve --chunk-words N" in http and "serve --long-input chunk" in http and '"evidence": true' in http
    assert "chunk_words=" not in http and "long_input=" not in http and "evidence=True" not in http
    python = truncation_message(stats, limits, "truncate", cli=False)
    assert "chunk_words=N" in python and "chunk_words='N'" not in python and "evidence=True" in python
    assert "--chunk-words N" in truncation_message(stats, limits, "truncate", cli=True)
    assert "long_input=" not in shortened_message(stats, "http") and "serve --long-input chunk" in \
        shortened_message(stats, "http")
    long_source = " ".join([SOURCE] * 40)  # over --max-length 64: truncated over HTTP too
    c, service = client(fake_ckpt, max_length=64)
    try:
        r = c.post("/v1/score", json={"task": "summarization", "aspects": ["consistency"],
                                      "data": [{"target": SUMMARY, "source": long_source}]})
        assert r.status_code == 200, r.text
        notes = " ".join(r.json()["notes"])
        assert "lost their end" in notes and "serve --long-input chunk" in notes and "long_input=" not in notes
    finally:
        service.drain(10)


def test_under_the_geval_judge_notes_name_that_judge_and_no_training_language():
    from unieval_local.compat import SummarizationEvaluator
    from unieval_local.registry.evaluators import get_evaluator

    assert get_evaluator("g-eval").languages is None  # the user's model: its languages are not ours to tell
    evaluator = SummarizationEvaluator(config={"judge": "g-eval"}, model_credentials="k", model={"g-eval": "x"})
    assert "G-Eval judge" in evaluator._credentials_note and "UniEval" not in evaluator._credentials_note
    assert "local UniEval checkpoints" in SummarizationEvaluator(model_credentials="k")._credentials_note


def test_the_configs_own_cut_points_are_not_said_to_be_fitted_for_the_default_checker():
    from unieval_local.registry.tasks import DEFAULT_REGISTRY
    from unieval_local.reports.language import language_options
    from unieval_local.reports.rating import RatingConfig

    own = RatingConfig(cut_points={"consistency": [0.2, 0.4]})
    _, said = language_options(own, "fr", DEFAULT_REGISTRY)
    assert said and not any("fitted for summarization/consistency" in n for n in said), said
    _, said = language_options(RatingConfig(), "fr", DEFAULT_REGISTRY)
    assert any("fitted for summarization/consistency" in n for n in said), said


@pytest.mark.parametrize("given, hint", [
    ("jp", "did you mean 'ja' (Japanese)?"), ("cn", "did you mean 'zh' (Chinese)?"),
    ("JP", "did you mean 'ja' (Japanese)?"), ("klingon", "no language named 'klingon' is known here"),
])
def test_wrong_language_codes_and_unknown_names_get_a_did_you_mean(given, hint):
    from unieval_local.settings import check_language

    with pytest.raises(ValueError, match="must be a language code") as err:
        check_language(given)
    assert hint in str(err.value)


def test_retry_after_follows_the_queue_over_the_measured_throughput(fake_ckpt):
    from unieval_local.service.core import ServiceLimits

    def slow(prompt):
        time.sleep(0.05)  # 20 queries a second at most
        return 0.6

    limits = ServiceLimits(max_wait_ms=0, max_step_ms=0, max_request_queries=60, max_queued_queries=70)
    c, service = client(fake_ckpt, FakeRunner(slow), limits, batch_tokens=200)
    try:
        data = [{"target": f"The council approved park number {i}.", "source": SOURCE} for i in range(60)]
        big = threading.Thread(target=lambda: c.post("/v1/score", json={"task": "summarization",
                                                                         "aspects": ["consistency"], "data": data}))
        big.start()
        deadline = time.monotonic() + 30
        while service.worker.throughput() is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the first micro-batch measured
        r = c.post("/v1/score", json={"task": "summarization", "aspects": ["consistency"], "data": data[:20]})
        held, rate = service.worker.queued(), service.worker.throughput()
        assert r.status_code == 429, r.text
        retry = int(r.headers["Retry-After"])
        assert held / rate > 1.5  # more than a second of work queued ...
        assert retry > 1 and abs(retry - math.ceil(held / rate)) <= 1, (retry, held, rate)  # ... and said so
        big.join(60)
    finally:
        service.drain(30)


def test_an_empty_python_request_is_said_to_be_empty_not_example_0(fake_scorer):
    """The hosted-metric ``score(data=[])`` in Python: the request, not "example 0", is at fault."""
    from unieval_local import score
    from unieval_local.errors import InvalidExampleError

    with pytest.raises(InvalidExampleError) as info:
        score([], task="summarization", aspect="coherence")
    assert "the request, field 'data': the request is empty" in str(info.value)
    assert "example 0" not in str(info.value)


# ============================================================================= issue 40 (serve)
def _deberta_folder(parent):
    """A folder of the DeBERTa family (config.json model_type deberta-v2, its spm.model)."""
    folder = parent / "mdeberta"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "deberta-v2"}')
    (folder / "spm.model").write_text("x")
    return folder


def test_serve_with_a_missing_model_folder_exits_3_before_binding_the_port(tmp_path):
    import os
    import subprocess
    import sys

    missing = tmp_path / "no-such-folder"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())",
                           "serve", "--model", f"unieval-sum={missing}", "--port", str(port)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "UNIEVAL_LOCAL_HOME": str(tmp_path / "home")})
    assert proc.returncode == 3, proc.stderr
    # the folder beside it holds nothing of a close name: no did-you-mean, said so
    assert proc.stderr == (f"unieval-local: error: --model unieval-sum={missing}: checkpoint folder '{missing}' "
                           f"does not exist; '{tmp_path}' holds no folder of a close name\n"), proc.stderr
    assert "loading checkpoints" not in proc.stderr and time.monotonic() - started < 60


@pytest.mark.parametrize("kind", ["missing", "no config.json", "deberta"])
def test_serve_refuses_a_preloaded_folder_it_cannot_use_before_any_bind(monkeypatch, capsys, tmp_path, kind):
    from unieval_local.cli import main

    def never(*args, **kwargs):
        raise AssertionError("a port was bound or a model loaded before the folder was checked")

    monkeypatch.setattr(socket.socket, "bind", never)
    monkeypatch.setattr(Engine, "runner", never)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "empty"
    if kind == "no config.json":
        folder.mkdir()
    elif kind == "deberta":
        folder = _deberta_folder(tmp_path)
    code = main(["serve", "--model", str(folder), "--port", "8999"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"unieval-local: error: --model {folder}: "), err
    says = {"missing": f"checkpoint folder '{folder}' does not exist",
            "no config.json": f"checkpoint folder '{folder}' (for unieval-sum) has no config.json",
            "deberta": f"checkpoint folder '{folder}' holds a 'deberta-v2' model (config.json model_type; the "
                       "family of mdeberta-nli, factcg-deberta-large), but unieval-sum is a t5 model"}[kind]
    assert says in err, err


def test_a_folder_of_another_family_is_named_by_its_family_not_as_one_without_tokenizer(tmp_path):
    from unieval_local.errors import CheckpointError
    from unieval_local.models.checkpoints import resolve_checkpoint

    folder = _deberta_folder(tmp_path)
    with pytest.raises(CheckpointError) as info:
        resolve_checkpoint("unieval-sum", folder)
    assert str(info.value) == (f"checkpoint folder '{folder}' holds a 'deberta-v2' model (config.json model_type; "
                               "the family of mdeberta-nli, factcg-deberta-large), but unieval-sum is a t5 model: give the folder "
                               "of unieval-sum (MingZhong/unieval-sum)")


def test_the_throughput_meter_follows_a_mix_that_gets_slower_within_its_window():
    from unieval_local.service.core import ThroughputMeter

    now = [100.0]  # steps of 1/8 s: exact in binary, so the window's edge is exact
    meter = ThroughputMeter(window_s=3.0, min_busy_s=1.0, clock=lambda: now[0])
    assert meter.rate() is None

    def steps(n, units, seconds=0.125):
        for _ in range(n):
            now[0] += seconds
            meter.record(seconds, units)

    steps(40, 40)  # 5 s of a fast mix: 40 cost units per 1/8 s = 320/s
    assert meter.rate() == 320.0
    steps(8, 5)  # 1 s of a mix 8x slower: the window (ends in [now - 3, now]) holds 8 slow + 17 fast steps
    assert meter.rate() == (8 * 5 + 17 * 40) / (25 * 0.125) == 230.4
    steps(24, 5)  # 3 s more: the new mix only
    assert meter.rate() == 40.0
    now[0] += 600.0  # idle for ten minutes: the last second of work (min_busy_s) still counts
    assert meter.rate() == 40.0
    meter.record(0.25, -3)  # a stage that re-planned: no negative work; 0.25 s + 6 older steps = 1 s
    assert meter.rate() == 6 * 5 / 1.0 == 30.0


def test_retry_after_counts_the_queue_and_the_throughput_in_the_same_units(fake_ckpt):
    """Held cost units over cost units per second: a request whose cost is 3x its distinct
    prompts (each example three times) is not said to drain 3x slower than it does."""
    from unieval_local.service.core import ServiceLimits

    def slow(prompt):
        time.sleep(0.02)
        return 0.6

    limits = ServiceLimits(max_wait_ms=0, max_step_ms=0, max_request_queries=200, max_queued_queries=200)
    c, service = client(fake_ckpt, FakeRunner(slow), limits, batch_tokens=120)
    try:
        data = [{"target": f"The council approved park number {i % 20}.", "source": SOURCE} for i in range(60)]
        started = time.perf_counter()
        first = c.post("/v1/score", json={"task": "summarization", "aspects": ["consistency"], "data": data})
        wall = time.perf_counter() - started
        assert first.status_code == 200, first.text
        cost, distinct = service.worker._retired, service.scheduler.stats.n_queries
        assert cost >= 3 * distinct > 0, (cost, distinct)
        rate = service.worker.throughput()
        assert 0.8 * cost / wall <= rate, (rate, cost, wall)  # what the queue drained, per second
    finally:
        service.drain(30)


def test_an_unknown_evaluation_aspect_over_http_names_its_config_field_and_the_valid_ones(http):
    r = http.post("/v1/unieval", json={"config": {"task": "summarization", "evaluation_aspect": "all"},
                                       "data": [{"target": SUMMARY, "source": SOURCE}]})
    assert r.status_code == 422, r.text
    [problem] = r.json()["error"]["examples"]
    assert problem["field"] == "config.evaluation_aspect" and problem["index"] is None, problem
    assert problem["message"].startswith("unknown aspect 'all' for task 'summarization'; valid aspects: coherence, "
                                         "consistency, fluency, relevance"), problem
    r = http.post("/v1/unieval", json={"config": {"task": "summary", "evaluation_aspect": "coherence"},
                                       "data": [{"target": SUMMARY, "source": SOURCE}]})
    assert r.status_code == 422 and r.json()["error"]["examples"][0]["field"] == "config.task", r.text


def test_the_language_note_over_http_writes_one_example_and_two_examples(http):
    def notes(targets):
        r = http.post("/v1/score", json={"task": "summarization", "aspects": ["fluency"],
                                         "data": [{"target": t} for t in targets]})
        assert r.status_code == 200, r.text
        return [n for n in r.json()["notes"] if "trained on" in n]

    one = notes(["客服承诺三天内退款。我们会尽快处理您的请求。"])
    assert len(one) == 1 and "summarization/fluency: 1 example in Chinese (zh)" in one[0], one
    two = notes(["客服承诺三天内退款。我们会尽快处理您的请求。", "他们明天会来这里开会。会议将在上午十点开始。"])
    assert len(two) == 1 and "summarization/fluency: 2 examples in Chinese (zh)" in two[0], two


# ============================================================================= issue 40 (http)
FRENCH_SOURCE = ("Le conseil municipal a approuvé le nouveau parc lundi. Les travaux commencent en mai. "
                 "Le parc aura un lac et deux aires de jeux.")
FRENCH = "Le conseil a approuvé un parc. Il ouvre en mai."


def test_notes_over_http_name_serve_flags_not_python_keywords_nor_cli_flags(http):
    """A French summary on /v1/summarization-evaluator: the language, cut-point and checker notes
    name what sets them over HTTP (serve's flags), not Python's keywords or the CLI's --config."""
    r = http.post("/v1/summarization-evaluator", json={"input": FRENCH_SOURCE, "summary": FRENCH})
    assert r.status_code == 200, r.text
    import json

    said = json.loads(r.headers["X-UniEval-Notes"])
    text = " ".join(said)
    for python_or_cli in ("strict_language", "--config FILE", "config=", "consistency_aspect /", "in Python"):
        assert python_or_cli not in text, (python_or_cli, said)
    language = next(n for n in said if n.startswith("summarization/fluency: 1 example in French"))
    assert language.endswith("its scores there are not validated (serve --strict-language refuses such examples; "
                             "docs/languages.md)"), language
    assert any("pass the YAML as the rating config (serve --rating-config FILE.yaml; README, rating;" in n
               for n in said), said
    assert any(n.endswith("(mdeberta-nli, a multilingual NLI model trained on fr); choose another with serve "
                          "--consistency-aspect") for n in said), said


@pytest.mark.parametrize("given, http_words", [
    ("(strict_language / --strict-language refuses such examples)", "(serve --strict-language refuses such examples)"),
    ("as the rating config (--config FILE in the CLI, config= in Python; README)",
     "as the rating config (serve --rating-config FILE.yaml; README)"),
    ("give it (--model mdeberta-nli=DIR, model={'mdeberta-nli': DIR}), or choose the checker (--consistency-aspect, "
     "consistency_aspect=) or", "give it (serve --model mdeberta-nli=DIR), or choose the checker (serve "
     "--consistency-aspect) or"),
    ("give it with --model g-eval=DIR (model={'g-eval': DIR} in Python) or stage it",
     "give it with serve --model g-eval=DIR or stage it"),
    ("Give each evaluator its own folder (--model unieval-sum=DIR, model={'unieval-sum': DIR}), or stage",
     "Give each evaluator its own folder (serve --model unieval-sum=DIR), or stage"),
    ("model={'mdeberta-nli': DIR, ...} gives one, aspects=[NAME] asks for it",
     'serve --model mdeberta-nli=DIR gives one, "aspects": [NAME] in the body asks for it'),
])
def test_python_and_cli_names_of_settings_are_rewritten_into_the_services(given, http_words):
    from unieval_local.service.words import in_http_words

    assert in_http_words(given) == http_words


def test_a_checkpoint_error_over_http_names_serves_model_flag_not_a_python_dict(fake_ckpt):
    """An error raised below the service in Python's words (``model={'g-eval': DIR}``) reaches the
    client as the operator's ``serve --model g-eval=DIR``."""
    from unieval_local.errors import CheckpointNotFoundError

    c, service = client(fake_ckpt)
    try:
        err = service.error(CheckpointNotFoundError(
            "the G-Eval judge (judge: g-eval) needs a local instruct model: give it with --model g-eval=DIR "
            "(model={'g-eval': DIR} in Python) or stage it as $UNIEVAL_LOCAL_HOME/g-eval"))
        assert err.status == 422 and err.message.startswith(
            "the G-Eval judge (judge: g-eval) needs a local instruct model: give it with serve --model g-eval=DIR "
            "or stage it as $UNIEVAL_LOCAL_HOME/g-eval"), err.message
        assert "model={" not in err.message
    finally:
        service.drain(10)


@pytest.mark.parametrize("body, field", [({"input": SOURCE}, "summary"), ({"summary": SUMMARY}, "input")])
def test_a_missing_summary_reads_the_same_on_every_endpoint(http, body, field):
    r = http.post("/v1/summarization-evaluator", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["examples"] == [{"index": None, "field": field, "message": f"the {field} is missing"}]
    assert "Field required" not in r.text
    if field == "summary":  # the same words as /v1/autoeval and a custom run's row
        auto = http.post("/v1/autoeval", json={"transcript": SOURCE})
        assert auto.json()["error"]["examples"][0]["message"] == "the summary is missing", auto.text
    r = http.post("/v1/summarization-evaluator", json={"input": SOURCE, "sumary": SUMMARY})
    assert r.json()["error"]["examples"] == [{"index": None, "field": "summary", "message": "the summary is missing "
                                              "(the body has 'sumary': did you mean 'summary'?)"}], r.text


def test_a_422_where_nothing_was_scored_carries_no_note_about_scoring(http):
    """/v1/autoeval without a summary: the record is refused; the run's notes (the unverified
    checkpoint ...) are about scores and none was given."""
    ok = http.post("/v1/autoeval", json={"transcript": SOURCE, "summary": SUMMARY, "instructions": ["Summarize."]})
    assert ok.status_code == 200 and any("was used unchecked" in n for n in ok.json()["notes"]), ok.text
    r = http.post("/v1/autoeval", json={"transcript": SOURCE, "instructions": ["Summarize."]})
    assert r.status_code == 422, r.text
    assert "X-UniEval-Notes" not in r.headers, r.headers.get("X-UniEval-Notes")


@pytest.mark.parametrize("given, language, hint", [
    ("zh-CN", "zh", None), ("ZH", "zh", None), ("zh_Hant", "zh", None), ("zho", "zh", None), ("en-US", "en", None),
    ("cn", None, "; did you mean 'zh' (Chinese)?"),
    ("in", None, "; did you mean 'id' (Indonesian; 'in' is its old ISO 639 code)?"),
    ("xx", None, ""),
])
def test_the_rating_configs_language_reads_tags_and_says_which_code_was_meant(given, language, hint):
    from unieval_local.compat import SummarizationEvaluator

    if language is not None:
        assert SummarizationEvaluator(config={"language": given}).config.language == language
        return
    with pytest.raises(ValueError) as err:
        SummarizationEvaluator(config={"language": given})
    assert str(err.value) == f"config: language {given!r} has no templates; have en, fr, zh, id{hint}"


def test_retry_after_waits_for_the_requests_that_make_room_not_the_whole_queue():
    """Four held requests (costs 10, 10, 10, 40; the queue holds 70): a request of 10 fits once the
    one with least work left is answered; one of 30 needs the three small ones answered, one of 60 all."""
    from unieval_local.requests.base import Prepared
    from unieval_local.service.core import BatchingWorker, ServiceLimits

    class Idle:  # a scheduler that never runs: the worker is not started
        def partial_cost(self):
            return 0.0

    limits = ServiceLimits(max_wait_ms=0, max_step_ms=0, max_request_queries=70, max_queued_queries=70)
    worker = BatchingWorker(Idle(), limits)
    held = [Prepared(None, cost=c) for c in (10, 10, 10, 40)]
    for p, (pooled, remaining) in zip(held, [(10, 5), (10, 10), (10, 10), (40, 40)]):
        p.pooled, p.remaining = pooled, remaining
    worker._admitted = {id(p): p for p in held}
    worker._held = 70
    now = [0.0]
    worker.meter.clock = lambda: now[0]
    now[0] += 1.0
    worker.meter.record(1.0, 2.5)  # 2.5 cost units a second
    assert worker._retry_after(10) == 2  # the half-done request: 5 units left / 2.5 per second
    assert worker._retry_after(30) == math.ceil((5 + 10 + 10) / 2.5) == 10  # three answered: 30 units freed
    assert worker._retry_after(60) == math.ceil((5 + 10 + 10 + 40) / 2.5) == 26  # the whole queue


def test_a_checkpoint_error_in_python_names_the_model_dict_once():
    """The library says both forms, ``(--model X=DIR, model={'X': DIR})``; rewritten for Python the
    two became the same words twice (issue 45's newcomer trial): said once."""
    from unieval_local.api import _in_python_names
    from unieval_local.errors import CheckpointError

    err = _in_python_names(CheckpointError(
        "out/tck is unieval-sum, not unieval-fact: its scores would not be unieval-fact's. Give each evaluator "
        "its own folder (--model unieval-fact=DIR, model={'unieval-fact': DIR}), or stage it with "
        "`unieval-local download --checkpoint unieval-fact`"))
    assert "folder (model={'unieval-fact': DIR}), or stage it" in str(err)
    assert str(err).count("model={'unieval-fact': DIR}") == 1
