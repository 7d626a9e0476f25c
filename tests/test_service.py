"""The HTTP service as users meet it: the real server (``unieval-local serve`` in its own process,
uvicorn on a free loopback port, the generated checkpoint) and real HTTP clients (requests,
raw sockets, schemathesis). Answers are compared with in-process scoring of the same inputs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

requests = pytest.importorskip("requests")
pytest.importorskip("fastapi")

from unieval_local import Scorer  # noqa: E402
from unieval_local.engine import Engine  # noqa: E402
from unieval_local.reports import make_report  # noqa: E402

KEY = "test-key-5f2c9d"
SECRET_TEXT = "ZEBRA-CONFIDENTIAL-7731"
ROOT = Path(__file__).resolve().parents[1]
AUTH = {"Authorization": f"Bearer {KEY}"}
SOURCE = ("The city council approved the new park on Monday. Construction starts in May. "
          "The park will have a lake and two playgrounds. Residents welcomed the plan.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``unieval-local serve`` in a subprocess; stdout (the access log) and stderr to a file (read by the tests)."""

    def __init__(self, ckpt: Path, tmp: Path, *flags: str, key: str | None = KEY, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        cmd = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())", "serve",
               "--model", str(ckpt), "--port", str(self.port), *flags]
        if key:
            cmd += ["--api-key-file", str(tmp / f"key-{self.port}")]
            (tmp / f"key-{self.port}").write_text(key + "\n")
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT, cwd=ROOT,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})

    def wait_ready(self, timeout: float = 180) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"serve exited {self.proc.returncode}: {self.stderr()}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:  # not listening yet, or a proxy still starting
                pass
            time.sleep(0.3)
        pytest.fail(f"serve not healthy after {timeout} s: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def post(self, path: str, body, headers=AUTH, **kw):
        return requests.post(self.url + path, json=body, headers=headers, timeout=kw.pop("timeout", 120), **kw)

    def metric(self, name: str) -> float:
        text = requests.get(f"{self.url}/metrics", headers=AUTH, timeout=10).text
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
                   or line.startswith(name + "{"))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server(tiny_ckpt, tmp_path_factory):
    # no step cap: how many micro-batches the requests share depends on the requests here, not on
    # the pace of a busy CI machine (the cap is tested in test_scheduler.py)
    s = Server(tiny_ckpt, tmp_path_factory.mktemp("serve"), "--max-wait-ms", "100", "--max-step-ms", "0").wait_ready()
    yield s
    assert s.stop() == 0, s.stderr()


@pytest.fixture(scope="module")
def scorer(tiny_ckpt):
    return Scorer(model=str(tiny_ckpt), device="cpu")


def examples(summeval_records, n: int, start: int = 0) -> list[dict]:
    return [{"target": r["target"], "source": r["source"]} for r in summeval_records[start:start + n]]


def unieval(config, data):
    return {"config": config, "data": data}


# ----------------------------------------------------------------------------- the hosted metric
@pytest.mark.smoke
def test_unieval_endpoint_equals_in_process_scoring_and_the_hosted_schema(server, scorer, summeval_records):
    import jsonschema

    schema = json.loads((ROOT / "tests" / "data" / "formats" / "hosted.schema.json").read_text())
    data = examples(summeval_records, 6)
    for aspect in ("coherence", "consistency", "fluency"):
        r = server.post("/v1/unieval", unieval({"task": "summarization", "evaluation_aspect": aspect}, data))
        assert r.status_code == 200, r.text
        got = r.json()
        jsonschema.validate(got, schema)
        assert list(got) == ["overall", "examples"] and all(list(e) == ["value"] for e in got["examples"])
        want = scorer.score(data, task="summarization", aspect=aspect)
        np.testing.assert_allclose([e["value"] for e in got["examples"]], [e.value for e in want.examples],
                                   atol=1e-5, rtol=0)
        assert got["overall"]["value"] == pytest.approx(float(np.mean([e["value"] for e in got["examples"]])),
                                                        abs=1e-12)


