"""The HTTP service on the wire, as clients meet it (a real ``unieval-local serve`` on a loopback port,
real HTTP clients): the event loop stays free while large bodies are parsed, bodies that cannot be
read are 422s naming ``body``, ``--max-runs`` is a hard bound, no answer shows a server path, and
every note the Python API would warn about a request travels in its answer (a ``notes`` key, or the
``X-UniEval-Notes`` header where the answer's shape is the hosted one)."""

from __future__ import annotations

import json
import statistics
import threading
import time
import warnings
from pathlib import Path

import pytest

requests = pytest.importorskip("requests")
pytest.importorskip("fastapi")

from test_service import AUTH, KEY, SOURCE, Server  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.engine import Engine  # noqa: E402
from unieval_local.reports import make_report  # noqa: E402

MAX_LENGTH = 96  # tokens per query on the module's server: a long source is truncated
LONG_SOURCE = " ".join([SOURCE] * 12)
POST_ROUTES = ("/v1/unieval", "/v1/score", "/v1/summarization-evaluator", "/v1/autoeval", "/runs/custom")


@pytest.fixture(scope="module")
def server(tiny_ckpt, tmp_path_factory):
    s = Server(Path(f"unieval-sum={tiny_ckpt}"), tmp_path_factory.mktemp("wire"), "--model",
               f"unieval-dialog={tiny_ckpt}", "--max-wait-ms", "20", "--max-length", str(MAX_LENGTH)).wait_ready()
    yield s
    assert s.stop() == 0, s.stderr()


def header_notes(r) -> list[str]:
    """The notes of an answer that carries them in its headers (ASCII JSON list)."""
    raw = r.headers.get("X-UniEval-Notes")
    if raw is None:
        return []
    assert raw.isascii()
    notes = json.loads(raw)
    assert int(r.headers["X-UniEval-Notes-Count"]) >= len(notes)
    return notes