def test_unieval_request_errors_name_the_limit_the_example_and_the_field(server, summeval_records):
    data = examples(summeval_records, 1)
    r = server.post("/v1/unieval", unieval({"evaluation_aspect": "coherence"}, data * 251))
    assert r.status_code == 422 and "250" in r.json()["error"]["message"]
    bad = [data[0], {"target": "Only a target."}, {"target": "", "source": SOURCE}]
    r = server.post("/v1/unieval", unieval({"task": "summarization", "evaluation_aspect": "consistency"}, bad))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["type"] == "InvalidExample"
    assert {(e["index"], e["field"]) for e in err["examples"]} == {(1, "source"), (2, "target")}
    r = server.post("/v1/unieval", unieval({"task": "summarization", "evaluation_aspect": "wit"}, data))
    assert r.status_code == 422 and "wit" in r.json()["error"]["message"]
    r = server.post("/v1/unieval", {"config": {"task": "summarization"}, "data": [{"target": 3, "source": "x"}]})
    assert r.status_code == 422 and r.json()["error"]["examples"][0]["index"] == 0
    r = requests.post(f"{server.url}/v1/unieval", data="{not json", headers=AUTH, timeout=30)
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"
    (problem,) = r.json()["error"]["examples"]
    assert problem["field"] == "body" and problem["index"] is None and "not valid JSON" in problem["message"]


@pytest.mark.smoke
def test_auth_is_required_everywhere_but_health_and_compared_as_a_bearer_key(server, summeval_records):
    body = unieval({"evaluation_aspect": "coherence"}, examples(summeval_records, 1))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"Basic {KEY}"}):
        r = server.post("/v1/unieval", body, headers=headers)
        assert r.status_code == 401, headers
        assert r.headers["WWW-Authenticate"] == "Bearer" and r.json()["error"]["type"] == "Unauthorized"
    for path in ("/info", "/metrics", "/runs/run_x"):
        assert requests.get(server.url + path, timeout=10).status_code == 401
    assert requests.get(f"{server.url}/health", timeout=10).json() == {"status": "ok"}
    assert server.post("/v1/unieval", body).status_code == 200


@pytest.mark.smoke
def test_unknown_routes_and_methods_are_json_errors(server):
    r = requests.get(f"{server.url}/v2/nothing", headers=AUTH, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound"
    r = requests.get(f"{server.url}/v1/unieval", headers=AUTH, timeout=10)
    assert r.status_code == 405 and r.json()["error"]["type"] == "MethodNotAllowed"
    r = requests.get(f"{server.url}/runs/run_unknown", headers=AUTH, timeout=10)
    assert r.status_code == 404 and "in memory" in r.json()["error"]["message"]


# ----------------------------------------------------------------------------- the other endpoints
@pytest.mark.smoke
def test_score_endpoint_is_the_python_api_result_as_json(server, scorer, summeval_records):
    data = examples(summeval_records, 3)
    r = server.post("/v1/score", {"task": "summarization", "aspects": ["coherence", "fluency"], "data": data,
                                  "evidence": True})
    assert r.status_code == 200, r.text
    got = r.json()
    want = scorer.evaluate(data, task="summarization", aspects=["coherence", "fluency"], evidence=True)
    want = want.model_dump(mode="json", exclude_none=True)
    assert got["aspects"] == want["aspects"] and len(got["examples"]) == 3
    for g, w in zip(got["examples"], want["examples"]):
        for a in ("coherence", "fluency"):
            assert g["scores"][a] == pytest.approx(w["scores"][a], abs=1e-5)
        assert g["evidence"]["fluency"]["sentences"] == w["evidence"]["fluency"]["sentences"]
    assert got["per_aspect"]["coherence"]["signature"] == want["per_aspect"]["coherence"]["signature"]


def test_summarization_evaluator_endpoint_equals_the_compat_evaluator(server, tiny_ckpt):
    from unieval_local.compat import SummarizationEvaluator

    item = {"input": SOURCE, "summary": "A park was approved. It will have a lake."}
    evaluator = SummarizationEvaluator(model=str(tiny_ckpt), device="cpu", long_input="truncate",
                                       enabled_metrics=["coherence", "fluency"])
    with pytest.warns(UserWarning):
        want = asyncio.run(evaluator.evaluate(dict(item)))
    r = server.post("/v1/summarization-evaluator", {**item, "enabled_metrics": ["coherence", "fluency"]})
    assert r.status_code == 200, r.text
    assert r.json() == want
    assert set(r.json()["summary"]) >= {"coherence", "fluency"} and "relevance" not in r.json()["summary"]
    r = server.post("/v1/summarization-evaluator", {"input": SOURCE, "summary": "  "})
    assert r.status_code == 422 and r.json()["error"]["examples"][0]["field"] == "summary"
    r = server.post("/v1/summarization-evaluator", {**item, "enabled_metrics": ["wit"]})
    assert r.status_code == 422


def test_autoeval_endpoint_equals_the_report(server, tiny_ckpt):
    record = {"instruction": "Summarize the council meeting.", "source": SOURCE,
              "target": "The council approved a park. Construction starts in May."}
    r = server.post("/v1/autoeval", record)
    assert r.status_code == 200, r.text
    with pytest.warns(UserWarning):
        want = make_report([record], "autoeval", engine=Engine(model=str(tiny_ckpt), device="cpu"))
    got = r.json()
    assert any("instruction" in n for n in got.pop("notes"))  # not read by autoeval: noted, as ignored
    assert got == want.reports[0].report.model_dump(mode="json", exclude_none=True)
    r = server.post("/v1/autoeval", {"instruction": "Summarize.", "source": SOURCE})
    assert r.status_code == 422 and r.json()["error"]["examples"][0]["field"] == "target"


def custom_run_payload(threshold: float = 50) -> dict:
    return {
        "threshold": threshold, "model_slug": "gpt-4o-mini", "is_blocking": True, "data_collection_id": "dc-42",
        "evaluations": [
            {"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 2, "max_n_claims": 4}}],
             "data": [{"input": SOURCE, "output": "The council approved a park. It opens in May."},
                      {"input": SOURCE, "output": "Residents welcomed a new lake."}]},
            {"metrics": [{"metric": "summ", "metric_args": {"n_key_points": 1}},
                         {"metric": "summ", "metric_args": {"n_key_points": 3}}],
             "threshold": 20, "data": [{"input": SOURCE, "output": "A park with two playgrounds."}]},
        ],
    }


def test_custom_run_client_code_as_documented_gets_the_summ_reports(server, tiny_ckpt):
    # the custom-run users' client code as the hosted docs show it; only BASE_URL changed
    BASE_URL, API_KEY = server.url, KEY
    payload = custom_run_payload()
    response = requests.post(f"{BASE_URL}/runs/custom",
                             headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
                             json=payload)
    response.raise_for_status()
    run = response.json()
    assert run["status"] == "completed" and run["id"].startswith("run_") and run["data_collection_id"] == "dc-42"
    assert [len(e["metrics"]) for e in run["evaluations"]] == [1, 2]
    engine = Engine(model=str(tiny_ckpt), device="cpu")
    for e, ev in enumerate(payload["evaluations"]):
        for k, metric in enumerate(ev["metrics"]):
            rows = [{**row, **metric["metric_args"], "threshold": ev.get("threshold", payload["threshold"])}
                    for row in ev["data"]]
            with pytest.warns(UserWarning):
                want = make_report(rows, "summ", engine=engine)
            got = run["evaluations"][e]["metrics"][k]["results"]
            assert len(got) == len(rows)
            for j, (g, w) in enumerate(zip(got, want.reports)):
                w = w.report.model_dump(mode="json")
                assert g["id"] == f"evaluations[{e}].data[{j}]"
                assert g["score"] == pytest.approx(w["score"], abs=1e-9) and 0 <= g["score"] <= 100
                assert g["passed"] == (g["score"] >= g["threshold"]) and g["threshold"] == rows[j]["threshold"]
                assert g["eval_metadata"]["missing_details"] == w["eval_metadata"]["missing_details"]
                assert all(isinstance(s, str) for s in g["eval_metadata"]["misaligned_details"])
    # two metric_args of one evaluation give two results (1 and 3 key points)
    two = run["evaluations"][1]["metrics"]
    assert [len(m["results"][0]["key_points"]) for m in two] == [1, 3]
    assert any("model_slug" in n for n in run["notes"])


def test_custom_run_not_blocking_is_polled_and_bad_metrics_are_named(server):
    payload = {**custom_run_payload(), "is_blocking": False}
    r = server.post("/runs/custom", payload)
    assert r.status_code == 202 and r.headers["Location"] == f"/runs/{r.json()['id']}"
    run_id = r.json()["id"]
    deadline = time.monotonic() + 60
    while True:
        run = requests.get(f"{server.url}/runs/{run_id}", headers=AUTH, timeout=10).json()
        if run["status"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert run["status"] == "completed"
    blocking = server.post("/runs/custom", custom_run_payload()).json()
    assert [m["results"] for e in run["evaluations"] for m in e["metrics"]] == \
           [m["results"] for e in blocking["evaluations"] for m in e["metrics"]]
    bad = {**custom_run_payload(), "threshold": 500}
    bad["evaluations"][1]["metrics"][1] = {"metric": "rouge"}
    r = server.post("/runs/custom", bad)
    assert r.status_code == 422
    assert [e["field"] for e in r.json()["error"]["examples"]] == ["threshold", "evaluations[1].metrics[1]"]
    rows = custom_run_payload()
    rows["evaluations"][0]["data"][1] = {"input": SOURCE}  # no output: its row fails, in the run's names
    run = server.post("/runs/custom", rows).json()
    results = run["evaluations"][0]["metrics"][0]["results"]
    assert "score" in results[0] and results[1]["error"]["field"] == "output"


def test_docs_work_offline_and_the_schema_documents_auth_and_errors(server):
    page = requests.get(f"{server.url}/docs", timeout=10)
    assert page.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in page.text and "cdn" not in page.text
    assert requests.get(f"{server.url}/docs-assets/swagger-ui-bundle.js", timeout=10).status_code == 200
    schema = requests.get(f"{server.url}/openapi.json", timeout=10).json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    post = schema["paths"]["/v1/unieval"]["post"]
    assert {"401", "413", "422", "429", "503", "504"} <= set(post["responses"])
    assert post["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


@pytest.mark.smoke
def test_info_and_metrics_never_show_the_key(server):
    r = requests.get(f"{server.url}/info", headers=AUTH, timeout=10)
    info = r.json()
    assert info["limits"]["max_examples_per_query"] == 250 and info["auth"] is True
    assert "unieval-sum" in info["evaluators"] and info["signature"]["run"]["dtype"] == "float32"
    assert KEY not in r.text
    text = requests.get(f"{server.url}/metrics", headers=AUTH, timeout=10).text
    for name in ("unieval_local_requests_total", "unieval_local_request_seconds_bucket",
                 "unieval_local_micro_batches_total", "unieval_local_scheduler_requests_total",
                 "unieval_local_model_queries_total", "unieval_local_queue_queries"):
        assert name in text
    assert 'unieval_local_requests_total{endpoint="/v1/unieval",status="200"}' in text


# ----------------------------------------------------------------------------- load, batching, disconnects
def test_32_concurrent_clients_get_in_process_answers_in_shared_micro_batches(server, scorer, summeval_records):
    shared = {"target": "The council approved a park.", "source": SOURCE}
    bodies = [[shared] + examples(summeval_records, 3, start=(3 * i) % 45) for i in range(32)]
    passes, prompts = server.metric("unieval_local_micro_batches_total"), server.metric("unieval_local_model_queries_total")
    barrier = threading.Barrier(32)

    def client(data):
        with requests.Session() as s:
            barrier.wait()
            r = s.post(f"{server.url}/v1/unieval", json=unieval({"evaluation_aspect": "coherence"}, data),
                       headers=AUTH, timeout=300)
        return r.status_code, r.json()

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(client, bodies))
    for (status, got), data in zip(answers, bodies):
        assert status == 200, got
        want = scorer.score(data, task="summarization", aspect="coherence")
        np.testing.assert_allclose([e["value"] for e in got["examples"]], [e.value for e in want.examples],
                                   atol=1e-5, rtol=0)
    ran = server.metric("unieval_local_micro_batches_total") - passes
    scored = server.metric("unieval_local_model_queries_total") - prompts
    assert 1 <= ran < 32
    assert scored <= 32 * 3 + 1  # the shared example is scored once, not once per request


def test_a_client_that_disconnects_does_not_disturb_the_others(server, summeval_records):
    body = json.dumps(unieval({"evaluation_aspect": "coherence"}, examples(summeval_records, 40))).encode()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    r = server.post("/v1/unieval", unieval({"evaluation_aspect": "fluency"}, examples(summeval_records, 2)))
    assert r.status_code == 200 and len(r.json()["examples"]) == 2
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200


def test_access_log_holds_no_bodies_nor_the_key(server):
    r = server.post("/v1/unieval", unieval({"evaluation_aspect": "fluency"}, [{"target": SECRET_TEXT + "."}]))
    assert r.status_code == 200
    time.sleep(0.2)
    log = server.stderr()
    assert '"POST /v1/unieval HTTP/1.1" 200' in log
    assert SECRET_TEXT not in log and KEY not in log and "Traceback" not in log


def test_schema_fuzzing_finds_no_server_error(server):
    st = Path(sys.executable).parent / "st"
    if not st.exists():
        pytest.fail("schemathesis is part of the test extra; its `st` command is missing")
    proc = subprocess.run([str(st), "run", f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {KEY}",
                           "--checks", "not_a_server_error", "--max-examples", "5", "--max-time", "20",
                           "--request-timeout", "60", "--seed", "1", "--phases", "examples,coverage,fuzzing",
                           "--warnings", "off"],
                          capture_output=True, text=True, timeout=400, cwd=server.log.parent)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200


# ----------------------------------------------------------------------------- limits, signals, start-up
def test_limits_give_413_before_parsing_429_with_retry_after_and_504(tiny_ckpt, tmp_path, summeval_records):
    s = Server(tiny_ckpt, tmp_path, "--max-wait-ms", "1500", "--request-timeout-s", "0.7",
               "--max-queued-queries", "1", "--max-request-queries", "1", "--max-body-mb", "0.01").wait_ready()
    try:
        big = {"config": {}, "data": [{"target": "x" * 20000, "source": "y"}]}
        r = s.post("/v1/unieval", big)
        assert r.status_code == 413 and r.json()["error"]["type"] == "PayloadTooLarge"
        chunks = (b'{"data": [' + b'{"target": "' + b"x" * 4000 + b'", "source": "y"},' for _ in range(5))
        r = requests.post(f"{s.url}/v1/unieval", data=chunks, headers={**AUTH, "Content-Type": "application/json"},
                          timeout=30)  # chunked: no Content-Length; counted as it streams
        assert r.status_code == 413
        data = examples(summeval_records, 1)
        first: dict = {}
        t = threading.Thread(target=lambda: first.update(r=s.post("/v1/unieval", unieval({}, data))))
        t.start()
        time.sleep(0.25)
        second = s.post("/v1/unieval", unieval({}, data))
        t.join()
        assert second.status_code == 429 and int(second.headers["Retry-After"]) >= 1
        assert second.json()["error"]["type"] == "QueueFull"
        assert first["r"].status_code == 504 and first["r"].json()["error"]["type"] == "Timeout"
        assert requests.get(f"{s.url}/health", timeout=10).status_code == 200
    finally:
        assert s.stop() == 0


def test_sigterm_answers_every_accepted_request_then_exits_0(tiny_ckpt, tmp_path, scorer, summeval_records):
    s = Server(tiny_ckpt, tmp_path, "--max-wait-ms", "1000").wait_ready()
    bodies = [examples(summeval_records, 2, start=2 * i) for i in range(8)]
    late = json.dumps(unieval({"evaluation_aspect": "fluency"}, bodies[0])).encode()
    slow = socket.create_connection(("127.0.0.1", s.port))  # a request still uploading its body at SIGTERM
    slow.sendall(b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(late)}\r\n\r\n".encode() + late[:10])
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(s.post, "/v1/unieval", unieval({"evaluation_aspect": "fluency"}, b)) for b in bodies]
        time.sleep(0.5)  # accepted, waiting in the batching window
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        slow.sendall(late[10:])
        head = b""
        while chunk := slow.recv(65536):  # until the server closes the connection
            head += chunk
        head = head.decode()
        answers = [f.result() for f in futures]
    slow.close()
    assert s.proc.wait(90) == 0, s.stderr()
    assert head.startswith("HTTP/1.1 503") and '"Draining"' in head  # not accepted: refused, as JSON
    for r, data in zip(answers, bodies):
        assert r.status_code == 200, r.text
        want = scorer.score(data, task="summarization", aspect="fluency")
        np.testing.assert_allclose([e["value"] for e in r.json()["examples"]], [e.value for e in want.examples],
                                   atol=1e-5, rtol=0)
    assert "every accepted request was answered" in s.stderr()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{s.url}/health", timeout=5)


def test_health_says_loading_until_the_checkpoints_are_loaded_and_draining_after(tiny_ckpt):
    from unieval_local.service.handlers import Service

    service = Service(Engine(model=str(tiny_ckpt), device="cpu"), preload=["unieval-sum"])
    assert service.health() == (503, {"status": "loading"})
    service.load()
    assert service.health() == (200, {"status": "ok"}) and service.engine.model_loads == 1
    assert service.drain(timeout=30)
    assert service.health() == (503, {"status": "draining"})


def test_a_non_loopback_address_needs_a_key_and_a_missing_extra_is_named(tiny_ckpt, tmp_path):
    run = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())", "serve",
           "--model", str(tiny_ckpt)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("UNIEVAL_LOCAL_API_KEY", None)
    proc = subprocess.run(run + ["--host", "0.0.0.0"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--api-key-file" in lines[0] and "--no-auth" in lines[0]
    hidden = ("import sys; sys.modules['fastapi'] = None; from unieval_local.cli import main; "
              "sys.exit(main(['serve', '--model', sys.argv[1]]))")
    proc = subprocess.run([sys.executable, "-c", hidden, str(tiny_ckpt)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2 and "unieval-local[serve]" in proc.stderr


def test_a_task_whose_evaluator_is_not_served_is_a_422_and_a_busy_port_exit_2(tiny_ckpt, tmp_path):
    home = {"UNIEVAL_LOCAL_HOME": str(tmp_path / "empty")}  # nothing else to find: only unieval-sum is served
    s = Server(Path(f"unieval-sum={tiny_ckpt}"), tmp_path, "--max-wait-ms", "0", env=home).wait_ready()
    try:
        dialogue = unieval({"task": "dialogue", "evaluation_aspect": "naturalness"},
                           [{"target": "Sure, see you then.", "source": "Meet at 5?", "context": "A meeting."}])
        r = s.post("/v1/unieval", dialogue)
        assert r.status_code == 422 and r.json()["error"]["type"] == "CheckpointUnavailable", r.text
        assert "--model NAME=DIR" in r.json()["error"]["message"]
        assert s.post("/v1/unieval", unieval({}, [{"target": "A park.", "source": SOURCE}])).status_code == 200
        busy = subprocess.run([sys.executable, "-c", "import sys; from unieval_local.cli import main; "
                               "sys.exit(main())", "serve", "--model", str(tiny_ckpt), "--port", str(s.port)],
                              capture_output=True, text=True, timeout=120)
        assert busy.returncode == 2 and "cannot listen on" in busy.stderr
    finally:
        assert s.stop() == 0


def test_a_checkpoint_that_does_not_load_stops_the_server_with_exit_3(tmp_path):
    port = free_port()
    proc = subprocess.run([sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())",
                           "serve", "--model", str(tmp_path / "missing"), "--port", str(port), "--offline"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 3, proc.stderr
    assert "missing" in proc.stderr


# ----------------------------------------------------------------------------- Ray Serve
@pytest.mark.ray
def test_ray_serve_two_replicas_answer_as_in_process(tiny_ckpt, tmp_path, scorer, summeval_records):
    pytest.importorskip("ray.serve")
    s = Server(tiny_ckpt, tmp_path, "--engine", "ray", "--replicas", "2", "--max-wait-ms", "20")
    try:
        s.wait_ready(timeout=300)
        # Ray Serve's proxy learns of each replica as it comes up (/health answers from the first):
        # ask /info, 8 at a time, until two replica processes answer (at most 60 s)
        pids, deadline = set(), time.monotonic() + 60
        with ThreadPoolExecutor(8) as pool:
            while len(pids) < 2 and time.monotonic() < deadline:
                pids |= set(pool.map(lambda _: requests.get(f"{s.url}/info", headers=AUTH, timeout=30).json()["pid"],
                                     range(16)))
        assert len(pids) == 2, f"only {pids} answered /info in 60 s"
        data = examples(summeval_records, 4)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: s.post("/v1/unieval", unieval({"evaluation_aspect": "coherence"},
                                                                             data)), range(8)))
        want = [e.value for e in scorer.score(data, task="summarization", aspect="coherence").examples]
        for r in answers:
            assert r.status_code == 200, r.text
            np.testing.assert_allclose([e["value"] for e in r.json()["examples"]], want, atol=1e-5, rtol=0)
        assert s.post("/v1/unieval", unieval({}, data), headers={}).status_code == 401
    finally:
        assert s.stop() == 0, s.stderr()