def python_warnings(fn) -> list[str]:
    """The UserWarning messages ``fn()`` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


# ----------------------------------------------------------------------------- item 7: the loop never blocks
def test_health_answers_within_100_ms_while_a_1_5_mb_body_is_parsed_and_validated(server):
    # 10,000 short examples (1.5 MB): parsing, validating and planning them took the event loop for
    # ~0.3 s per request (seconds once they were scored); the last one has no target, so the answer is
    # a 422 after every example was read and no model time muddies the measurement
    data = [{"target": f"The council approved park number {i} on Monday.",
             "source": f"Residents of district {i} met the council, which approved the new park and its lake."}
            for i in range(10_000)]
    data[-1] = {"source": "no target"}
    raw = json.dumps({"task": "summarization", "aspects": ["consistency"], "data": data}).encode()
    assert len(raw) >= 1_500_000
    worst = []
    for _ in range(3):
        latencies, stop = [], threading.Event()

        def poll():
            with requests.Session() as s:
                while not stop.is_set():
                    started = time.perf_counter()
                    assert s.get(f"{server.url}/health", timeout=30).status_code == 200
                    latencies.append(time.perf_counter() - started)
                    time.sleep(0.01)

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.1)
        r = requests.post(f"{server.url}/v1/score", data=raw, headers={**AUTH, "Content-Type": "application/json"},
                          timeout=120)
        stop.set()
        poller.join()
        assert r.status_code == 422 and r.json()["error"]["examples"][0]["index"] == 9999, r.text[:300]
        worst.append(max(latencies))
    # the median over three posts of the slowest /health: a clear bound, robust to one noisy post
    assert statistics.median(worst) < 0.100, [f"{w * 1000:.0f} ms" for w in worst]


# ----------------------------------------------------------------------------- item 9: bodies that cannot be read
UNREADABLE = [
    ("empty", b"", "empty"),
    ("whitespace", b"  \n", "empty"),
    ("not json", b'{"config": {}, "data": [', "not valid JSON"),
    ("deep nesting", b"[" * 100_000, "nested too deeply"),
    ("huge integer", b'{"data": [], "threshold": ' + b"7" * 5000 + b"}", "digits"),
    ("invalid UTF-8", b'{"data": [{"target": "caf\xe9"}]}', "UTF-8"),
    ("UTF-16", '{"data": []}'.encode("utf-16"), "UTF-8"),
    ("an array", b'[{"target": "x"}]', "must be a JSON object"),
    ("a string", b'"hello"', "must be a JSON object"),
    ("null", b"null", "must be a JSON object"),
]


def test_a_body_that_cannot_be_read_is_a_422_naming_body_on_every_route(server):
    bad = []
    for route in POST_ROUTES:
        for name, raw, says in UNREADABLE:
            r = requests.post(server.url + route, data=raw, headers={**AUTH, "Content-Type": "application/json"},
                              timeout=60)
            try:
                assert r.status_code == 422 and r.headers["content-type"] == "application/json"
                err = r.json()["error"]
                assert err["type"] == "InvalidRequest"
                (problem,) = err["examples"]
                assert problem["index"] is None and problem["field"] == "body" and says in problem["message"]
            except (AssertionError, ValueError, KeyError) as exc:
                bad.append(f"{route} {name}: {r.status_code} {r.text[:200]} ({type(exc).__name__})")
    assert not bad, "\n".join(bad)
    # a body nested deeply inside an example (under the parser's limit) is refused too, never a 500
    deep = {"config": {}, "data": [{"target": "A park.", "source": "x", "meta": json.loads("[" * 900 + "]" * 900)}]}
    r = server.post("/v1/unieval", deep)
    assert r.status_code in (200, 422), r.text[:300]
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200


# ----------------------------------------------------------------------------- item 8: notes reach the client
def test_unieval_keeps_its_hosted_shape_and_gives_ignored_keys_and_truncation_in_the_notes_header(server, tiny_ckpt):
    data = [{"target": "The council approved a park.", "source": LONG_SOURCE}]
    r = server.post("/v1/unieval", {"config": {"task": "summarization", "evalution_aspect": "coherence",
                                               "aspect": "consistency"},
                                    "data": data, "model_slug": "gpt-4o-mini", "data_collection_id": "dc-1"})
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["overall", "examples"] and all(list(e) == ["value"] for e in r.json()["examples"])
    notes = header_notes(r)
    ignored = [n for n in notes if "ignored" in n]
    assert any("model_slug" in n and "data_collection_id" in n for n in ignored), notes
    assert any("config.evalution_aspect (did you mean 'evaluation_aspect'?)" in n for n in ignored), notes
    # the truncation sentence the Python API warns, its advice in the service's words (serve flags,
    # the evidence field of a /v1/score body), not Python's
    scorer = Scorer(model={"unieval-sum": str(tiny_ckpt)}, device="cpu", max_length=MAX_LENGTH)
    said = python_warnings(lambda: scorer.score(data, task="summarization", aspect="consistency"))
    truncation = [w for w in said if "longer than max_length" in w]
    over_http = [n for n in notes if "longer than max_length" in n]
    assert truncation and over_http and over_http[0].split("; ")[:2] == truncation[0].split("; ")[:2], (said, notes)
    assert "serve --long-input chunk" in over_http[0] and "long_input=" not in over_http[0], notes
    assert int(r.headers["X-UniEval-Notes-Count"]) == len(notes)


def test_score_answers_notes_in_its_body_with_did_you_mean(server):
    body = {"task": "summarization", "aspect": ["fluency"], "aspects": ["fluency"], "data_collection_id": "x",
            "data": [{"target": "The council approved a park.", "source": LONG_SOURCE}], "evidence": False}
    r = server.post("/v1/score", body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["aspects"] == ["fluency"] and "X-UniEval-Notes" not in r.headers
    assert any("aspect (did you mean 'aspects'?)" in n and "data_collection_id" in n for n in got["notes"])
    # no note, no key: the answer is the package's own result unchanged
    r = server.post("/v1/score", {"task": "summarization", "aspects": ["fluency"],
                                  "data": [{"target": "The council approved a park."}]})
    assert r.status_code == 200 and "notes" not in r.json(), r.json().get("notes")


def test_summarization_evaluator_keeps_its_shape_and_gives_report_notes_in_the_header(server, tiny_ckpt):
    item = {"input": SOURCE, "summary": "A park was approved. It will have a lake.", "model_slug": "gpt-4o"}
    r = server.post("/v1/summarization-evaluator", {**item, "enabled_metrics": ["coherence", "fluency"]})
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["summary"]
    notes = header_notes(r)
    assert any("model_slug" in n and "ignored" in n for n in notes), notes
    want = make_report([{k: v for k, v in item.items() if k != "model_slug"}], "rating", warn=False,
                       engine=Engine(model={"unieval-sum": str(tiny_ckpt)}, device="cpu"),
                       options={"enabled_metrics": ["coherence", "fluency"]})
    cut_points = [n for n in want.notes if "cut points" in n]
    assert cut_points, want.notes
    # the report's note, with the checkpoint named by its evaluator instead of its folder, and the
    # rating config named as the operator gives it (issue 40: serve --rating-config, not --config / config=)
    python_note = cut_points[0].replace(str(tiny_ckpt), "unieval-sum")
    assert "(--config FILE in the CLI, config= in Python;" in python_note
    assert python_note.replace("--config FILE in the CLI, config= in Python", "serve --rating-config FILE.yaml") \
        in notes, notes


def test_autoeval_answers_report_and_ignored_key_notes_in_its_body(server):
    record = {"source": SOURCE, "target": "The council approved a park. Construction starts in May.",
              "instruction": "Summarize the meeting.", "model_slug": "m"}
    r = server.post("/v1/autoeval", record)
    assert r.status_code == 200, r.text
    notes = r.json()["notes"]
    assert any("instruction (did you mean 'instructions'?)" in n and "model_slug" in n for n in notes), notes


def test_custom_run_rows_keep_their_notes_and_the_run_its_notes(server, tiny_ckpt):
    payload = {"threshold": 50, "model_slug": "gpt-4o-mini", "is_blocking": True, "modle": "x",
               "evaluations": [{"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 9}}],
                                "data": [{"input": SOURCE, "output": "The council approved a park."},
                                         {"input": LONG_SOURCE, "output": "A lake and two playgrounds."}]}]}
    r = server.post("/runs/custom", payload)
    assert r.status_code == 200, r.text
    assert r.headers["X-UniEval-Long-Input"] == "chunk"  # the report endpoints read long sources as `report`
    run = r.json()
    rows = run["evaluations"][0]["metrics"][0]["results"]
    want = make_report([{**row, "n_key_points": 9, "threshold": 50} for row in payload["evaluations"][0]["data"]],
                       "summ", warn=False, engine=Engine(model={"unieval-sum": str(tiny_ckpt)}, device="cpu",
                                                         max_length=MAX_LENGTH, long_input="chunk"))
    assert want.reports[0].notes, "the test needs a row with notes (n_key_points over the source's sentences)"
    for got, expected in zip(rows, want.reports):  # a row without notes has no notes key
        assert got.get("notes", []) == expected.notes
    assert any("model_slug" in n for n in run["notes"]) and any("modle" in n for n in run["notes"])
    # read in chunks, the long source loses nothing: no truncation note (the score endpoints' test has one)
    assert not any("longer than max_length" in n for n in run["notes"]), run["notes"]
    assert requests.get(f"{server.url}/runs/{run['id']}", headers=AUTH, timeout=10).json()["notes"] == run["notes"]


def test_a_dialogue_without_the_trained_newlines_gets_no_input_hint_note(server, tiny_ckpt):
    # the endings do not change T5's token ids (issue 29): neither Python nor HTTP says anything of them
    data = [{"target": "Sure, see you then.", "source": "Can we meet at 5?", "context": "A meeting."}]
    r = server.post("/v1/unieval", {"config": {"task": "dialogue", "evaluation_aspect": "coherence"}, "data": data})
    assert r.status_code == 200, r.text
    scorer = Scorer(model={"unieval-dialog": str(tiny_ckpt)}, device="cpu", max_length=MAX_LENGTH)
    said = python_warnings(lambda: scorer.score(data, task="dialogue", aspect="coherence"))
    assert not [w for w in said + header_notes(r) if "not ending with" in w], (said, header_notes(r))


def test_a_language_outside_the_evaluators_training_is_noted(server):
    r = server.post("/v1/unieval", {"config": {"evaluation_aspect": "fluency"},
                                    "data": [{"target": "市议会周一批准了新公园。公园里有一个湖。", "source": "x"}]})
    assert r.status_code == 200, r.text
    assert any("Chinese (zh)" in n and "unieval-sum" in n for n in header_notes(r)), header_notes(r)


def test_openapi_documents_bodies_by_model_and_where_notes_travel(server):
    schema = requests.get(f"{server.url}/openapi.json", timeout=10).json()
    paths, components = schema["paths"], schema["components"]["schemas"]
    for route, model in (("/v1/unieval", "UniEvalBody"), ("/v1/score", "ScoreBody"),
                         ("/v1/summarization-evaluator", "EvaluatorBody"), ("/runs/custom", "CustomRunBody")):
        body = paths[route]["post"]["requestBody"]
        assert body["required"] and body["content"]["application/json"]["schema"] == \
               {"$ref": f"#/components/schemas/{model}"}
        assert model in components
    assert set(components["UniEvalBody"]["properties"]) == {"config", "data"}
    assert "UniEvalConfigBody" in components and "Evaluation" in components and "Metric" in components
    for route in ("/v1/unieval", "/v1/summarization-evaluator"):
        assert {"X-UniEval-Notes", "X-UniEval-Notes-Count"} <= set(paths[route]["post"]["responses"]["200"]["headers"])
    score = paths["/v1/score"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "notes" in components[score.rsplit("/", 1)[1]]["properties"]
    autoeval = paths["/v1/autoeval"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "notes" in components[autoeval.rsplit("/", 1)[1]]["properties"]
    run = paths["/runs/custom"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "notes" in components[run.rsplit("/", 1)[1]]["properties"]


def test_the_notes_header_is_ascii_json_capped_at_4_kb_of_whole_notes():
    from unieval_local.wire.http import NOTES_HEADER_BYTES, notes_headers

    notes = ["première note: é", "x" * 3000, "y" * 2000, "z"]
    headers = notes_headers(notes)
    assert headers["X-UniEval-Notes-Count"] == "4"
    kept = json.loads(headers["X-UniEval-Notes"])
    assert headers["X-UniEval-Notes"].isascii() and len(headers["X-UniEval-Notes"]) <= NOTES_HEADER_BYTES
    assert kept == notes[:2]  # whole notes, from the end
    assert notes_headers([]) == {}


# ----------------------------------------------------------------------------- item 9: --max-runs is a hard bound
def test_max_runs_is_a_hard_bound_finished_runs_forgotten_first(tiny_ckpt, tmp_path):
    s = Server(tiny_ckpt, tmp_path, "--max-runs", "2", "--max-wait-ms", "2000").wait_ready()
    try:
        def payload(blocking: bool) -> dict:
            return {"is_blocking": blocking, "evaluations": [{"data": [{"input": SOURCE, "output": "A park."}]}]}

        first = s.post("/runs/custom", payload(False))
        second = s.post("/runs/custom", payload(False))
        assert first.status_code == second.status_code == 202, (first.text, second.text)
        refused = s.post("/runs/custom", payload(False))  # both kept runs still wait in the window
        assert refused.status_code == 503 and refused.json()["error"]["type"] == "TooManyRuns", refused.text
        assert int(refused.headers["Retry-After"]) >= 1 and "--max-runs" in refused.json()["error"]["message"]
        blocking = s.post("/runs/custom", payload(True))  # answered all the same
        assert blocking.status_code == 200 and blocking.json()["status"] == "completed", blocking.text
        ids = [first.json()["id"], second.json()["id"], blocking.json()["id"]]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # every run finishes
            runs = [requests.get(f"{s.url}/runs/{i}", headers=AUTH, timeout=10) for i in ids]
            if all(r.status_code == 404 or r.json()["status"] != "running" for r in runs):
                break
            time.sleep(0.2)
        later = s.post("/runs/custom", payload(False))  # room again: the oldest finished run is forgotten
        assert later.status_code == 202, later.text
        kept = [i for i in ids + [later.json()["id"]]
                if requests.get(f"{s.url}/runs/{i}", headers=AUTH, timeout=10).status_code == 200]
        assert len(kept) <= 2 and later.json()["id"] in kept, kept
        assert first.json()["id"] not in kept  # the oldest finished one went first
    finally:
        assert s.stop() == 0, s.stderr()


# ----------------------------------------------------------------------------- item 9: no server path in answers
def test_info_and_errors_name_checkpoints_by_evaluator_and_hash_never_by_path(tiny_ckpt, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    s = Server(Path(f"unieval-sum={tiny_ckpt}"), tmp_path, "--max-wait-ms", "0",
               env={"UNIEVAL_LOCAL_HOME": str(home)}).wait_ready()
    try:
        secret_dirs = [str(tiny_ckpt), str(tiny_ckpt.parent), str(home), str(tmp_path)]
        info = requests.get(f"{s.url}/info", headers=AUTH, timeout=10)
        assert info.status_code == 200
        ident = info.json()["signature"]["checkpoints"]["unieval-sum"]
        assert ident["evaluator"] == "unieval-sum" and len(ident["fingerprint"]) == 12
        assert int(ident["fingerprint"], 16) >= 0 and "checkpoint" not in ident
        # the fact task's checkpoint is not staged: the error would name the folder it looked in
        r = s.post("/v1/unieval", {"config": {"task": "fact", "evaluation_aspect": "consistency"},
                                   "data": [{"target": "A park.", "source": SOURCE}]})
        assert r.status_code == 422 and r.json()["error"]["type"] == "CheckpointUnavailable", r.text
        assert "unieval-fact" in r.json()["error"]["message"]
        run = s.post("/runs/custom", {"evaluations": [{"data": [{"input": SOURCE, "output": "A park."}]}]})
        assert run.status_code == 200, run.text
        score = s.post("/v1/score", {"aspects": ["fluency"], "data": [{"target": "A park."}]})
        assert score.json()["per_aspect"]["fluency"]["signature"]["checkpoint"] == "unieval-sum"
        for answer in (info, r, run, score):
            for secret in secret_dirs:
                assert secret not in answer.text, (secret, answer.text[:500])
        time.sleep(0.2)
        assert str(home) in s.stderr()  # the full message went to the server's log
    finally:
        assert s.stop() == 0, s.stderr()


def test_the_path_redactor_keeps_routes_and_replaces_folders():
    from unieval_local.wire.http import PathRedactor, public_checkpoints

    redact = PathRedactor(lambda: {"/srv/models/unieval-sum": "unieval-sum"})
    text = ("cannot load '/srv/models/unieval-sum/config.json'; looked at /tmp/x/unieval-fact. "
            "POST /v1/score or GET /runs/{id}; C:\\Users\\me\\model")
    assert redact(text) == ("cannot load 'unieval-sum/config.json'; looked at <path>. "
                            "POST /v1/score or GET /runs/{id}; <path>")
    ids = public_checkpoints({"unieval-sum": {"checkpoint": "/srv/models/unieval-sum", "fingerprint": "ab" * 32,
                                              "revision": None, "max_length": 1024, "identity": "verified"},
                              "unieval-fact": {"checkpoint": "MingZhong/unieval-fact", "fingerprint": None}})
    assert ids["unieval-sum"] == {"evaluator": "unieval-sum", "fingerprint": "ab" * 6, "revision": None,
                                  "max_length": 1024, "identity": "verified"}
    assert ids["unieval-fact"]["hub_id"] == "MingZhong/unieval-fact"


def test_a_relative_model_path_is_named_by_its_evaluator_too(tiny_ckpt, tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    from test_service import free_port

    folder = tmp_path / "mine" / "unieval-sum"  # a folder that says it is unieval-sum's model
    shutil.copytree(tiny_ckpt, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "unieval_local_evaluator": "unieval-sum"}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())",
                             "serve", "--model", "mine/unieval-sum", "--port", str(port), "--max-wait-ms", "0"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "UNIEVAL_LOCAL_HOME": str(tmp_path / "empty")})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.3)
        r = requests.post(f"{url}/v1/unieval", timeout=60, json={
            "config": {"task": "dialogue", "evaluation_aspect": "naturalness"},
            "data": [{"target": "Sure.", "source": "Meet at 5?", "context": "A meeting."}]})
        assert r.status_code == 422 and "is 'unieval-sum'" in r.text, r.text  # the refusal names the folder...
        assert "mine/" not in r.text and str(folder) not in r.text, r.text  # ...by its evaluator, not its path
        rated = requests.post(f"{url}/v1/summarization-evaluator", timeout=60,
                              json={"input": SOURCE, "summary": "A park was approved."})
        assert rated.status_code == 200, rated.text
        assert "mine/" not in json.dumps(dict(rated.headers)), dict(rated.headers)
    finally:
        proc.terminate()
        proc.wait(60)


def test_an_error_answer_carries_the_notes_gathered_before_it(server):
    # 'aspect' for 'aspects': every aspect is asked for, and relevance needs references: a 422 whose
    # notes header says why
    r = server.post("/v1/score", {"task": "summarization", "aspect": ["coherence"],
                                  "data": [{"target": "A park.", "source": SOURCE}]})
    assert r.status_code == 422, r.text
    assert any("aspect" in n and "did you mean 'aspects'" in n for n in header_notes(r)), dict(r.headers)


def test_a_non_blocking_run_is_answered_before_it_is_planned(server):
    body = {"is_blocking": False, "evaluations": [{"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 40}}],
                                                   "data": [{"input": " ".join([SOURCE] * 150), "output": "A park."}
                                                            for _ in range(6)]}]}
    started = time.monotonic()
    r = server.post("/runs/custom", body)
    answered = time.monotonic() - started
    assert r.status_code == 202 and r.headers["Location"] == f"/runs/{r.json()['id']}"
    assert r.json()["status"] == "running"
    deadline = time.monotonic() + 120
    while True:
        run = requests.get(f"{server.url}/runs/{r.json()['id']}", headers=AUTH, timeout=10)
        if run.json()["status"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert run.json()["status"] == "completed" and run.headers["X-UniEval-Long-Input"] == "chunk"
    assert answered < (time.monotonic() - started) / 2  # the 202 came well before the run was done


def test_a_key_file_of_several_lines_is_refused(tiny_ckpt, tmp_path):
    import subprocess
    import sys

    key = tmp_path / "key"
    key.write_text("abc\ndef\n")
    done = subprocess.run([sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())",
                           "serve", "--model", str(tiny_ckpt), "--port", "0", "--api-key-file", str(key)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "more than one line" in done.stderr
